//! The server assembled in one place: recover the tree from the newest
//! snapshot, start the replicated log (which replays what follows it), the
//! apply loop, session expiry, the container and TTL reaper, and the client
//! listener. Standalone is a one-voter group on this same path.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use consensus::{Consensus, Role, Snapshots};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tree::{DataTree, Txn, TxnOp};

use crate::apply::{ApplyError, ApplyLoop};
use crate::config::ServerConfig;
use crate::session::{SessionIds, SessionTracker};
use crate::shared::{now_ms, Published, Shared, SocketSlot};
use crate::stats::Stats;
use crate::watch::WatchRegistry;

/// One raft tick. Standalone never holds elections, so this only paces
/// raft's internal timers.
const RAFT_TICK: Duration = Duration::from_millis(100);
/// Raft ticks without a leader before a follower campaigns (one second).
const ELECTION_TICKS: usize = 10;
/// How long to wait before accepting again after `accept` fails (out of
/// file descriptors, say): the listener must survive it.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The reaper proposes at most this many deletions per pass, as
/// ZooKeeper's `znode.container.maxPerMinute` bounds its own.
const REAPS_PER_PASS_MAX: usize = 10_000;

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
    #[error("cannot read the JAAS file {path}: {source}")]
    Jaas {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot load the newest snapshot: {0}")]
    Snapshot(String),
    #[error(transparent)]
    Consensus(#[from] consensus::Error),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("the replicated log stopped (see the error logged above)")]
    LogStopped,
}

/// Runs a server until `shutdown` completes or a fatal error occurs.
/// `on_listening` is told the bound address once clients can connect.
pub async fn run(
    config: ServerConfig,
    on_listening: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let snapshot_dir = config.data_dir.join("version-paddock").join("snapshots");
    let log_dir = config.data_log_dir.join("version-paddock").join("log");
    for dir in [&snapshot_dir, &log_dir] {
        std::fs::create_dir_all(dir).map_err(|source| ServerError::DataDir {
            path: dir.clone(),
            source,
        })?;
    }
    let sasl_users = match &config.jaas_config {
        Some(path) => crate::sasl::read_jaas_users(path).map_err(|source| ServerError::Jaas {
            path: path.clone(),
            source,
        })?,
        None => HashMap::new(),
    };
    if !config.ignored_keys.is_empty() {
        tracing::info!(keys = ?config.ignored_keys, "configuration keys this server does not use");
    }

    let started = Instant::now();
    let snapshots = Arc::new(Snapshots::open(&snapshot_dir)?);
    let (tree, snapshot_meta) = match snapshots.latest()? {
        Some((meta, mut reader)) => {
            let tree = DataTree::read_snapshot(&mut reader)
                .map_err(|e| ServerError::Snapshot(e.to_string()))?;
            tracing::info!(
                zxid = meta.index,
                nodes = tree.node_count(),
                "loaded snapshot"
            );
            (tree, Some(meta))
        }
        None => (DataTree::new(), None),
    };
    let server_id = 1;
    let voters = vec![server_id];
    let (committed_tx, committed_rx) = mpsc::unbounded_channel();
    let consensus = Consensus::start(
        consensus::Config {
            id: server_id,
            voters: voters.clone(),
            learners: Vec::new(),
            log_dir,
            tick: RAFT_TICK,
            election_ticks: ELECTION_TICKS,
        },
        snapshot_meta.as_ref(),
        committed_tx,
        Arc::new(consensus::NoPeers),
    )?;

    let shared = Arc::new(Shared {
        server_id,
        voters: voters.clone(),
        published: Mutex::new(Published {
            tree: tree.clone(),
            watches: WatchRegistry::default(),
            last_zxid: snapshot_meta.as_ref().map_or(0, |m| m.index as i64),
            applied_index: snapshot_meta.as_ref().map_or(0, |m| m.index),
        }),
        sessions: SessionTracker::default(),
        session_ids: SessionIds::new(server_id, now_ms()),
        consensus,
        connections: Mutex::new(HashMap::new()),
        next_connection_id: AtomicU64::new(1),
        sockets_per_ip: Mutex::new(HashMap::new()),
        stats: Stats::default(),
        sasl_users,
        config,
    });

    let apply = ApplyLoop {
        shared: shared.clone(),
        tree,
        snapshots,
        snapshot_in_progress: Arc::new(AtomicBool::new(false)),
        voters,
        since_snapshot: 0,
        snapshot_after: ApplyLoop::jittered_snapshot_count(shared.config.snap_count),
    };
    let mut apply_task = tokio::spawn(apply.run(committed_rx));

    tokio::select! {
        result = &mut apply_task => return stopped(result),
        () = caught_up(&shared) => {}
    }
    // Sessions recovered from disk get a fresh full timeout, as after a
    // leader change: their clients need time to come back.
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
            .track(*id, Duration::from_millis(*timeout_ms as u64), now);
    }
    tracing::info!(
        zxid = format!("{:#x}", shared.last_zxid()),
        nodes = shared.published().tree.node_count(),
        sessions = recovered.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "recovered"
    );

    let addr = SocketAddr::new(
        shared
            .config
            .client_port_address
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        shared.config.client_port,
    );
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Listen { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    on_listening(bound);
    tracing::info!(%bound, "serving clients");

    let expiry = tokio::spawn(expire_sessions(shared.clone()));
    let reaper = tokio::spawn(reap(shared.clone()));
    let result = tokio::select! {
        result = &mut apply_task => stopped(result),
        () = accept(shared.clone(), listener) => Ok(()),
        () = shutdown => {
            tracing::info!("shutting down: closing client connections (sessions live on)");
            Ok(())
        }
    };
    expiry.abort();
    reaper.abort();
    for handle in shared.connections().values() {
        handle.kill.cancel();
    }
    result
}

fn stopped(
    result: Result<Result<(), ApplyError>, tokio::task::JoinError>,
) -> Result<(), ServerError> {
    match result {
        Ok(Ok(())) => Err(ServerError::LogStopped),
        Ok(Err(error)) => Err(error.into()),
        Err(join) => std::panic::resume_unwind(join.into_panic()),
    }
}

/// Resolves once this server leads and has applied everything committed,
/// including what it replayed from disk.
async fn caught_up(shared: &Shared) {
    loop {
        let status = shared.consensus.status();
        let applied = shared.published().applied_index;
        if status.role() == Role::Leader
            && status.commit_index() >= status.last_index()
            && applied >= status.commit_index()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn accept(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!("accepting a connection failed: {error}; retrying");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Some(slot) = SocketSlot::take(&shared, remote.ip()) else {
            shared
                .stats
                .connections_rejected
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(
                %remote,
                limit = shared.config.max_client_cnxns,
                "too many connections from {}; raise maxClientCnxns to allow more",
                remote.ip()
            );
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            crate::connection::serve(shared, stream, remote).await;
            drop(slot);
        });
    }
}

/// Proposes `closeSession` for sessions whose clients fell silent.
async fn expire_sessions(shared: Arc<Shared>) {
    let period = Duration::from_millis(u64::from(shared.config.tick_time_ms).clamp(10, 1000) / 2);
    let mut ticker = tokio::time::interval(period);
    loop {
        ticker.tick().await;
        for session_id in shared.sessions.take_expired(Instant::now()) {
            tracing::info!(session = format!("{session_id:#x}"), "session expired");
            let txn = Txn {
                time_ms: now_ms(),
                session_id,
                auth: Vec::new(),
                op: TxnOp::CloseSession,
            };
            drop(shared.propose(&txn));
        }
    }
}

/// Deletes empty containers and expired TTL nodes through the log, as
/// ZooKeeper's `ContainerManager` does.
async fn reap(shared: Arc<Shared>) {
    let period = Duration::from_millis(shared.config.container_check_interval_ms.max(10));
    let mut ticker = tokio::time::interval(period);
    loop {
        ticker.tick().await;
        let candidates = shared
            .published()
            .tree
            .reap_candidates(now_ms(), shared.config.container_max_never_used_interval_ms);
        for path in candidates.into_iter().take(REAPS_PER_PASS_MAX) {
            let txn = Txn {
                time_ms: now_ms(),
                session_id: 0,
                auth: Vec::new(),
                op: TxnOp::Reap { path },
            };
            drop(shared.propose(&txn));
        }
    }
}
