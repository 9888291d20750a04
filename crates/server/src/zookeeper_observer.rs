//! A server that follows a running Apache ZooKeeper ensemble as its
//! observer (`observeZooKeeper`), the live way in from ZooKeeper: its
//! consensus is `migrate`'s learner, which delivers what the ZooKeeper
//! leader commits to the apply loop and forwards this server's writes and
//! sessions to that leader. Everything else (connections, reads, watches,
//! the apply loop, snapshots) is the server's own.
//!
//! The takeover (`migrate::TAKEOVER_PATH`): once the observer has applied
//! the marker's creation, the server snapshots its tree at that zxid with
//! the marker's servers as the membership and starts again as one of a
//! Paddock ensemble; every later start reads the marker and does the same,
//! whatever zoo.cfg still says.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use consensus::{Applying, Consensus, Membership, SnapshotMeta, Snapshots};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;
use tree::DataTree;

use crate::config::{ConfigError, ServerConfig, ServerSpec};
use crate::server::ServerError;
use crate::shared::{Shared, Waiter};

/// This server's id in the ZooKeeper ensemble, from `dataDir/myid`: one
/// no ZooKeeper server has, as the leader tells its learners apart by it.
pub fn server_id(config: &ServerConfig) -> Result<u64, ServerError> {
    let path = config.data_dir.join("myid");
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
        path: path.clone(),
        source,
    })?;
    let id = text.trim();
    match id.parse::<u64>() {
        Ok(id @ 1..=254) => Ok(id),
        _ => Err(ConfigError::Invalid {
            key: "myid".into(),
            value: id.into(),
            reason: format!(
                "{} must hold this server's id in the ZooKeeper ensemble it observes (1 to 254, one no ZooKeeper server has)",
                path.display()
            ),
        }
        .into()),
    }
}

/// A server's following of a ZooKeeper ensemble.
pub struct Observer {
    /// The server's consensus: the learner's thread.
    pub consensus: Consensus<Waiter>,
    pub revalidate: migrate::Revalidate,
    /// The zxid of the takeover, once applied.
    pub takeover: oneshot::Receiver<i64>,
}

/// Starts following the ensemble; `shared` is set once the server's state
/// exists, for the sessions each ping to the leader keeps alive.
pub fn start(
    config: &ServerConfig,
    server_id: u64,
    snapshot: Option<&SnapshotMeta>,
    snapshots: Arc<Snapshots>,
    committed: UnboundedSender<Applying<Waiter>>,
    shared: Arc<OnceLock<Weak<Shared>>>,
) -> Result<Observer, ServerError> {
    let (takeover_tx, takeover) = oneshot::channel();
    let tick = Duration::from_millis(u64::from(config.tick_time_ms));
    let learner = migrate::LearnerConfig {
        servers: config.observe_zookeeper.clone(),
        server_id: server_id as i64,
        init_limit: tick * config.init_limit_ticks,
        sync_limit: tick * config.sync_limit_ticks,
        give_up_after: tick * config.init_limit_ticks,
    };
    let parts = migrate::ObserverParts {
        learner,
        server_id,
        zxid: snapshot.map_or(0, |meta| meta.index as i64),
        snapshots,
        snapshots_retained: config.snapshots_retained(),
        committed,
        sessions_touched: Box::new(move || sessions_heard(&shared)),
        takeover: takeover_tx,
    };
    let (consensus, revalidate) =
        migrate::observe_zookeeper(parts).map_err(|e| ServerError::Observer(e.to_string()))?;
    Ok(Observer {
        consensus,
        revalidate,
        takeover,
    })
}

/// The servers a takeover recorded in `tree`, if one did: from then on
/// this server is one of them, not an observer. Sets them as `config`'s.
pub fn adopt_takeover(config: &mut ServerConfig, tree: &DataTree) -> Result<(), ServerError> {
    let Some(servers) = takeover_servers(tree)? else {
        return Ok(());
    };
    let my_id = server_id(config)?;
    if !servers.iter().any(|server| server.id == my_id) {
        return Err(ServerError::Observer(format!(
            "ZooKeeper was taken over by server.{} and no server.{my_id} (this server's myid): it cannot join that ensemble from this data; start it with an empty data directory and add it with reconfig",
            servers.iter().map(|s| s.id.to_string()).collect::<Vec<_>>().join(", server.")
        )));
    }
    tracing::warn!(
        "this server took over from ZooKeeper ({} exists): observeZooKeeper no longer applies (remove it from zoo.cfg), the ensemble is the servers {} lists",
        migrate::TAKEOVER_PATH,
        migrate::TAKEOVER_PATH
    );
    config.observe_zookeeper.clear();
    config.servers = servers;
    Ok(())
}

