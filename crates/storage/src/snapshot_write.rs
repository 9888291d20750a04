//! Writing a snapshot file's bytes: checksummed as they go, and sent to
//! disk a chunk at a time so that the log's syncs never queue behind a
//! flood of them.
//!
//! The start of the file goes through the page cache, which keeps the
//! snapshot in memory for a restart or a follower's catch-up to read.
//! Past [`direct_after_bytes`] the rest bypasses it (`O_DIRECT`), where
//! the file system allows: copying a big tree's gigabytes into the page
//! cache was most of a snapshot's CPU (61% of the snapshot thread's
//! samples in the kernel's `copy_folio_from_iter_atomic` while `paddock
//! bench crud --preset 10gb` set 10 KB values), and it took that CPU from
//! the requests served meanwhile.

use std::io::{self, Write};

use crate::fs::{WritableFile, DIRECT_ALIGN_BYTES};

/// How much of a snapshot is gathered before it is written, and how much
/// may wait in the page cache before it is sent to disk: at most two such
/// chunks are dirty at once. A log sync queues behind what is in flight:
/// with 8 MB chunks each took 20-33 ms while a snapshot was written,
/// against 3 ms otherwise; with 1 MB the snapshot takes about a third
/// longer to write.
pub(crate) const CHUNK_BYTES: u64 = 1 << 20;

/// Where a snapshot stops going through the page cache: at a quarter of
/// the machine's memory, and never below 512 MiB. Below it, the page
/// cache can keep the snapshot beside the tree it was taken of, for
/// whoever reads it next; a follower catching up from a leader whose 2 GB
/// snapshot was past it took 8.2-10.3 s instead of 5.8-7.1 (`paddock bench
/// catchup --start paddock --servers 3 --megabytes 2048`), the leader
/// reading from the disk the follower wrote to. Above it, the page cache
/// would push the snapshot's pages out before they were read anyway.
pub(crate) fn direct_after_bytes() -> u64 {
    const FLOOR_BYTES: u64 = 512 << 20;
    physical_memory_bytes().map_or(u64::MAX, |memory| (memory / 4).max(FLOOR_BYTES))
}

#[cfg(unix)]
fn physical_memory_bytes() -> Option<u64> {
    // SAFETY: sysconf(3) reads system constants; it has no preconditions.
    let (pages, page_bytes) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let pages = u64::try_from(pages).ok()?;
    let page_bytes = u64::try_from(page_bytes).ok()?;
    pages.checked_mul(page_bytes)
}

#[cfg(not(unix))]
fn physical_memory_bytes() -> Option<u64> {
    None
}

/// Streams into a file from its start, a chunk at a time gathered in
/// aligned memory, tracking the running checksum of everything written.
pub(crate) struct ChecksummedWriter<'a> {
    file: &'a mut dyn WritableFile,
    /// The same file opened for direct writes, while they are accepted.
    direct: Option<Box<dyn WritableFile>>,
    /// The first chunk written directly.
    direct_from: u64,
    chunk: AlignedChunk,
    /// The file offset of the chunk gathered.
    chunk_at: u64,
    /// Where the chunk not yet sent to disk starts, of those written
    /// through the page cache.
    unsent: u64,
    crc: u32,
}

impl<'a> ChecksummedWriter<'a> {
    /// `direct`: the same file opened for direct writes, used from the
    /// first chunk at or past `direct_after` bytes on.
    pub(crate) fn new(
        file: &'a mut dyn WritableFile,
        direct: Option<Box<dyn WritableFile>>,
        direct_after: u64,
    ) -> Self {
        ChecksummedWriter {
            file,
            direct,
            direct_from: direct_after.next_multiple_of(CHUNK_BYTES),
            chunk: AlignedChunk::new(),
            chunk_at: 0,
            unsent: 0,
            crc: 0,
        }
    }

    /// The bytes written so far.
    pub(crate) fn offset(&self) -> u64 {
        self.chunk_at + self.chunk.held().len() as u64
    }

    /// The checksum of the bytes written so far.
    pub(crate) fn crc(&self) -> u32 {
        self.crc
    }

