//! An Apache ZooKeeper data directory: which snapshot and which logs its
//! server would load (`FileTxnSnapLog.restore`), read into one tree.

use std::path::{Path, PathBuf};

use tree::DataTree;

use crate::error::MigrateError;
use crate::zk_log::{self, LogEnd, LogFile};
use crate::zk_snapshot::{self, Snapshot, SnapshotFile};
use crate::zk_tree::ZkTree;
use crate::zk_txn::LoggedTxn;

/// What reading a ZooKeeper data directory found.
#[derive(Debug)]
pub struct ZooKeeperState {
    pub tree: DataTree,
    /// The last zxid: the snapshot's, or the last replayed txn's.
    pub zxid: i64,
    pub snapshot: PathBuf,
    /// Newer snapshots the server never finished writing, passed over as
    /// ZooKeeper passes over them.
    pub unfinished_snapshots: Vec<PathBuf>,
    /// The zxid the snapshot's name gives.
    pub snapshot_zxid: i64,
    pub logs: Vec<PathBuf>,
    pub txns_replayed: u64,
    /// Steps of replayed txns that did not apply (a fuzzy snapshot
    /// already held them); ZooKeeper skips them too.
    pub steps_skipped: u64,
    /// Where the last log was cut by a crash, if it was.
    pub torn: Option<(PathBuf, u64)>,
    /// Ephemerals of sessions the snapshot no longer lists, removed as
    /// ZooKeeper removes them when it loads.
    pub orphaned_ephemerals: usize,
}

/// ZooKeeper keeps its files in `version-2` under `dataDir` and
/// `dataLogDir`; either that directory or its parent may be given.
fn version_dir(dir: &Path) -> PathBuf {
    let inner = dir.join("version-2");
    if inner.is_dir() {
        inner
    } else {
        dir.to_path_buf()
    }
}

/// Files named `PREFIX.<zxid in hex>[.suffix]`, by zxid.
fn files_by_zxid(dir: &Path, prefix: &str) -> Result<Vec<(i64, PathBuf)>, MigrateError> {
    let io = |source| MigrateError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else {
            continue;
        };
        let hex = rest.split('.').next().unwrap_or_default();
        if let Ok(zxid) = i64::from_str_radix(hex, 16) {
            found.push((zxid, path));
        }
    }
    found.sort();
    Ok(found)
}

/// `FileTxnLog.getLogFiles`: the newest log starting at or before the
/// snapshot's zxid, and every later one.
fn logs_after(files: Vec<(i64, PathBuf)>, snapshot_zxid: i64) -> Vec<LogFile> {
    let start = files
        .iter()
        .filter(|(zxid, _)| *zxid <= snapshot_zxid)
        .map(|(zxid, _)| *zxid)
        .max()
        .unwrap_or(i64::MIN);
    files
        .into_iter()
        .filter(|(zxid, _)| *zxid >= start)
        .map(|(zxid, path)| LogFile { path, zxid })
        .collect()
}

/// Whether `next` may follow `last` in a whole log: the next counter of
/// the same epoch, or the first txn of a later one.
fn follows(last: i64, next: i64) -> bool {
    const COUNTER: i64 = 0xffff_ffff;
    next == last + 1 || (next >> 32 > last >> 32 && next & COUNTER == 1)
}

/// Reads the newest finished snapshot in `data_dir` and replays the logs
/// in `log_dir` (ZooKeeper's `dataLogDir`; `data_dir` when it has none)
/// after it. A finished snapshot must be whole: when the newest is
/// damaged this refuses, rather than fall back to an older one as
/// ZooKeeper would, so that a person decides (moving the damaged file
/// aside is enough).
pub fn read(data_dir: &Path, log_dir: Option<&Path>) -> Result<ZooKeeperState, MigrateError> {
    let snap_dir = version_dir(data_dir);
    let (snapshot, mut zk, unfinished_snapshots) = newest_finished_snapshot(&snap_dir)?;
    let log_dir = version_dir(log_dir.unwrap_or(data_dir));
    let logs = logs_after(files_by_zxid(&log_dir, "log")?, snapshot.zxid);
    let mut state = Replay {
        last_zxid: snapshot.zxid,
        txns: 0,
        skipped: 0,
    };
    let mut torn = None;
    for log in &logs {
        let end = zk_log::read(log, |txn| state.replay(&mut zk, txn, &log.path))?;
        if let LogEnd::Torn { offset } = end {
            torn = Some((log.path.clone(), offset));
        }
    }
    let (tree, orphaned_ephemerals) =
        zk.into_data_tree(state.last_zxid)
            .map_err(|source| MigrateError::Tree {
                file: snapshot.path.clone(),
                source,
            })?;
    Ok(ZooKeeperState {
        tree,
        zxid: state.last_zxid,
        snapshot: snapshot.path,
        unfinished_snapshots,
        snapshot_zxid: snapshot.zxid,
        logs: logs.into_iter().map(|l| l.path).collect(),
        txns_replayed: state.txns,
        steps_skipped: state.skipped,
        torn,
        orphaned_ephemerals,
    })
}

