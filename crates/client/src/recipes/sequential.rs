//! The engine of the ordered recipes: one participant's ephemeral-sequential
//! node in a directory, and the wait until no node that matters sorts
//! before it, watching only the one node it waits for (ZooKeeper's lock
//! recipe, step by step; [`super::Lock`], [`super::ReadWriteLock`],
//! [`super::LeaderElection`] and the semaphore's entry lock run on it).
//!
//! An [`Attempt`] cleans up after itself: dropped before it is turned into
//! an [`OwnedNode`] (an error, a timeout, or the caller dropping the future
//! that owns it), it deletes its node; dropped while its create was in
//! flight, it looks for the node by its guid and deletes what it finds.

use jute::CreateMode;
use tokio::time::Instant;

use super::{
    child, create_tagged, delete_in_background, delete_retrying, guid, retry, sequence, OwnedNode,
};
use crate::{Client, Error};

/// One participant's node among the sorted participants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    /// The server's sequence counter (see [`sequence`]).
    pub seq: i64,
}

/// Given the participants in sequence order and the index of ours, the
/// name of the node ours waits for, or `None` if nothing blocks it.
pub(crate) type Blocker = fn(&[Entry], usize) -> Option<&str>;

/// An exclusive participant waits for the node just before it.
pub(crate) fn predecessor(entries: &[Entry], index: usize) -> Option<&str> {
    index
        .checked_sub(1)
        .map(|before| entries[before].name.as_str())
}

/// The participants among `children`: names with one of `prefixes` and a
/// sequence number, in sequence order.
pub(crate) fn participants(children: Vec<String>, prefixes: &[&str]) -> Vec<Entry> {
    let mut entries: Vec<Entry> = children
        .into_iter()
        .filter(|name| prefixes.iter().any(|p| name.starts_with(p)))
        .filter_map(|name| sequence(&name).map(|seq| Entry { name, seq }))
        .collect();
    entries.sort_by_key(|entry| entry.seq);
    entries
}

/// The whole ordered wait: joins `dir` with a `<prefix><guid>-<seq>` node
/// holding `data` and waits until `blocker` finds nothing before it.
/// `None` if `deadline` passed first; the node is deleted by then.
pub(crate) async fn acquire(
    client: &Client,
    dir: &str,
    prefix: &str,
    prefixes: &'static [&'static str],
    blocker: Blocker,
    data: &[u8],
    deadline: Option<Instant>,
) -> Result<Option<OwnedNode>, Error> {
    let mut attempt = Attempt::new(client, dir, prefix, prefixes);
    attempt.create(data).await?;
    if attempt.wait(blocker, deadline).await? {
        Ok(Some(attempt.into_owned()))
    } else {
        attempt.abandon().await?;
        Ok(None)
    }
}

/// One participant's attempt to get through: its node and where it is in
/// its life (see the module docs for the cleanup).
#[derive(Debug)]
pub(crate) struct Attempt {
    client: Client,
    dir: String,
    /// `<prefix><guid>-`: the name of this attempt's node before the
    /// server's counter.
    tag: String,
    /// Which names in `dir` are participants (for the rwlock, both kinds).
    prefixes: &'static [&'static str],
    state: Progress,
}

#[derive(Debug)]
enum Progress {
    NotSent,
    /// A create was sent; its outcome is not known yet.
    Creating,
    Created(String),
    /// Handed over to an owner, or cleaned up.
    Done,
}

