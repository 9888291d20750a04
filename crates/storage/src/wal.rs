//! The write-ahead log: opaque records tagged with a caller-chosen `u64`
//! index, in a sequence of segment files, made durable by group commit.
//!
//! # Files
//!
//! `wal-<seq>-<first>.log`, both 16 hex digits: `seq` numbers segments in
//! append order (1, 2, 3, ... with no gaps; recovery refuses a gap, because a
//! missing middle segment means lost records), `first` is the index of the
//! first record written to the segment, for operators. Order comes from `seq`,
//! not from indices, because indices may go backwards (see below). The record
//! format is described in the `record` module.
//!
//! # Durability
//!
//! [`Wal::append`] writes to the kernel (one `pwrite` per call, two when the
//! batch crosses into a new segment); [`Wal::sync`] makes everything appended
//! so far durable with one `fdatasync`. [`Wal::start_sync`] hands that
//! `fdatasync` to another thread as a [`PendingSync`], so the writer can go
//! on appending (and its caller on heartbeating) while the disk is slow.
//! Rolling to a new segment first
//! `fdatasync`s the old one, so a segment other than the last is always
//! complete on disk — which is what lets recovery call any damage in it
//! corruption. New segments are preallocated with `fallocate` (so a full disk
//! shows when a segment starts, not in the middle of one; `set_len`, sparse,
//! where the file system cannot reserve space) and their directory entry is
//! synced before use; removed
//! segments are unlinked one at a time, oldest first, each followed by a
//! directory sync, so a crash never leaves a gap.
//!
//! After any failed write or fsync the `Wal` is poisoned: every later call
//! returns [`StorageError::Poisoned`]. (After a failed fsync Linux may already
//! have dropped the dirty pages, so retrying could report durability falsely.)
//! A full disk is the exception: an append that fails with
//! [`StorageError::NoSpace`] wrote nothing that a repeat of it (same records)
//! would not write again at the same place, so the log stays usable and the
//! caller repeats the append once space is freed.
//!
//! # Repeated indices
//!
//! Storage does not interpret indices. The caller may append an index lower
//! than or equal to one already written (rewriting a suffix after a conflict):
//! both stay in the log and [`Wal::open`] returns both, in append order. The
//! caller resolves them; the rule that matches Raft is "a record with index
//! `i` supersedes every earlier-appended record with index `>= i`".
//! [`Wal::release_through`] deletes only a prefix of segments, so a rewrite is
//! never deleted while the records it superseded survive.
//!
//! # Recovery
//!
//! See [`RecoveryMode`]. In short: a damaged record at the very end of the
//! last segment, with nothing valid after it, is a write that a crash cut
//! short (it was never synced, so never acknowledged): it is truncated with a
//! warning. Any other damage is [`StorageError::Corrupt`] and nothing is
//! modified.
//!
//! Known limit: if the pages of an unsynced batch reach the disk out of order
//! before a crash, the batch can show a hole followed by valid records; that
//! is indistinguishable from corruption of synced data and is reported as
//! `Corrupt` (safe, but needs the operator).

use std::collections::VecDeque;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tracing::{debug, warn};

use crate::error::{io_context, write_context, StorageError};
use crate::fs::{parent_dir, FileSystem, StdFs, WritableFile};
use crate::record::{
    self, Payload, RECORD_HEADER_BYTES, RECORD_PAYLOAD_BYTES_MAX, SEGMENT_HEADER_BYTES,
    SEGMENT_MAGIC,
};
use crate::removal::{self, RemovalPace};
use crate::wal_read::{RecordLocation, SegmentPaths, WalReader};

/// Tuning of a [`Wal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalOptions {
    /// A new segment is started when the next record would take the active
    /// one past this many bytes (a record larger than this gets a segment of
    /// its own). Default 64 MiB.
    pub segment_bytes: u64,
    /// Extend each new segment to `segment_bytes` when creating it, so appends
    /// do not grow the file. Default true.
    pub preallocate: bool,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_bytes: 64 << 20,
            preallocate: true,
        }
    }
}

