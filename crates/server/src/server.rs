//! The server assembled in one place: recover the tree from the newest
//! snapshot, start the replicated log (which replays what follows it), the
//! apply loop, session expiry, the container and TTL reaper, and the client
//! listener. Standalone is a one-voter group on this same path.

use std::collections::HashMap;
use std::future::Future;
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use consensus::{
    Consensus, DeltaMeta, Deltas, HandOff, Membership, PeerNetwork, RecoveredLog, Restored, Role,
    SnapshotMeta, SnapshotPieces, Snapshots,
};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tree::{DataTree, TxnOp};

use crate::apply::{ApplyError, ApplyLoop};
use crate::config::{ConfigError, ServerConfig};
use crate::delta_chain::{ChainTip, DeltaChain};
use crate::ensemble::{Ensemble, PeerNote};
use crate::monitor::Monitor;
use crate::session::{SessionIds, SessionTracker};
use crate::shared::{now_ms, stamped_txn, Published, Shared, SocketSlot, Waiter};
use crate::snapshot_arrival::Arrivals;
use crate::snapshot_schedule::{SnapshotSchedule, TreeSize};
use crate::stats::Stats;
use crate::throttle::{ConnectionThrottle, LargeRequests, RequestGate};
use crate::tls_listener::TlsService;
use crate::watch::WatchRegistry;

/// One raft tick: the leader heartbeats every tick. Standalone never holds
/// elections, so there this only paces raft's internal timers.
const RAFT_TICK: Duration = Duration::from_millis(15);
/// Raft ticks without a leader before a follower campaigns: 150-300 ms
/// (raft randomizes it between one and two times this). Short enough to
/// replace a crashed leader in about 0.2 s; long enough that on a disk shared
/// by three saturated servers, whose syncs stall for most of a second, an
/// election is rare, since syncs no longer hold the consensus thread up
/// (docs/ARCHITECTURE.md, "Ensemble").
const ELECTION_TICKS: usize = 10;
/// How long a stopping server that handed leadership over waits to apply
/// what was proposed through it: the new leader commits it within a few
/// round trips, so this only bounds a stop when the new leader fails too.
const HANDED_OFF_APPLY_WAIT: Duration = Duration::from_secs(1);
/// How many times a stopping leader asks a follower to take over, each
/// bounded by an election timeout.
const HAND_OFF_ATTEMPTS: u32 = 2;
/// How long to wait before accepting again after `accept` fails (out of
/// file descriptors, say): the listener must survive it.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The reaper proposes at most this many deletions per pass, as
/// ZooKeeper's `znode.container.maxPerMinute` bounds its own.
const REAPS_PER_PASS_MAX: usize = 10_000;
/// Sessions closed by one batch of expiries, which is what a client's write
/// may wait behind: about 2.5 ms of a 3-server ensemble's time on the
/// 2-core machine the benchmarks run on, at some 25,000 sessions closed a
/// second (256 at a time, a write waited 10 ms or more in a storm).
const EXPIRIES_PER_BATCH_MAX: usize = 64;
/// How often, at most, the leader looks for silent sessions and a follower
/// reports the sessions it heard from: a session expires this much after
/// its timeout at worst, and sessions lost together (their clients' pings
/// spread over a third of the timeout) are found in small groups rather
/// than one wave.
const DUTIES_PERIOD_MAX: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot create {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot listen on {addr}: {source} (is another server using the port? set clientPort)"
    )]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot read the JAAS file {path}: {reason}")]
    Jaas { path: PathBuf, reason: String },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("cannot load the newest snapshot: {0}")]
    Snapshot(String),
    #[error("cannot start a thread to {what}: {source}")]
    Thread {
        what: &'static str,
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Consensus(#[from] consensus::Error),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("the replicated log stopped (see the error logged above)")]
    LogStopped,
    #[error("cannot start following ZooKeeper: {0}")]
    Observer(String),
}

/// Why a server stopped without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// `shutdown` completed.
    Shutdown,
    /// It observed a ZooKeeper ensemble until a takeover: run it again
    /// (same configuration) and it goes on as one of a Paddock ensemble.
    TookOver,
}

