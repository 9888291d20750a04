//! Coordination recipes on top of [`Client`]: the ones of ZooKeeper's
//! "Recipes and Solutions" page (<https://zookeeper.apache.org/doc/current/recipes.html>)
//! plus the small ones every application writes again.
//!
//! | recipe | type | nodes under its directory |
//! |---|---|---|
//! | exclusive lock | [`Lock`] | `lock-<guid>-<seq>`, ephemeral-sequential |
//! | shared lock | [`ReadWriteLock`] | `read-<guid>-<seq>`, `write-<guid>-<seq>` |
//! | semaphore | [`Semaphore`] | `locks/lock-…` and `leases/lease-<guid>-<seq>` |
//! | leader election | [`LeaderElection`] | `candidate-<guid>-<seq>` holding the candidate's data |
//! | group membership | [`GroupMembership`] | `<member>`, ephemeral |
//! | barrier | [`Barrier`] | the barrier node itself |
//! | double barrier | [`DoubleBarrier`] | `participant-<guid>`, ephemeral, and `ready` |
//! | queue | [`Queue`], [`PriorityQueue`] | `item-[<priority>-]<guid>-<seq>`, persistent-sequential |
//! | shared integer | [`Counter`] | the counter node, as decimal text |
//! | watched value | [`ConfigValue`] | the value's node |
//! | following the ensemble's membership | [`follow_ensemble`] | `/zookeeper/config`, read only |
//!
//! Each recipe is a cheap handle (a [`Client`] clone and a path) with
//! async methods; every participant of one instance (one lock, one queue)
//! uses the same directory, which the recipe creates, with its missing
//! ancestors, as persistent nodes when it first needs it, and never
//! deletes.
//!
//! ```no_run
//! use std::time::Duration;
//! use client::recipes::{LeaderElection, Lock, Queue};
//!
//! # async fn demo(zk: client::Client) -> Result<(), client::Error> {
//! let lock = Lock::new(&zk, "/app/locks/schema");
//! let guard = lock.acquire().await?;
//! // ... only one process at a time gets here ...
//! guard.release().await?;
//! if let Some(guard) = lock.try_acquire(Duration::from_secs(1)).await? {
//!     guard.release().await?;
//! }
//!
//! let election = LeaderElection::new(&zk, "/app/election");
//! let mut leaders = election.changes();
//! let leadership = election.campaign(b"10.0.0.7:8080").await?;
//! let leader = leaders.next().await?.expect("someone leads");
//! assert_eq!(leader.path, leadership.path());
//! leadership.resign().await?;
//!
//! let jobs = Queue::new(&zk, "/app/jobs");
//! jobs.offer(b"job 1").await?;
//! assert_eq!(&jobs.take().await?[..], b"job 1");
//! # Ok(()) }
//! ```
//!
//! # Waiting without a herd
//!
//! The ordered recipes (locks, election, the semaphore's entry lock) follow
//! ZooKeeper's: a participant creates an ephemeral-sequential node, lists
//! the directory, and is through if no node that matters sorts before its
//! own; otherwise it watches only the one node just before it that blocks
//! it (its predecessor) and looks again when that node goes. A release
//! therefore wakes one waiter, not all of them, and the order of the
//! sequence numbers is the order of service. Nodes sort by the server's
//! sequence counter (the last ten digits of the name), not by name, so
//! prefixes of different kinds (`read-`, `write-`) interleave correctly.
//!
//! # Failures
//!
//! - **ConnectionLoss.** The client reconnects by itself; a recipe waits
//!   for it and retries what is safe to retry (reads, deletes of its own
//!   nodes, creates of fixed paths). A create of a *sequential* node is not
//!   safe to retry blindly: the lost create may have been applied, and a
//!   second one would leave an orphan that outlives the attempt (and, for a
//!   lock, would be waited on forever by its own owner). So, as the
//!   ZooKeeper recipe and Curator's "protected" mode do, every such node's
//!   name carries a random guid chosen per attempt; after a ConnectionLoss
//!   the recipe lists the directory and adopts the node carrying its guid
//!   if there is one, and creates it otherwise. Should both have been
//!   applied after all, the duplicates carrying that guid are deleted as
//!   soon as they are seen. Non-sequential ephemeral nodes (group members,
//!   barrier participants) are recognised instead by being ephemeral nodes
//!   of this session (`ephemeralOwner`).
//! - **SessionExpired** (or a closed client). The session's ephemeral nodes
//!   are gone, so every lock, lease, leadership and membership it held is
//!   gone too, possibly given to someone else already. The recipe is broken
//!   and says so: every later call on it, and on the guards it returned,
//!   fails with [`Error::SessionExpired`] (or [`Error::Closed`]). A holder
//!   that must not act after losing its lock watches
//!   [`Client::state_changes`]: once `Disconnected`, it no longer knows it
//!   holds anything; `Expired` says it does not. (The queue, counter,
//!   barrier and watched value keep nothing ephemeral: for them expiry
//!   only ends the client.)
//! - **Outcomes that cannot be found out.** Where a lost reply leaves a
//!   write's outcome unknowable, the recipe's docs say what it does:
//!   [`Counter::add`] then fails with ConnectionLoss, meaning "unknown",
//!   rather than risk adding twice; a queue's take is exact through a
//!   receipt node (see [`Queue`]).
//!
//! # Cancellation
//!
//! Dropping an `acquire`/`campaign`/`enter` future before it finishes
//! removes the node it created (a delete queued at once, then retried in a
//! background task across a ConnectionLoss), so a timed-out caller leaves
//! no node behind for the others to wait on. A guard dropped without its
//! explicit `release` does the same; see [`LockGuard`].

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use jute::{CreateMode, Stat};

