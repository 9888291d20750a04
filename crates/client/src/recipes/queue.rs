//! Distributed queues: ZooKeeper's "Queues" and "Priority Queues" recipes.
//!
//! `offer` creates `item-<guid>-<seq>` (for a [`PriorityQueue`],
//! `item-<priority>-<guid>-<seq>`), persistent and sequential, holding the
//! item. `take` lists the directory, sorts the items (by sequence number;
//! by priority, then sequence number) and claims the first: it reads the
//! item, then deletes it, and whoever's delete succeeds has it; a consumer
//! that finds the item already gone tries the next one. With nothing to
//! take, a blocking `take` sets a child watch on the directory and waits
//! for an offer. Every waiting consumer is woken by each offer and races
//! for it (the herd effect is inherent to this recipe: all of them wait
//! for the same thing).
//!
//! Each item is delivered exactly once, also across ConnectionLoss:
//! - A claim is a `multi` that deletes the item and creates the ephemeral
//!   receipt `taken-<item name>` in one transaction. If its reply is lost,
//!   the receipt (an ephemeral of this session, unique to the item) tells
//!   whether it was applied; a bare delete could not tell our delete from
//!   another consumer's. The receipt is deleted right after.
//! - An offer whose reply is lost finds its item again by its guid (see
//!   the [module docs](super)). Left open: if a consumer takes the item
//!   before the producer reconnects and looks, the producer offers it
//!   again.
//!
//! Items are persistent: they outlive their producer's session.

use std::time::Duration;

use bytes::Bytes;
use jute::CreateMode;
use tokio::time::Instant;

use super::{
    child, create_tagged, delete_in_background, ensure_path, guid, owned_by_session, reconnected,
    retry, sequence,
};
use crate::{Client, Error, Op};

const ITEM: &str = "item-";
const TAKEN: &str = "taken-";
/// Digits of a priority in an item's name: enough for any `u16`, and the
/// fixed width keeps names readable in a sorted listing.
const PRIORITY_DIGITS: usize = 5;

/// A FIFO queue under the directory `dir`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Queue {
    core: Core,
}

impl Queue {
    /// The queue whose items are the children of `dir` (created on first
    /// use).
    pub fn new(client: &Client, dir: &str) -> Queue {
        Queue {
            core: Core::new(client, dir),
        }
    }

    /// Appends an item; returns its node's path.
    pub async fn offer(&self, data: &[u8]) -> Result<String, Error> {
        self.core.offer(ITEM.to_owned(), data).await
    }

    /// Removes and returns the oldest item, waiting for one if the queue is
    /// empty.
    ///
    /// # Cancel safety
    /// Not cancel-safe: dropping the future while it claims an item may
    /// consume the item without returning it. To bound the wait, use
    /// [`Queue::try_take`].
    pub async fn take(&self) -> Result<Bytes, Error> {
        let item = self.core.take_until(None).await?;
        Ok(item.expect("without a deadline the wait ends only with an item"))
    }

    /// [`Queue::take`], waiting at most `timeout` for an item
    /// (`Duration::ZERO`: only if one is there); `None` if none came.
    pub async fn try_take(&self, timeout: Duration) -> Result<Option<Bytes>, Error> {
        self.core.take_until(Some(Instant::now() + timeout)).await
    }

    /// The number of items now.
    pub async fn len(&self) -> Result<usize, Error> {
        self.core.len().await
    }

    /// Whether the queue is empty now.
    pub async fn is_empty(&self) -> Result<bool, Error> {
        Ok(self.core.len().await? == 0)
    }
}

/// A priority queue under the directory `dir`: items of the lowest
/// priority number first, and in the order offered among equals. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct PriorityQueue {
    core: Core,
}

impl PriorityQueue {
    /// The queue whose items are the children of `dir` (created on first
    /// use).
    pub fn new(client: &Client, dir: &str) -> PriorityQueue {
        PriorityQueue {
            core: Core::new(client, dir),
        }
    }

    /// Adds an item with `priority` (0 is taken first); returns its node's
    /// path.
    pub async fn offer(&self, data: &[u8], priority: u16) -> Result<String, Error> {
        let prefix = format!("{ITEM}{priority:0width$}-", width = PRIORITY_DIGITS);
        self.core.offer(prefix, data).await
    }

    /// Removes and returns the first item, waiting for one if the queue is
    /// empty. Not cancel-safe, as [`Queue::take`].
    pub async fn take(&self) -> Result<Bytes, Error> {
        let item = self.core.take_until(None).await?;
        Ok(item.expect("without a deadline the wait ends only with an item"))
    }

    /// [`PriorityQueue::take`], waiting at most `timeout` for an item.
    pub async fn try_take(&self, timeout: Duration) -> Result<Option<Bytes>, Error> {
        self.core.take_until(Some(Instant::now() + timeout)).await
    }

    /// The number of items now.
    pub async fn len(&self) -> Result<usize, Error> {
        self.core.len().await
    }

    /// Whether the queue is empty now.
    pub async fn is_empty(&self) -> Result<bool, Error> {
        Ok(self.core.len().await? == 0)
    }
}