/// What [`Wal::open`] does with a record that fails verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// The policy Paddock runs with. In the last segment, a bad record (cut
    /// short, or failing its checksum) after which no valid record exists is
    /// a torn write: the segment is truncated at the bad record's offset, the
    /// file is synced, and a warning names file and offset. A bad record that
    /// is followed by a valid one, or that sits in any other segment, is
    /// [`StorageError::Corrupt`].
    #[default]
    TolerateTailCorruption,
    /// Any bad record, even a torn tail, is [`StorageError::Corrupt`]; nothing
    /// is modified. For offline checks.
    AbsoluteConsistency,
}

/// One record as recovered by [`Wal::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// The index the caller appended the record with (the caller's index space).
    pub index: u64,
    /// The payload; shares memory with the other payloads of its segment.
    pub payload: Bytes,
    /// Where it lies, for reading it again with a [`WalReader`].
    pub location: RecordLocation,
}

/// A segment that will not be written again; all its records are durable.
#[derive(Debug)]
struct SealedSegment {
    seq: u64,
    path: PathBuf,
    /// The largest index among its records (caller's index space); `None` if
    /// it holds none.
    max_index: Option<u64>,
}

/// The segment appends go to.
#[derive(Debug)]
struct ActiveSegment {
    seq: u64,
    path: PathBuf,
    file: Box<dyn WritableFile>,
    /// Byte offset in the file where the next record goes.
    write_offset: u64,
    /// The largest index among its records (caller's index space).
    max_index: Option<u64>,
    /// Bytes were written since a sync of them last started (here or in a
    /// [`PendingSync`]).
    unsynced: bool,
    /// A [`PendingSync`] was handed out since the last sync here, and may
    /// not have finished.
    sync_handed_out: bool,
}

impl ActiveSegment {
    fn has_records(&self) -> bool {
        self.write_offset > SEGMENT_HEADER_BYTES as u64
    }
}

/// A segmented write-ahead log. See the module docs for the contract.
#[derive(Debug)]
pub struct Wal {
    dir: PathBuf,
    opts: WalOptions,
    fs: Arc<dyn FileSystem>,
    /// Oldest first; each is complete and synced.
    sealed: VecDeque<SealedSegment>,
    /// `None` until the first append after opening an empty log.
    active: Option<ActiveSegment>,
    /// Sequence number the next new segment gets.
    next_seq: u64,
    /// Index of the most recently appended (or, after open, recovered) record.
    last_index: Option<u64>,
    /// Encoding buffer, reused across appends.
    pending: Vec<u8>,
    /// Set by any failed write or sync, here or in a [`PendingSync`].
    poisoned: Arc<AtomicBool>,
    /// Every segment file now in the log, for readers.
    paths: SegmentPaths,
}

/// A segment file found on disk.
struct FoundSegment {
    seq: u64,
    path: PathBuf,
}

fn segment_name(seq: u64, first_index: u64) -> String {
    format!("wal-{seq:016x}-{first_index:016x}.log")
}

/// `(seq, first_index)` from a segment file name.
fn parse_segment_name(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    let (seq, first) = rest.split_once('-')?;
    let hex16 = |s: &str| {
        if s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            u64::from_str_radix(s, 16).ok()
        } else {
            None
        }
    };
    Some((hex16(seq)?, hex16(first)?))
}

/// What [`load_segment`] learned from one file.
struct LoadedSegment {
    records: Vec<WalRecord>,
    /// Byte offset just past the last valid record (or of the segment header).
    valid_end: u64,
    file_len: u64,
    /// A torn tail must be cut at `valid_end`.
    torn: bool,
}

fn corrupt(path: &Path, offset: u64, reason: String) -> StorageError {
    StorageError::Corrupt {
        file: path.to_path_buf(),
        offset,
        reason,
    }
}

