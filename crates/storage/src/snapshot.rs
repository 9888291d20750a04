//! Snapshot files: an opaque, possibly multi-gigabyte payload tagged with the
//! caller's index, written atomically and verified before use.
//!
//! # Files
//!
//! `snap-<index>.snap` (16 hex digits), written as `snap-<index>.<n>.tmp` and
//! renamed once complete and synced. Format, integers little-endian:
//!
//! ```text
//! offset 0   8 bytes  SNAPSHOT_MAGIC ("PDKSNP", 0, format version 1)
//! offset 8   u64      index (must match the file name)
//! offset 16  payload
//! then       u64      payload length in bytes
//!            u32      crc32c of header and payload (everything before this trailer)
//!            4 bytes  TRAILER_MAGIC ("PDKT")
//! ```
//!
//! # Verification
//!
//! [`SnapshotStore::latest`] reads a candidate file once, in full, computing
//! the checksum as it goes; only if it verifies does it hand out a reader,
//! over the same open file rewound to the payload. So the caller never sees a
//! byte of a bad snapshot, at the price of reading each snapshot twice. A
//! leader sending its snapshot to a follower, and a server restoring its
//! tree at start, read it only once: [`SnapshotStore::latest_pieces`] and
//! [`SnapshotStore::pieces`] check the checksum as they hand the payload
//! out, in pieces or as one stream, and give the bytes that end the payload
//! only once the trailer matched (`snapshot_read`), so neither a follower
//! nor a restore takes a bad snapshot for whole. A snapshot pruned while
//! it is being read is removed, never written over (see below); the
//! reader sees it cut short, which the pieces report as an error.
//!
//! # The spare
//!
//! The newest snapshot pruned is renamed `snap.spare` rather than removed,
//! and the next snapshot is written over it, so that its page-cache pages
//! and disk blocks are used again (`snapshot_spare` says why and when).

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tracing::{debug, warn};

use crate::error::{io_context, StorageError};
use crate::fs::{parent_dir, FileSystem, StdFs};
use crate::removal::{self, RemovalPace};
use crate::snapshot_read::{self, Payload, SnapshotPieces};
use crate::snapshot_spare::{Spare, SPARE_NAME};
use crate::snapshot_write::{direct_after_bytes, ChecksummedWriter};

pub(crate) const SNAPSHOT_MAGIC: [u8; 8] = *b"PDKSNP\x00\x01";
pub(crate) const TRAILER_MAGIC: [u8; 4] = *b"PDKT";
pub(crate) const HEADER_BYTES: u64 = 16;
pub(crate) const TRAILER_BYTES: u64 = 16;
/// Buffer size for streaming snapshot payloads in and out.
pub(crate) const IO_BUFFER_BYTES: usize = 1 << 20;

/// A reader over a verified snapshot's payload (`Box<dyn Read + Send>`),
/// buffered; it ends exactly at the payload's end.
pub type SnapshotReader = Box<dyn Read + Send>;

fn snapshot_name(index: u64) -> String {
    format!("snap-{index:016x}.snap")
}

/// The index from a final snapshot file name.
fn parse_snapshot_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("snap-")?.strip_suffix(".snap")?;
    if hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        None
    }
}

/// The newest finished snapshot in `dir` (by index) and when its file was
/// last written, from the names alone: a look for reports, which neither
/// opens the store nor verifies the file.
pub fn newest_snapshot_in(dir: &Path) -> Option<(u64, std::time::SystemTime)> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let index = parse_snapshot_name(entry.file_name().to_str()?)?;
            Some((index, entry.metadata().ok()?.modified().ok()?))
        })
        .max_by_key(|(index, _)| *index)
}

fn is_temp_name(name: &str) -> bool {
    name.starts_with("snap-") && name.ends_with(".tmp")
}

/// A directory of snapshots. Safe to share between threads: a background
/// [`SnapshotStore::save`] may run while [`SnapshotStore::latest`] serves a
/// reader. Use one `SnapshotStore` per directory (opening one removes the
/// temp files of saves in progress).
#[derive(Debug)]
pub struct SnapshotStore {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    /// Makes temp file names unique among concurrent saves.
    temp_counter: AtomicU64,
    /// Where a snapshot being written stops going through the page cache.
    direct_after_bytes: u64,
    /// The pruned snapshot the next one is written over, and who reads
    /// which snapshot.
    spare: Arc<Spare>,
}

impl SnapshotStore {
    /// Opens (creating) the snapshot directory and removes temp files left by
    /// saves that a crash interrupted.
    pub fn open(dir: &Path) -> Result<SnapshotStore, StorageError> {
        Self::open_with(dir, Arc::new(StdFs))
    }

