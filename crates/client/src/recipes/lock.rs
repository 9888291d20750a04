//! An exclusive lock: ZooKeeper's "Locks" recipe.
//!
//! To acquire, a participant creates `lock-<guid>-<seq>`, ephemeral and
//! sequential, in the lock's directory and lists the directory: holding the
//! lowest sequence number, it holds the lock; otherwise it watches the node
//! just before its own and looks again when that one goes. Releasing
//! deletes the node, which wakes exactly the next waiter. Waiters are
//! served in the order they asked; the lock is not reentrant (a second
//! `acquire` on the same lock waits for the first guard like anyone else).
//!
//! A holder's session ending (expiry, close, or the process dying) deletes
//! its node, so the next waiter gets the lock at once, while the old holder
//! learns it lost the lock only from its session's state (see the
//! [module docs](super)): [`LockGuard::is_held`] and
//! [`LockGuard::release`] then fail with [`Error::SessionExpired`].

use std::time::Duration;

use tokio::time::Instant;

use super::sequential::{acquire, predecessor};
use super::OwnedNode;
use crate::{Client, Error};

const PREFIX: &str = "lock-";

/// An exclusive lock on the directory `dir`. Cheap to clone; every
/// process that uses the same directory contends for the same lock.
#[derive(Debug, Clone)]
pub struct Lock {
    client: Client,
    dir: String,
}

impl Lock {
    /// The lock whose waiters queue under `dir` (created on first use).
    pub fn new(client: &Client, dir: &str) -> Lock {
        Lock {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    /// Waits until this participant holds the lock.
    ///
    /// # Cancel safety
    /// Dropping the future before it finishes deletes the node it queued
    /// with (see [the module docs](super#cancellation)); the lock is not
    /// taken.
    pub async fn acquire(&self) -> Result<LockGuard, Error> {
        let node = self.acquire_until(None).await?;
        Ok(node.expect("without a deadline the wait ends only when the lock is ours"))
    }

    /// [`Lock::acquire`], giving up after `timeout` (`Duration::ZERO`: take
    /// it only if nobody holds or waits for it). `None` on time-out, by
    /// which time this participant's node is deleted. The timeout bounds
    /// the wait, not the round trips around it (nor a reconnection).
    pub async fn try_acquire(&self, timeout: Duration) -> Result<Option<LockGuard>, Error> {
        self.acquire_until(Some(Instant::now() + timeout)).await
    }

    pub(crate) async fn acquire_until(
        &self,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard>, Error> {
        let node = acquire(
            &self.client,
            &self.dir,
            PREFIX,
            &[PREFIX],
            predecessor,
            b"",
            deadline,
        )
        .await?;
        Ok(node.map(LockGuard::new))
    }
}

/// A held lock (of a [`Lock`], or either side of a
/// [`super::ReadWriteLock`]): its node in the lock's directory.
///
/// Release it with [`LockGuard::release`], which waits until the server
/// has deleted the node and reports failures. Dropping the guard instead
/// releases in the background: the delete is queued at once (so it reaches
/// the server before any later request of the same client) and, inside a
/// tokio runtime, retried across a ConnectionLoss; if that fails, the node
/// goes when the session ends.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock"]
pub struct LockGuard {
    node: OwnedNode,
}

impl LockGuard {
    pub(crate) fn new(node: OwnedNode) -> Self {
        Self { node }
    }

    /// The path of this holder's node.
    pub fn path(&self) -> &str {
        self.node.path()
    }

    /// Whether the node still stands as this session's: `false` if someone
    /// deleted it, [`Error::SessionExpired`] once the session is gone.
    /// Either way the lock may be someone else's.
    pub async fn is_held(&self) -> Result<bool, Error> {
        self.node.exists().await
    }

    /// Releases the lock: deletes the node, retrying across a
    /// ConnectionLoss. Fails with [`Error::SessionExpired`] if the session
    /// ended first (the lock was lost, not released).
    pub async fn release(self) -> Result<(), Error> {
        self.node.delete().await
    }
}