use crate::{Client, Error, SessionState};

mod barrier;
mod config;
mod counter;
mod double_barrier;
mod election;
mod ensemble;
mod group;
mod lock;
mod queue;
mod rwlock;
mod semaphore;
mod sequential;

pub use barrier::Barrier;
pub use config::{ConfigValue, ValueChanges};
pub use counter::Counter;
pub use double_barrier::DoubleBarrier;
pub use election::{Leader, LeaderChanges, LeaderElection, Leadership};
pub use ensemble::follow_ensemble;
pub use group::{GroupMembership, MemberChanges, Membership};
pub use lock::{Lock, LockGuard};
pub use queue::{PriorityQueue, Queue};
pub use rwlock::ReadWriteLock;
pub use semaphore::{Lease, Semaphore};

/// How long to pause after a ConnectionLoss before looking at the state:
/// the client fails the calls in flight a moment before it marks itself
/// `Disconnected`, and the pause also keeps a retry loop from spinning.
const RETRY_PAUSE: Duration = Duration::from_millis(10);

/// The error every call gets once the session is over in `state`.
fn ended(state: SessionState) -> Error {
    match state {
        SessionState::Expired => Error::SessionExpired {
            path: String::new(),
        },
        SessionState::AuthFailed => Error::AuthFailed {
            path: String::new(),
        },
        _ => Error::Closed,
    }
}

/// Waits, after a ConnectionLoss, until the client is connected again;
/// fails with the session's end if it ends instead.
pub(crate) async fn reconnected(client: &Client) -> Result<(), Error> {
    tokio::time::sleep(RETRY_PAUSE).await;
    // Subscribe before looking, so a change between the two is not missed.
    let mut states = client.state_changes();
    loop {
        match client.state() {
            SessionState::Connected => return Ok(()),
            SessionState::Disconnected => {}
            terminal => return Err(ended(terminal)),
        }
        match states.next().await {
            Some(SessionState::Connected) => return Ok(()),
            Some(SessionState::Disconnected) => {}
            Some(terminal) => return Err(ended(terminal)),
            // The stream ends only after a terminal state, which the next
            // look at `state()` reports.
            None => return Err(ended(client.state())),
        }
    }
}

/// Runs `op` until it does not fail with ConnectionLoss, waiting for the
/// reconnection in between. Only for operations that are safe to repeat.
pub(crate) async fn retry<T, F, Fut>(client: &Client, mut op: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    loop {
        match op().await {
            Err(e) if e.is_connection_loss() => reconnected(client).await?,
            done => return done,
        }
    }
}

/// `dir/name`, also for `dir` "/".
pub(crate) fn child(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// The last segment of a path.
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The parent of a path other than "/".
pub(crate) fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(at) => &path[..at],
    }
}