/// Runs a server until `shutdown` completes or a fatal error occurs.
/// `on_listening` is told the bound address once the port is open (it
/// answers four-letter words at once, sessions once caught up), with the
/// [`Monitor`] that reports on the server from then on.
pub async fn run(
    mut config: ServerConfig,
    on_listening: impl FnOnce(SocketAddr, Monitor),
    shutdown: impl Future<Output = ()>,
) -> Result<Stopped, ServerError> {
    let started = Instant::now();
    let open_files = crate::open_files::raise_to_hard_limit();
    let client_sockets_max = crate::open_files::client_sockets_max(open_files);
    if let Some(sockets) = client_sockets_max {
        tracing::info!(
            "open files: the limit is {open_files}, of which client connections may take {sockets}"
        );
    }
    let (snapshot_dir, log_dir) = data_dirs(&config)?;
    let (sasl_users, client_tls) = client_security(&config)?;
    log_start_warnings(&config);
    let snapshots = Arc::new(Snapshots::open(&snapshot_dir)?);
    let deltas = Arc::new(Deltas::open(&consensus::delta_dir(&config.data_dir))?);
    let (
        Starting {
            tree,
            mut snapshot_meta,
            deltas: mut loaded_deltas,
            reconfigured,
        },
        log,
    ) = load_state(&mut config, &snapshots, &deltas, &log_dir)?;
    let ensemble = Ensemble::from_config(&config)?;
    let server_id = own_id(&config, ensemble.as_ref())?;
    let (voters, learners) = ensemble.as_ref().map_or((vec![server_id], vec![]), |e| {
        (e.voters.clone(), e.learners.clone())
    });
    // Until a reconfig, zoo.cfg says who is in the group. That also mends
    // snapshots written before their header kept the learners: a group
    // restarted from one would no longer replicate to observers.
    let static_membership = Membership::new(voters.clone(), learners.clone());
    let loaded_memberships = (snapshot_meta.iter_mut().map(|meta| &mut meta.membership))
        .chain(loaded_deltas.last_mut().map(|delta| &mut delta.membership));
    if !reconfigured {
        loaded_memberships.for_each(|loaded| *loaded = static_membership.clone());
    }
    let restored = Restored {
        snapshot: snapshot_meta.as_ref(),
        last_delta: loaded_deltas.last(),
    };
    let tree_at = restored.state_at();
    let membership = (tree_at.as_ref()).map_or(static_membership, |at| at.membership.clone());
    let network = ensemble
        .as_ref()
        .map(|_| PeerNetwork::new(snapshots.clone(), config.snapshots_retained()));
    let (committed_tx, committed_rx) = mpsc::unbounded_channel();
    let shared_later = Arc::new(std::sync::OnceLock::new());
    let raft = consensus::Config {
        id: server_id,
        voters: voters.clone(),
        learners,
        log_dir,
        tick: RAFT_TICK,
        election_ticks: ELECTION_TICKS,
        sync_warning: Duration::from_millis(config.fsync_warning_threshold_ms),
    };
    let Replication {
        consensus,
        revalidate,
        takeover,
    } = start_replication(
        &config,
        raft,
        StartingPoint { restored, log },
        &snapshots,
        committed_tx,
        network.clone(),
        shared_later.clone(),
    )?;

    // The tree holds every entry up to its last delta, whether or not
    // raft hands out the entries the delta holds (see `pass_loaded`).
    let applied_index = tree_at.map_or(0, |at| at.index);
    let shared = Arc::new(Shared {
        server_id,
        published: Mutex::new(Published {
            tree,
            watches: WatchRegistry::default(),
            last_zxid: applied_index as i64,
            applied_index,
        }),
        sessions: SessionTracker::default(),
        session_ids: SessionIds::new(server_id, now_ms()),
        consensus,
        connections: Mutex::new(HashMap::new()),
        next_connection_id: AtomicU64::new(1),
        sockets_per_ip: Mutex::new(HashMap::new()),
        client_sockets_max,
        requests: Arc::new(request_gate(&config, &membership, server_id)),
        client_tls,
        connection_throttle: ConnectionThrottle::new(config.limits.connection_throttle.clone()),
        stats: Stats::default(),
        quota_report: Default::default(),
        server_user: crate::audit::server_user(),
        sasl_users,
        peers: ensemble.zip(network),
        serving: AtomicBool::new(false),
        applied: tokio::sync::watch::channel(applied_index).0,
        read_only: Default::default(),
        delegations: Default::default(),
        reconfig_asks: Default::default(),
        revalidate,
        config,
    });
    let _ = shared_later.set(Arc::downgrade(&shared));
    // Before the peers are heard, so that a snapshot they send is decoded
    // as it arrives.
    let chain = snapshot_meta.as_ref().map(|meta| {
        let tip = ChainTip::whole(meta.index);
        loaded_deltas
            .iter()
            .fold(tip, |tip, delta| tip.then(delta.index))
    });
    let (base, last) = chain.map_or((0, 0), |tip| (tip.base, tip.last));
    deltas.keep_only_chain(base, last);
    let files = StartingSnapshots {
        snapshots: snapshots.clone(),
        deltas,
        chain,
    };
    let apply = apply_loop(&shared, files, membership);
    if let Some((ensemble, network)) = &shared.peers {
        start_peer_transport(&shared, ensemble, network).await?;
    }

    let mut apply_task = tokio::spawn(apply.run(committed_rx));

    let listeners = ClientListeners::bind(&shared)?;
    on_listening(listeners.address(&shared), Monitor::new(shared.clone()));
    let acceptors = listeners.spawn(&shared);
    tokio::select! {
        result = &mut apply_task => {
            acceptors.iter().for_each(JoinHandle::abort);
            return Err(stopped(result));
        }
        () = caught_up(&shared) => {}
    }
    start_serving(&shared, started);
    if shared.config.audit_enabled {
        crate::audit::server_started(&shared.server_user);
    }

    let leader_duties = tokio::spawn(leader_duties(shared.clone()));
    let read_only = (shared.config.read_only_mode && !shared.is_standalone())
        .then(|| tokio::spawn(crate::read_only::follow_the_quorum(shared.clone())));
    let took_over = async {
        match takeover {
            Some(takeover) => takeover.await.ok(),
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        // First: the observer's thread announces a takeover before it ends,
        // and its end closes the apply loop's channel, which ends the loop.
        biased;
        Some(zxid) = took_over => {
            crate::zookeeper_observer::take_over(&shared, snapshots, zxid).await.map(|()| Stopped::TookOver)
        }
        result = &mut apply_task => Err(stopped(result)),
        () = shutdown => Ok(Stopped::Shutdown),
    };
    // Awaited, so that the listeners are closed when this returns: a
    // server started again in the same process binds the same ports.
    stop_tasks(acceptors).await;
    leader_duties.abort();
    read_only.iter().for_each(JoinHandle::abort);
    close_down(&shared, matches!(result, Ok(Stopped::Shutdown))).await;
    result
}

/// After the server stopped serving: a leader stopped on purpose hands
/// over first; then every connection closes, the log and the peer
/// network stop.
async fn close_down(shared: &Shared, on_purpose: bool) {
    if shared.config.audit_enabled {
        crate::audit::server_stopping(&shared.server_user);
    }
    if on_purpose {
        hand_off_leadership(shared).await;
        tracing::info!("shutting down: closing client connections (sessions live on)");
    }
    for handle in shared.connections().values() {
        handle.kill.cancel();
    }
    shared.consensus.shutdown();
    if let Some((_, network)) = &shared.peers {
        network.shutdown().await;
    }
}

/// The users of the JAAS `Server` section and the clients' TLS, as the
/// configuration asks for them.
fn client_security(
    config: &ServerConfig,
) -> Result<(Option<crate::sasl::SaslUsers>, Option<Arc<TlsService>>), ServerError> {
    let sasl_users = match &config.jaas_config {
        Some(path) => crate::sasl::read_jaas_users(path).map_err(|reason| ServerError::Jaas {
            path: path.clone(),
            reason,
        })?,
        None => None,
    };
    let client_tls = match config.client_tls.enabled() {
        true => Some(Arc::new(
            TlsService::new(&config.client_tls)
                .map_err(|e| ServerError::Tls(format!("for clients: {e}")))?,
        )),
        false => None,
    };
    Ok((sasl_users, client_tls))
}

/// Where replication starts: the snapshot and deltas the tree was loaded
/// from, and the raft log read after the snapshot while the tree loaded
/// (none when the server was configured to observe ZooKeeper).
struct StartingPoint<'a> {
    restored: Restored<'a>,
    log: Option<RecoveredLog>,
}

