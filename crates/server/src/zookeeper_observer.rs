//! A server that follows a running Apache ZooKeeper ensemble as its
//! observer (`observeZooKeeper`), the live way in from ZooKeeper: its
//! consensus is `migrate`'s learner, which delivers what the ZooKeeper
//! leader commits to the apply loop and forwards this server's writes and
//! sessions to that leader. Everything else (connections, reads, watches,
//! the apply loop, snapshots) is the server's own.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use consensus::{Applying, Consensus, SnapshotMeta, Snapshots};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::{ConfigError, ServerConfig};
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

/// Starts following the ensemble; `shared` is set once the server's state
/// exists, for the sessions each ping to the leader keeps alive.
pub fn start(
    config: &ServerConfig,
    server_id: u64,
    snapshot: Option<&SnapshotMeta>,
    snapshots: Arc<Snapshots>,
    committed: UnboundedSender<Applying<Waiter>>,
    shared: Arc<OnceLock<Weak<Shared>>>,
) -> Result<(Consensus<Waiter>, migrate::Revalidate), ServerError> {
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
    };
    migrate::observe_zookeeper(parts).map_err(|e| ServerError::Observer(e.to_string()))
}

/// Whether the ZooKeeper leader takes session `id`, resumed here, as
/// living, and makes this server its owner (ZooKeeper's learner
/// revalidates every session a client resumes, so that the leader takes
/// its writes from here). `Err` when no leader answered.
pub async fn revalidate(
    revalidate: &migrate::Revalidate,
    session_id: i64,
    timeout_ms: i32,
) -> Result<bool, ()> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    revalidate(
        session_id,
        timeout_ms,
        Box::new(move |valid| {
            let _ = answer.send(valid);
        }),
    );
    match tokio::time::timeout(REVALIDATE_WAIT, answered).await {
        Ok(Ok(Some(valid))) => Ok(valid),
        _ => Err(()),
    }
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