/// Reads the whole segment at `path` into `buf`'s memory, which the
/// returned bytes then own; [`reclaim`] gives it back once no record of the
/// segment is kept. A fresh buffer for each segment had the kernel make
/// (and zero) 64 MiB of new pages each time: after a bulk load of 10M
/// znodes, 1.1 GB of them, most of the time opening the log took.
fn read_segment(
    fs: &dyn FileSystem,
    path: &Path,
    buf: &mut BytesMut,
) -> Result<Bytes, StorageError> {
    let ctx = || format!("reading WAL segment {}", path.display());
    let mut file = fs.open_read(path).map_err(io_context(ctx))?;
    let len = file.seek(SeekFrom::End(0)).map_err(io_context(ctx))?;
    file.rewind().map_err(io_context(ctx))?;
    let len = usize::try_from(len).map_err(|_| corrupt(path, 0, "larger than memory".into()))?;
    buf.clear();
    buf.resize(len, 0);
    std::io::Read::read_exact(&mut file, &mut buf[..]).map_err(io_context(ctx))?;
    Ok(std::mem::take(buf).freeze())
}

/// The memory of a segment read by [`read_segment`], if none of its records
/// is kept any more.
fn reclaim(segment: Bytes) -> BytesMut {
    segment.try_into_mut().unwrap_or_default()
}

/// Verifies one segment's bytes and extracts its records, applying the
/// recovery policy. Modifies nothing.
fn load_segment(
    seq: u64,
    path: &Path,
    buf: &Bytes,
    is_last: bool,
    mode: RecoveryMode,
) -> Result<LoadedSegment, StorageError> {
    let file_len = buf.len() as u64;
    if buf.get(..SEGMENT_HEADER_BYTES) != Some(&SEGMENT_MAGIC[..]) {
        // A crash right after creating the last segment can leave it without
        // its header, but then it holds nothing at all.
        if is_last && buf.iter().all(|&b| b == 0) {
            return Ok(LoadedSegment {
                records: Vec::new(),
                valid_end: 0,
                file_len,
                torn: false,
            });
        }
        return Err(corrupt(
            path,
            0,
            "missing or unknown segment header (not a Paddock WAL segment, or written by an \
             incompatible version)"
                .to_string(),
        ));
    }
    let scan = record::scan(buf, SEGMENT_HEADER_BYTES);
    let valid_end = scan.valid_end as u64;
    let torn = match scan.bad {
        None => false,
        Some((reason, resume)) => {
            if !is_last {
                return Err(corrupt(
                    path,
                    valid_end,
                    format!("{reason} (in a segment that was complete and synced before the next one began)"),
                ));
            }
            if mode == RecoveryMode::AbsoluteConsistency {
                return Err(corrupt(path, valid_end, reason));
            }
            if let Some(at) = record::find_valid_record(buf, resume) {
                return Err(corrupt(
                    path,
                    valid_end,
                    format!(
                        "{reason}; a valid record follows at offset {at}, so this is damage in the \
                         middle of the log, not a write cut short at its end"
                    ),
                ));
            }
            warn!(
                file = %path.display(),
                offset = valid_end,
                reason = %reason,
                "truncating a torn record at the end of the write-ahead log (a write that a crash \
                 cut short before it was synced)"
            );
            true
        }
    };
    let records = scan
        .records
        .into_iter()
        .map(|(index, range)| {
            let offset = range.start - RECORD_HEADER_BYTES;
            WalRecord {
                index,
                location: RecordLocation {
                    segment: seq,
                    offset: offset as u64,
                    len: (range.end - offset) as u32,
                },
                payload: buf.slice(range),
            }
        })
        .collect();
    Ok(LoadedSegment {
        records,
        valid_end,
        file_len,
        torn,
    })
}

impl Wal {
    /// Opens (creating) the log in `dir` with [`RecoveryMode::TolerateTailCorruption`],
    /// recovers, and returns every valid record in append order (repeated
    /// indices included: see the module docs).
    pub fn open(dir: &Path, opts: WalOptions) -> Result<(Wal, Vec<WalRecord>), StorageError> {
        Self::open_with(
            dir,
            opts,
            RecoveryMode::TolerateTailCorruption,
            Arc::new(StdFs),
        )
    }