/// Starts the replication: raft among Paddock servers (`peers`, none when
/// standalone), or the learner of the ZooKeeper ensemble this server
/// observes, which tells `shared` (once it exists) of the sessions it
/// keeps alive.
fn start_replication(
    config: &ServerConfig,
    raft: consensus::Config,
    from: StartingPoint<'_>,
    snapshots: &Arc<Snapshots>,
    committed: mpsc::UnboundedSender<consensus::Applying<Waiter>>,
    peers: Option<Arc<PeerNetwork>>,
    shared: Arc<std::sync::OnceLock<std::sync::Weak<Shared>>>,
) -> Result<Replication, ServerError> {
    if config.observes_zookeeper() {
        let observer = crate::zookeeper_observer::start(
            config,
            raft.id,
            from.restored.snapshot,
            snapshots.clone(),
            committed,
            shared,
        )?;
        return Ok(Replication {
            consensus: observer.consensus,
            revalidate: Some(observer.revalidate),
            takeover: Some(observer.takeover),
        });
    }
    let peers: Arc<dyn consensus::Network> = match peers {
        Some(network) => network,
        None => Arc::new(consensus::NoPeers),
    };
    // A server started as an observer of ZooKeeper did not read a log
    // while its tree loaded, and may have found there that it took over.
    let log = match from.log {
        Some(log) => log,
        None => RecoveredLog::read(&raft.log_dir, from.restored.snapshot.map_or(0, |m| m.index))?,
    };
    Ok(Replication {
        consensus: Consensus::start(raft, log, from.restored, committed, peers)?,
        revalidate: None,
        takeover: None,
    })
}

/// The snapshot files a server starts from: the whole snapshots, the
/// deltas, and the chain of them its tree was loaded from.
struct StartingSnapshots {
    snapshots: Arc<Snapshots>,
    deltas: Arc<Deltas>,
    chain: Option<ChainTip>,
}