/// Where an item goes in the queue: priority (0 for a plain queue's
/// items), then sequence number.
fn order(name: &str) -> Option<(u32, i64)> {
    let rest = name.strip_prefix(ITEM)?;
    let priority = rest
        .get(..PRIORITY_DIGITS)
        .filter(|_| rest.as_bytes().get(PRIORITY_DIGITS) == Some(&b'-'))
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(0);
    Some((priority, sequence(name)?))
}

/// The items among a listing of the directory, in the order to take them.
fn items(children: Vec<String>) -> Vec<String> {
    let mut items: Vec<((u32, i64), String)> = children
        .into_iter()
        .filter_map(|name| order(&name).map(|key| (key, name)))
        .collect();
    items.sort();
    items.into_iter().map(|(_, name)| name).collect()
}

#[derive(Debug, Clone)]
struct Core {
    client: Client,
    dir: String,
}

impl Core {
    fn new(client: &Client, dir: &str) -> Self {
        Self {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    async fn offer(&self, prefix: String, data: &[u8]) -> Result<String, Error> {
        let tag = format!("{prefix}{}-", guid());
        let mode = CreateMode::PersistentSequential;
        let name = create_tagged(&self.client, &self.dir, &tag, data, mode).await?;
        Ok(child(&self.dir, &name))
    }

    async fn len(&self) -> Result<usize, Error> {
        let client = &self.client;
        match retry(client, || client.get_children(&self.dir)).await {
            Ok(children) => Ok(items(children).len()),
            Err(Error::NoNode { .. }) => Ok(0),
            Err(e) => Err(e),
        }
    }

    async fn take_until(&self, deadline: Option<Instant>) -> Result<Option<Bytes>, Error> {
        let client = &self.client;
        loop {
            let children = match retry(client, || client.get_children(&self.dir)).await {
                Ok(children) => children,
                Err(Error::NoNode { .. }) => Vec::new(),
                Err(e) => return Err(e),
            };
            for name in items(children) {
                if let Some(data) = self.claim(&name).await? {
                    return Ok(Some(data));
                }
            }
            // Nothing left to take: watch for the next offer. (Not on the
            // first listing: a consumer that finds items sets no watch.)
            let offered = match retry(client, || client.get_children_watched(&self.dir)).await {
                Ok((children, _, watch)) if !children.iter().any(|c| order(c).is_some()) => watch,
                Ok(_) => continue,
                Err(Error::NoNode { .. }) => {
                    ensure_path(client, &self.dir).await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            match deadline {
                None => drop(offered.await?),
                Some(deadline) => match tokio::time::timeout_at(deadline, offered).await {
                    Ok(event) => drop(event?),
                    Err(_elapsed) => return Ok(None),
                },
            }
        }
    }

    /// Claims the item `name`: its data if this consumer got it, `None` if
    /// another one did.
    async fn claim(&self, name: &str) -> Result<Option<Bytes>, Error> {
        let client = &self.client;
        let path = child(&self.dir, name);
        let receipt = child(&self.dir, &format!("{TAKEN}{name}"));
        loop {
            let (data, stat) = match retry(client, || client.get_data(&path)).await {
                Ok((data, stat)) => (data.unwrap_or_default(), stat),
                Err(Error::NoNode { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let claim = [
                Op::delete(&path, Some(stat.version)),
                Op::create(&receipt, b"", CreateMode::Ephemeral),
            ];
            match client.multi(claim).await {
                Ok(_) => {
                    delete_in_background(client, &receipt);
                    return Ok(Some(data));
                }
                Err(Error::Multi {
                    failed_index: 0,
                    error,
                    ..
                }) => match *error {
                    Error::NoNode { .. } => return Ok(None),
                    // Someone rewrote the item between our read and claim:
                    // read it again.
                    Error::BadVersion { .. } => {}
                    e => return Err(e),
                },
                Err(e) if e.is_connection_loss() => {
                    reconnected(client).await?;
                    match retry(client, || client.exists(&receipt)).await? {
                        Some(stat) if owned_by_session(client, &stat) => {
                            delete_in_background(client, &receipt);
                            return Ok(Some(data));
                        }
                        // Not applied: the item may still be there.
                        _ => {}
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_sort_by_priority_then_sequence() {
        let children = [
            "item-00002-aaaa-0000000001",
            "item-00001-bbbb-0000000003",
            "taken-item-00000-cccc-0000000000",
            "item-00001-dddd-0000000002",
            "item-00000-eeee-0000000004",
        ];
        let sorted = items(children.into_iter().map(String::from).collect());
        assert_eq!(
            sorted,
            [
                "item-00000-eeee-0000000004",
                "item-00001-dddd-0000000002",
                "item-00001-bbbb-0000000003",
                "item-00002-aaaa-0000000001",
            ]
        );
        // A plain queue's items: the guid is not a priority.
        let plain = [
            "item-0123456789abcdef-0000000002",
            "item-12345abc-0000000001",
        ];
        let sorted = items(plain.into_iter().map(String::from).collect());
        assert_eq!(
            sorted,
            [
                "item-12345abc-0000000001",
                "item-0123456789abcdef-0000000002"
            ]
        );
    }
}
