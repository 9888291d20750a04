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
//! needs to know nothing of this.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

#[derive(Clone, Default)]
pub(crate) struct Backlog {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    bytes: Mutex<u64>,
    drained: Condvar,
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
            let mut bytes = shared.bytes.lock().unwrap_or_else(PoisonError::into_inner);
            *bytes -= self.bytes;
            shared.drained.notify_all();
        }
    }
}

impl Backlog {
    /// Counts `bytes` handed out until the share returned is dropped.
    pub(crate) fn add(&self, bytes: u64) -> Unapplied {
        *self.lock() += bytes;
        Unapplied {
            shared: Some(self.shared.clone()),
            bytes,
        }
    }

    /// Waits until less than `limit_bytes` is handed out and not applied.
    pub(crate) fn wait_until_below(&self, limit_bytes: u64) {
        let bytes = self.lock();
        let _bytes = self
            .shared
            .drained
            .wait_while(bytes, |bytes| *bytes >= limit_bytes)
            .unwrap_or_else(PoisonError::into_inner);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        self.shared
            .bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