/// The apply loop of `shared`'s tree, its snapshots counted from the
/// tree's size now, and entries the tree was loaded with passed over.
fn apply_loop(shared: &Arc<Shared>, files: StartingSnapshots, membership: Membership) -> ApplyLoop {
    let snapshot_schedule = SnapshotSchedule::new(
        shared.config.snap_count,
        shared.config.snap_size_limit_kb,
        TreeSize::of(&shared.published().tree),
    );
    ApplyLoop {
        shared: shared.clone(),
        arrivals: Arrivals::decode_from(&files.snapshots),
        snapshots: files.snapshots,
        deltas: files.deltas,
        delta_chain: Arc::new(DeltaChain::starting_at(files.chain)),
        loaded_through: files.chain.map_or(0, |tip| tip.last),
        snapshot_job: Default::default(),
        membership,
        membership_snapshot: None,
        snapshot_schedule,
        applied_through: None,
    }
}

/// The tree a server starts from, and what it records of the membership.
struct Starting {
    tree: DataTree,
    snapshot_meta: Option<SnapshotMeta>,
    /// The deltas loaded after the snapshot, oldest first.
    deltas: Vec<DeltaMeta>,
    /// A reconfig's membership, which the configuration now holds, is the
    /// group's rather than zoo.cfg's.
    reconfigured: bool,
}

/// The starting state, and the raft log after its snapshot, read at the
/// same time on a thread of its own (none for a server configured to
/// observe ZooKeeper, which keeps no raft log until its tree says it took
/// over). Reading the log needs only the snapshot's
/// index: among 10M znodes, with 1.3 GB of log after the snapshot to read
/// (1.5 s), a restart took 14.8-16.5 s instead of 16.1-17.2.
///
/// The newest snapshot is read once, checked as it is decoded
/// ([`Snapshots::checked_as_read`]) rather than verified whole first. One
/// that turns out damaged is given up for the next older, with a warning,
/// and the log read again after that one; if every snapshot is damaged,
/// the newest's error stops the start (starting empty would lose state).
fn load_state(
    config: &mut ServerConfig,
    snapshots: &Snapshots,
    deltas: &Deltas,
    log_dir: &Path,
) -> Result<(Starting, Option<RecoveredLog>), ServerError> {
    let reads_log = !config.observes_zookeeper();
    let mut newest_error = None;
    for index in snapshots.newest_first()? {
        // A server that reads no log keeps no deltas either.
        let chain = match reads_log {
            true => deltas.chain(index)?,
            false => Vec::new(),
        };
        let with_deltas = chain.len();
        let mut loaded = load_at(snapshots, index, chain, reads_log, log_dir)?;
        if let (Err(damaged), 1..) = (&loaded, with_deltas) {
            tracing::warn!(
                "the {with_deltas} deltas after the snapshot {} cannot be loaded with it ({damaged}); loading the snapshot alone, and replaying the log after it",
                snapshots.path_of(index).display()
            );
            loaded = load_at(snapshots, index, Vec::new(), reads_log, log_dir)?;
        }
        match loaded {
            Ok((tree, log)) => return Ok((starting_state(config, tree)?, log)),
            Err(damaged) => {
                tracing::warn!(
                    "the snapshot {} cannot be loaded ({damaged}); trying an older one",
                    snapshots.path_of(index).display()
                );
                newest_error.get_or_insert(damaged);
            }
        }
    }
    if let Some(error) = newest_error {
        return Err(error);
    }
    let no_snapshot = None::<(SnapshotMeta, io::Empty)>;
    let (tree, log) = load_with_log(no_snapshot, Vec::new(), reads_log, log_dir)??;
    Ok((starting_state(config, tree)?, log))
}

/// The snapshot at `index` and the deltas `chain` after it, loaded while
/// the log after the snapshot is read, as [`load_with_log`] does.
fn load_at(
    snapshots: &Snapshots,
    index: u64,
    chain: Vec<(DeltaMeta, SnapshotPieces)>,
    reads_log: bool,
    log_dir: &Path,
) -> Result<Result<(LoadedTree, Option<RecoveredLog>), ServerError>, ServerError> {
    match snapshots.checked_as_read(index) {
        Ok(opened) => load_with_log(Some(opened), chain, reads_log, log_dir),
        Err(opening) => Ok(Err(opening.into())),
    }
}

/// A snapshot's tree and the deltas after it, loaded while the log after
/// the snapshot is read (when `reads_log`). The outer error is the log's,
/// which stops the start; the inner one the snapshot's or a delta's, for
/// which the snapshot alone or an older one may serve.
fn load_with_log(
    latest: Option<(SnapshotMeta, impl Read + Send)>,
    chain: Vec<(DeltaMeta, SnapshotPieces)>,
    reads_log: bool,
    log_dir: &Path,
) -> Result<Result<(LoadedTree, Option<RecoveredLog>), ServerError>, ServerError> {
    let after = latest.as_ref().map_or(0, |(meta, _)| meta.index);
    std::thread::scope(|scope| {
        let log = reads_log.then(|| {
            std::thread::Builder::new()
                .name("log-recovery".into())
                .spawn_scoped(scope, || RecoveredLog::read(log_dir, after))
        });
        let log = log.transpose().map_err(|source| ServerError::Thread {
            what: "read the raft log",
            source,
        })?;
        let tree = load_snapshot(latest, chain);
        let log = match log {
            Some(reading) => Some(
                reading
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
            ),
            None => None,
        };
        Ok(tree.map(|tree| (tree, log)))
    })
}

