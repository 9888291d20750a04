//! Session liveness on this server. The session *table* (ids, passwords,
//! timeouts, ephemerals) is replicated state in the tree; whether a session
//! is still alive is decided here, by when its client was last heard from,
//! and an expired session is closed by proposing `closeSession`.
//!
//! Time is passed in, so expiry is tested without sleeping.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::watch::ConnectionId;

struct Liveness {
    timeout: Duration,
    last_heard: Instant,
    /// The connection serving the session now, if any.
    owner: Option<ConnectionId>,
    /// Set once `closeSession` has been proposed, so it is proposed once.
    closing: bool,
}

#[derive(Default)]
pub struct SessionTracker {
    sessions: Mutex<HashMap<i64, Liveness>>,
    /// Sessions heard from since the last report to the leader.
    heard: Mutex<HashSet<i64>>,
}

/// A session's timeout as the tracker keeps it. ZooKeeper takes a negative
/// `minSessionTimeout` as given, so a session may be granted a negative
/// timeout; its expiry time is then already past, as it is here with none.
pub fn session_timeout(timeout_ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0))
}

impl SessionTracker {
    /// Starts (or restarts, with a fresh full timeout) tracking a session.
    pub fn track(&self, session_id: i64, timeout: Duration, now: Instant) {
        let mut sessions = self.sessions.lock().expect("session table poisoned");
        let entry = sessions.entry(session_id).or_insert(Liveness {
            timeout,
            last_heard: now,
            owner: None,
            closing: false,
        });
        entry.timeout = timeout;
        entry.last_heard = now;
    }

    /// Records that the session's client was heard from.
    pub fn touch(&self, session_id: i64, now: Instant) {
        self.heard
            .lock()
            .expect("session table poisoned")
            .insert(session_id);
        if let Some(s) = self
            .sessions
            .lock()
            .expect("session table poisoned")
            .get_mut(&session_id)
        {
            s.last_heard = now;
        }
    }

    /// Makes `connection` the one serving the session; returns the one it
    /// replaces, which must be closed.
    pub fn take_ownership(
        &self,
        session_id: i64,
        connection: ConnectionId,
    ) -> Option<ConnectionId> {
        let mut sessions = self.sessions.lock().expect("session table poisoned");
        let s = sessions.get_mut(&session_id)?;
        s.owner.replace(connection).filter(|&c| c != connection)
    }

    /// The connection serving the session here, if any.
    pub fn owner(&self, session_id: i64) -> Option<ConnectionId> {
        self.sessions
            .lock()
            .expect("session table poisoned")
            .get(&session_id)
            .and_then(|s| s.owner)
    }

    /// Called when a connection ends: its session lives on until it expires.
    pub fn release_ownership(&self, session_id: i64, connection: ConnectionId) {
        let mut sessions = self.sessions.lock().expect("session table poisoned");
        if let Some(s) = sessions.get_mut(&session_id) {
            if s.owner == Some(connection) {
                s.owner = None;
            }
        }
    }

    /// Sessions heard from since the last call, for the leader.
    pub fn take_heard(&self) -> Vec<i64> {
        let mut heard = self.heard.lock().expect("session table poisoned");
        let mut ids: Vec<i64> = heard.drain().collect();
        ids.sort_unstable();
        ids
    }

    /// Gives every session a fresh full timeout: a new leader cannot know
    /// when clients were last heard from elsewhere.
    pub fn refresh_all(&self, now: Instant) {
        for s in self
            .sessions
            .lock()
            .expect("session table poisoned")
            .values_mut()
        {
            s.last_heard = now;
            s.closing = false;
        }
    }

    /// Sessions silent for longer than their timeout, each reported once.
    pub fn take_expired(&self, now: Instant) -> Vec<i64> {
        let mut sessions = self.sessions.lock().expect("session table poisoned");
        let mut expired: Vec<i64> = sessions
            .iter_mut()
            .filter(|(_, s)| !s.closing && now.duration_since(s.last_heard) > s.timeout)
            .map(|(&id, s)| {
                s.closing = true;
                id
            })
            .collect();
        expired.sort_unstable();
        expired
    }

    /// Forgets a session once its close is applied.
    pub fn forget(&self, session_id: i64) -> Option<ConnectionId> {
        self.sessions
            .lock()
            .expect("session table poisoned")
            .remove(&session_id)
            .and_then(|s| s.owner)
    }

    pub fn len(&self) -> usize {
        self.sessions.lock().expect("session table poisoned").len()
    }

    /// Each session with the time left before it expires unless heard
    /// from; zero when it is due.
    pub fn time_left(&self, now: Instant) -> Vec<(i64, Duration)> {
        self.sessions
            .lock()
            .expect("session table poisoned")
            .iter()
            .map(|(&id, s)| {
                (
                    id,
                    (s.last_heard + s.timeout).saturating_duration_since(now),
                )
            })
            .collect()
    }
}

/// Hands out session ids the way ZooKeeper does: the server id in the top
/// byte, then milliseconds since the epoch, then a counter — unique across
/// restarts as long as the clock moves forward.
pub struct SessionIds {
    next: AtomicI64,
}

impl SessionIds {
    pub fn new(server_id: u64, now_ms: i64) -> Self {
        let base = ((now_ms << 24) as u64 >> 8) as i64;
        Self {
            next: AtomicI64::new(base | ((server_id as i64) << 56)),
        }
    }

    pub fn next(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_sessions_expire_once() {
        let tracker = SessionTracker::default();
        let t0 = Instant::now();
        tracker.track(1, Duration::from_millis(100), t0);
        tracker.track(2, Duration::from_millis(100), t0);
        tracker.touch(2, t0 + Duration::from_millis(80));
        assert_eq!(
            tracker.take_expired(t0 + Duration::from_millis(150)),
            vec![1]
        );
        assert!(tracker
            .take_expired(t0 + Duration::from_millis(160))
            .is_empty());
        assert_eq!(
            tracker.take_expired(t0 + Duration::from_millis(200)),
            vec![2]
        );
    }

    #[test]
    fn ownership_moves_to_the_newest_connection() {
        let tracker = SessionTracker::default();
        tracker.track(1, Duration::from_secs(1), Instant::now());
        assert_eq!(tracker.take_ownership(1, 10), None);
        assert_eq!(tracker.take_ownership(1, 11), Some(10));
        tracker.release_ownership(1, 10);
        assert_eq!(
            tracker.forget(1),
            Some(11),
            "a stale release leaves the new owner"
        );
    }

    #[test]
    fn session_ids_carry_the_server_id() {
        let ids = SessionIds::new(3, 1_700_000_000_000);
        let a = ids.next();
        assert_eq!(a >> 56, 3);
        assert_eq!(ids.next(), a + 1);
    }
}