    /// [`SnapshotStore::open`] with an explicit file system.
    pub fn open_with(dir: &Path, fs: Arc<dyn FileSystem>) -> Result<SnapshotStore, StorageError> {
        fs.create_dir_all(dir).map_err(io_context(|| {
            format!("creating snapshot directory {}", dir.display())
        }))?;
        if let Some(parent) = parent_dir(dir) {
            fs.sync_dir(parent).map_err(io_context(|| {
                format!("syncing directory {}", parent.display())
            }))?;
        }
        let names = fs.list_dir(dir).map_err(io_context(|| {
            format!("listing snapshot directory {}", dir.display())
        }))?;
        let direct_after_bytes = direct_after_bytes();
        let store = SnapshotStore {
            dir: dir.to_path_buf(),
            fs,
            temp_counter: AtomicU64::new(0),
            direct_after_bytes,
            spare: Spare::new(names.iter().any(|n| n == SPARE_NAME), direct_after_bytes),
        };
        removal::remove_leftovers(store.fs.as_ref(), dir).map_err(io_context(|| {
            format!(
                "removing what an interrupted removal left in {}",
                dir.display()
            )
        }))?;
        let mut removed = false;
        for name in store.list()? {
            if is_temp_name(&name) {
                let path = dir.join(&name);
                debug!(file = %path.display(), "removing leftover snapshot temp file");
                store
                    .fs
                    .remove_file(&path)
                    .map_err(io_context(|| format!("removing {}", path.display())))?;
                removed = true;
            }
        }
        if removed {
            store.sync_dir()?;
        }
        Ok(store)
    }

    /// Writes the snapshot for `index` (caller's index space): `write` streams
    /// the payload into a temp file (the spare, if there is one, written
    /// over: `snapshot_spare`); then the trailer is appended, the file
    /// fsynced, renamed to its final name, and the directory fsynced.
    /// Finally only the newest `retain` snapshots (by index) are kept;
    /// `retain` 0 is taken as 1. Saving an index that exists replaces it.
    ///
    /// An error from `write`, or any I/O error, leaves no new snapshot (the
    /// temp file is removed if possible); older snapshots are untouched.
    pub fn save(
        &self,
        index: u64,
        retain: usize,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), StorageError> {
        self.save_with(index, retain, self.direct_after_bytes, write)
    }

    /// [`SnapshotStore::save`] for a snapshot nobody will read back soon:
    /// all of it bypasses the page cache where the file system allows, so
    /// writing it costs no CPU copying it there.
    pub fn save_uncached(
        &self,
        index: u64,
        retain: usize,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), StorageError> {
        self.save_with(index, retain, 0, write)
    }

    fn save_with(
        &self,
        index: u64,
        retain: usize,
        direct_after_bytes: u64,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), StorageError> {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = self.dir.join(format!("snap-{index:016x}.{n}.tmp"));
        let result = self.write_temp(&temp, index, direct_after_bytes, write);
        if let Err(e) = result {
            if let Err(rm) = self.fs.remove_file(&temp) {
                if rm.kind() != io::ErrorKind::NotFound {
                    warn!(file = %temp.display(), error = %rm, "could not remove snapshot temp file");
                }
            }
            return Err(e);
        }
        let path = self.path_of(index);
        self.fs.rename(&temp, &path).map_err(io_context(|| {
            format!("renaming {} to {}", temp.display(), path.display())
        }))?;
        self.sync_dir()?;
        debug!(file = %path.display(), index, "saved snapshot");
        self.prune(retain.max(1));
        Ok(())
    }

