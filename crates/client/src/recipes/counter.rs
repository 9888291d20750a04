//! A shared integer: one node holding a number, changed by optimistic
//! concurrency (the compare-and-set loop of Curator's
//! `DistributedAtomicLong`, on ZooKeeper's conditional `setData`).
//!
//! `add` reads the value and its version, then writes the new value on
//! condition that the version is unchanged; if someone wrote in between,
//! the write fails with BadVersion and `add` starts over from a fresh read.
//! Every successful `add` thus applies to exactly the value it read: with
//! concurrent adders, the result is the exact sum.
//!
//! The value is decimal text (`"42"`), readable and writable from any
//! ZooKeeper shell; an empty or missing node counts as 0.
//!
//! ConnectionLoss: reads are retried. A conditional write whose reply is
//! lost is sent again with the same expected version, which is safe (it
//! applies only if the first did not); if that one fails with BadVersion,
//! the version moved, but possibly by our own lost write, and `add` cannot
//! tell: it then fails with [`Error::ConnectionLoss`], meaning "applied or
//! not, unknown", rather than risk adding twice.

use jute::CreateMode;

use super::{ensure_path, parent, parse_i64, reconnected, retry};
use crate::{Client, Error};

/// A shared integer at the node `path`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Counter {
    client: Client,
    path: String,
}

impl Counter {
    /// The counter kept at `path` (created, with its ancestors, on first
    /// write).
    pub fn new(client: &Client, path: &str) -> Counter {
        Counter {
            client: client.clone(),
            path: path.to_owned(),
        }
    }

    /// The value now (0 if the node does not exist).
    pub async fn get(&self) -> Result<i64, Error> {
        let client = &self.client;
        match retry(client, || client.get_data(&self.path)).await {
            Ok((data, _)) => parse_i64(&self.path, &data.unwrap_or_default()),
            Err(Error::NoNode { .. }) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Adds `delta` (negative to subtract) and returns the new value.
    /// Fails with [`Error::InvalidArgument`] if the sum overflows an `i64`
    /// (nothing is written), and with [`Error::ConnectionLoss`] only if it
    /// cannot tell whether its write was applied (see the module docs).
    pub async fn add(&self, delta: i64) -> Result<i64, Error> {
        let client = &self.client;
        loop {
            let (data, stat) = match retry(client, || client.get_data(&self.path)).await {
                Ok(read) => read,
                Err(Error::NoNode { .. }) => {
                    self.create(0).await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let value = parse_i64(&self.path, &data.unwrap_or_default())?;
            let next = value
                .checked_add(delta)
                .ok_or_else(|| Error::InvalidArgument {
                    reason: format!("{} + {delta} overflows the counter {}", value, self.path),
                })?;
            if self.compare_and_set(next, stat.version).await? {
                return Ok(next);
            }
        }
    }

    /// Sets the value, whatever it was.
    pub async fn set(&self, value: i64) -> Result<(), Error> {
        let client = &self.client;
        let text = value.to_string();
        loop {
            // An unconditional write is idempotent: safe to repeat.
            let write = || client.set_data(&self.path, text.as_bytes(), None);
            match retry(client, write).await {
                Ok(_) => return Ok(()),
                Err(Error::NoNode { .. }) => {
                    if self.create(value).await? {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes `value` if the node's version is still `version`: `false` if
    /// someone else wrote (or deleted the node) first.
    async fn compare_and_set(&self, value: i64, version: i32) -> Result<bool, Error> {
        let client = &self.client;
        let text = value.to_string();
        let mut lost = false;
        loop {
            match client
                .set_data(&self.path, text.as_bytes(), Some(version))
                .await
            {
                Ok(_) => return Ok(true),
                Err(Error::BadVersion { .. } | Error::NoNode { .. }) if lost => {
                    return Err(Error::ConnectionLoss {
                        path: self.path.clone(),
                    })
                }
                Err(Error::BadVersion { .. } | Error::NoNode { .. }) => return Ok(false),
                Err(e) if e.is_connection_loss() => {
                    reconnected(client).await?;
                    lost = true;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Creates the node holding `value`: `false` if it exists already.
    async fn create(&self, value: i64) -> Result<bool, Error> {
        let client = &self.client;
        let text = value.to_string();
        loop {
            let create = || client.create(&self.path, text.as_bytes(), CreateMode::Persistent);
            match retry(client, create).await {
                Ok(_) => return Ok(true),
                Err(Error::NodeExists { .. }) => return Ok(false),
                Err(Error::NoNode { .. }) => ensure_path(client, parent(&self.path)).await?,
                Err(e) => return Err(e),
            }
        }
    }
}
