//! Group membership: each member is an ephemeral node named after it in
//! the group's directory ("Group Membership" in ZooKeeper's programmer's
//! guide, and the classic first recipe of every ZooKeeper tutorial).
//!
//! Joining creates `<dir>/<member>` holding the member's data; leaving, or
//! the member's session ending, deletes it. The children of the directory
//! are the members, and a child watch on it tells of every join and leave:
//! [`GroupMembership::changes`] re-arms one after each change. (Everyone who
//! follows the group is woken by every change; that is the point of
//! following it.)
//!
//! Member names are the caller's, so a name may be taken: joining with a
//! name another live session holds fails with [`Error::NodeExists`]. After
//! a ConnectionLoss during the join, a node of that name that is an
//! ephemeral of this session is the one the lost create made.

use bytes::Bytes;

use super::{child, create_ephemeral, ensure_path, retry, OwnedNode};
use crate::{Client, Error, Watch};

/// The group under the directory `dir`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GroupMembership {
    client: Client,
    dir: String,
}

impl GroupMembership {
    /// The group whose members are the children of `dir` (created on
    /// first use).
    pub fn new(client: &Client, dir: &str) -> GroupMembership {
        GroupMembership {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    /// Joins as `member` (a node name: no `/`) with `data`, for as long as
    /// the returned [`Membership`] lives or the session lasts.
    pub async fn join(&self, member: &str, data: &[u8]) -> Result<Membership, Error> {
        if member.is_empty() || member.contains('/') {
            return Err(Error::InvalidArgument {
                reason: format!("a member name must be one node name, not {member:?}"),
            });
        }
        let path = child(&self.dir, member);
        create_ephemeral(&self.client, &path, data, &self.dir).await?;
        Ok(Membership {
            name: member.to_owned(),
            node: OwnedNode::new(&self.client, path),
        })
    }

    /// The members now, sorted by name.
    pub async fn members(&self) -> Result<Vec<String>, Error> {
        let client = &self.client;
        match retry(client, || client.get_children(&self.dir)).await {
            Ok(mut members) => {
                members.sort();
                Ok(members)
            }
            Err(Error::NoNode { .. }) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// A member's data, `None` if it is not a member.
    pub async fn member_data(&self, member: &str) -> Result<Option<Bytes>, Error> {
        let client = &self.client;
        let path = child(&self.dir, member);
        match retry(client, || client.get_data(&path)).await {
            Ok((data, _)) => Ok(Some(data.unwrap_or_default())),
            Err(Error::NoNode { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The members now and after every change, as a stream (see
    /// [`MemberChanges::next`]).
    pub fn changes(&self) -> MemberChanges {
        MemberChanges {
            client: self.client.clone(),
            dir: self.dir.clone(),
            dir_made: false,
            pending: None,
            last: None,
        }
    }
}

/// This process's membership: leave with [`Membership::leave`]; dropping
/// it leaves in the background, as dropping a [`super::LockGuard`]
/// releases.
#[derive(Debug)]
#[must_use = "dropping the membership leaves the group"]
pub struct Membership {
    name: String,
    node: OwnedNode,
}

impl Membership {
    /// The member's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The member's node.
    pub fn path(&self) -> &str {
        self.node.path()
    }

    /// Whether the member's node still stands as this session's;
    /// [`Error::SessionExpired`] once the session is gone.
    pub async fn is_member(&self) -> Result<bool, Error> {
        self.node.exists().await
    }

    /// Leaves the group: deletes the member's node.
    pub async fn leave(self) -> Result<(), Error> {
        self.node.delete().await
    }
}

/// A group's members as they change. Each [`MemberChanges::next`] returns
/// the sorted member names, the first call at once, later calls once the
/// set differs from the one last returned. Joins and leaves closer
/// together than a round trip may be reported as one change (the watch
/// says the children changed; the reread finds the latest set), but the
/// latest set is always reported.
#[derive(Debug)]
pub struct MemberChanges {
    client: Client,
    dir: String,
    /// Whether the directory was created, so that it can be watched.
    dir_made: bool,
    /// The child watch armed by the last read, kept across calls so a
    /// cancelled `next` loses nothing.
    pending: Option<Watch>,
    /// What the last `next` returned; `None` before the first.
    last: Option<Vec<String>>,
}

impl MemberChanges {
    /// The members, once they are not the ones last returned.
    ///
    /// # Cancel safety
    /// Cancel-safe: a change is never lost by dropping this future.
    pub async fn next(&mut self) -> Result<Vec<String>, Error> {
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
            let client = &self.client;
            let (mut members, _, watch) =
                retry(client, || client.get_children_watched(&self.dir)).await?;
            members.sort();
            self.pending = Some(watch);
            if self.last.as_ref() != Some(&members) {
                self.last = Some(members.clone());
                return Ok(members);
            }
        }
    }
}