    /// Writes and fsyncs the complete temp file.
    fn write_temp(
        &self,
        temp: &Path,
        index: u64,
        direct_after_bytes: u64,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), StorageError> {
        let ctx = || format!("writing snapshot {}", temp.display());
        let spare = self.dir.join(SPARE_NAME);
        let (file, spare_len) = if self
            .spare
            .take(self.fs.as_ref(), &spare, temp)
            .map_err(io_context(ctx))?
        {
            let len = self
                .fs
                .open_read(temp)
                .and_then(|mut f| f.seek(SeekFrom::End(0)));
            (self.fs.open_write(temp), len.map_err(io_context(ctx))?)
        } else {
            (self.fs.create(temp), 0)
        };
        let mut file = file.map_err(io_context(ctx))?;
        let direct = self.fs.open_direct(temp).map_err(io_context(ctx))?;
        let mut out = ChecksummedWriter::new(file.as_mut(), direct, direct_after_bytes);
        out.write_all(&SNAPSHOT_MAGIC).map_err(io_context(ctx))?;
        out.write_all(&index.to_le_bytes())
            .map_err(io_context(ctx))?;
        write(&mut out).map_err(io_context(ctx))?;
        let payload_len = out.offset() - HEADER_BYTES;
        let mut trailer = [0u8; TRAILER_BYTES as usize];
        trailer[0..8].copy_from_slice(&payload_len.to_le_bytes());
        trailer[8..12].copy_from_slice(&out.crc().to_le_bytes());
        trailer[12..16].copy_from_slice(&TRAILER_MAGIC);
        out.write_all(&trailer).map_err(io_context(ctx))?;
        let len = out.offset();
        out.finish().map_err(io_context(ctx))?;
        // Written over the spare, the file may go on past the snapshot (the
        // tree shrank), and freeing that tail at once would hold up the
        // log's syncs as removing a whole file would (`removal`).
        removal::shrink_gradually(file.as_mut(), spare_len, len, &RemovalPace::default())
            .map_err(io_context(ctx))?;
        file.sync_all().map_err(io_context(|| {
            format!("fsync of snapshot {}", temp.display())
        }))
    }

    /// Removes all but the newest `retain` snapshots, keeping the newest of
    /// those as the spare if it may be. Failures only cost disk space, so
    /// they are logged, not returned.
    fn prune(&self, retain: usize) {
        let indices = match self.newest_first() {
            Ok(indices) => indices,
            Err(e) => {
                warn!(error = %e, "could not list snapshots to prune old ones");
                return;
            }
        };
        for index in indices.iter().skip(retain) {
            let path = self.path_of(*index);
            match self.keep_as_spare(*index, &path) {
                Ok(true) => {
                    debug!(file = %path.display(), "kept old snapshot as the spare");
                    continue;
                }
                Ok(false) => {}
                Err(e) => {
                    warn!(file = %path.display(), error = %e, "could not keep old snapshot as the spare")
                }
            }
            self.remove(*index);
        }
    }

    /// Removes every snapshot whose index `doomed` picks, none kept as the
    /// spare. Failures only cost disk space, so they are logged, not
    /// returned.
    pub fn remove_if(&self, doomed: impl Fn(u64) -> bool) {
        let indices = match self.snapshot_indices() {
            Ok(indices) => indices,
            Err(e) => {
                warn!(error = %e, "could not list snapshots to remove old ones");
                return;
            }
        };
        for index in indices.into_iter().filter(|&index| doomed(index)) {
            self.remove(index);
        }
    }

    fn remove(&self, index: u64) {
        let path = self.path_of(index);
        match removal::remove_gradually(self.fs.as_ref(), &self.dir, &path, &RemovalPace::default())
        {
            Ok(()) => debug!(file = %path.display(), "removed old snapshot"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                warn!(file = %path.display(), error = %e, "could not remove old snapshot")
            }
        }
    }

    /// Makes the pruned snapshot at `index` the spare, if it may be.
    fn keep_as_spare(&self, index: u64, path: &Path) -> io::Result<bool> {
        let bytes = self.fs.open_read(path)?.seek(SeekFrom::End(0))?;
        self.spare
            .keep(self.fs.as_ref(), &self.dir, path, index, bytes)
    }