impl Attempt {
    /// An attempt to join `dir` with a node named `<prefix><guid>-<seq>`;
    /// `prefixes` (which includes `prefix`) says which nodes of `dir` take
    /// part.
    pub(crate) fn new(
        client: &Client,
        dir: &str,
        prefix: &str,
        prefixes: &'static [&'static str],
    ) -> Self {
        debug_assert!(prefixes.iter().any(|p| prefix.starts_with(p)));
        Self {
            client: client.clone(),
            dir: dir.to_owned(),
            tag: format!("{prefix}{}-", guid()),
            prefixes,
            state: Progress::NotSent,
        }
    }

    /// Creates this attempt's ephemeral-sequential node with `data`.
    pub(crate) async fn create(&mut self, data: &[u8]) -> Result<(), Error> {
        debug_assert!(matches!(self.state, Progress::NotSent));
        self.state = Progress::Creating;
        let name = create_tagged(
            &self.client,
            &self.dir,
            &self.tag,
            data,
            CreateMode::EphemeralSequential,
        )
        .await?;
        self.state = Progress::Created(name);
        Ok(())
    }

    fn name(&self) -> &str {
        match &self.state {
            Progress::Created(name) => name,
            _ => panic!("the attempt's node is not created"),
        }
    }

    /// Waits until `blocker` finds nothing before this attempt's node
    /// (`Ok(true)`) or `deadline` passes first (`Ok(false)`, the node still
    /// there: [`Attempt::abandon`] it). The deadline bounds the waiting,
    /// not the round trips.
    pub(crate) async fn wait(
        &mut self,
        blocker: Blocker,
        deadline: Option<Instant>,
    ) -> Result<bool, Error> {
        let client = self.client.clone();
        loop {
            let children = retry(&client, || client.get_children(&self.dir)).await?;
            let entries = self.others_cleared(children).await?;
            let name = self.name();
            let Some(index) = entries.iter().position(|e| e.name == name) else {
                // Our ephemeral is gone while the session lives: someone
                // deleted it. What it stood for is lost; say so.
                return Err(Error::NoNode {
                    path: child(&self.dir, name),
                });
            };
            let Some(blocking) = blocker(&entries, index) else {
                return Ok(true);
            };
            // getData rather than exists: it leaves no watch behind when
            // the node is already gone.
            let path = child(&self.dir, blocking);
            let watch = match retry(&client, || client.get_data_watched(&path)).await {
                Ok((_, _, watch)) => watch,
                Err(Error::NoNode { .. }) => continue,
                Err(e) => return Err(e),
            };
            // Any event (deleted, or its data changed) means: look again.
            match deadline {
                None => drop(watch.await?),
                Some(deadline) => match tokio::time::timeout_at(deadline, watch).await {
                    Ok(event) => drop(event?),
                    Err(_elapsed) => return Ok(false),
                },
            }
        }
    }

    /// Waits until at most `max` participants, this one included, are in
    /// the directory (`Ok(true)`), or `deadline` passes first (`Ok(false)`).
    /// Every waiter of this kind watches the whole directory, so the
    /// caller must make sure only one waits at a time (the semaphore does
    /// so with its entry lock).
    pub(crate) async fn wait_count(
        &mut self,
        max: usize,
        deadline: Option<Instant>,
    ) -> Result<bool, Error> {
        let client = self.client.clone();
        loop {
            let (children, _, watch) =
                retry(&client, || client.get_children_watched(&self.dir)).await?;
            let entries = self.others_cleared(children).await?;
            let name = self.name();
            if !entries.iter().any(|e| e.name == name) {
                return Err(Error::NoNode {
                    path: child(&self.dir, name),
                });
            }
            if entries.len() <= max {
                return Ok(true);
            }
            match deadline {
                None => drop(watch.await?),
                Some(deadline) => match tokio::time::timeout_at(deadline, watch).await {
                    Ok(event) => drop(event?),
                    Err(_elapsed) => return Ok(false),
                },
            }
        }
    }

    /// The participants, once any duplicate of our own node is deleted (a
    /// create that reported ConnectionLoss yet was applied; see
    /// `create_tagged`): left there, it could sort before ours and be
    /// waited on by its own owner forever.
    async fn others_cleared(&self, children: Vec<String>) -> Result<Vec<Entry>, Error> {
        let name = self.name();
        let mut entries = participants(children, self.prefixes);
        for stray in entries
            .iter()
            .filter(|e| e.name.starts_with(&self.tag) && e.name != name)
        {
            delete_retrying(&self.client, &child(&self.dir, &stray.name)).await?;
        }
        entries.retain(|e| !e.name.starts_with(&self.tag) || e.name == name);
        Ok(entries)
    }

    /// The node, now owned by the caller's guard.
    pub(crate) fn into_owned(mut self) -> OwnedNode {
        let name = std::mem::replace(&mut self.state, Progress::Done);
        match name {
            Progress::Created(name) => OwnedNode::new(&self.client, child(&self.dir, &name)),
            _ => panic!("the attempt's node is not created"),
        }
    }

    /// Deletes the node and waits for the delete, so that when the caller
    /// returns (a timed-out acquire, say) nobody waits on it any more.
    pub(crate) async fn abandon(mut self) -> Result<(), Error> {
        match std::mem::replace(&mut self.state, Progress::Done) {
            Progress::Created(name) => {
                delete_retrying(&self.client, &child(&self.dir, &name)).await
            }
            _ => Ok(()),
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.state, Progress::Done) {
            Progress::NotSent | Progress::Done => {}
            Progress::Created(name) => delete_in_background(&self.client, &child(&self.dir, &name)),
            Progress::Creating => sweep_in_background(&self.client, &self.dir, &self.tag),
        }
    }
}

/// For an attempt dropped with its create in flight: lists `dir` (the
/// listing is queued now, behind the create, so it sees the node if the
/// create succeeds) and deletes the nodes carrying `tag`, in a background
/// task. Best effort: without a runtime, or if the connection breaks, the
/// node stays until the session ends.
fn sweep_in_background(client: &Client, dir: &str, tag: &str) {
    let listing = client.get_children(dir);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (client, dir, tag) = (client.clone(), dir.to_owned(), tag.to_owned());
    runtime.spawn(async move {
        if let Ok(children) = listing.await {
            for name in children.iter().filter(|name| name.starts_with(&tag)) {
                let _ = client.delete(&child(&dir, name), None).await;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(entries: &[Entry]) -> Vec<&str> {
        entries.iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn participants_sort_by_sequence_across_prefixes() {
        let children = vec![
            "write-bb-0000000003".to_owned(),
            "read-aa-0000000001".to_owned(),
            "ready".to_owned(),
            "read-zz-0000000002".to_owned(),
            "other-0000000000".to_owned(),
        ];
        let entries = participants(children, &["read-", "write-"]);
        assert_eq!(
            names(&entries),
            [
                "read-aa-0000000001",
                "read-zz-0000000002",
                "write-bb-0000000003"
            ]
        );
        assert_eq!(predecessor(&entries, 0), None);
        assert_eq!(predecessor(&entries, 2), Some("read-zz-0000000002"));
    }
}
