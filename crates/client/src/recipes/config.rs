//! A watched value: one node's data, read once and then followed as it
//! changes (ZooKeeper's configuration-management use of watches, as in
//! Curator's `NodeCache`).
//!
//! Each read leaves a watch (`getData` with a watch while the node exists,
//! `exists` with a watch while it does not), and when the watch fires the
//! value is read again, re-arming it. A one-shot watch fires once for any
//! number of changes before the reread, so changes closer together than a
//! round trip merge: a follower may skip an intermediate value, never the
//! latest one. Rereads that find the same write (same `mzxid`) report
//! nothing; a write of the same bytes is a change and is reported.
//! Watches survive reconnection, and a change made while the client was
//! disconnected fires them when it is back, so nothing is lost across a
//! ConnectionLoss.

use bytes::Bytes;
use jute::CreateMode;

use super::{delete_retrying, ensure_path, parent, retry};
use crate::{Client, Error, Watch};

/// The value kept at the node `path`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ConfigValue {
    client: Client,
    path: String,
}

impl ConfigValue {
    /// The value kept at `path`.
    pub fn new(client: &Client, path: &str) -> ConfigValue {
        ConfigValue {
            client: client.clone(),
            path: path.to_owned(),
        }
    }

    /// The value now; `None` if the node does not exist.
    pub async fn get(&self) -> Result<Option<Bytes>, Error> {
        let client = &self.client;
        match retry(client, || client.get_data(&self.path)).await {
            Ok((data, _)) => Ok(Some(data.unwrap_or_default())),
            Err(Error::NoNode { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sets the value, creating the node (and its ancestors) if missing.
    pub async fn set(&self, data: &[u8]) -> Result<(), Error> {
        let client = &self.client;
        loop {
            // Both writes are idempotent, so safe to repeat after a
            // ConnectionLoss.
            match retry(client, || client.set_data(&self.path, data, None)).await {
                Ok(_) => return Ok(()),
                Err(Error::NoNode { .. }) => {}
                Err(e) => return Err(e),
            }
            let create = || client.create(&self.path, data, CreateMode::Persistent);
            match retry(client, create).await {
                Ok(_) => return Ok(()),
                // Created by someone else meanwhile: overwrite it.
                Err(Error::NodeExists { .. }) => {}
                Err(Error::NoNode { .. }) => ensure_path(client, parent(&self.path)).await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Deletes the value's node.
    pub async fn delete(&self) -> Result<(), Error> {
        delete_retrying(&self.client, &self.path).await
    }

    /// The value now and after every change, as a stream (see
    /// [`ValueChanges::next`]).
    pub fn changes(&self) -> ValueChanges {
        ValueChanges {
            client: self.client.clone(),
            path: self.path.clone(),
            pending: None,
            last: None,
        }
    }
}

/// A value as it changes. Each [`ValueChanges::next`] returns the value
/// (`None` while the node does not exist), the first call at once, later
/// calls once the node was written, deleted or created since the last one
/// returned.
#[derive(Debug)]
pub struct ValueChanges {
    client: Client,
    path: String,
    /// The watch armed by the last read, kept across calls so a cancelled
    /// `next` loses nothing.
    pending: Option<Watch>,
    /// The `mzxid` of what the last `next` returned (`None` inside: the
    /// node did not exist); `None` before the first.
    last: Option<Option<i64>>,
}

impl ValueChanges {
    /// The value, once it is not the one last returned.
    ///
    /// # Cancel safety
    /// Cancel-safe: a change is never lost by dropping this future.
    pub async fn next(&mut self) -> Result<Option<Bytes>, Error> {
        loop {
            if let Some(watch) = self.pending.as_mut() {
                let fired = watch.await;
                self.pending = None;
                fired?;
            }
            let (value, watch) = self.read().await?;
            self.pending = Some(watch);
            let version = value.as_ref().map(|(_, mzxid)| *mzxid);
            if self.last != Some(version) {
                self.last = Some(version);
                return Ok(value.map(|(data, _)| data));
            }
        }
    }

    /// The data and its `mzxid`, and a watch for the next change.
    async fn read(&self) -> Result<(Option<(Bytes, i64)>, Watch), Error> {
        let client = &self.client;
        loop {
            match retry(client, || client.get_data_watched(&self.path)).await {
                Ok((data, stat, watch)) => {
                    return Ok((Some((data.unwrap_or_default(), stat.mzxid)), watch))
                }
                Err(Error::NoNode { .. }) => {}
                Err(e) => return Err(e),
            }
            // Missing: watch for its creation instead (unless it was
            // created between the two reads: then read it).
            let (stat, watch) = retry(client, || client.exists_watched(&self.path)).await?;
            if stat.is_none() {
                return Ok((None, watch));
            }
        }
    }
}