/// A tree, the snapshot it was loaded from, if any, and the deltas after
/// it, oldest first.
struct LoadedTree {
    tree: DataTree,
    snapshot: Option<SnapshotMeta>,
    deltas: Vec<DeltaMeta>,
}

/// The state a server starts from, given its loaded tree: sets `config`'s
/// servers to what the tree records over the files: a takeover's ensemble,
/// a reconfig's membership.
/// A server of an ensemble that no reconfig has changed writes zoo.cfg's
/// membership into the tree, as ZooKeeper writes `/zookeeper/config`.
fn starting_state(config: &mut ServerConfig, loaded: LoadedTree) -> Result<Starting, ServerError> {
    let LoadedTree {
        mut tree,
        snapshot: snapshot_meta,
        deltas,
    } = loaded;
    if config.observes_zookeeper() {
        crate::zookeeper_observer::adopt_takeover(config, &tree)?;
    }
    // An observer's tree holds ZooKeeper's configuration, which is not ours.
    if config.observes_zookeeper() {
        return Ok(Starting {
            tree,
            snapshot_meta,
            deltas,
            reconfigured: false,
        });
    }
    // From before the membership is written in, so that the next delta
    // holds that too.
    tree.track_changes();
    let reconfigured = crate::membership::reconfigured(&tree);
    if let Some(servers) = &reconfigured {
        let text = |servers| crate::membership::config_text(servers, 0);
        if text(servers) != text(&config.servers) {
            tracing::warn!(
                "the configuration files list other servers than the ensemble's last committed membership, which is used; change the membership with reconfig"
            );
        }
        config.servers = crate::membership::with_self(servers, config)?;
    }
    crate::membership::install(&mut tree, config);
    Ok(Starting {
        tree,
        snapshot_meta,
        deltas,
        reconfigured: reconfigured.is_some(),
    })
}

/// This server's id: its `myid` in an ensemble or as an observer of
/// ZooKeeper, 1 when standalone.
fn own_id(config: &ServerConfig, ensemble: Option<&Ensemble>) -> Result<u64, ServerError> {
    match ensemble {
        Some(ensemble) if config.observes_zookeeper() => Err(ConfigError::Invalid {
            key: "observeZooKeeper".into(),
            value: config.observe_zookeeper.join(","),
            reason: format!(
                "server.{} lines make a Paddock ensemble; a server that observes ZooKeeper has none",
                ensemble.my_id
            ),
        }
        .into()),
        Some(ensemble) => Ok(ensemble.my_id),
        None if config.observes_zookeeper() => crate::zookeeper_observer::server_id(config),
        None => Ok(1),
    }
}

/// How the server's log is replicated: raft among Paddock servers, or the
/// learner of an observed ZooKeeper ensemble, with what that one adds.
struct Replication {
    consensus: Consensus<Waiter>,
    revalidate: Option<migrate::Revalidate>,
    takeover: Option<tokio::sync::oneshot::Receiver<i64>>,
}

fn log_start_warnings(config: &ServerConfig) {
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    if !config.ignored_keys.is_empty() {
        tracing::warn!(
            "zoo.cfg keys Paddock does not support, which have no effect: {} (remove them to silence this warning)",
            config.ignored_keys.join(", ")
        );
    }
}

/// Cancels `tasks` and waits until each has ended, its resources dropped.
pub async fn stop_tasks(tasks: Vec<JoinHandle<()>>) {
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
}

/// A leader of an ensemble hands leadership to a follower before it stops,
/// so that writes pause for a few round trips instead of an election
/// timeout. Its clients' connections stay open meanwhile: their new writes
/// are refused (ConnectionLoss, which they retry elsewhere), and those
/// already proposed are answered once applied here, before the connections
/// close. When the follower asked does not take over in time (starved of
/// CPU, or gone since it last answered), another is asked (the same one if
/// it is the only one): a stop then takes up to two election timeouts.
async fn hand_off_leadership(shared: &Shared) {
    if shared.peers.is_none() {
        return;
    }
    let mut avoid = None;
    for attempt in 1..=HAND_OFF_ATTEMPTS {
        match shared.consensus.hand_off(avoid).await {
            Ok(HandOff::Done {
                to,
                elapsed,
                last_index,
            }) => {
                tracing::info!(
                    "handed leadership to server.{to} in {} ms",
                    elapsed.as_millis()
                );
                return await_applied(shared, last_index).await;
            }
            Ok(HandOff::NotTaken { asked }) if attempt < HAND_OFF_ATTEMPTS => {
                tracing::info!(
                    "server.{asked} did not take leadership over within an election timeout; asking another"
                );
                avoid = Some(asked);
            }
            Ok(HandOff::NotTaken { asked }) => return tracing::info!(
                "server.{asked} did not take leadership over within an election timeout; stopping as leader, the others elect one"
            ),
            Ok(HandOff::NotLeading) => {
                return tracing::info!("not leading: no leadership to hand over");
            }
            Ok(HandOff::NoOtherVoter) => {
                return tracing::info!("the only voter: no server to hand leadership to");
            }
            Ok(HandOff::DiskFull) => return tracing::info!(
                "not handing leadership over: the log waits for disk space; the others elect a leader"
            ),
            Err(error) => return tracing::info!("not handing leadership over: {error}"),
        }
    }
}

