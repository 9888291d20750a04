//! Fault injection through the file seam: failed fsyncs, writes cut short,
//! a full disk.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use storage::{
    FileSystem, ReadableFile, RecoveryMode, SnapshotStore, StdFs, StorageError, Wal, WalOptions,
    WritableFile,
};

/// Switches a test flips; shared by the file system and its open files.
#[derive(Debug, Default)]
struct Faults {
    fail_sync_data: AtomicBool,
    /// `fdatasync` calls that reached the file.
    data_syncs: AtomicUsize,
    fail_sync_all: AtomicBool,
    /// The next write stores only this many bytes, then fails.
    short_write: Mutex<Option<usize>>,
    /// No space left: reserving fails, and so does a write beyond the space
    /// its file reserved (after storing half its bytes), with ENOSPC.
    disk_full: AtomicBool,
}

impl Faults {
    fn check_space(&self) -> io::Result<()> {
        if self.disk_full.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct FaultyFs {
    faults: Arc<Faults>,
}

#[derive(Debug)]
struct FaultyFile {
    inner: Box<dyn WritableFile>,
    faults: Arc<Faults>,
    /// Bytes of disk reserved by `allocate`.
    reserved: u64,
}

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} failure"))
}

impl WritableFile for FaultyFile {
    fn write_all_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        if offset + buf.len() as u64 > self.reserved {
            if let Err(full) = self.faults.check_space() {
                self.inner.write_all_at(offset, &buf[..buf.len() / 2])?;
                return Err(full);
            }
        }
        let short = self.faults.short_write.lock().expect("lock").take();
        match short {
            Some(n) => {
                self.inner.write_all_at(offset, &buf[..n.min(buf.len())])?;
                Err(injected("write"))
            }
            None => self.inner.write_all_at(offset, buf),
        }
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    fn allocate(&mut self, len: u64) -> io::Result<()> {
        self.faults.check_space()?;
        self.inner.allocate(len)?;
        self.reserved = self.reserved.max(len);
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        if self.faults.fail_sync_data.load(Ordering::SeqCst) {
            return Err(injected("fdatasync"));
        }
        self.faults.data_syncs.fetch_add(1, Ordering::SeqCst);
        self.inner.sync_data()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        if self.faults.fail_sync_all.load(Ordering::SeqCst) {
            return Err(injected("fsync"));
        }
        self.inner.sync_all()
    }

    fn try_clone(&self) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(FaultyFile {
            inner: self.inner.try_clone()?,
            faults: self.faults.clone(),
            reserved: self.reserved,
        }))
    }
}

impl FileSystem for FaultyFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        StdFs.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        StdFs.list_dir(dir)
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadableFile>> {
        StdFs.open_read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(FaultyFile {
            inner: StdFs.create(path)?,
            faults: self.faults.clone(),
            reserved: 0,
        }))
    }
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(FaultyFile {
            inner: StdFs.open_write(path)?,
            faults: self.faults.clone(),
            reserved: 0,
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        StdFs.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        StdFs.remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        StdFs.sync_dir(dir)
    }
}

fn open_faulty(dir: &Path) -> (Wal, Arc<Faults>) {
    open_faulty_with(dir, WalOptions::default())
}

fn open_faulty_with(dir: &Path, options: WalOptions) -> (Wal, Arc<Faults>) {
    let fs = Arc::new(FaultyFs::default());
    let faults = fs.faults.clone();
    let (wal, _) =
        Wal::open_with(dir, options, RecoveryMode::TolerateTailCorruption, fs).expect("open");
    (wal, faults)
}

fn append_range(wal: &mut Wal, range: std::ops::RangeInclusive<u64>) -> Result<(), StorageError> {
    let payloads: Vec<(u64, Vec<u8>)> = range.map(|i| (i, vec![i as u8; 40])).collect();
    let batch: Vec<(u64, &[u8])> = payloads.iter().map(|(i, p)| (*i, p.as_slice())).collect();
    wal.append(&batch).map(drop)
}

fn recovered_indices(dir: &Path) -> Vec<u64> {
    let (_, records) = Wal::open(dir, WalOptions::default()).expect("reopen");
    records.iter().map(|r| r.index).collect()
}

