//! Removing large files without stalling the log's syncs.
//!
//! Unlinking a file frees all its blocks in one journal transaction, and
//! the commit that carries it takes time in proportion; on a file system
//! mounted with `discard` (as this machine's root is, and many cloud
//! disks) it also discards them all. Every `fdatasync` of the log waits
//! for that commit: removing a snapshot of about 1 GB held a log sync for
//! 150-220 ms, and so every write. So a file is first renamed out of the
//! way (its removal durable once the directory is synced), then truncated
//! a step at a time with a pause after each, and only then unlinked, as
//! RocksDB's `DeleteScheduler` truncates in chunks for the same reason.
//!
//! The pauses protect a running log's syncs and nothing else, so a
//! [`RemovalPace`] can drop them: when a server shuts down, its pending
//! removals of a big log (3.4 GB of segments after a snapshot among 8 GB of
//! data) held the shutdown for about 7 s at 400 MB/s, where unlinking them
//! outright takes under a second here.
//!
//! A crash midway leaves a file ending in [`REMOVING_SUFFIX`], which
//! [`remove_leftovers`] deletes when the directory is opened again, without
//! pauses: nothing is syncing yet.

use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tracing::debug;

use crate::fs::{FileSystem, WritableFile};

/// Appended to the name of a file being removed.
pub(crate) const REMOVING_SUFFIX: &str = ".removing";
/// Bytes freed per truncation. With 8 MB steps the log's syncs still took
/// 50-60 ms while a segment was freed; with 2 MB no probe of `paddock
/// bench statesize` waited 40 ms during a removal.
const FREE_STEP_BYTES: u64 = 2 << 20;
/// The pause after each truncation, so log syncs commit in between: at
/// most 400 MB freed per second.
const FREE_STEP_PAUSE: Duration = Duration::from_millis(5);

/// Whether removals pause after each step. Clones share the setting, so
/// the thread that stops a log can hurry the removals another thread is
/// running.
#[derive(Debug, Clone, Default)]
pub struct RemovalPace {
    hurried: Arc<AtomicBool>,
}

impl RemovalPace {
    /// A pace without pauses from the start.
    pub fn hurried() -> Self {
        let pace = Self::default();
        pace.hurry();
        pace
    }

    /// From now on, removals under this pace (and its clones) no longer
    /// pause: no log sync is left to commit between their steps.
    pub fn hurry(&self) {
        self.hurried.store(true, Ordering::Release);
    }

    fn pause(&self) {
        if !self.hurried.load(Ordering::Acquire) {
            thread::sleep(FREE_STEP_PAUSE);
        }
    }
}

/// Removes `path` from `dir`: durably at once, then its blocks gradually.
/// Blocks the calling thread for about 5 ms per 2 MB of the file, unless
/// `pace` is hurried.
///
/// A reader that has the file open sees it shrink, unlike after a plain
/// unlink: a snapshot still being sent when it is pruned fails to send,
/// and raft sends the newest instead.
pub(crate) fn remove_gradually(
    fs: &dyn FileSystem,
    dir: &Path,
    path: &Path,
    pace: &RemovalPace,
) -> io::Result<()> {
    let removing = removing_path(path);
    fs.rename(path, &removing)?;
    fs.sync_dir(dir)?;
    free_gradually(fs, &removing, pace)
}

/// Deletes the files a removal left behind in `dir` when it was cut short.
pub(crate) fn remove_leftovers(fs: &dyn FileSystem, dir: &Path) -> io::Result<()> {
    for name in fs.list_dir(dir)? {
        if name.ends_with(REMOVING_SUFFIX) {
            let path = dir.join(&name);
            debug!(file = %path.display(), "removing a file an interrupted removal left");
            free_gradually(fs, &path, &RemovalPace::hurried())?;
        }
    }
    Ok(())
}

fn removing_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(REMOVING_SUFFIX);
    PathBuf::from(name)
}

/// Truncates `path` a step at a time, then unlinks it.
fn free_gradually(fs: &dyn FileSystem, path: &Path, pace: &RemovalPace) -> io::Result<()> {
    let len = fs.open_read(path)?.seek(SeekFrom::End(0))?;
    if len > FREE_STEP_BYTES {
        shrink_gradually(fs.open_write(path)?.as_mut(), len, FREE_STEP_BYTES, pace)?;
    }
    fs.remove_file(path)
}