/// Waits, bounded, until this server has applied the log up to `index`.
async fn await_applied(shared: &Shared, index: u64) {
    let mut applied = shared.applied.subscribe();
    let caught_up = applied.wait_for(|&applied| applied >= index);
    if tokio::time::timeout(HANDED_OFF_APPLY_WAIT, caught_up)
        .await
        .is_err()
    {
        tracing::info!(
            index,
            "writes proposed through this server were not applied within {} ms; their clients see ConnectionLoss",
            HANDED_OFF_APPLY_WAIT.as_millis()
        );
    }
}

fn data_dirs(config: &ServerConfig) -> Result<(PathBuf, PathBuf), ServerError> {
    let snapshot_dir = consensus::snapshot_dir(&config.data_dir);
    let log_dir = consensus::log_dir(&config.data_log_dir);
    for dir in [&snapshot_dir, &log_dir] {
        std::fs::create_dir_all(dir).map_err(|source| ServerError::DataDir {
            path: dir.clone(),
            source,
        })?;
    }
    Ok((snapshot_dir, log_dir))
}

fn load_snapshot(
    latest: Option<(SnapshotMeta, impl Read + Send)>,
    mut chain: Vec<(DeltaMeta, SnapshotPieces)>,
) -> Result<LoadedTree, ServerError> {
    let started = Instant::now();
    let Some((meta, mut reader)) = latest else {
        return Ok(LoadedTree {
            tree: DataTree::new(),
            snapshot: None,
            deltas: Vec::new(),
        });
    };
    let deltas = chain
        .iter_mut()
        .map(|(_, delta)| delta as &mut (dyn Read + Send))
        .collect();
    let tree = DataTree::read_snapshot_and_deltas(&mut reader, deltas)
        .map_err(|e| ServerError::Snapshot(e.to_string()))?;
    // Read to its end, each file is checked whole.
    read_to_its_end(&mut reader, "the snapshot")?;
    for (_, delta) in &mut chain {
        read_to_its_end(delta, "a delta")?;
    }
    let deltas: Vec<DeltaMeta> = chain.into_iter().map(|(delta, _)| delta).collect();
    tracing::info!(
        zxid = meta.index,
        nodes = tree.node_count(),
        deltas = deltas.len(),
        through = deltas.last().map_or(meta.index, |delta| delta.index),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "loaded snapshot"
    );
    Ok(LoadedTree {
        tree,
        snapshot: Some(meta),
        deltas,
    })
}

fn read_to_its_end(file: &mut dyn Read, what: &str) -> Result<(), ServerError> {
    crate::snapshot_thread::read_to_its_end(file, what)
        .map_err(|e| ServerError::Snapshot(e.to_string()))
}

/// Starts the peer transport: raft's messages and snapshots go to
/// consensus, notes to [`receive_notes`].
async fn start_peer_transport(
    shared: &Arc<Shared>,
    ensemble: &Ensemble,
    network: &Arc<PeerNetwork>,
) -> Result<(), ServerError> {
    let (notes_tx, notes) = mpsc::unbounded_channel();
    let mut transport = ensemble.transport_config();
    transport.tls = shared
        .config
        .quorum_tls
        .peer_tls()
        .map_err(|e| ServerError::Tls(format!("between servers: {e}")))?;
    network
        .start(transport, shared.consensus.clone(), move |from, payload| {
            let _ = notes_tx.send((from, payload));
        })
        .await
        .map_err(|source| ServerError::Listen {
            addr: ensemble.listen,
            source,
        })?;
    tokio::spawn(receive_notes(shared.clone(), notes));
    tracing::info!(
        id = ensemble.my_id,
        listen = %ensemble.listen,
        peers = ensemble.peers.len(),
        "peer transport started"
    );
    Ok(())
}

/// Acts on the peers' notes, in the order each peer sent them.
async fn receive_notes(
    shared: Arc<Shared>,
    mut notes: mpsc::UnboundedReceiver<(u64, bytes::Bytes)>,
) {
    while let Some((from, payload)) = notes.recv().await {
        match PeerNote::decode(payload) {
            Some(PeerNote::SessionsHeard(ids)) => sessions_heard(&shared, ids),
            Some(PeerNote::SessionMoved(id)) => session_moved(&shared, id),
            Some(PeerNote::ReconfigAsk { ask, body }) => {
                crate::reconfig::answer_ask(&shared, from, ask, body)
            }
            Some(PeerNote::ReconfigAnswer { ask, zxid, err }) => {
                crate::reconfig::take_answer(&shared, ask, zxid, err)
            }
            None => tracing::warn!(peer = from, "ignoring a note this server cannot read"),
        }
    }
}

