//! What the snapshot thread writes, and what it tells of the outcome.
//!
//! A delta is written from an O(1) clone of the tree, which lives only as
//! long as the delta takes to write. A whole snapshot is written from such
//! a clone too when the tree has no chain of deltas to follow on (at the
//! start, after a lost snapshot, on a server that does not track changes).
//! Otherwise it is folded: a delta is written as usual, the clone dropped,
//! and the last whole snapshot and its deltas, this one the last, merged
//! from their files into a new whole snapshot (`tree::fold_deltas`).
//!
//! Folding, because a tree shared with a clone pays for every write: the
//! first change to each bucket after the clone copies its path through the
//! nodes map. Among 10M znodes a whole snapshot takes 10-16 s at
//! background priority, and writes cost about twice as much as long as it
//! held its clone.
//!
//! But not when the changes since the last snapshot name half the tree or
//! more (a client that rewrote or deleted most of it): that delta alone
//! would hold the clone about as long as the whole tree does, and the fold
//! would then read the whole snapshot and every delta to rewrite what it
//! already replaced. Such a snapshot, delta or whole, is written whole
//! from the clone.

use std::io::{self, Read};
use std::sync::Arc;
use std::time::Instant;

use consensus::{DeltaMeta, Deltas, SnapshotMeta, Snapshots};
use tree::DataTree;

use crate::delta_chain::{ChainTip, DeltaChain, Followed};
use crate::shared::Shared;
use crate::snapshot_job::Running;

/// What a snapshot thread writes.
pub enum Writing {
    /// The tree, whole.
    Whole(SnapshotMeta),
    /// The buckets that changed since the newest snapshot of the chain.
    Delta(DeltaMeta, tree::Changes),
    /// A delta, then the chain it ends folded into a whole snapshot at its
    /// index.
    Folded(SnapshotMeta, DeltaMeta, tree::Changes),
}

/// Where a snapshot thread writes, and the chain it tells of the outcome.
pub struct SnapshotFiles {
    pub snapshots: Arc<Snapshots>,
    pub deltas: Arc<Deltas>,
    pub chain: Arc<DeltaChain>,
}

/// Writes the snapshot `writing` says of `tree`, started on the chain as
/// `followed`, at the job's priority. A whole snapshot then lets the log
/// forget what it holds, and the deltas before it go.
pub fn write_snapshot(
    shared: &Shared,
    files: &SnapshotFiles,
    writing: Writing,
    followed: Followed,
    tree: DataTree,
    running: Running,
) {
    running.set_thread_priority();
    let writer = Writer {
        shared,
        files,
        followed,
        running,
    };
    match whole_if_most_changed(writing, &tree) {
        Writing::Whole(meta) => writer.whole(&meta, &tree),
        Writing::Delta(meta, changes) => {
            writer.delta(&meta, &changes, &tree);
        }
        Writing::Folded(whole, delta, changes) => {
            if writer.delta(&delta, &changes, &tree) {
                let nodes = tree.snapshot_node_count();
                drop(tree);
                writer.fold(&whole, delta.base, nodes);
            }
        }
    }
}

/// `writing`, or the tree whole if its changes name at least half as
/// many buckets as the tree holds znodes: a delta of them would take about
/// as long as the whole tree, with the same clone held, and a fold would
/// then read the chain's files to rewrite what that delta already
/// replaced. A whole snapshot starts the chain afresh.
fn whole_if_most_changed(mut writing: Writing, tree: &DataTree) -> Writing {
    if let Writing::Delta(meta, changes) | Writing::Folded(_, meta, changes) = &mut writing {
        if changed_most_of(changes.bucket_count(), tree.snapshot_node_count()) {
            return Writing::Whole(meta.as_whole());
        }
    }
    writing
}

fn changed_most_of(buckets: usize, nodes: u64) -> bool {
    buckets as u64 >= nodes.div_ceil(2)
}

struct Writer<'a> {
    shared: &'a Shared,
    files: &'a SnapshotFiles,
    followed: Followed,
    running: Running,
}