/// The `server.N` lines the takeover znode holds.
fn takeover_servers(tree: &DataTree) -> Result<Option<Vec<ServerSpec>>, ServerError> {
    let Ok((data, _)) = tree.get_data(migrate::TAKEOVER_PATH, &[]) else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(data.as_deref().unwrap_or_default()).into_owned();
    let (servers, _) = crate::membership::parse_config_text(&text).map_err(|reason| {
        ServerError::Observer(format!(
            "{} does not list the ensemble to take over as server.N lines: {reason}",
            migrate::TAKEOVER_PATH
        ))
    })?;
    Ok(Some(servers))
}

/// Once the apply loop has applied the takeover at `zxid`, writes the tree
/// as a snapshot there, under the membership it names: where the server
/// starts again as one of that ensemble. ZooKeeper's configuration goes
/// from the tree, as in an import; the ensemble installs its own.
pub async fn take_over(
    shared: &Shared,
    snapshots: Arc<Snapshots>,
    zxid: i64,
) -> Result<(), ServerError> {
    let index = zxid as u64;
    let mut applied = shared.applied.subscribe();
    tokio::time::timeout(TAKEOVER_APPLY_WAIT, applied.wait_for(|&at| at >= index))
        .await
        .map_err(|_| {
            ServerError::Observer(format!(
                "the takeover at {zxid:#x} was not applied within {TAKEOVER_APPLY_WAIT:?}"
            ))
        })?
        .map_err(|_| ServerError::LogStopped)?;
    let mut tree = shared.published().tree.clone();
    let servers = takeover_servers(&tree)?.ok_or_else(|| {
        ServerError::Observer(format!(
            "the takeover at {zxid:#x} left no {}",
            migrate::TAKEOVER_PATH
        ))
    })?;
    tree.forget_config();
    let ids = |observer: bool| -> Vec<u64> {
        servers
            .iter()
            .filter(|s| s.observer == observer)
            .map(|s| s.id)
            .collect()
    };
    let meta = SnapshotMeta {
        index,
        // The raft term goes on from ZooKeeper's epoch.
        term: index >> 32,
        membership: Membership::new(ids(false), ids(true)),
    };
    let retained = shared.config.snapshots_retained();
    tokio::task::spawn_blocking(move || {
        snapshots.save(&meta, retained, |out| tree.write_snapshot(out))
    })
    .await
    .map_err(|e| ServerError::Observer(format!("writing the takeover snapshot: {e}")))?
    .map_err(|e| ServerError::Observer(format!("writing the takeover snapshot: {e}")))?;
    tracing::info!(
        zxid = format!("{zxid:#x}"),
        "took over from ZooKeeper: starting again as server.{} of {}",
        shared.server_id,
        crate::membership::config_text(&servers, 0).replace('\n', ", ")
    );
    Ok(())
}

/// How long the apply loop may take to apply what the observer handed it
/// before the takeover: a few txns, already in its channel.
const TAKEOVER_APPLY_WAIT: Duration = Duration::from_secs(30);

/// Whether the ZooKeeper leader takes session `id`, resumed here, as
/// living, and makes this server its owner (ZooKeeper's learner
/// revalidates every session a client resumes, so that the leader takes
/// its writes from here). `None` when no leader answered.
pub async fn revalidate(
    revalidate: &migrate::Revalidate,
    session_id: i64,
    timeout_ms: i32,
) -> Option<bool> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    revalidate(
        session_id,
        timeout_ms,
        Box::new(move |valid| {
            let _ = answer.send(valid);
        }),
    );
    tokio::time::timeout(REVALIDATE_WAIT, answered)
        .await
        .ok()?
        .ok()?
}

/// How long a resumed session waits for the leader's word: ZooKeeper's
/// learner waits as long as its connection to the leader lives, which a
/// ping missed for syncLimit ends; this bounds it the same.
const REVALIDATE_WAIT: Duration = Duration::from_secs(10);

/// The sessions this server's clients were heard from since the last
/// ping, with their timeouts.
fn sessions_heard(shared: &OnceLock<Weak<Shared>>) -> Vec<(i64, i32)> {
    let Some(shared) = shared.get().and_then(Weak::upgrade) else {
        return Vec::new();
    };
    let heard = shared.sessions.take_heard();
    let published = shared.published();
    heard
        .into_iter()
        .filter_map(|id| Some((id, published.tree.session(id)?.timeout_ms)))
        .collect()
}
