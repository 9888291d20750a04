//! The znodes a group of txns about to be applied, and of reads about to
//! be answered, will look up: gathered from wherever those are held, then
//! loaded into the CPU's cache in one walk ([`DataTree::prefetch`]).
//! Among 1M znodes a lookup is about five cache misses, one after the
//! other; a walk for the whole group overlaps them. Each path is kept as
//! its hash, so that a path a lock guards need not stay borrowed once
//! added.
//!
//! [`DataTree::prefetch`]: crate::DataTree::prefetch

use crate::nodes::path_hash;
use crate::path;
use crate::txn::Txn;

#[derive(Debug, Default)]
pub struct Lookups {
    hashes: Vec<u64>,
}

impl Lookups {
    /// What applying `txn` looks up: its znode, and its parent for a
    /// create or a delete.
    pub fn add_txn(&mut self, txn: &Txn) {
        txn.op.looked_up(&mut |path| self.add_path(path));
    }

    /// The znode at `path` (a read's), with ZooKeeper's `""` alias for the
    /// root.
    pub fn add_path(&mut self, path: &str) {
        self.hashes.push(path_hash(path::lookup_key(path)));
    }

    /// Lookups added.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    pub(crate) fn hashes(&self) -> &[u64] {
        &self.hashes
    }
}