/// `FileSnap.deserialize`: snapshots newest first, passing over those the
/// server never finished writing. Returns the one read, its tree, and
/// those passed over.
fn newest_finished_snapshot(
    snap_dir: &Path,
) -> Result<(SnapshotFile, ZkTree, Vec<PathBuf>), MigrateError> {
    let mut unfinished = Vec::new();
    for (zxid, path) in files_by_zxid(snap_dir, "snapshot")?.into_iter().rev() {
        let snapshot = SnapshotFile { path, zxid };
        match zk_snapshot::read(&snapshot)? {
            Snapshot::Whole(tree) => return Ok((snapshot, tree, unfinished)),
            Snapshot::Unfinished => unfinished.push(snapshot.path),
        }
    }
    Err(MigrateError::NoSnapshot {
        dir: snap_dir.to_path_buf(),
        unfinished,
    })
}

/// Writes `tree` at `zxid` as the snapshot ZooKeeper starts from, in
/// `dir/version-2` (ZooKeeper's `dataDir`), which must hold no snapshot or
/// log yet: ZooKeeper would load those too.
pub fn write(tree: &DataTree, zxid: i64, dir: &Path) -> Result<PathBuf, MigrateError> {
    let version_dir = dir.join("version-2");
    std::fs::create_dir_all(&version_dir).map_err(|source| MigrateError::Io {
        path: version_dir.clone(),
        source,
    })?;
    for prefix in ["snapshot", "log"] {
        if let Some((_, found)) = files_by_zxid(&version_dir, prefix)?.pop() {
            return Err(MigrateError::NotEmpty {
                dir: version_dir,
                found,
            });
        }
    }
    zk_snapshot::write(tree, zxid, &version_dir)
}

struct Replay {
    last_zxid: i64,
    txns: u64,
    skipped: u64,
}

impl Replay {
    /// `fastForwardFromEdits`: txns the snapshot is already at are
    /// skipped; the rest must follow on without a gap.
    fn replay(&mut self, zk: &mut ZkTree, txn: LoggedTxn, file: &Path) -> Result<(), MigrateError> {
        let zxid = txn.header.zxid;
        if zxid <= self.last_zxid {
            return Ok(());
        }
        if !follows(self.last_zxid, zxid) {
            return Err(MigrateError::LogGap {
                before: self.last_zxid,
                after: zxid,
                file: file.to_path_buf(),
            });
        }
        self.skipped += zk.replay(&txn).len() as u64;
        self.txns += 1;
        self.last_zxid = zxid;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logs_read_are_those_zookeeper_reads() {
        let files = |zxids: &[i64]| {
            zxids
                .iter()
                .map(|&z| (z, PathBuf::from(format!("log.{z:x}"))))
                .collect::<Vec<_>>()
        };
        let zxids = |logs: Vec<LogFile>| logs.into_iter().map(|l| l.zxid).collect::<Vec<_>>();
        assert_eq!(zxids(logs_after(files(&[1, 50, 100]), 70)), [50, 100]);
        assert_eq!(zxids(logs_after(files(&[1, 50, 100]), 100)), [100]);
        assert_eq!(zxids(logs_after(files(&[80, 100]), 70)), [80, 100]);
        assert_eq!(zxids(logs_after(files(&[]), 70)), Vec::<i64>::new());
    }

    #[test]
    fn zxids_follow_within_an_epoch_or_into_a_new_one() {
        assert!(follows(5, 6));
        assert!(!follows(5, 7));
        assert!(follows(0x1_0000_0009, 0x2_0000_0001));
        assert!(!follows(0x1_0000_0009, 0x2_0000_0002));
        assert!(!follows(0x2_0000_0001, 0x1_0000_0002));
    }
}
