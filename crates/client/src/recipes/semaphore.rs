//! A counting semaphore: at most `max_leases` holders at once. ZooKeeper's
//! recipes page has none; this is the scheme of Curator's
//! `InterProcessSemaphoreV2`, built from the lock recipe.
//!
//! The directory holds `locks/` (a [`super::Lock`]) and `leases/`. To
//! acquire, a participant first takes the entry lock, then creates
//! `leases/lease-<guid>-<seq>` (ephemeral) and counts the leases: if there
//! are at most `max_leases`, its own included, it holds one; otherwise it
//! watches `leases/` for a child going and counts again. Then it releases
//! the entry lock. Waiters thus queue in the lock in arrival order, and only
//! the one at the head watches the leases, so a release wakes one waiter,
//! not all of them. Releasing deletes the lease node.
//!
//! Every participant must use the same `max_leases`: the count is checked
//! by each acquirer against its own. A holder whose session ends loses its
//! lease (the node is ephemeral), and the next waiter gets it; the old
//! holder learns it from its session state (see the [module docs](super)).

use std::time::Duration;

use tokio::time::Instant;

use super::sequential::Attempt;
use super::{child, Lock, OwnedNode};
use crate::{Client, Error};

const PREFIX: &str = "lease-";

/// A semaphore of `max_leases` leases under the directory `dir`. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct Semaphore {
    client: Client,
    entry: Lock,
    leases: String,
    max_leases: usize,
}

impl Semaphore {
    /// The semaphore under `dir` (created on first use). Panics if
    /// `max_leases` is 0: nobody could ever acquire.
    pub fn new(client: &Client, dir: &str, max_leases: usize) -> Semaphore {
        assert!(max_leases > 0, "a semaphore needs at least one lease");
        Semaphore {
            client: client.clone(),
            entry: Lock::new(client, &child(dir, "locks")),
            leases: child(dir, "leases"),
            max_leases,
        }
    }

    /// The number of leases.
    pub fn max_leases(&self) -> usize {
        self.max_leases
    }

    /// Waits until this participant holds a lease.
    ///
    /// # Cancel safety
    /// Dropping the future before it finishes deletes the nodes it created
    /// (see [the module docs](super#cancellation)); no lease is taken.
    pub async fn acquire(&self) -> Result<Lease, Error> {
        let lease = self.acquire_until(None).await?;
        Ok(lease.expect("without a deadline the wait ends only with a lease"))
    }

    /// [`Semaphore::acquire`], giving up after `timeout` (`None`; its nodes
    /// are deleted by then). The timeout bounds the wait, not the round
    /// trips around it (nor a reconnection).
    pub async fn try_acquire(&self, timeout: Duration) -> Result<Option<Lease>, Error> {
        self.acquire_until(Some(Instant::now() + timeout)).await
    }

    async fn acquire_until(&self, deadline: Option<Instant>) -> Result<Option<Lease>, Error> {
        let Some(entry) = self.entry.acquire_until(deadline).await? else {
            return Ok(None);
        };
        let mut attempt = Attempt::new(&self.client, &self.leases, PREFIX, &[PREFIX]);
        attempt.create(b"").await?;
        // On an error, dropping `attempt` and `entry` deletes both nodes.
        if attempt.wait_count(self.max_leases, deadline).await? {
            let lease = Lease {
                node: attempt.into_owned(),
            };
            entry.release().await?;
            Ok(Some(lease))
        } else {
            attempt.abandon().await?;
            entry.release().await?;
            Ok(None)
        }
    }
}

/// A held lease of a [`Semaphore`]. Release it with [`Lease::release`];
/// dropping it releases in the background, as for [`super::LockGuard`].
#[derive(Debug)]
#[must_use = "dropping the lease releases it"]
pub struct Lease {
    node: OwnedNode,
}

impl Lease {
    /// The path of this lease's node.
    pub fn path(&self) -> &str {
        self.node.path()
    }

    /// Whether the lease's node still stands as this session's;
    /// [`Error::SessionExpired`] once the session is gone.
    pub async fn is_held(&self) -> Result<bool, Error> {
        self.node.exists().await
    }

    /// Gives the lease back, retrying across a ConnectionLoss. Fails with
    /// [`Error::SessionExpired`] if the session ended first (the lease was
    /// lost, not released).
    pub async fn release(self) -> Result<(), Error> {
        self.node.delete().await
    }
}