    /// [`Wal::open`] with an explicit recovery policy and file system.
    pub fn open_with(
        dir: &Path,
        opts: WalOptions,
        mode: RecoveryMode,
        fs: Arc<dyn FileSystem>,
    ) -> Result<(Wal, Vec<WalRecord>), StorageError> {
        let mut records = Vec::new();
        let wal = Self::open_visiting(dir, opts, mode, fs, &mut |record| records.push(record))?;
        Ok((wal, records))
    }

    /// [`Wal::open_with`], handing each valid record to `visit`, in append
    /// order, as its segment is read, rather than returning them all.
    ///
    /// A record's payload shares its segment's buffer, so the buffer lives
    /// as long as any payload of it is kept. A caller that keeps few (raft
    /// keeps its newest entries decoded and reads older ones back when
    /// asked) then holds a segment or two, not the whole log: after a bulk
    /// load of 10M znodes, 3.4M records (1.1 GB) were read back at start,
    /// and making fresh pages for all of them at once was 70% of opening
    /// the log.
    pub fn open_visiting(
        dir: &Path,
        opts: WalOptions,
        mode: RecoveryMode,
        fs: Arc<dyn FileSystem>,
        visit: &mut dyn FnMut(WalRecord),
    ) -> Result<Wal, StorageError> {
        fs.create_dir_all(dir).map_err(io_context(|| {
            format!("creating WAL directory {}", dir.display())
        }))?;
        if let Some(parent) = parent_dir(dir) {
            fs.sync_dir(parent).map_err(io_context(|| {
                format!("syncing directory {}", parent.display())
            }))?;
        }
        removal::remove_leftovers(fs.as_ref(), dir).map_err(io_context(|| {
            format!(
                "removing what an interrupted removal left in {}",
                dir.display()
            )
        }))?;
        let found = list_segments(fs.as_ref(), dir)?;
        let mut wal = Wal {
            dir: dir.to_path_buf(),
            opts,
            fs,
            sealed: VecDeque::new(),
            active: None,
            next_seq: 1,
            last_index: None,
            pending: Vec::new(),
            poisoned: Arc::default(),
            paths: SegmentPaths::default(),
        };
        let mut visited = 0_usize;
        let mut buf = BytesMut::new();
        for (i, seg) in found.iter().enumerate() {
            let is_last = i + 1 == found.len();
            let segment = read_segment(wal.fs.as_ref(), &seg.path, &mut buf)?;
            let mut loaded = load_segment(seg.seq, &seg.path, &segment, is_last, mode)?;
            let max_index = loaded.records.iter().map(|r| r.index).max();
            let has_records = !loaded.records.is_empty();
            if let Some(last) = loaded.records.last() {
                wal.last_index = Some(last.index);
            }
            visited += loaded.records.len();
            loaded.records.drain(..).for_each(&mut *visit);
            buf = reclaim(segment);
            wal.next_seq = seg.seq + 1;
            wal.paths
                .lock()
                .expect("segment list poisoned")
                .insert(seg.seq, seg.path.clone());
            if !is_last {
                wal.sealed.push_back(SealedSegment {
                    seq: seg.seq,
                    path: seg.path.clone(),
                    max_index,
                });
            } else if has_records {
                wal.reopen_last(seg.seq, &seg.path, &loaded, max_index)?;
            } else {
                // Nothing in it (a crash right after creating it, or a torn
                // first record): remove it, so that the next segment is named
                // after the record it really starts with. Its seq is reused.
                wal.remove_segment(seg.seq, &seg.path)?;
                wal.next_seq = seg.seq;
            }
        }
        debug!(
            dir = %dir.display(),
            segments = found.len(),
            records = visited,
            last_index = ?wal.last_index,
            "opened write-ahead log"
        );
        Ok(wal)
    }

