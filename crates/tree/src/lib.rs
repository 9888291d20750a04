//! Paddock's data tree: ZooKeeper's `DataTree` as a deterministic state
//! machine. [`DataTree::apply`] takes a [`Txn`] and the zxid (the log
//! index) it was committed at and returns an [`Outcome`] plus the watch
//! [`Trigger`]s ZooKeeper would fire. Equal trees given equal Txns stay
//! equal: no I/O, no clock, no randomness, no hash-map order in results.
//! Time, session ids, passwords and auth ids arrive inside the Txn.
//!
//! Layout:
//! - `path`: path validation and ZooKeeper's parent/child path rules.
//! - `acl`: `checkACL`, `fixupACL`, the ip/digest providers, redaction.
//! - `node`: a znode, its persisted stat, what `ephemeralOwner` encodes.
//! - `node_data`: a znode's data, in twelve bytes of the node.
//! - `nodes`: the map of every znode by path, ordered by the path's hash.
//! - `hash_trie`: the persistent hash trie the nodes map is built on.
//! - `shared_path`: a znode's path, one thin pointer held by the nodes map
//!   and by the parent's children.
//! - `session`: the replicated session record.
//! - `txn`: [`Txn`]/[`TxnOp`] and their log encoding.
//! - `outcome`: [`Applied`], [`Outcome`], [`Trigger`].
//! - `tree`: the [`DataTree`] state and its mutation primitives.
//! - `apply`: ZooKeeper's per-op checks, in its order, then the mutation;
//!   multi; reaper eligibility.
//! - `quota`: the `/zookeeper/quota` bookkeeping `DataTree` does.
//! - `read`: reads with `FinalRequestProcessor`'s ACL checks; counters.
//! - `snapshot`: streaming snapshot write and read.
//! - `changes`: which buckets of the nodes map changed since they were
//!   last taken.
//! - `delta`: delta snapshots of those buckets, and a snapshot loaded
//!   merged with the deltas after it.
//! - `restore`: a tree from another system's znode records, and a tree's
//!   znodes parent first, for the migration room.
//!
//! Versions: every map is persistent (imbl's, and the nodes map's own
//! hash trie), so `DataTree::clone` is O(1) and gives the snapshot writer
//! an immutable version while apply goes on.
//! A version shared with a clone costs every write on it a copy of each
//! map node it changes (once per node while the clone lives), so the
//! server applies to one tree in place and clones only to snapshot.
//!
//! ```
//! use bytes::Bytes;
//! use jute::{Acl, CreateMode};
//! use tree::{DataTree, Outcome, Txn, TxnOp};
//!
//! let mut tree = DataTree::new();
//! let session = 0x100;
//! let txn = |op| Txn {
//!     time_ms: 1_000,
//!     session_id: session,
//!     auth: vec![],
//!     enforce_quota: false,
//!     op,
//! };
//! tree.apply(1, &txn(TxnOp::CreateSession { timeout_ms: 30_000, password: Bytes::new() }));
//! let applied = tree.apply(2, &txn(TxnOp::Create {
//!     path: "/lock-".into(),
//!     data: Some(Bytes::from_static(b"me")),
//!     acl: Acl::open_unsafe(),
//!     mode: CreateMode::EphemeralSequential,
//!     ttl_ms: -1,
//! }));
//! let Outcome::Created { path, stat } = applied.outcome else { panic!() };
//! // The suffix is the parent's count of children created so far; the
//! // root's "/zookeeper" child was there from the start and is not counted.
//! assert_eq!(path, "/lock-0000000000");
//! assert_eq!(stat.ephemeral_owner, session);
//! assert_eq!(tree.get_ephemerals(session, "/"), vec![path]);
//! ```

mod acl;
mod apply;
mod changes;
mod delta;
mod hash_trie;
mod lookups;
mod node;
mod node_data;
mod nodes;
mod outcome;
mod path;
mod path_set;
mod prefetch;
mod quota;
mod read;
mod restore;
mod session;
mod shared_path;
mod snapshot;
mod tree;
mod txn;

pub use acl::{check_acl, AclList};
pub use delta::{fold_deltas, Changes};
pub use lookups::Lookups;
pub use node::{
    ttl_owner, Children, Node, OwnerKind, SharedNode, StatPersisted, CONTAINER_EPHEMERAL_OWNER,
    TTL_MAX_MS,
};
pub use outcome::{Applied, Outcome, Trigger};
pub use path::validate_path;
pub use quota::{top_namespace, QuotaBreach, QuotaMeasure, QuotasPerNamespace};
pub use restore::ZnodeRecord;
pub use session::SessionInfo;
pub use snapshot::SnapshotError;
pub use tree::DataTree;
pub use txn::{Txn, TxnOp};
