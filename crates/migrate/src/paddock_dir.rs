//! A Paddock data directory: written from an imported tree, read (newest
//! snapshot plus the log after it) for an export. An export does without
//! the deltas a server may have written: the log goes back to the
//! snapshot they build on.

use std::path::{Path, PathBuf};

use consensus::{SnapshotMeta, Snapshots};
use tree::{DataTree, Txn};

use crate::error::MigrateError;

/// Snapshots kept in a data directory written by an import: just the one.
const SNAPSHOTS_RETAINED: usize = 1;

/// A stopped Paddock server's state.
#[derive(Debug)]
pub struct PaddockState {
    pub tree: DataTree,
    /// The last log index (zxid) the tree includes.
    pub zxid: i64,
    /// The servers voting in the group the data belongs to.
    pub voters: Vec<u64>,
    /// Entries included that the server had not yet recorded as committed
    /// (in an ensemble, they may not have been).
    pub past_recorded_commit: usize,
}

/// Refuses a directory that already holds files (a Paddock data
/// directory is never merged into).
fn ensure_empty(dir: &Path) -> Result<(), MigrateError> {
    let found = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(MigrateError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    match found {
        Some(entry) => Err(MigrateError::NotEmpty {
            dir: dir.to_path_buf(),
            found: entry.map_or_else(|_| dir.to_path_buf(), |e| e.path()),
        }),
        None => Ok(()),
    }
}

/// Refuses a data directory that already holds a Paddock server's
/// snapshots, deltas or log: checked before a long import, and again as
/// it writes.
pub fn ensure_new(data_dir: &Path, data_log_dir: &Path) -> Result<(), MigrateError> {
    ensure_empty(&consensus::snapshot_dir(data_dir))?;
    ensure_empty(&consensus::delta_dir(data_dir))?;
    ensure_empty(&consensus::log_dir(data_log_dir))
}

/// Writes `tree` as the only snapshot of a new data directory, at index
/// `zxid`, so that the server's log (and so its zxids) goes on from there.
/// `voters` and `learners` are the group's servers (`[1]` standalone).
pub fn write(
    tree: &DataTree,
    zxid: i64,
    data_dir: &Path,
    data_log_dir: &Path,
    voters: Vec<u64>,
    learners: Vec<u64>,
) -> Result<PathBuf, MigrateError> {
    let index = u64::try_from(zxid)
        .ok()
        .filter(|&i| i > 0)
        .ok_or(MigrateError::NothingToImport)?;
    ensure_new(data_dir, data_log_dir)?;
    let snapshot_dir = consensus::snapshot_dir(data_dir);
    let snapshots = Snapshots::open(&snapshot_dir)?;
    // ZooKeeper's membership is not Paddock's: each Paddock server writes
    // its own when it starts, unless the node holds a Paddock reconfig's.
    let mut tree = tree.clone();
    tree.forget_config();
    let meta = SnapshotMeta {
        index,
        // Any term serves: raft's own start after it with the next one.
        term: (index >> 32).max(1),
        membership: consensus::Membership::new(voters, learners),
    };
    snapshots.save(&meta, SNAPSHOTS_RETAINED, |out| tree.write_snapshot(out))?;
    Ok(snapshot_dir)
}

/// Reads a stopped server's newest snapshot and applies the log after it,
/// as the server would on start.
pub fn read(data_dir: &Path, data_log_dir: &Path) -> Result<PaddockState, MigrateError> {
    let snapshot_dir = consensus::snapshot_dir(data_dir);
    let snapshots = Snapshots::open(&snapshot_dir)?;
    let (mut tree, meta) = match snapshots.latest()? {
        Some((meta, mut reader)) => {
            let tree = DataTree::read_snapshot(&mut reader).map_err(|source| {
                MigrateError::PaddockSnapshot {
                    dir: snapshot_dir.clone(),
                    source,
                }
            })?;
            (tree, meta)
        }
        None => (DataTree::new(), SnapshotMeta::default()),
    };
    let log = consensus::read_stopped_log(&consensus::log_dir(data_log_dir), meta.index)?;
    let mut zxid = meta.index;
    let mut past_recorded_commit = 0;
    for (index, _term, data) in log.entries {
        zxid = index;
        if index > log.recorded_commit {
            past_recorded_commit += 1;
        }
        if data.is_empty() {
            continue;
        }
        let txn =
            Txn::decode(data).map_err(|source| MigrateError::PaddockEntry { index, source })?;
        tree.apply(index as i64, &txn);
    }
    Ok(PaddockState {
        tree,
        zxid: zxid as i64,
        voters: meta.membership.voters,
        past_recorded_commit,
    })
}