    /// Makes the last segment on disk the active one, cutting a torn tail.
    fn reopen_last(
        &mut self,
        seq: u64,
        path: &Path,
        loaded: &LoadedSegment,
        max_index: Option<u64>,
    ) -> Result<(), StorageError> {
        let ctx = || format!("truncating torn tail of WAL segment {}", path.display());
        let mut file = self.fs.open_write(path).map_err(io_context(|| {
            format!("opening WAL segment {}", path.display())
        }))?;
        if loaded.torn {
            // Cut, then (if preallocated) extend again with zeros, so that the
            // bytes after the last valid record are the end-of-data marker.
            file.set_len(loaded.valid_end).map_err(io_context(ctx))?;
            if self.opts.preallocate && loaded.file_len > loaded.valid_end {
                file.set_len(loaded.file_len).map_err(io_context(ctx))?;
            }
        }
        // Also when nothing was cut: if the previous process died before its
        // last sync, what we just recovered may be only in the page cache, and
        // the caller is about to treat it as durable.
        file.sync_all().map_err(io_context(|| {
            format!("fsync of WAL segment {}", path.display())
        }))?;
        self.active = Some(ActiveSegment {
            seq,
            path: path.to_path_buf(),
            file,
            write_offset: loaded.valid_end,
            max_index,
            unsynced: false,
            sync_handed_out: false,
        });
        Ok(())
    }