#[test]
fn a_failed_fdatasync_is_returned_and_poisons_the_log() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, faults) = open_faulty(tmp.path());
    append_range(&mut wal, 1..=5).expect("append");
    wal.sync().expect("sync");
    append_range(&mut wal, 6..=10).expect("append");
    faults.fail_sync_data.store(true, Ordering::SeqCst);
    let err = wal.sync().expect_err("sync must fail");
    assert!(
        matches!(&err, StorageError::Io { context, .. } if context.contains("fdatasync")),
        "{err:?}"
    );
    // No retry may pretend the data is durable now.
    faults.fail_sync_data.store(false, Ordering::SeqCst);
    assert!(matches!(wal.sync(), Err(StorageError::Poisoned { .. })));
    assert!(matches!(
        append_range(&mut wal, 11..=11),
        Err(StorageError::Poisoned { .. })
    ));
    assert!(matches!(
        wal.release_through(100),
        Err(StorageError::Poisoned { .. })
    ));
    drop(wal);
    // What was synced survives (here the page cache still had the rest too).
    let indices = recovered_indices(tmp.path());
    assert_eq!(&indices[..5], &[1, 2, 3, 4, 5]);
}

#[test]
fn a_failed_sync_on_another_thread_poisons_the_log() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, faults) = open_faulty(tmp.path());
    append_range(&mut wal, 1..=5).expect("append");
    let pending = wal.start_sync().expect("start").expect("something to sync");
    faults.fail_sync_data.store(true, Ordering::SeqCst);
    let err = std::thread::spawn(move || pending.finish())
        .join()
        .expect("the syncing thread")
        .expect_err("sync must fail");
    assert!(
        matches!(&err, StorageError::Io { context, .. } if context.contains("fdatasync")),
        "{err:?}"
    );
    faults.fail_sync_data.store(false, Ordering::SeqCst);
    assert!(matches!(
        append_range(&mut wal, 6..=6),
        Err(StorageError::Poisoned { .. })
    ));
    assert!(matches!(
        wal.start_sync(),
        Err(StorageError::Poisoned { .. })
    ));
}

#[test]
fn a_sync_handed_out_and_not_finished_is_not_taken_for_done() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, faults) = open_faulty_with(
        tmp.path(),
        WalOptions {
            segment_bytes: 4096,
            preallocate: true,
        },
    );
    let syncs = || faults.data_syncs.load(Ordering::SeqCst);
    append_range(&mut wal, 1..=5).expect("append");
    let _unfinished = wal.start_sync().expect("start").expect("something to sync");
    assert!(
        wal.start_sync().expect("start").is_none(),
        "nothing new since"
    );
    // The handed-out sync may not have run: a sync here must not skip it.
    let before = syncs();
    wal.sync().expect("sync");
    assert_eq!(syncs(), before + 1);
    wal.sync().expect("sync");
    assert_eq!(syncs(), before + 1, "nothing left to sync");
    // Nor may a roll seal a segment whose handed-out sync has not run.
    append_range(&mut wal, 6..=10).expect("append");
    let _unfinished = wal.start_sync().expect("start").expect("something to sync");
    let before = syncs();
    let too_big_for_the_rest = vec![7u8; 5000];
    wal.append(&[(11, &too_big_for_the_rest[..])])
        .expect("append into a new segment");
    assert_eq!(wal.segment_count(), 2);
    assert!(
        syncs() > before,
        "the sealed segment was synced when it rolled"
    );
}

#[test]
fn a_write_cut_short_poisons_the_log_and_recovery_truncates_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, faults) = open_faulty(tmp.path());
    append_range(&mut wal, 1..=5).expect("append");
    wal.sync().expect("sync");
    // 30 bytes: the next record's header and part of its payload.
    *faults.short_write.lock().expect("lock") = Some(30);
    assert!(matches!(
        append_range(&mut wal, 6..=10),
        Err(StorageError::Io { .. })
    ));
    assert!(matches!(wal.sync(), Err(StorageError::Poisoned { .. })));
    drop(wal);

    assert_eq!(recovered_indices(tmp.path()), vec![1, 2, 3, 4, 5]);
    let (mut wal, _) = open_faulty(tmp.path());
    append_range(&mut wal, 6..=7).expect("append");
    wal.sync().expect("sync");
    drop(wal);
    assert_eq!(recovered_indices(tmp.path()), vec![1, 2, 3, 4, 5, 6, 7]);
}