/// Cuts `file` from `len` bytes down to `to`, a step at a time, so that
/// the blocks freed never make one long journal commit that a log sync
/// would wait for. Blocks the calling thread for about 5 ms per 2 MB cut,
/// unless `pace` is hurried.
pub(crate) fn shrink_gradually(
    file: &mut dyn WritableFile,
    mut len: u64,
    to: u64,
    pace: &RemovalPace,
) -> io::Result<()> {
    while len > to {
        len = len.saturating_sub(FREE_STEP_BYTES).max(to);
        file.set_len(len)?;
        pace.pause();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::StdFs;

    #[test]
    fn a_large_file_is_renamed_then_freed_and_a_leftover_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![1u8; 3 * FREE_STEP_BYTES as usize + 5]).unwrap();
        remove_gradually(&StdFs, dir.path(), &big, &RemovalPace::default()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let leftover = dir.path().join(format!("wal-1.log{REMOVING_SUFFIX}"));
        std::fs::write(&leftover, b"half removed").unwrap();
        std::fs::write(dir.path().join("kept"), b"").unwrap();
        remove_leftovers(&StdFs, dir.path()).unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["kept"]);
    }

    #[test]
    fn a_file_shrunk_gradually_ends_at_its_new_length_with_its_start_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spare");
        let bytes: Vec<u8> = (0..5 * FREE_STEP_BYTES + 3).map(|i| i as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let mut file = StdFs.open_write(&path).unwrap();
        shrink_gradually(
            file.as_mut(),
            bytes.len() as u64,
            1000,
            &RemovalPace::default(),
        )
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes[..1000]);
        // Growing is not its job: a file already short enough is left be.
        shrink_gradually(file.as_mut(), 1000, 5000, &RemovalPace::default()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1000);
    }

    /// The lengths a file is cut to, in order.
    #[derive(Debug, Default)]
    struct Cuts(Vec<u64>);

    impl WritableFile for Cuts {
        fn write_all_at(&mut self, _: u64, _: &[u8]) -> io::Result<()> {
            unreachable!("shrinking writes nothing")
        }
        fn set_len(&mut self, len: u64) -> io::Result<()> {
            self.0.push(len);
            Ok(())
        }
        fn allocate(&mut self, _: u64) -> io::Result<()> {
            unreachable!("shrinking allocates nothing")
        }
        fn sync_data(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn sync_all(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn try_clone(&self) -> io::Result<Box<dyn WritableFile>> {
            unreachable!("shrinking needs one handle")
        }
    }

    #[test]
    fn a_hurried_pace_shrinks_without_pausing() {
        // 400 steps: two seconds of pauses at the gradual pace.
        let steps = 400;
        let mut cuts = Cuts::default();
        let started = std::time::Instant::now();
        shrink_gradually(
            &mut cuts,
            steps * FREE_STEP_BYTES,
            0,
            &RemovalPace::hurried(),
        )
        .unwrap();
        assert_eq!(
            cuts.0.len() as u64,
            steps,
            "the same cuts, a step at a time"
        );
        let took = started.elapsed();
        assert!(
            took < FREE_STEP_PAUSE * steps as u32 / 4,
            "hurried, {steps} steps took {took:?}"
        );
    }

    #[test]
    fn hurrying_a_clone_hurries_the_original() {
        let pace = RemovalPace::default();
        let started = std::time::Instant::now();
        pace.clone().hurry();
        for _ in 0..400 {
            pace.pause();
        }
        assert!(started.elapsed() < FREE_STEP_PAUSE * 100);
    }

    #[test]
    fn a_file_is_shrunk_at_most_a_step_at_a_time() {
        let mut cuts = Cuts::default();
        shrink_gradually(
            &mut cuts,
            3 * FREE_STEP_BYTES + 7,
            100,
            &RemovalPace::default(),
        )
        .unwrap();
        assert_eq!(cuts.0, [2 * FREE_STEP_BYTES + 7, FREE_STEP_BYTES + 7, 100]);
    }
}