impl Writer<'_> {
    fn whole(&self, meta: &SnapshotMeta, tree: &DataTree) {
        let started = Instant::now();
        let retain = self.shared.config.snapshots_retained();
        let written = self.files.snapshots.save(meta, retain, |out| {
            tree.write_snapshot(&mut self.running.guard(out))
        });
        if written.is_err() {
            // It took the tree's changes: the next snapshot must be whole.
            self.files.chain.ended(self.followed, None);
        }
        let written = written.map_err(|e| e.to_string());
        self.whole_written(meta, written, started, tree.snapshot_node_count(), "whole");
    }

    /// Writes a delta; true once it is durable and ends the chain.
    fn delta(&self, meta: &DeltaMeta, changes: &tree::Changes, tree: &DataTree) -> bool {
        let started = Instant::now();
        let mut buckets = None;
        let written = self.files.deltas.save(meta, |out| {
            buckets = Some(tree.write_delta(changes, &mut self.running.guard(out))?);
            Ok(())
        });
        let tip = written.is_ok().then(|| {
            self.followed
                .tip
                .expect("a delta follows on a chain")
                .then(meta.index)
        });
        self.files.chain.ended(self.followed, tip);
        match written {
            Ok(()) => {
                self.shared.stats.snapshots.record(started.elapsed());
                tracing::info!(
                    zxid = meta.index,
                    kind = "delta",
                    nodes = tree.snapshot_node_count(),
                    buckets,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    priority = ?self.running.priority(),
                    "snapshot written"
                );
                true
            }
            Err(error) => {
                self.failed(meta.index, "delta", &error.to_string());
                false
            }
        }
    }

    /// Folds the chain from the whole snapshot at `base` to the delta at
    /// `meta.index` into a whole snapshot of `nodes` znodes. If that fails,
    /// the chain goes on from its deltas.
    fn fold(&self, meta: &SnapshotMeta, base: u64, nodes: u64) {
        let started = Instant::now();
        let written = self.fold_chain(base, meta, nodes);
        self.whole_written(meta, written, started, nodes, "folded");
    }

    fn fold_chain(&self, base: u64, meta: &SnapshotMeta, nodes: u64) -> Result<(), String> {
        let (_, mut base_file) = self
            .files
            .snapshots
            .checked_as_read(base)
            .map_err(|e| e.to_string())?;
        let mut chain = self.files.deltas.chain(base).map_err(|e| e.to_string())?;
        if chain.last().map(|(delta, _)| delta.index) != Some(meta.index) {
            return Err(format!(
                "the deltas after the snapshot at {base:#x} do not reach {:#x}",
                meta.index
            ));
        }
        let retain = self.shared.config.snapshots_retained();
        self.files
            .snapshots
            .save(meta, retain, |out| {
                let out = &mut self.running.guard(out);
                let deltas = chain
                    .iter_mut()
                    .map(|(_, file)| file as &mut (dyn Read + Send))
                    .collect();
                tree::fold_deltas(&mut base_file, deltas, nodes, out).map_err(io::Error::other)?;
                // Read to its end, each file is checked whole.
                read_to_its_end(&mut base_file, "the snapshot")?;
                for (_, delta) in &mut chain {
                    read_to_its_end(delta, "a delta")?;
                }
                Ok(())
            })
            .map_err(|e| e.to_string())
    }

    /// A whole snapshot of `nodes` znodes was written, or not: if it was,
    /// the chain starts afresh from it, the deltas before it go and the log
    /// forgets what it holds.
    fn whole_written(
        &self,
        meta: &SnapshotMeta,
        written: Result<(), String>,
        started: Instant,
        nodes: u64,
        kind: &str,
    ) {
        match written {
            Ok(()) => {
                self.files
                    .chain
                    .ended(self.followed, Some(ChainTip::whole(meta.index)));
                self.shared.stats.snapshots.record(started.elapsed());
                tracing::info!(
                    zxid = meta.index,
                    kind,
                    nodes,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    priority = ?self.running.priority(),
                    "snapshot written"
                );
                self.files.deltas.keep_only_chain(meta.index, meta.index);
                // The log may now forget what the snapshot holds.
                let _ = self.shared.consensus.compact(meta.clone());
            }
            Err(error) => self.failed(meta.index, kind, &error),
        }
    }

    fn failed(&self, index: u64, kind: &str, error: &str) {
        if self.running.given_up() {
            tracing::info!(zxid = index, kind, "snapshot given up");
        } else {
            tracing::error!(
                "writing a {kind} snapshot at zxid {index:#x} failed: {error}; the log keeps growing until a whole snapshot succeeds"
            );
        }
    }
}

/// Reads `file` past what its tree was read from: nothing may be left,
/// and reaching its end checks its checksum.
pub fn read_to_its_end(file: &mut dyn Read, what: &str) -> io::Result<()> {
    let mut past_the_tree = [0u8; 1];
    match file.read(&mut past_the_tree)? {
        0 => Ok(()),
        _ => Err(io::Error::other(format!("{what} goes on past its tree"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_to_half_the_tree_or_more_write_it_whole() {
        assert!(!changed_most_of(0, 1));
        assert!(changed_most_of(0, 0));
        assert!(!changed_most_of(49, 99));
        assert!(changed_most_of(50, 99));
        assert!(changed_most_of(50, 100));
        assert!(!changed_most_of(100_000, 10_000_000));
        // Deletes leave buckets with no znode: more than the tree holds.
        assert!(changed_most_of(1_000_100, 601_526));
    }
}
