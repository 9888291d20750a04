//! Leader election: ZooKeeper's "Leader Election" recipe.
//!
//! Each candidate creates `candidate-<guid>-<seq>`, ephemeral and
//! sequential, holding its data (its id, an address: whatever followers
//! need to find it). The candidate with the lowest sequence number leads;
//! each other candidate watches only the candidate just before it, and when
//! that one goes, looks again: it leads if it is now the lowest, and
//! otherwise watches its new predecessor. A leader that dies or resigns
//! thus wakes one candidate, not all of them, and candidates lead in the
//! order they joined.
//!
//! Anyone (a candidate or not) can follow who leads with
//! [`LeaderElection::changes`]: it watches the leader's node, so it hears
//! of a new leader when the old one's node goes, and the children of the
//! directory only while nobody campaigns.
//!
//! A leader whose session ends is no longer the leader, at once, for
//! everyone else; it learns it from its session state (see the
//! [module docs](super)): [`Leadership::is_leader`] then fails with
//! [`Error::SessionExpired`].

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::sequential::{acquire, participants, predecessor};
use super::{child, ensure_path, retry, OwnedNode};
use crate::{Client, Error, Watch};

const PREFIX: &str = "candidate-";

/// An election among the candidates under the directory `dir`. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    client: Client,
    dir: String,
}

/// Who leads: the leader's node, its data and its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The path of the leader's candidate node.
    pub path: String,
    /// What the leader put in its node when it campaigned.
    pub data: Bytes,
    /// The leader's session (the node's `ephemeralOwner`).
    pub session_id: i64,
}

impl LeaderElection {
    /// The election held under `dir` (created on first use).
    pub fn new(client: &Client, dir: &str) -> LeaderElection {
        LeaderElection {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    /// Joins the election with `data` and waits until this candidate leads.
    ///
    /// # Cancel safety
    /// Dropping the future before it finishes withdraws the candidacy
    /// (see [the module docs](super#cancellation)).
    pub async fn campaign(&self, data: &[u8]) -> Result<Leadership, Error> {
        let leadership = self.campaign_until(data, None).await?;
        Ok(leadership.expect("without a deadline the wait ends only when leading"))
    }

    /// [`LeaderElection::campaign`], withdrawing after `timeout` if this
    /// candidate does not lead by then (`None`).
    pub async fn try_campaign(
        &self,
        data: &[u8],
        timeout: Duration,
    ) -> Result<Option<Leadership>, Error> {
        self.campaign_until(data, Some(Instant::now() + timeout))
            .await
    }

    async fn campaign_until(
        &self,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<Option<Leadership>, Error> {
        let node = acquire(
            &self.client,
            &self.dir,
            PREFIX,
            &[PREFIX],
            predecessor,
            data,
            deadline,
        )
        .await?;
        Ok(node.map(|node| Leadership { node }))
    }

    /// The leader now, if anyone campaigns.
    pub async fn leader(&self) -> Result<Option<Leader>, Error> {
        let client = &self.client;
        loop {
            let children = match retry(client, || client.get_children(&self.dir)).await {
                Ok(children) => children,
                Err(Error::NoNode { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let Some(first) = participants(children, &[PREFIX]).into_iter().next() else {
                return Ok(None);
            };
            let path = child(&self.dir, &first.name);
            match retry(client, || client.get_data(&path)).await {
                Ok((data, stat)) => {
                    return Ok(Some(Leader {
                        path,
                        data: data.unwrap_or_default(),
                        session_id: stat.ephemeral_owner,
                    }))
                }
                // It stepped down between the two reads: look again.
                Err(Error::NoNode { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The leader now and after every change, as a stream (see
    /// [`LeaderChanges::next`]).
    pub fn changes(&self) -> LeaderChanges {
        LeaderChanges {
            client: self.client.clone(),
            dir: self.dir.clone(),
            dir_made: false,
            pending: None,
            last: None,
        }
    }
}

/// This candidate's leadership. It lasts until [`Leadership::resign`], the
/// guard is dropped (which resigns in the background, as dropping a
/// [`super::LockGuard`] releases), or the session ends.
#[derive(Debug)]
#[must_use = "dropping the leadership resigns it"]
pub struct Leadership {
    node: OwnedNode,
}

impl Leadership {
    /// The path of this leader's candidate node.
    pub fn path(&self) -> &str {
        self.node.path()
    }

    /// Whether this candidate still leads: its node stands as this
    /// session's (the lowest node only ever goes, so standing is leading).
    /// [`Error::SessionExpired`] once the session is gone.
    pub async fn is_leader(&self) -> Result<bool, Error> {
        self.node.exists().await
    }

    /// Steps down: deletes the node, which wakes the next candidate.
    pub async fn resign(self) -> Result<(), Error> {
        self.node.delete().await
    }
}

/// The leader of an election as it changes. Each [`LeaderChanges::next`]
/// returns the leader (`None`: nobody campaigns), the first call at once,
/// later calls once it differs from the last one returned: another
/// candidate, or the same one with new data. Changes closer together than a
/// round trip may merge into one (a watch reports that something changed,
/// and the reread finds the latest state), but the latest leader is always
/// reported.
#[derive(Debug)]
pub struct LeaderChanges {
    client: Client,
    dir: String,
    /// Whether the directory was created, so that it can be watched.
    dir_made: bool,
    /// The watch armed by the last look, kept across calls so a cancelled
    /// `next` loses nothing.
    pending: Option<Watch>,
    /// What the last `next` returned; `None` before the first.
    last: Option<Option<Leader>>,
}

impl LeaderChanges {
    /// The leader, once it is not the one last returned.
    ///
    /// # Cancel safety
    /// Cancel-safe: a change is never lost by dropping this future.
    pub async fn next(&mut self) -> Result<Option<Leader>, Error> {
        loop {
            if let Some(watch) = self.pending.as_mut() {
                let fired = watch.await;
                self.pending = None;
                fired?;
            }
            if !self.dir_made {
                ensure_path(&self.client, &self.dir).await?;
                self.dir_made = true;
            }
            let (leader, watch) = self.look().await?;
            self.pending = Some(watch);
            if self.last.as_ref() != Some(&leader) {
                self.last = Some(leader.clone());
                return Ok(leader);
            }
        }
    }

    /// The leader and a watch that fires when it may have changed: on the
    /// leader's node, or, with no candidates, on the directory's children.
    async fn look(&self) -> Result<(Option<Leader>, Watch), Error> {
        let client = &self.client;
        loop {
            let children = retry(client, || client.get_children(&self.dir)).await?;
            match participants(children, &[PREFIX]).into_iter().next() {
                None => {
                    let (children, _, watch) =
                        retry(client, || client.get_children_watched(&self.dir)).await?;
                    if participants(children, &[PREFIX]).is_empty() {
                        return Ok((None, watch));
                    }
                    // A candidate joined between the two reads: look again.
                }
                Some(first) => {
                    let path = child(&self.dir, &first.name);
                    match retry(client, || client.get_data_watched(&path)).await {
                        Ok((data, stat, watch)) => {
                            let leader = Leader {
                                path,
                                data: data.unwrap_or_default(),
                                session_id: stat.ephemeral_owner,
                            };
                            return Ok((Some(leader), watch));
                        }
                        Err(Error::NoNode { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
}
