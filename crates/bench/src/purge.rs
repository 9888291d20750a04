//! Old snapshots and transaction logs of the ZooKeeper servers this tool
//! starts, removed as they go out of use, as ZooKeeper's autopurge
//! removes them with `autopurge.snapRetainCount=3`.
//!
//! ZooKeeper keeps every snapshot unless autopurge is on, and autopurge
//! runs at most once an hour: growing 10 GB of data, it wrote 46 GB of
//! snapshots in two minutes and filled this machine's disk. Paddock keeps
//! its newest three snapshots and the log after them; purging ZooKeeper's
//! every few seconds to the same rule compares the two alike.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Snapshots kept, as by ZooKeeper's `autopurge.snapRetainCount` default
/// and Paddock's own.
const SNAPSHOTS_RETAINED: usize = 3;
const PURGE_INTERVAL: Duration = Duration::from_secs(2);

/// Purges the `version-2` directories of ZooKeeper servers until dropped.
pub struct Purger {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Purger {
    /// `dirs`: each server's `version-2` directory.
    pub fn start(dirs: Vec<PathBuf>) -> Purger {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                for dir in &dirs {
                    purge(dir);
                }
                std::thread::park_timeout(PURGE_INTERVAL);
            }
        });
        Purger {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Purger {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// Removes what `purgeable` names in `dir`; a directory not there yet, or
/// a file gone already, is no matter.
fn purge(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let names: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    for name in purgeable(&names, SNAPSHOTS_RETAINED) {
        let _ = std::fs::remove_file(dir.join(name));
    }
}

/// ZooKeeper's purge rule (PurgeTxnLog): keep the newest `retain`
/// snapshots, the log file that holds the txns right after the oldest of
/// them (the newest log starting at or before it) and every newer log;
/// everything older goes. Files are named `snapshot.<zxid>` and
/// `log.<zxid>`, the zxid in hex, a log named after its first txn.
fn purgeable(names: &[String], retain: usize) -> Vec<String> {
    let zxids = |prefix: &str| {
        let mut found: Vec<(u64, &String)> = names
            .iter()
            .filter_map(|name| {
                let zxid = name.strip_prefix(prefix)?;
                Some((u64::from_str_radix(zxid, 16).ok()?, name))
            })
            .collect();
        found.sort_unstable();
        found
    };
    let snapshots = zxids("snapshot.");
    if snapshots.len() <= retain || retain == 0 {
        return Vec::new();
    }
    let oldest_kept = snapshots[snapshots.len() - retain].0;
    let logs = zxids("log.");
    let first_log_kept = logs
        .iter()
        .rev()
        .find(|(zxid, _)| *zxid <= oldest_kept)
        .map_or(0, |(zxid, _)| *zxid);
    let old_snapshots = snapshots.iter().filter(|(zxid, _)| *zxid < oldest_kept);
    let old_logs = logs.iter().filter(|(zxid, _)| *zxid < first_log_kept);
    old_snapshots
        .chain(old_logs)
        .map(|(_, name)| (*name).clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_newest_three_snapshots_are_kept_with_the_logs_after_the_oldest() {
        let dir = names(&[
            "log.1",
            "snapshot.0",
            "log.200",
            "snapshot.1f4",
            "log.3e8",
            "snapshot.400",
            "snapshot.5dc",
            "log.600",
            "snapshot.7d0",
            "acceptedEpoch",
        ]);
        let mut purged = purgeable(&dir, 3);
        purged.sort();
        // Kept: snapshots 0x400, 0x5dc, 0x7d0; log.3e8 (it holds the txns
        // after 0x400) and log.600.
        assert_eq!(
            purged,
            names(&["log.1", "log.200", "snapshot.0", "snapshot.1f4"])
        );
    }

    #[test]
    fn nothing_goes_while_three_snapshots_or_fewer_exist() {
        let dir = names(&[
            "log.1",
            "snapshot.0",
            "log.200",
            "snapshot.1f4",
            "snapshot.300",
        ]);
        assert!(purgeable(&dir, 3).is_empty());
    }

    #[test]
    fn a_log_starting_at_the_oldest_kept_snapshot_is_kept() {
        let dir = names(&[
            "log.1",
            "snapshot.1",
            "log.10",
            "snapshot.10",
            "snapshot.20",
            "snapshot.30",
        ]);
        assert_eq!(purgeable(&dir, 3), names(&["snapshot.1", "log.1"]));
    }
}