fn sessions_heard(shared: &Shared, ids: Vec<i64>) {
    let now = Instant::now();
    for id in ids {
        shared.sessions.touch(id, now);
    }
}

/// The client resumed its session elsewhere: its connection here, if
/// still open, must stop serving it.
fn session_moved(shared: &Shared, id: i64) {
    if let Some(connection) = shared.sessions.owner(id) {
        shared.sessions.release_ownership(id, connection);
        shared.kill_connection(connection);
    }
}

fn client_addr(shared: &Shared) -> SocketAddr {
    SocketAddr::new(
        shared
            .config
            .client_port_address
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        shared.config.client_port,
    )
}

/// The client ports: `clientPort` (plain text, or either with
/// `client.portUnification`) and `secureClientPort`.
struct ClientListeners {
    plain: Option<TcpListener>,
    secure: Option<TcpListener>,
}

/// What an accepted connection speaks.
#[derive(Clone, Copy)]
enum Speaks {
    PlainText,
    Tls,
    /// TLS if it opens with a TLS record, else plain text.
    Either,
}

impl ClientListeners {
    fn bind(shared: &Shared) -> Result<Self, ServerError> {
        let config = &shared.config;
        let plain = match config.plain_client_port {
            true => Some(bind(
                client_addr(shared),
                config.client_port_listen_backlog,
            )?),
            false => None,
        };
        let secure = match config.client_tls.port {
            Some(port) => {
                let ip = config
                    .client_tls
                    .address
                    .or(config.client_port_address)
                    .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
                let addr = SocketAddr::new(ip, port);
                Some(bind(addr, config.client_port_listen_backlog)?)
            }
            None => None,
        };
        Ok(Self { plain, secure })
    }

    /// The address to report: the plain port's, else the secure one's.
    fn address(&self, shared: &Shared) -> SocketAddr {
        self.plain
            .iter()
            .chain(&self.secure)
            .find_map(|l| l.local_addr().ok())
            .unwrap_or_else(|| client_addr(shared))
    }

    fn spawn(self, shared: &Arc<Shared>) -> Vec<JoinHandle<()>> {
        let plain_speaks = match shared.config.client_tls.port_unification {
            true => Speaks::Either,
            false => Speaks::PlainText,
        };
        let mut tasks = Vec::new();
        if let Some(listener) = self.plain {
            tasks.push(tokio::spawn(accept(shared.clone(), listener, plain_speaks)));
        }
        if let Some(listener) = self.secure {
            tasks.push(tokio::spawn(accept(shared.clone(), listener, Speaks::Tls)));
        }
        if let Some(tls) = &shared.client_tls {
            tasks.push(tokio::spawn(tls.clone().reload_changed_stores()));
        }
        tasks
    }
}

/// A client port's listener, with `clientPortListenBacklog`'s accept queue.
fn bind(addr: SocketAddr, backlog: Option<u32>) -> Result<TcpListener, ServerError> {
    let listen = || {
        let socket = match addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        // As std and tokio do for a listener: a restarted server binds its
        // port again while the last run's connections are in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(backlog.unwrap_or(crate::config::DEFAULT_LISTEN_BACKLOG))
    };
    listen().map_err(|source| ServerError::Listen { addr, source })
}

/// Opens the door to sessions. Sessions recovered from disk get a fresh
/// full timeout, as after a leader change: their clients need time to
/// come back.
fn start_serving(shared: &Shared, started: Instant) {
    let now = Instant::now();
    let recovered: Vec<(i64, i32)> = shared
        .published()
        .tree
        .sessions()
        .map(|(id, info)| (id, info.timeout_ms))
        .collect();
    for (id, timeout_ms) in &recovered {
        shared
            .sessions
            .track(*id, crate::session::session_timeout(*timeout_ms), now);
    }
    shared
        .serving
        .store(true, std::sync::atomic::Ordering::Release);
    tracing::info!(
        zxid = format!("{:#x}", shared.last_zxid()),
        nodes = shared.published().tree.node_count(),
        sessions = recovered.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        bound = %client_addr(shared),
        "serving clients"
    );
}

fn stopped(result: Result<Result<(), ApplyError>, tokio::task::JoinError>) -> ServerError {
    match result {
        Ok(Ok(())) => ServerError::LogStopped,
        Ok(Err(error)) => error.into(),
        Err(join) => std::panic::resume_unwind(join.into_panic()),
    }
}

