//! ZooKeeper's read-only mode (`readonlymode.enabled`): a server of an
//! ensemble that has been without a leader for `max(2 s, tickTime)` (the
//! wait ZooKeeper's peer gives its read-only server) serves the clients
//! that say they can take it (the connect request's `readOnly` flag) from
//! the tree it has: reads and watches, with writes answered NotReadOnly.
//! A client without the flag is refused. Entering and leaving the mode
//! closes every client connection, as ZooKeeper does when it replaces its
//! server: clients reconnect to what is there, and once a leader is back
//! they get read-write sessions again.
//!
//! A session created in the mode is this server's alone, as ZooKeeper's
//! read-only sessions are: it is not in the replicated tree, it ends with
//! its connection, and a quorum does not know it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::shared::Shared;

/// How often the leader is looked for.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// ZooKeeper's least wait before a leaderless peer serves read-only.
const LEADERLESS_WAIT_MIN: Duration = Duration::from_secs(2);

/// Whether the server is in read-only mode now.
#[derive(Default)]
pub struct ReadOnlyMode {
    active: AtomicBool,
}

impl ReadOnlyMode {
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }
}

/// How long a server must be without a leader before it serves read-only.
fn leaderless_wait(tick_time_ms: u32) -> Duration {
    Duration::from_millis(u64::from(tick_time_ms)).max(LEADERLESS_WAIT_MIN)
}

/// Switches the mode as the leader goes and comes, until the server stops.
pub async fn follow_the_quorum(shared: Arc<Shared>) {
    let wait = leaderless_wait(shared.config.tick_time_ms);
    let mut leaderless_since: Option<Instant> = None;
    let mut ticker = tokio::time::interval(POLL_INTERVAL);
    loop {
        ticker.tick().await;
        let has_leader = shared.consensus.status().leader_id() != 0;
        leaderless_since = match has_leader {
            true => None,
            false => leaderless_since.or_else(|| Some(Instant::now())),
        };
        let read_only = leaderless_since.is_some_and(|since| since.elapsed() >= wait);
        if read_only != shared.read_only.is_active() {
            switch(&shared, read_only);
        }
    }
}

fn switch(shared: &Shared, read_only: bool) {
    shared.read_only.active.store(read_only, Ordering::Release);
    if read_only {
        tracing::warn!(
            "no leader for {:?}: serving read-only clients (readonlymode.enabled); writes are refused until a quorum is back",
            leaderless_wait(shared.config.tick_time_ms)
        );
    } else {
        tracing::info!("a leader is back: leaving read-only mode");
    }
    for handle in shared.connections().values() {
        handle.kill.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_zookeepers() {
        assert_eq!(leaderless_wait(2000), Duration::from_secs(2));
        assert_eq!(leaderless_wait(500), Duration::from_secs(2));
        assert_eq!(leaderless_wait(3000), Duration::from_secs(3));
    }
}