    /// Buffers `records` (each `(index, payload)`, index in the caller's index
    /// space) in the kernel with one write (two if a new segment begins).
    /// Nothing is durable until [`Wal::sync`].
    ///
    /// A payload over [`RECORD_PAYLOAD_BYTES_MAX`] fails the whole call with
    /// [`StorageError::RecordTooLarge`] before anything is written.
    /// [`StorageError::NoSpace`] leaves the log usable: repeat the call with
    /// the same records once space is freed (records it did write, before a
    /// new segment could not be started, are then written again, which
    /// recovery reads as the same record rewritten). Any other error poisons
    /// the log.
    ///
    /// Each payload encodes itself into the log's buffer ([`Payload`]):
    /// byte slices are copied in, and a caller's own records need no buffer
    /// of their own first.
    ///
    /// Returns where each record was written, in their order.
    pub fn append<P: Payload>(
        &mut self,
        records: &[(u64, P)],
    ) -> Result<Vec<RecordLocation>, StorageError> {
        self.check_usable()?;
        for (index, payload) in records {
            if payload.encoded_len() > RECORD_PAYLOAD_BYTES_MAX {
                return Err(StorageError::RecordTooLarge {
                    index: *index,
                    len: payload.encoded_len(),
                    max: RECORD_PAYLOAD_BYTES_MAX,
                });
            }
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        let mut locations = Vec::with_capacity(records.len());
        let result = self.append_encoded(records, &mut pending, &mut locations);
        if result
            .as_ref()
            .is_err_and(|e| !matches!(e, StorageError::NoSpace { .. }))
        {
            self.poison();
        }
        // Do not keep a huge buffer alive after one exceptional batch.
        if pending.capacity() <= 16 << 20 {
            self.pending = pending;
        }
        result.map(|()| locations)
    }

    fn append_encoded<P: Payload>(
        &mut self,
        records: &[(u64, P)],
        pending: &mut Vec<u8>,
        locations: &mut Vec<RecordLocation>,
    ) -> Result<(), StorageError> {
        for &(index, ref payload) in records {
            let record_bytes = (RECORD_HEADER_BYTES + payload.encoded_len()) as u64;
            let roll = match &self.active {
                None => true,
                Some(active) => {
                    (active.has_records() || !pending.is_empty())
                        && active.write_offset + pending.len() as u64 + record_bytes
                            > self.opts.segment_bytes
                }
            };
            if roll {
                self.write_pending(pending)?;
                self.roll(index)?;
            }
            let Some(active) = &mut self.active else {
                unreachable!("a segment is active once rolled to");
            };
            locations.push(RecordLocation {
                segment: active.seq,
                offset: active.write_offset + pending.len() as u64,
                len: record_bytes as u32,
            });
            record::encode(pending, index, payload);
            active.max_index = Some(active.max_index.map_or(index, |m| m.max(index)));
            self.last_index = Some(index);
        }
        self.write_pending(pending)
    }

    /// Writes the encoded records in `pending` to the active segment.
    fn write_pending(&mut self, pending: &mut Vec<u8>) -> Result<(), StorageError> {
        if pending.is_empty() {
            return Ok(());
        }
        let Some(active) = &mut self.active else {
            unreachable!("records are encoded only once a segment is active");
        };
        // A failed write leaves `write_offset` where it was: repeated, it
        // overwrites whatever prefix reached the file.
        active
            .file
            .write_all_at(active.write_offset, pending)
            .map_err(write_context(|| {
                format!("writing WAL segment {}", active.path.display())
            }))?;
        active.write_offset += pending.len() as u64;
        active.unsynced = true;
        pending.clear();
        Ok(())
    }

    /// Seals the active segment (syncing it) and starts a new one whose first
    /// record will have index `first_index`.
    fn roll(&mut self, first_index: u64) -> Result<(), StorageError> {
        if let Some(mut old) = self.active.take() {
            if old.unsynced || old.sync_handed_out {
                old.file.sync_data().map_err(io_context(|| {
                    format!("fdatasync of WAL segment {}", old.path.display())
                }))?;
            }
            self.sealed.push_back(SealedSegment {
                seq: old.seq,
                path: old.path,
                max_index: old.max_index,
            });
        }
        let path = self.dir.join(segment_name(self.next_seq, first_index));
        let file = match self.start_segment(&path) {
            Ok(file) => file,
            Err(error) => {
                // Out of space: the next attempt starts this segment afresh,
                // under the same name.
                if matches!(error, StorageError::NoSpace { .. }) {
                    let _ = self.fs.remove_file(&path);
                }
                return Err(error);
            }
        };
        debug!(file = %path.display(), first_index, "started WAL segment");
        self.paths
            .lock()
            .expect("segment list poisoned")
            .insert(self.next_seq, path.clone());
        self.active = Some(ActiveSegment {
            seq: self.next_seq,
            path,
            file,
            write_offset: SEGMENT_HEADER_BYTES as u64,
            max_index: None,
            unsynced: false,
            sync_handed_out: false,
        });
        self.next_seq += 1;
        Ok(())
    }

    /// Creates the segment file at `path`: magic, space, durable entry.
    fn start_segment(&self, path: &Path) -> Result<Box<dyn WritableFile>, StorageError> {
        let ctx = || format!("creating WAL segment {}", path.display());
        let mut file = self.fs.create(path).map_err(write_context(ctx))?;
        file.write_all_at(0, &SEGMENT_MAGIC)
            .map_err(write_context(ctx))?;
        if self.opts.preallocate {
            let len = self.opts.segment_bytes.max(SEGMENT_HEADER_BYTES as u64);
            file.allocate(len).map_err(write_context(ctx))?;
        }
        file.sync_all().map_err(io_context(ctx))?;
        self.fs.sync_dir(&self.dir).map_err(io_context(|| {
            format!("syncing WAL directory {}", self.dir.display())
        }))?;
        Ok(file)
    }

    /// Makes every record appended so far durable, with one `fdatasync` (none
    /// if nothing was appended since the last sync). An error poisons the log:
    /// the caller must stop.
    pub fn sync(&mut self) -> Result<(), StorageError> {
        self.check_usable()?;
        let Some(active) = &mut self.active else {
            return Ok(());
        };
        if !active.unsynced && !active.sync_handed_out {
            return Ok(());
        }
        if let Err(source) = active.file.sync_data() {
            self.poisoned.store(true, Ordering::SeqCst);
            return Err(StorageError::Io {
                context: format!("fdatasync of WAL segment {}", active.path.display()),
                source,
            });
        }
        active.unsynced = false;
        active.sync_handed_out = false;
        Ok(())
    }

    /// Like [`Wal::sync`], but the `fdatasync` runs when the caller calls
    /// [`PendingSync::finish`], on any thread, while this log takes more
    /// appends. What was appended before this call is durable once it
    /// returns Ok; later appends need a later sync. `None` when nothing was
    /// appended since the last sync started.
    pub fn start_sync(&mut self) -> Result<Option<PendingSync>, StorageError> {
        self.check_usable()?;
        let Some(active) = &mut self.active else {
            return Ok(None);
        };
        if !active.unsynced {
            return Ok(None);
        }
        let file = active.file.try_clone().map_err(io_context(|| {
            format!(
                "duplicating WAL segment {} for syncing",
                active.path.display()
            )
        }))?;
        active.unsynced = false;
        active.sync_handed_out = true;
        Ok(Some(PendingSync {
            file,
            path: active.path.clone(),
            poisoned: self.poisoned.clone(),
        }))
    }

    /// Deletes the longest prefix of segments (oldest first, never the active
    /// one) all of whose records have an index `<= index` (caller's index
    /// space). Stops at the first segment holding a larger index, even if a
    /// later one would qualify, so that records superseding others are never
    /// deleted before the ones they supersede.
    pub fn release_through(&mut self, index: u64) -> Result<(), StorageError> {
        self.detach_through(index)?.finish(&RemovalPace::default())
    }

    /// [`Wal::release_through`], with the unlinking and directory syncs left
    /// to [`SegmentRemoval::finish`], on any thread: the segments are no
    /// longer part of this log (nor read through it) from now on, and stay
    /// on disk until then (recovery reads them as records it already has).
    pub fn detach_through(&mut self, index: u64) -> Result<SegmentRemoval, StorageError> {
        self.check_usable()?;
        let mut paths = Vec::new();
        while let Some(front) = self.sealed.front() {
            if front.max_index.is_some_and(|m| m > index) {
                break;
            }
            self.paths
                .lock()
                .expect("segment list poisoned")
                .remove(&front.seq);
            paths.extend(self.sealed.pop_front().map(|segment| segment.path));
        }
        Ok(SegmentRemoval {
            fs: self.fs.clone(),
            dir: self.dir.clone(),
            paths,
        })
    }

    /// Unlinks one segment and syncs the directory, without pauses: the
    /// log is being opened, so nothing syncs yet.
    fn remove_segment(&self, seq: u64, path: &Path) -> Result<(), StorageError> {
        self.paths
            .lock()
            .expect("segment list poisoned")
            .remove(&seq);
        remove_segment_file(self.fs.as_ref(), &self.dir, path, &RemovalPace::hurried())
    }

    /// Index (caller's index space) of the most recently appended record, or
    /// after open of the last recovered one; `None` if there never was one.
    /// Not changed by [`Wal::release_through`].
    pub fn last_index(&self) -> Option<u64> {
        self.last_index
    }

    /// How many segment files the log has (sealed plus active).
    pub fn segment_count(&self) -> usize {
        self.sealed.len() + usize::from(self.active.is_some())
    }

    /// A reader of this log's records by location, for any thread.
    pub fn reader(&self) -> WalReader {
        WalReader {
            fs: self.fs.clone(),
            segments: self.paths.clone(),
        }
    }

    /// The directory holding the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn poison(&self) {
        self.poisoned.store(true, Ordering::SeqCst);
    }

