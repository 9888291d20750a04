//! Committed entries handed to the state machine and not yet applied, in
//! bytes. A restart replays its log far faster than the state machine
//! applies it: with nothing to hold it back, the consensus thread read the
//! whole log after the snapshot into the channel before most of it was
//! applied. Among 10M znodes, with 3.7M txns (1.2 GB) to replay, that was
//! a fifth of the restart's page faults, each a first touch of memory the
//! hypervisor backs, only to be freed again. The replay now waits while
//! the backlog is over a few pages of the log, and reuses their memory.
//!
//! Each batch carries its share of the backlog ([`Unapplied`]); the state
//! machine gives it back by dropping it once the batch is applied, so it
//! needs to know nothing of this. Only a replay waits, so a share dropped
//! while nobody waits wakes nobody: a condition variable's notify is a
//! futex call even then, which every write paid once.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

#[derive(Clone, Default)]
pub(crate) struct Backlog {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    drained: Condvar,
}

#[derive(Default)]
struct State {
    bytes: u64,
    /// Whether a replay waits for the backlog to drain.
    waiting: bool,
}

/// A batch of committed entries' share of the backlog, given back when
/// dropped: drop it once the batch is applied.
#[must_use = "dropping it says the batch is applied"]
pub struct Unapplied {
    shared: Option<Arc<Shared>>,
    bytes: u64,
}

impl Unapplied {
    /// A share of no backlog, for entries that come from elsewhere than
    /// the consensus thread.
    pub fn untracked() -> Self {
        Unapplied {
            shared: None,
            bytes: 0,
        }
    }
}

impl Drop for Unapplied {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            let mut state = shared.lock();
            state.bytes -= self.bytes;
            if state.waiting {
                shared.drained.notify_all();
            }
        }
    }
}

impl Backlog {
    /// Counts `bytes` handed out until the share returned is dropped.
    pub(crate) fn add(&self, bytes: u64) -> Unapplied {
        self.shared.lock().bytes += bytes;
        Unapplied {
            shared: Some(self.shared.clone()),
            bytes,
        }
    }

    /// Waits until less than `limit_bytes` is handed out and not applied.
    pub(crate) fn wait_until_below(&self, limit_bytes: u64) {
        let shared = &self.shared;
        let mut state = shared.lock();
        while state.bytes >= limit_bytes {
            state.waiting = true;
            state = shared
                .drained
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.waiting = false;
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_wait_ends_once_enough_shares_are_dropped() {
        let backlog = Backlog::default();
        let first = backlog.add(60);
        let second = backlog.add(60);
        backlog.wait_until_below(121);
        let waiter = std::thread::spawn({
            let backlog = backlog.clone();
            move || backlog.wait_until_below(100)
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "120 bytes are still unapplied");
        drop(first);
        waiter.join().unwrap();
        drop(second);
        backlog.wait_until_below(1);
    }
}