    /// Writes the last, partial chunk; the file then needs only its sync.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        // It is rarely a whole aligned block: it goes through the page
        // cache, which the final sync sends to disk.
        self.write_through_cache()
    }

    fn write_chunk(&mut self) -> io::Result<()> {
        match self.direct.as_mut() {
            Some(direct) if self.chunk_at >= self.direct_from => {
                if let Err(error) = direct.write_all_at(self.chunk_at, self.chunk.held()) {
                    if error.kind() != io::ErrorKind::InvalidInput {
                        return Err(error);
                    }
                    self.give_up_direct(error);
                    return self.write_chunk();
                }
                // Nothing of it waits in the page cache to be sent.
                self.unsent = self.chunk_at + CHUNK_BYTES;
            }
            _ => self.write_through_cache()?,
        }
        self.chunk_at += CHUNK_BYTES;
        self.chunk.clear();
        Ok(())
    }

    fn write_through_cache(&mut self) -> io::Result<()> {
        self.file.write_all_at(self.chunk_at, self.chunk.held())?;
        let end = self.chunk_at + self.chunk.held().len() as u64;
        while end - self.unsent >= CHUNK_BYTES {
            if let Some(previous) = self.unsent.checked_sub(CHUNK_BYTES) {
                self.file.write_back(previous, CHUNK_BYTES, true)?;
            }
            self.file.write_back(self.unsent, CHUNK_BYTES, false)?;
            self.unsent += CHUNK_BYTES;
        }
        Ok(())
    }

    /// The file system refused a direct write after all (a device whose
    /// blocks are larger than our alignment): that chunk and the rest go
    /// through the page cache.
    fn give_up_direct(&mut self, error: io::Error) {
        tracing::warn!(%error, "direct writes refused; the rest of the snapshot goes through the page cache");
        self.direct = None;
        self.unsent = self.chunk_at;
    }
}