    fn check_usable(&self) -> Result<(), StorageError> {
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(StorageError::Poisoned {
                dir: self.dir.clone(),
            });
        }
        Ok(())
    }
}

/// Removes `path` durably (renamed away, `dir` synced) before the next
/// removal, so a crash never leaves a gap in the segments, then frees its
/// blocks gradually at `pace` (see the `removal` module).
fn remove_segment_file(
    fs: &dyn FileSystem,
    dir: &Path,
    path: &Path,
    pace: &RemovalPace,
) -> Result<(), StorageError> {
    let context = || format!("removing WAL segment {}", path.display());
    match removal::remove_gradually(fs, dir, path, pace) {
        Ok(()) => {}
        // Gone already; its removal may not be durable yet.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs.sync_dir(dir).map_err(io_context(context))?;
        }
        Err(source) => {
            return Err(StorageError::Io {
                context: context(),
                source,
            })
        }
    }
    debug!(file = %path.display(), "removed WAL segment");
    Ok(())
}

/// Segments detached by [`Wal::detach_through`], oldest first, still on disk.
#[derive(Debug)]
pub struct SegmentRemoval {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    paths: Vec<PathBuf>,
}

impl SegmentRemoval {
    /// Removes the segments, oldest first, each removal durable before the
    /// next, freeing their blocks at `pace`.
    pub fn finish(self, pace: &RemovalPace) -> Result<(), StorageError> {
        for path in &self.paths {
            remove_segment_file(self.fs.as_ref(), &self.dir, path, pace)?;
        }
        Ok(())
    }

