//! A barrier: ZooKeeper's "Barriers" recipe. While the barrier node
//! exists, everyone who waits on it waits; removing it lets them all
//! through. A waiter calls `exists` with a watch and waits for the node's
//! deletion, or goes through at once if the node is not there.
//!
//! The node is persistent, so a barrier outlives the session that set it;
//! ConnectionLoss is harmless (setting and removing are idempotent, and a
//! waiter's watch survives the reconnect).

use std::time::Duration;

use jute::CreateMode;
use tokio::time::Instant;

use super::{delete_retrying, ensure_path, parent, retry};
use crate::{Client, Error};

/// A barrier at the node `path`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Barrier {
    client: Client,
    path: String,
}

impl Barrier {
    /// The barrier whose node is `path`.
    pub fn new(client: &Client, path: &str) -> Barrier {
        Barrier {
            client: client.clone(),
            path: path.to_owned(),
        }
    }

    /// Raises the barrier (creating its node and missing ancestors); a
    /// barrier already raised stays so.
    pub async fn set(&self) -> Result<(), Error> {
        let client = &self.client;
        loop {
            let create = || client.create(&self.path, b"", CreateMode::Persistent);
            match retry(client, create).await {
                Ok(_) | Err(Error::NodeExists { .. }) => return Ok(()),
                Err(Error::NoNode { .. }) => ensure_path(client, parent(&self.path)).await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Lowers the barrier: every waiter goes through.
    pub async fn remove(&self) -> Result<(), Error> {
        delete_retrying(&self.client, &self.path).await
    }

    /// Waits until the barrier is down (now, or when it is removed).
    pub async fn wait(&self) -> Result<(), Error> {
        self.wait_until(None).await.map(drop)
    }

    /// [`Barrier::wait`] for at most `timeout`: whether the barrier was
    /// down in time.
    pub async fn try_wait(&self, timeout: Duration) -> Result<bool, Error> {
        self.wait_until(Some(Instant::now() + timeout)).await
    }

    async fn wait_until(&self, deadline: Option<Instant>) -> Result<bool, Error> {
        let client = &self.client;
        loop {
            let (stat, watch) = retry(client, || client.exists_watched(&self.path)).await?;
            if stat.is_none() {
                return Ok(true);
            }
            // Any event on the node (deleted, or merely changed): look again.
            match deadline {
                None => drop(watch.await?),
                Some(deadline) => match tokio::time::timeout_at(deadline, watch).await {
                    Ok(event) => drop(event?),
                    Err(_elapsed) => return Ok(false),
                },
            }
        }
    }
}