/// `globalOutstandingLimit` and the request throttler, as this server's
/// place in the ensemble divides the limit.
fn request_gate(config: &ServerConfig, membership: &Membership, server_id: u64) -> RequestGate {
    RequestGate::new(
        crate::membership::outstanding_limit(config, membership, server_id),
        config.limits.request_throttle.clone(),
        LargeRequests::new(
            config.limits.large_request_threshold,
            config.limits.large_request_max_bytes,
        ),
    )
}

/// Resolves once a leader is known and this server has applied everything
/// it knows to be committed, including what it replayed from disk; a
/// leader also waits until its own log is committed (its first entry of
/// the term commits everything before it).
async fn caught_up(shared: &Shared) {
    loop {
        let status = shared.consensus.status();
        let applied = shared.published().applied_index;
        let leader_known = status.leader_id() != 0;
        let leader_done =
            status.role() != Role::Leader || status.commit_index() >= status.last_index();
        if leader_known && leader_done && applied >= status.commit_index() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn accept(shared: Arc<Shared>, listener: TcpListener, speaks: Speaks) {
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!("accepting a connection failed: {error}; retrying");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let slot = match SocketSlot::take(&shared, remote.ip()) {
            Ok(slot) => slot,
            Err(refusal) => {
                shared
                    .stats
                    .connections_rejected
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(%remote, "refusing a connection: {refusal}");
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            match (speaks, shared.client_tls.clone()) {
                (Speaks::Tls, Some(tls)) => tls.serve(shared, stream, remote).await,
                (Speaks::Either, Some(tls)) => tls.serve_unified(shared, stream, remote).await,
                _ => crate::connection::serve(shared, stream, remote).await,
            }
            drop(slot);
        });
    }
}

/// What the leader does for the ensemble, and followers' part in it: the
/// leader expires silent sessions and reaps containers and TTL nodes
/// (through the log, so every server applies the same deletions); a
/// follower reports the sessions it heard from to the leader.
async fn leader_duties(shared: Arc<Shared>) {
    let half_tick = Duration::from_millis(u64::from(shared.config.tick_time_ms).max(10) / 2);
    let period = half_tick.min(DUTIES_PERIOD_MAX);
    let reap_every = Duration::from_millis(shared.config.container_check_interval_ms.max(10));
    let mut ticker = tokio::time::interval(period);
    let mut was_leader = shared.is_leader();
    let mut last_reap = Instant::now();
    loop {
        ticker.tick().await;
        let is_leader = shared.is_leader();
        if is_leader && !was_leader {
            // A new leader cannot know when clients were last heard from.
            tracing::info!("leading: every session gets a fresh full timeout");
            shared.sessions.refresh_all(Instant::now());
        }
        was_leader = is_leader;
        if !is_leader {
            report_sessions_heard(&shared);
            continue;
        }
        expire_sessions(&shared).await;
        if last_reap.elapsed() >= reap_every {
            last_reap = Instant::now();
            reap(&shared);
        }
    }
}

fn report_sessions_heard(shared: &Shared) {
    let Some((_, network)) = &shared.peers else {
        return;
    };
    let heard = shared.sessions.take_heard();
    let leader = shared.consensus.status().leader_id();
    if heard.is_empty() || leader == 0 {
        return;
    }
    network.send_app(leader, PeerNote::SessionsHeard(heard).encode());
}

/// Proposes `closeSession` for sessions whose clients fell silent, a
/// batch at a time: the next batch is proposed once the last is applied,
/// so a client's write waits behind at most one batch even when thousands
/// of sessions are lost together (a rack losing power, a load balancer
/// restarting). Stops if this server stops leading; the next leader gives
/// every session a fresh timeout and expires them in turn.
async fn expire_sessions(shared: &Shared) {
    shared.sessions.take_heard();
    let expired = shared.sessions.take_expired(Instant::now());
    if expired.len() > EXPIRIES_PER_BATCH_MAX {
        tracing::info!(
            sessions = expired.len(),
            "sessions expired together; closing them {EXPIRIES_PER_BATCH_MAX} at a time"
        );
    }
    for batch in expired.chunks(EXPIRIES_PER_BATCH_MAX) {
        if !shared.is_leader() {
            return;
        }
        let mut last_applied = None;
        for &session_id in batch {
            tracing::info!(session = format!("{session_id:#x}"), "session expired");
            last_applied = Some(shared.propose(&stamped_txn(session_id, TxnOp::CloseSession)));
        }
        if let Some(applied) = last_applied {
            // Entries apply in log order: the last one done means the
            // whole batch is. A lost proposal ends the wait as well.
            let _ = applied.await;
        }
    }
}

/// Deletes empty containers and expired TTL nodes through the log, as
/// ZooKeeper's `ContainerManager` does.
fn reap(shared: &Shared) {
    let candidates = shared
        .published()
        .tree
        .reap_candidates(now_ms(), shared.config.container_max_never_used_interval_ms);
    for path in candidates.into_iter().take(REAPS_PER_PASS_MAX) {
        drop(shared.propose(&stamped_txn(0, TxnOp::Reap { path })));
    }
}