/// A fresh random identifier for one attempt's nodes: 128 bits, so two
/// attempts anywhere never share one.
pub(crate) fn guid() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The counter the server appended to a sequential node's name: its last
/// ten characters, ZooKeeper's `%010d` of the parent's cversion. (After
/// 2^31 creates under one parent the counter wraps negative, as in
/// ZooKeeper; the recipes do not survive that either.)
pub fn sequence(name: &str) -> Option<i64> {
    let digits = name.get(name.len().checked_sub(10)?..)?;
    digits.parse().ok()
}

/// Creates `path` and its missing ancestors as empty persistent nodes,
/// retrying across ConnectionLoss.
pub async fn ensure_path(client: &Client, path: &str) -> Result<(), Error> {
    if retry(client, || client.exists(path)).await?.is_some() {
        return Ok(());
    }
    let mut prefix = String::new();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        prefix.push('/');
        prefix.push_str(segment);
        // A create repeated after a ConnectionLoss answers NodeExists if
        // the first one was applied: the outcome wanted either way.
        let create = || client.create(&prefix, b"", CreateMode::Persistent);
        match retry(client, create).await {
            Ok(_) | Err(Error::NodeExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Deletes `path`, retrying across ConnectionLoss; a node already gone
/// counts as deleted (a retried delete finds the first one's work done).
pub(crate) async fn delete_retrying(client: &Client, path: &str) -> Result<(), Error> {
    match retry(client, || client.delete(path, None)).await {
        Ok(()) | Err(Error::NoNode { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes `path` without waiting, for `Drop`: the delete is queued at
/// once, so it reaches the server before anything this client sends
/// later; inside a tokio runtime a background task retries it across a
/// ConnectionLoss, for at most twice the session timeout (after that long
/// without a connection the server has expired the session and the node
/// with it).
pub(crate) fn delete_in_background(client: &Client, path: &str) {
    let first = client.delete(path, None);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let client = client.clone();
    let path = path.to_owned();
    runtime.spawn(async move {
        if let Err(e) = first.await {
            if e.is_connection_loss() {
                let limit = client.session_timeout() * 2;
                let _ = tokio::time::timeout(limit, delete_retrying(&client, &path)).await;
            }
        }
    });
}

/// Creates `dir/<tag><counter>` (a sequential `mode`) and returns its
/// name. `tag` ends with a guid unique to this attempt, so after a
/// ConnectionLoss the node is found again if the lost create was applied
/// (see the module docs); a missing `dir` is created first.
pub(crate) async fn create_tagged(
    client: &Client,
    dir: &str,
    tag: &str,
    data: &[u8],
    mode: CreateMode,
) -> Result<String, Error> {
    debug_assert!(mode.is_sequential());
    let path = child(dir, tag);
    loop {
        match client.create(&path, data, mode).await {
            Ok((created, _)) => return Ok(basename(&created).to_owned()),
            // For a sequential create, only the parent can be missing.
            Err(Error::NoNode { .. }) => ensure_path(client, dir).await?,
            Err(e) if e.is_connection_loss() => {
                reconnected(client).await?;
                let found = find_tagged(client, dir, tag).await?;
                tracing::debug!(dir, tag, ?found, "a create's reply was lost");
                if let Some(name) = found {
                    return Ok(name);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// The node of `dir` whose name starts with `tag`, if any. Should there be
/// several (a create that reported ConnectionLoss but was applied after
/// all, next to its retry), the first in sequence order is kept and the
/// others deleted.
async fn find_tagged(client: &Client, dir: &str, tag: &str) -> Result<Option<String>, Error> {
    let children = match retry(client, || client.get_children(dir)).await {
        Ok(children) => children,
        Err(Error::NoNode { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut mine: Vec<String> = children
        .into_iter()
        .filter(|name| name.starts_with(tag))
        .collect();
    mine.sort_by_key(|name| sequence(name));
    let mut mine = mine.into_iter();
    let kept = mine.next();
    for extra in mine {
        delete_retrying(client, &child(dir, &extra)).await?;
    }
    Ok(kept)
}

/// Whether `stat` is of an ephemeral node of this client's session.
pub(crate) fn owned_by_session(client: &Client, stat: &Stat) -> bool {
    stat.ephemeral_owner != 0 && stat.ephemeral_owner == client.session_id()
}

/// Creates the ephemeral node `path` (not sequential) with `data`,
/// creating its parent if missing. After a ConnectionLoss, a node that
/// turns out to be an ephemeral of this session is the one the lost create
/// made; `NodeExists` otherwise means someone else holds the name.
pub(crate) async fn create_ephemeral(
    client: &Client,
    path: &str,
    data: &[u8],
    parent: &str,
) -> Result<(), Error> {
    let mut lost = false;
    loop {
        match client.create(path, data, CreateMode::Ephemeral).await {
            Ok(_) => return Ok(()),
            Err(Error::NoNode { .. }) => ensure_path(client, parent).await?,
            Err(e) if e.is_connection_loss() => {
                reconnected(client).await?;
                lost = true;
            }
            Err(Error::NodeExists { path: existing }) if lost => {
                match retry(client, || client.exists(path)).await? {
                    Some(stat) if owned_by_session(client, &stat) => return Ok(()),
                    // Gone meanwhile: try again.
                    None => {}
                    Some(_) => return Err(Error::NodeExists { path: existing }),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// An ephemeral node this session owns on behalf of a guard (a lock, a
/// lease, a leadership, a membership). Deleting it gives up what it
/// stands for; dropping it undeleted deletes it in the background (see
/// [`delete_in_background`]).
#[derive(Debug)]
pub(crate) struct OwnedNode {
    client: Client,
    path: String,
    /// False once deleted, so `Drop` has nothing left to do.
    live: bool,
}

impl OwnedNode {
    pub(crate) fn new(client: &Client, path: String) -> Self {
        Self {
            client: client.clone(),
            path,
            live: true,
        }
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Whether the node still exists as an ephemeral of this session: false
    /// if someone deleted it; `SessionExpired` once the session is gone.
    pub(crate) async fn exists(&self) -> Result<bool, Error> {
        let stat = retry(&self.client, || self.client.exists(&self.path)).await?;
        Ok(stat.is_some_and(|stat| owned_by_session(&self.client, &stat)))
    }

    /// Lets the node be: nothing deletes it on drop any more.
    pub(crate) fn keep(mut self) {
        self.live = false;
    }

    pub(crate) async fn delete(mut self) -> Result<(), Error> {
        self.live = false;
        delete_retrying(&self.client, &self.path).await
    }
}

impl Drop for OwnedNode {
    fn drop(&mut self) {
        if self.live {
            delete_in_background(&self.client, &self.path);
        }
    }
}

/// Decimal text to and from a node's data, for the recipes that keep a
/// number (the counter): readable in any ZooKeeper shell.
pub(crate) fn parse_i64(path: &str, data: &Bytes) -> Result<i64, Error> {
    if data.is_empty() {
        return Ok(0);
    }
    std::str::from_utf8(data)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .ok_or_else(|| Error::InvalidArgument {
            reason: format!(
                "{path} holds {:?}, not a decimal integer",
                String::from_utf8_lossy(data)
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_is_the_last_ten_digits() {
        assert_eq!(sequence("lock-ab12-0000000042"), Some(42));
        assert_eq!(sequence("read-0000000009-0000000010"), Some(10));
        assert_eq!(sequence("short"), None);
        assert_eq!(sequence("lock-ab12-00000000x2"), None);
        assert_eq!(sequence("ready"), None);
    }

    #[test]
    fn paths() {
        assert_eq!(child("/", "a"), "/a");
        assert_eq!(child("/locks/x", "lock-"), "/locks/x/lock-");
        assert_eq!(basename("/locks/x/lock-1"), "lock-1");
        assert_eq!(parent("/locks/x"), "/locks");
        assert_eq!(parent("/locks"), "/");
        assert_eq!(guid().len(), 32);
        assert_ne!(guid(), guid());
    }

    #[test]
    fn decimal_data() {
        let parse = |s: &'static str| parse_i64("/c", &Bytes::from_static(s.as_bytes()));
        assert_eq!(parse(""), Ok(0));
        assert_eq!(parse("-17"), Ok(-17));
        assert_eq!(parse(" 5\n"), Ok(5));
        assert!(matches!(parse("five"), Err(Error::InvalidArgument { .. })));
    }
}