    /// The newest snapshot that verifies, as (index in the caller's index
    /// space, reader over its payload only). A newest snapshot that fails
    /// verification is skipped with a warning and the next older one tried;
    /// the caller must then check that its log still reaches back to the
    /// older index. `Ok(None)` if there is no snapshot at all; if there are
    /// some and none verifies, the error of the newest is returned (starting
    /// from nothing would silently lose state).
    pub fn latest(&self) -> Result<Option<(u64, SnapshotReader)>, StorageError> {
        let mut newest_error = None;
        for index in self.newest_first()? {
            match self.verified(index) {
                Ok(payload) => return Ok(Some((index, payload.buffered()))),
                Err(e) => {
                    warn!(error = %e, "snapshot failed verification; trying an older one");
                    newest_error.get_or_insert(e);
                }
            }
        }
        match newest_error {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// The newest snapshot, as (index, its payload in pieces, checked as
    /// they are read: see [`SnapshotPieces`]); `Ok(None)` if there is
    /// none. Unlike [`SnapshotStore::latest`] it reads the file only once,
    /// and never falls back to an older snapshot.
    pub fn latest_pieces(&self) -> Result<Option<(u64, SnapshotPieces)>, StorageError> {
        let Some(index) = self.snapshot_indices()?.into_iter().max() else {
            return Ok(None);
        };
        self.pieces(index).map(|pieces| Some((index, pieces)))
    }

    /// The indices of the snapshots there are, newest first: the order a
    /// server restoring through [`SnapshotStore::pieces`] tries them in.
    pub fn newest_first(&self) -> Result<Vec<u64>, StorageError> {
        let mut indices = self.snapshot_indices()?;
        indices.sort_unstable_by(|a, b| b.cmp(a));
        Ok(indices)
    }

    /// The snapshot at `index` (one [`SnapshotStore::newest_first`] gave),
    /// its header checked and its payload checked as it is read: see
    /// [`SnapshotPieces`]. Unlike [`SnapshotStore::latest`], nothing but
    /// the header is checked before the first byte, so a caller that
    /// builds on the bytes keeps nothing until it read them to the end.
    pub fn pieces(&self, index: u64) -> Result<SnapshotPieces, StorageError> {
        let path = self.path_of(index);
        snapshot_read::pieces(self.fs.as_ref(), &path, index, self.spare.reading(index))
    }

    /// The file the snapshot at `index` is kept in, for messages.
    pub fn path_of(&self, index: u64) -> PathBuf {
        self.dir.join(snapshot_name(index))
    }

    /// The snapshot at `index`, verified, or `Ok(None)` if there is none
    /// (never taken, or pruned since).
    pub fn at(&self, index: u64) -> Result<Option<SnapshotReader>, StorageError> {
        if !self.snapshot_indices()?.contains(&index) {
            return Ok(None);
        }
        self.verified(index).map(|payload| Some(payload.buffered()))
    }

    fn verified(&self, index: u64) -> Result<Payload, StorageError> {
        let path = self.path_of(index);
        snapshot_read::verified(self.fs.as_ref(), &path, index, self.spare.reading(index))
    }

    fn list(&self) -> Result<Vec<String>, StorageError> {
        self.fs.list_dir(&self.dir).map_err(io_context(|| {
            format!("listing snapshot directory {}", self.dir.display())
        }))
    }

    fn snapshot_indices(&self) -> Result<Vec<u64>, StorageError> {
        Ok(self
            .list()?
            .iter()
            .filter_map(|n| parse_snapshot_name(n))
            .collect())
    }

    fn sync_dir(&self) -> Result<(), StorageError> {
        self.fs.sync_dir(&self.dir).map_err(io_context(|| {
            format!("syncing snapshot directory {}", self.dir.display())
        }))
    }

    /// The directory holding the snapshots.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(snapshot_name(255), "snap-00000000000000ff.snap");
        assert_eq!(parse_snapshot_name("snap-00000000000000ff.snap"), Some(255));
        assert_eq!(parse_snapshot_name("snap-00000000000000ff.3.tmp"), None);
        assert!(is_temp_name("snap-00000000000000ff.3.tmp"));
    }

    /// On a file system with direct writes, the part past the threshold
    /// takes them; on one without, all of it goes through the page cache.
    #[test]
    fn a_snapshot_written_partly_past_the_page_cache_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SnapshotStore::open(dir.path()).unwrap();
        store.direct_after_bytes = 1 << 20;
        let payload: Vec<u8> = (0..5_000_017u32).map(|i| (i % 251) as u8).collect();
        store.save(7, 1, |out| out.write_all(&payload)).unwrap();

        let (index, mut reader) = store.latest().unwrap().expect("a snapshot");
        assert_eq!(index, 7);
        let mut read = Vec::new();
        reader.read_to_end(&mut read).unwrap();
        assert!(read == payload, "the payload reads back as written");
    }

    /// A snapshot larger than the page cache keeps of one is removed when
    /// pruned, not kept as the spare: writing over it would save nothing
    /// past that point, and it would cost a snapshot's worth of disk.
    #[test]
    fn a_pruned_snapshot_past_the_page_cached_size_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SnapshotStore::open(dir.path()).unwrap();
        store.spare = Spare::new(false, 1 << 20);
        let spare = dir.path().join(SPARE_NAME);
        let save = |index, len| {
            store
                .save(index, 1, |out| out.write_all(&vec![7; len]))
                .unwrap()
        };
        save(1, 2 << 20);
        save(2, 1000);
        assert!(!spare.exists(), "a large snapshot was kept as the spare");
        save(3, 1000);
        assert!(spare.exists(), "a small snapshot was not kept as the spare");
    }
}
