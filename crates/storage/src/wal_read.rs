//! Reading records back from the write-ahead log by where they were
//! written, so that its owner need not keep what it appended in memory.
//!
//! [`Wal::append`](crate::Wal::append) and [`Wal::open`](crate::Wal::open)
//! say where each record lies ([`RecordLocation`]); a [`WalReader`], which
//! any thread may hold, reads the records at given locations again and
//! verifies them. The log keeps the reader's list of segment files current
//! as it starts and removes them, so a location in a removed segment is an
//! error, never another record.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::error::{io_context, StorageError};
use crate::fs::FileSystem;
use crate::record::{self, Decoded};

/// Where one record lies in the log: its segment, its byte offset there,
/// and the bytes it takes (header and payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLocation {
    pub(crate) segment: u64,
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

impl RecordLocation {
    /// A location given back by whoever kept its parts: a location the log
    /// did not hand out reads as an error, never as another record.
    pub fn from_parts(segment: u64, offset: u64, len: u32) -> Self {
        RecordLocation {
            segment,
            offset,
            len,
        }
    }

    /// The sequence number of the segment holding the record.
    pub fn segment(&self) -> u64 {
        self.segment
    }

    /// The record's byte offset in its segment.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The bytes the record takes on disk, header included.
    pub fn stored_bytes(&self) -> u64 {
        u64::from(self.len)
    }

    /// [`Self::stored_bytes`], as kept.
    pub fn stored_len(&self) -> u32 {
        self.len
    }

    /// Whether `next` starts right where this record ends.
    fn is_followed_by(&self, next: &RecordLocation) -> bool {
        next.segment == self.segment && next.offset == self.offset + self.stored_bytes()
    }
}

/// The segment files by sequence number, shared by the log and its
/// readers.
pub(crate) type SegmentPaths = Arc<Mutex<BTreeMap<u64, PathBuf>>>;

/// Reads records of one log at their locations; cheap to clone.
#[derive(Debug, Clone)]
pub struct WalReader {
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) segments: SegmentPaths,
}

thread_local! {
    /// What this thread reads records back into, kept from one read to the
    /// next: a buffer per read had the kernel make and zero fresh pages for
    /// every page of entries raft read back, half of the consensus thread's
    /// time when a restart replayed a log of 10 KB writes.
    static READ_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A read buffer larger than this (a read of huge records) is not kept.
const READ_BUFFER_KEPT_BYTES_MAX: usize = 16 << 20;

impl WalReader {
    /// `decode` of the payload of each record at `locations`, in their
    /// order; the payloads themselves are not kept. Records that follow
    /// each other in a segment are read with one read.
    pub fn read_each<T>(
        &self,
        locations: &[RecordLocation],
        mut decode: impl FnMut(&[u8]) -> T,
    ) -> Result<Vec<T>, StorageError> {
        let mut decoded = Vec::with_capacity(locations.len());
        let mut rest = locations;
        while let Some(first) = rest.first() {
            let run = 1 + rest
                .windows(2)
                .take_while(|pair| pair[0].is_followed_by(&pair[1]))
                .count();
            let (this, next) = rest.split_at(run);
            READ_BUFFER.with_borrow_mut(|buf| {
                let read = self.read_run(first.segment, this, buf, &mut decode, &mut decoded);
                if buf.capacity() > READ_BUFFER_KEPT_BYTES_MAX {
                    *buf = Vec::new();
                }
                read
            })?;
            rest = next;
        }
        Ok(decoded)
    }

    /// Reads the adjacent records `run` of `segment` into `buf` with one
    /// read, and decodes each.
    fn read_run<T>(
        &self,
        segment: u64,
        run: &[RecordLocation],
        buf: &mut Vec<u8>,
        decode: &mut impl FnMut(&[u8]) -> T,
        decoded: &mut Vec<T>,
    ) -> Result<(), StorageError> {
        let path = self.path_of(segment)?;
        let start = run[0].offset;
        let span: u64 = run.iter().map(RecordLocation::stored_bytes).sum();
        let ctx = || format!("reading back WAL segment {}", path.display());
        let mut file = self.fs.open_read(&path).map_err(io_context(ctx))?;
        file.seek(SeekFrom::Start(start)).map_err(io_context(ctx))?;
        buf.clear();
        buf.resize(span as usize, 0);
        file.read_exact(buf).map_err(io_context(ctx))?;
        let mut at = 0;
        for location in run {
            match record::decode_at(buf, at) {
                Decoded::Record { payload, next, .. } => {
                    decoded.push(decode(&buf[payload]));
                    at = next;
                }
                Decoded::End | Decoded::Bad { .. } => {
                    return Err(StorageError::Corrupt {
                        file: path,
                        offset: location.offset,
                        reason: "a record read back from the log is not the record written there"
                            .to_string(),
                    })
                }
            }
        }
        Ok(())
    }

    fn path_of(&self, segment: u64) -> Result<PathBuf, StorageError> {
        let segments = self.segments.lock().expect("segment list poisoned");
        segments
            .get(&segment)
            .cloned()
            .ok_or_else(|| StorageError::Io {
                context: format!("reading back WAL segment {segment:#x}"),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the segment was released (a record before the last snapshot was asked for)",
                ),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Wal, WalOptions};

    /// Reading back reuses this thread's buffer rather than making one a
    /// read, and gives up one grown past what it keeps.
    #[test]
    fn reads_back_into_the_same_buffer_each_time() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), WalOptions::default()).unwrap();
        let payload = vec![5; 1 << 16];
        let locations = wal.append(&[(1, &payload[..]), (2, &payload[..])]).unwrap();
        let buffer = || READ_BUFFER.with_borrow(|buf| (buf.as_ptr(), buf.capacity()));
        let read = wal.reader().read_each(&locations, <[u8]>::len).unwrap();
        assert_eq!(read, vec![payload.len(); 2]);
        let (first, capacity) = buffer();
        assert!(capacity >= 2 * payload.len(), "{capacity}");
        wal.reader()
            .read_each(&locations[1..], <[u8]>::len)
            .unwrap();
        assert_eq!(buffer(), (first, capacity));

        let huge = vec![6; READ_BUFFER_KEPT_BYTES_MAX];
        let located = wal.append(&[(3, &huge[..])]).unwrap();
        let read = wal.reader().read_each(&located, |p| p.len()).unwrap();
        assert_eq!(read, vec![huge.len()]);
        assert_eq!(buffer().1, 0, "a buffer past the kept size is let go");
    }
}