impl Write for ChecksummedWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.chunk.hold(buf);
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        if self.chunk.is_full() {
            self.write_chunk()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A chunk's worth of memory aligned for direct writes, filled from its
/// start.
struct AlignedChunk {
    /// A chunk and an alignment's slack: the chunk is `memory[start..]`.
    memory: Vec<u8>,
    start: usize,
    held: usize,
}

impl AlignedChunk {
    const BYTES: usize = CHUNK_BYTES as usize;

    fn new() -> Self {
        let memory = vec![0; Self::BYTES + DIRECT_ALIGN_BYTES];
        let start = memory.as_ptr().align_offset(DIRECT_ALIGN_BYTES);
        AlignedChunk {
            memory,
            start,
            held: 0,
        }
    }

    /// Takes as much of `buf` as there is room for.
    fn hold(&mut self, buf: &[u8]) -> usize {
        let n = buf.len().min(Self::BYTES - self.held);
        let from = self.start + self.held;
        self.memory[from..from + n].copy_from_slice(&buf[..n]);
        self.held += n;
        n
    }

    fn held(&self) -> &[u8] {
        &self.memory[self.start..self.start + self.held]
    }

    fn is_full(&self) -> bool {
        self.held == Self::BYTES
    }

    fn clear(&mut self) {
        self.held = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Writes `total` bytes in pieces that straddle every boundary.
    fn write_bytes(mut writer: ChecksummedWriter<'_>, total: u64) -> ChecksummedWriter<'_> {
        let mut left = total;
        let mut piece = 0u8;
        while left > 0 {
            piece = piece.wrapping_add(1);
            let block = vec![piece; 300_001];
            let n = left.min(block.len() as u64) as usize;
            writer.write_all(&block[..n]).expect("write");
            left -= n as u64;
        }
        writer
    }

    #[test]
    fn a_long_write_keeps_at_most_two_chunks_dirty() {
        let (shared, mut cached, _) = handles(false);
        let total = 10 * CHUNK_BYTES + 12_345;
        let writer = write_bytes(ChecksummedWriter::new(&mut cached, None, 0), total);
        assert_eq!(writer.offset(), total);
        writer.finish().expect("finish");
        let file = shared.lock().unwrap();
        assert_eq!(file.started, 10 * CHUNK_BYTES);
        assert_eq!(file.waited, 9 * CHUNK_BYTES);
        assert!(
            file.most_dirty <= 2 * CHUNK_BYTES,
            "{} bytes were dirty at once",
            file.most_dirty
        );
    }

    /// One file's bytes, written through either of two handles, which
    /// note each write's offset and length and from what memory, and
    /// which of those written through the page cache were sent to disk
    /// (`started`) and waited for (`waited`).
    #[derive(Debug, Default)]
    struct Shared {
        bytes: Vec<u8>,
        direct_writes: Vec<(u64, usize, usize)>,
        cached_writes: Vec<(u64, usize)>,
        cached_end: u64,
        waited: u64,
        started: u64,
        most_dirty: u64,
    }

    #[derive(Debug)]
    struct Handle {
        shared: Arc<Mutex<Shared>>,
        direct: bool,
        refuse: bool,
    }

    impl WritableFile for Handle {
        fn write_all_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
            let mut shared = self.shared.lock().unwrap();
            if self.direct {
                if self.refuse {
                    return Err(io::Error::from(io::ErrorKind::InvalidInput));
                }
                let address = buf.as_ptr() as usize;
                shared.direct_writes.push((offset, buf.len(), address));
            } else {
                shared.cached_writes.push((offset, buf.len()));
                shared.cached_end = shared.cached_end.max(offset + buf.len() as u64);
                shared.most_dirty = shared.most_dirty.max(shared.cached_end - shared.waited);
            }
            let end = offset as usize + buf.len();
            if shared.bytes.len() < end {
                shared.bytes.resize(end, 0);
            }
            shared.bytes[offset as usize..end].copy_from_slice(buf);
            Ok(())
        }
        fn set_len(&mut self, _: u64) -> io::Result<()> {
            Ok(())
        }
        fn allocate(&mut self, _: u64) -> io::Result<()> {
            Ok(())
        }
        fn sync_data(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn sync_all(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn try_clone(&self) -> io::Result<Box<dyn WritableFile>> {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
        fn write_back(&mut self, offset: u64, len: u64, wait: bool) -> io::Result<()> {
            let mut shared = self.shared.lock().unwrap();
            assert!(
                offset + len <= shared.cached_end,
                "only written bytes are sent"
            );
            if wait {
                assert_eq!(offset, shared.waited, "chunks are waited for in order");
                shared.waited = offset + len;
            } else {
                assert_eq!(offset, shared.started, "chunks are started in order");
                shared.started = offset + len;
            }
            Ok(())
        }
    }

    fn handles(refuse_direct: bool) -> (Arc<Mutex<Shared>>, Handle, Box<dyn WritableFile>) {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let cached = Handle {
            shared: shared.clone(),
            direct: false,
            refuse: false,
        };
        let direct = Handle {
            shared: shared.clone(),
            direct: true,
            refuse: refuse_direct,
        };
        (shared, cached, Box::new(direct))
    }

    fn expected_bytes(total: u64) -> Vec<u8> {
        let (shared, mut cached, _) = handles(false);
        write_bytes(ChecksummedWriter::new(&mut cached, None, 0), total)
            .finish()
            .expect("finish");
        let bytes = std::mem::take(&mut shared.lock().unwrap().bytes);
        bytes
    }

    #[test]
    fn past_the_threshold_whole_aligned_chunks_bypass_the_cache() {
        let total = 5 * CHUNK_BYTES + 12_345;
        let after = CHUNK_BYTES + 100;
        let (shared, mut cached, direct) = handles(false);
        let writer = write_bytes(
            ChecksummedWriter::new(&mut cached, Some(direct), after),
            total,
        );
        let crc = writer.crc();
        writer.finish().expect("finish");

        let shared = shared.lock().unwrap();
        assert_eq!(shared.bytes, expected_bytes(total), "the file is whole");
        assert_eq!(crc, crc32c::crc32c(&shared.bytes));
        let direct_from = after.next_multiple_of(CHUNK_BYTES);
        let mut next = direct_from;
        for &(offset, len, address) in &shared.direct_writes {
            assert_eq!(offset, next, "direct writes follow one another");
            assert_eq!(len as u64, CHUNK_BYTES, "a direct write is a whole chunk");
            assert_eq!(address % DIRECT_ALIGN_BYTES, 0, "from aligned memory");
            next += len as u64;
        }
        assert_eq!(shared.direct_writes.len(), 3);
        let cached_end = |&(offset, len): &(u64, usize)| offset + len as u64;
        assert!(
            shared
                .cached_writes
                .iter()
                .all(|w| cached_end(w) <= direct_from || w.0 >= next),
            "only the start and the tail go through the cache: {:?}",
            shared.cached_writes
        );
    }

    #[test]
    fn a_refused_direct_write_goes_through_the_cache_instead() {
        let total = 4 * CHUNK_BYTES + 777;
        let (shared, mut cached, direct) = handles(true);
        write_bytes(ChecksummedWriter::new(&mut cached, Some(direct), 0), total)
            .finish()
            .expect("finish");
        let shared = shared.lock().unwrap();
        assert_eq!(shared.bytes, expected_bytes(total), "the file is whole");
        assert!(shared.direct_writes.is_empty());
    }
}
