//! A shared (read-write) lock: ZooKeeper's "Shared Locks" recipe.
//!
//! Readers create `read-<guid>-<seq>`, writers `write-<guid>-<seq>`, both
//! ephemeral-sequential in one directory, so one sequence orders them all.
//! A writer holds the lock when no node of either kind sorts before its
//! own, and otherwise watches the node just before it. A reader holds it
//! when no *writer* sorts before it, and otherwise watches the nearest
//! writer before it: readers share the lock with each other and wait only
//! for earlier writers, and a reader that arrives after a waiting writer
//! queues behind it, so a stream of readers cannot starve writers. Each
//! waiter watches one node, so a release wakes only the waiters it
//! unblocks: the next writer, or the readers up to the next writer (each
//! of which watched that same writer).
//!
//! Failures are as for [`super::Lock`].

use std::time::Duration;

use tokio::time::Instant;

use super::sequential::{acquire, predecessor, Blocker, Entry};
use super::LockGuard;
use crate::{Client, Error};

const READ: &str = "read-";
const WRITE: &str = "write-";
const PARTICIPANTS: &[&str] = &[READ, WRITE];

/// A reader waits for the nearest writer before it.
fn earlier_writer(entries: &[Entry], index: usize) -> Option<&str> {
    entries[..index]
        .iter()
        .rev()
        .find(|entry| entry.name.starts_with(WRITE))
        .map(|entry| entry.name.as_str())
}

/// A read-write lock on the directory `dir`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ReadWriteLock {
    client: Client,
    dir: String,
}

impl ReadWriteLock {
    /// The lock whose holders and waiters queue under `dir` (created on
    /// first use).
    pub fn new(client: &Client, dir: &str) -> ReadWriteLock {
        ReadWriteLock {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    /// Waits until this participant holds the lock for reading, shared with
    /// other readers. Cancel-safe as [`super::Lock::acquire`].
    pub async fn acquire_read(&self) -> Result<LockGuard, Error> {
        let guard = self.acquire_until(READ, earlier_writer, None).await?;
        Ok(guard.expect("without a deadline the wait ends only when the lock is ours"))
    }

    /// [`ReadWriteLock::acquire_read`], giving up after `timeout` (`None`;
    /// the node is deleted by then).
    pub async fn try_acquire_read(&self, timeout: Duration) -> Result<Option<LockGuard>, Error> {
        let deadline = Instant::now() + timeout;
        self.acquire_until(READ, earlier_writer, Some(deadline))
            .await
    }

    /// Waits until this participant holds the lock alone. Cancel-safe as
    /// [`super::Lock::acquire`].
    pub async fn acquire_write(&self) -> Result<LockGuard, Error> {
        let guard = self.acquire_until(WRITE, predecessor, None).await?;
        Ok(guard.expect("without a deadline the wait ends only when the lock is ours"))
    }

    /// [`ReadWriteLock::acquire_write`], giving up after `timeout` (`None`;
    /// the node is deleted by then).
    pub async fn try_acquire_write(&self, timeout: Duration) -> Result<Option<LockGuard>, Error> {
        let deadline = Instant::now() + timeout;
        self.acquire_until(WRITE, predecessor, Some(deadline)).await
    }

    async fn acquire_until(
        &self,
        prefix: &str,
        blocker: Blocker,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard>, Error> {
        let node = acquire(
            &self.client,
            &self.dir,
            prefix,
            PARTICIPANTS,
            blocker,
            b"",
            deadline,
        )
        .await?;
        Ok(node.map(LockGuard::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipes::sequential::participants;

    #[test]
    fn readers_wait_only_for_earlier_writers() {
        let children = [
            "read-a-0000000001",
            "write-b-0000000002",
            "read-c-0000000003",
        ]
        .into_iter()
        .chain(["read-d-0000000004", "write-e-0000000005"])
        .map(String::from)
        .collect();
        let entries = participants(children, PARTICIPANTS);
        assert_eq!(earlier_writer(&entries, 0), None);
        assert_eq!(earlier_writer(&entries, 2), Some("write-b-0000000002"));
        assert_eq!(earlier_writer(&entries, 3), Some("write-b-0000000002"));
        // A writer waits for whoever is just before it, reader or writer.
        assert_eq!(predecessor(&entries, 4), Some("read-d-0000000004"));
        assert_eq!(predecessor(&entries, 1), Some("read-a-0000000001"));
    }
}