/// The log as its reader must take it: a record supersedes every earlier
/// one with an index at or above its own.
fn latest_indices(dir: &Path) -> Vec<u64> {
    let mut log: Vec<u64> = Vec::new();
    for index in recovered_indices(dir) {
        log.retain(|&earlier| earlier < index);
        log.push(index);
    }
    log
}

#[test]
fn a_full_disk_fails_the_append_and_a_repeat_once_space_is_back_keeps_every_record() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Small, reserved segments: the batch written while the disk is full
    // fills the active one and fails to start the next.
    let options = WalOptions {
        segment_bytes: 4096,
        preallocate: true,
    };
    let (mut wal, faults) = open_faulty_with(tmp.path(), options);
    append_range(&mut wal, 1..=50).expect("append");
    wal.sync().expect("sync");

    faults.disk_full.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        let err = append_range(&mut wal, 51..=200).expect_err("the disk is full");
        assert!(matches!(&err, StorageError::NoSpace { .. }), "{err:?}");
        assert!(err.to_string().contains("free space"), "{err}");
    }
    faults.disk_full.store(false, Ordering::SeqCst);
    append_range(&mut wal, 51..=200).expect("space is back");
    wal.sync().expect("sync");
    append_range(&mut wal, 201..=210).expect("append");
    wal.sync().expect("sync");
    drop(wal);
    assert_eq!(latest_indices(tmp.path()), (1..=210).collect::<Vec<_>>());
}

#[test]
fn a_full_disk_within_a_segment_leaves_a_torn_record_that_a_repeat_overwrites() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Without reserved space the write itself fails, half done.
    let options = WalOptions {
        preallocate: false,
        ..WalOptions::default()
    };
    let (mut wal, faults) = open_faulty_with(tmp.path(), options);
    append_range(&mut wal, 1..=5).expect("append");
    wal.sync().expect("sync");
    faults.disk_full.store(true, Ordering::SeqCst);
    assert!(matches!(
        append_range(&mut wal, 6..=10),
        Err(StorageError::NoSpace { .. })
    ));
    faults.disk_full.store(false, Ordering::SeqCst);
    append_range(&mut wal, 6..=10).expect("space is back");
    wal.sync().expect("sync");
    drop(wal);
    assert_eq!(recovered_indices(tmp.path()), (1..=10).collect::<Vec<_>>());
}

#[test]
fn a_too_large_record_is_refused_without_poisoning() {
    // Built from a zeroed allocation the OS hands out lazily, so the test does
    // not touch a gigabyte of memory.
    let big = vec![0u8; storage::RECORD_PAYLOAD_BYTES_MAX + 1];
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open_faulty(tmp.path());
    let err = wal
        .append(&[(1, b"ok".as_slice()), (2, big.as_slice())])
        .expect_err("too large");
    assert!(matches!(err, StorageError::RecordTooLarge { index: 2, .. }));
    drop(big);
    wal.append(&[(1, b"ok".as_slice())]).expect("append");
    wal.sync().expect("sync");
    drop(wal);
    assert_eq!(recovered_indices(tmp.path()), vec![1]);
}

#[test]
fn a_failed_snapshot_fsync_is_returned_and_leaves_the_old_snapshot() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(FaultyFs::default());
    let faults = fs.faults.clone();
    let store = SnapshotStore::open_with(tmp.path(), fs).expect("open");
    store.save(1, 2, |out| out.write_all(b"one")).expect("save");
    faults.fail_sync_all.store(true, Ordering::SeqCst);
    let err = store
        .save(2, 2, |out| out.write_all(b"two"))
        .expect_err("fsync fails");
    assert!(
        matches!(&err, StorageError::Io { context, .. } if context.contains("fsync")),
        "{err:?}"
    );
    let files: Vec<_> = std::fs::read_dir(tmp.path()).expect("read_dir").collect();
    assert_eq!(files.len(), 1, "only the first snapshot, no temp file");
    let (index, _) = store.latest().expect("latest").expect("some");
    assert_eq!(index, 1);
}