    /// Nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

/// An `fdatasync` of the active segment, handed out by [`Wal::start_sync`].
#[derive(Debug)]
pub struct PendingSync {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    poisoned: Arc<AtomicBool>,
}

impl PendingSync {
    /// Makes durable what was appended before [`Wal::start_sync`]. An error
    /// poisons the log, as a failed [`Wal::sync`] does.
    pub fn finish(mut self) -> Result<(), StorageError> {
        self.file.sync_data().map_err(|source| {
            self.poisoned.store(true, Ordering::SeqCst);
            StorageError::Io {
                context: format!("fdatasync of WAL segment {}", self.path.display()),
                source,
            }
        })
    }
}

/// The segment files in `dir`, in `seq` order, checked to have no gap.
fn list_segments(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<FoundSegment>, StorageError> {
    let names = fs.list_dir(dir).map_err(io_context(|| {
        format!("listing WAL directory {}", dir.display())
    }))?;
    let mut found = Vec::new();
    for name in names {
        match parse_segment_name(&name) {
            Some((seq, _first_index)) => found.push(FoundSegment {
                seq,
                path: dir.join(&name),
            }),
            None if name.starts_with("wal-") => {
                warn!(dir = %dir.display(), file = %name, "ignoring a file that looks like a WAL segment but is not named like one");
            }
            None => {}
        }
    }
    found.sort_by_key(|s| s.seq);
    for pair in found.windows(2) {
        if pair[1].seq != pair[0].seq + 1 {
            let reason = if pair[1].seq == pair[0].seq {
                format!("two segment files have sequence number {:#x}", pair[0].seq)
            } else {
                format!(
                    "segment sequence number {:#x} is missing before this file (a segment file was \
                     deleted or lost, and its records with it)",
                    pair[0].seq + 1
                )
            };
            return Err(corrupt(&pair[1].path, 0, reason));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opening reads every segment into the same memory, once the records
    /// of the one before are dropped.
    #[test]
    fn a_segment_read_gives_its_memory_back_once_its_records_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        std::fs::write(&path, vec![7; 1 << 20]).unwrap();
        let mut buf = BytesMut::new();
        let segment = read_segment(&StdFs, &path, &mut buf).unwrap();
        let record = segment.slice(10..20);
        let first = segment.as_ptr();
        drop(record);
        buf = reclaim(segment);
        assert_eq!(buf.capacity(), 1 << 20);
        let again = read_segment(&StdFs, &path, &mut buf).unwrap();
        assert_eq!(again.as_ptr(), first);
        let kept = again.slice(0..1);
        assert_eq!(reclaim(again).capacity(), 0, "a record is still kept");
        assert_eq!(kept[0], 7);
    }

    #[test]
    fn segment_names_round_trip_and_sort_by_seq() {
        let name = segment_name(0x2a, 7);
        assert_eq!(name, "wal-000000000000002a-0000000000000007.log");
        assert_eq!(parse_segment_name(&name), Some((0x2a, 7)));
        assert_eq!(parse_segment_name("wal-2a-7.log"), None);
        assert_eq!(
            parse_segment_name("wal-+00000000000002a-0000000000000007.log"),
            None
        );
        assert_eq!(parse_segment_name("snap-0000000000000001.snap"), None);
    }
}
