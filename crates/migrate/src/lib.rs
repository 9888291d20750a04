//! The migration room: Apache ZooKeeper's on-disk formats to and from
//! Paddock's tree, so that a move from ZooKeeper (and back) keeps every
//! znode, stat, ACL and session.
//!
//! - `zookeeper_dir`: which of a ZooKeeper data directory's snapshots and
//!   logs its server would load, read into one tree.
//! - `zk_snapshot`, `zk_log`, `zk_txn`: ZooKeeper's snapshot files (read
//!   and written), transaction logs and logged transactions.
//! - `zk_learner`, `zk_quorum`: a running ensemble followed as an observer
//!   (ZooKeeper's learner protocol and its quorum packets).
//! - `tree_txn`: ZooKeeper's committed txns as the tree's own, applied
//!   one by one once the follower is synced.
//! - `compression`: gzip and snappy-java snapshot streams.
//! - `zk_tree`: ZooKeeper's tree and its tolerant replay of logged txns.
//! - `password`: the session password ZooKeeper derives from an id.
//! - `paddock_dir`: a Paddock data directory written from a tree, or read
//!   (snapshot plus log) for an export.
//! - `java_io`: Java's big-endian fields with Adler-32 checksums.
//!
//! Imported zxids are ZooKeeper's: the Paddock snapshot sits at log index
//! = ZooKeeper's last zxid, so a client's lastZxidSeen stays valid.

mod compression;
mod error;
mod java_io;
mod paddock_dir;
mod password;
mod tree_txn;
mod zk_learner;
mod zk_log;
mod zk_mirror;
mod zk_observer;
mod zk_quorum;
mod zk_snapshot;
mod zk_tree;
mod zk_txn;
mod zookeeper_dir;

pub use error::MigrateError;
pub use java_io::ReadError;
pub use paddock_dir::{
    ensure_new as ensure_new_paddock_dir, read as read_paddock, write as write_paddock,
    PaddockState,
};
pub use password::zookeeper_password;
pub use zk_learner::{follow, Ended, Event, LearnerConfig, LearnerError, Mirror};
pub use zk_observer::{
    observe_zookeeper, ObserverParts, Revalidate, RevalidateCallback, SessionsTouched,
    TakeoverSender, TAKEOVER_PATH,
};
pub use zk_snapshot::write_to as write_zookeeper_snapshot;
pub use zookeeper_dir::{read as read_zookeeper, write as write_zookeeper, ZooKeeperState};
