//! A double barrier: ZooKeeper's "Double Barriers" recipe. `size`
//! participants enter; nobody gets past `enter` until all of them have
//! entered, and nobody gets past `leave` until all of them have left.
//!
//! Enter: set a watch on `ready` (before joining, so its creation cannot be
//! missed), create `participant-<guid>` (ephemeral) and count the
//! participants; the one that finds `size` of them creates `ready`, which
//! lets everyone in.
//!
//! Leave: list the participants; if none is left, done; if only this one,
//! delete it and done; if this one sorts lowest, wait for the highest to
//! go; otherwise delete this one and wait for the lowest to go; repeat.
//! The lowest leaves last, and its going releases everyone still waiting.
//!
//! Unlike the recipe's page, which leaves `ready` behind, every leaver
//! deletes it (it has served its purpose once anyone leaves: all `size`
//! participants have been told), and so does the last one, so the barrier
//! is ready for another round once everyone has left. A round must not
//! start before the previous one is over, or its participants may find the
//! old `ready` and go straight in.
//!
//! A participant whose session ends drops out (its node is ephemeral): the
//! others then do not wait for it to leave, but if it had not entered yet,
//! the barrier waits for a replacement.

use std::time::Duration;

use jute::CreateMode;
use tokio::time::Instant;

use super::{child, create_ephemeral, delete_retrying, guid, retry, OwnedNode};
use crate::{Client, Error};

const READY: &str = "ready";
const PREFIX: &str = "participant-";

/// One participant of the double barrier under the directory `dir`.
/// Each participant needs its own (`new` picks its node's name); one value
/// can go through many rounds, one after the other.
#[derive(Debug)]
pub struct DoubleBarrier {
    client: Client,
    dir: String,
    size: usize,
    /// This participant's node, `participant-<guid>`.
    name: String,
}

impl DoubleBarrier {
    /// A participant of the barrier under `dir` (created on first use) for
    /// `size` participants. Panics if `size` is 0.
    pub fn new(client: &Client, dir: &str, size: usize) -> DoubleBarrier {
        assert!(size > 0, "a barrier needs at least one participant");
        DoubleBarrier {
            client: client.clone(),
            dir: dir.to_owned(),
            size,
            name: format!("{PREFIX}{}", guid()),
        }
    }

    /// The path of this participant's node (present between `enter` and
    /// `leave`).
    pub fn path(&self) -> String {
        child(&self.dir, &self.name)
    }

    /// Enters, and waits until all `size` participants have. Fails with
    /// [`Error::NodeExists`] if this participant is in already.
    ///
    /// # Cancel safety
    /// Dropping the future before it finishes deletes this participant's
    /// node (in the background), so the others do not count it.
    pub async fn enter(&self) -> Result<(), Error> {
        self.enter_until(None).await.map(drop)
    }

    /// [`DoubleBarrier::enter`], giving up after `timeout`: `false` if the
    /// barrier was not full in time, and this participant is out again.
    pub async fn try_enter(&self, timeout: Duration) -> Result<bool, Error> {
        self.enter_until(Some(Instant::now() + timeout)).await
    }

    async fn enter_until(&self, deadline: Option<Instant>) -> Result<bool, Error> {
        let client = &self.client;
        let ready = child(&self.dir, READY);
        let (released, watch) = retry(client, || client.exists_watched(&ready)).await?;
        let path = self.path();
        // Until entered, dropping this (an error, a time-out, a cancelled
        // future, even during the create: the delete is queued behind it)
        // takes our node out again.
        let node = OwnedNode::new(client, path.clone());
        match create_ephemeral(client, &path, b"", &self.dir).await {
            Ok(()) => {}
            // Entered already (the name is this participant's alone):
            // an error, but not one that takes it out.
            Err(e @ Error::NodeExists { .. }) => {
                node.keep();
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        if released.is_some() {
            node.keep();
            return Ok(true);
        }
        let children = retry(client, || client.get_children(&self.dir)).await?;
        if count(&children) >= self.size {
            let create = || client.create(&ready, b"", CreateMode::Persistent);
            match retry(client, create).await {
                Ok(_) | Err(Error::NodeExists { .. }) => {}
                Err(e) => return Err(e),
            }
            node.keep();
            return Ok(true);
        }
        let in_time = match deadline {
            None => Some(watch.await),
            Some(deadline) => tokio::time::timeout_at(deadline, watch).await.ok(),
        };
        match in_time {
            // The only event an exists watch on a missing node has:
            // `ready` was created.
            Some(event) => drop(event?),
            // Late, unless `ready` came just as time ran out.
            None if retry(client, || client.exists(&ready)).await?.is_some() => {}
            None => {
                node.delete().await?;
                return Ok(false);
            }
        }
        node.keep();
        Ok(true)
    }

    /// Leaves, and waits until all participants have.
    ///
    /// # Cancel safety
    /// Dropping the future may leave this participant's node in place, and
    /// the others waiting for it: call `leave` again.
    pub async fn leave(&self) -> Result<(), Error> {
        self.leave_until(None).await.map(drop)
    }

    /// [`DoubleBarrier::leave`], giving up after `timeout`: `false` if the
    /// others had not all left in time. This participant has left either
    /// way.
    pub async fn try_leave(&self, timeout: Duration) -> Result<bool, Error> {
        self.leave_until(Some(Instant::now() + timeout)).await
    }

    async fn leave_until(&self, deadline: Option<Instant>) -> Result<bool, Error> {
        let client = &self.client;
        let ours = self.path();
        delete_retrying(client, &child(&self.dir, READY)).await?;
        loop {
            let children = retry(client, || client.get_children(&self.dir)).await?;
            let mut left: Vec<&String> =
                children.iter().filter(|c| c.starts_with(PREFIX)).collect();
            left.sort();
            let present = left.contains(&&self.name);
            let target = match left.as_slice() {
                [] => return Ok(true),
                [only] if *only == &self.name => {
                    delete_retrying(client, &ours).await?;
                    // Last out: take away a `ready` that someone still in
                    // `enter` created after the first leaver deleted it.
                    delete_retrying(client, &child(&self.dir, READY)).await?;
                    return Ok(true);
                }
                // The lowest leaves last: it waits for the highest.
                [lowest, .., highest] if *lowest == &self.name => highest,
                [lowest, ..] => {
                    if present {
                        delete_retrying(client, &ours).await?;
                    }
                    lowest
                }
            };
            // getData rather than exists: it leaves no watch behind when
            // the node is already gone.
            let target = child(&self.dir, target);
            let watch = match retry(client, || client.get_data_watched(&target)).await {
                Ok((_, _, watch)) => watch,
                Err(Error::NoNode { .. }) => continue,
                Err(e) => return Err(e),
            };
            match deadline {
                None => drop(watch.await?),
                Some(deadline) => match tokio::time::timeout_at(deadline, watch).await {
                    Ok(event) => drop(event?),
                    Err(_elapsed) => {
                        delete_retrying(client, &ours).await?;
                        return Ok(false);
                    }
                },
            }
        }
    }
}

/// The number of participants among a listing of the directory.
fn count(children: &[String]) -> usize {
    children.iter().filter(|c| c.starts_with(PREFIX)).count()
}
