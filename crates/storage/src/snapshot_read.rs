//! Reading a snapshot file back: checking its header and trailer, and
//! handing out its payload, either verified whole before the first byte
//! ([`verified`], for a reader that cannot take back what it read) or
//! checked as it is read, in pieces or as one stream ([`SnapshotPieces`],
//! for a leader that sends it to a follower, or a server that restores its
//! tree at start and keeps nothing until the end: each reads it once
//! rather than twice).

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{io_context, StorageError};
use crate::fs::{FileSystem, ReadableFile};
use crate::snapshot::{
    SnapshotReader, HEADER_BYTES, IO_BUFFER_BYTES, SNAPSHOT_MAGIC, TRAILER_BYTES, TRAILER_MAGIC,
};
use crate::snapshot_spare::Reading;

/// A snapshot file opened and its header checked, positioned at its
/// payload.
struct Opened {
    file: Box<dyn ReadableFile>,
    payload_len: u64,
    /// The checksum of the header, which the payload's bytes extend.
    crc: u32,
}

fn open(fs: &dyn FileSystem, path: &Path, index: u64) -> Result<Opened, StorageError> {
    let mut file = fs.open_read(path).map_err(io_context(reading(path)))?;
    let file_len = file
        .seek(SeekFrom::End(0))
        .map_err(io_context(reading(path)))?;
    file.seek(SeekFrom::Start(0))
        .map_err(io_context(reading(path)))?;
    if file_len < HEADER_BYTES + TRAILER_BYTES {
        return Err(corrupt(
            path,
            0,
            format!("file is only {file_len} bytes, too short for a snapshot"),
        ));
    }
    let mut header = [0u8; HEADER_BYTES as usize];
    file.read_exact(&mut header)
        .map_err(io_context(reading(path)))?;
    if header[0..8] != SNAPSHOT_MAGIC {
        return Err(corrupt(
            path,
            0,
            "missing or unknown snapshot header (not a Paddock snapshot, or written by an \
             incompatible version)"
                .to_string(),
        ));
    }
    let header_index = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    if header_index != index {
        return Err(corrupt(
            path,
            8,
            format!(
                "the file holds the snapshot at index {header_index}, but its name says {index}"
            ),
        ));
    }
    Ok(Opened {
        file,
        payload_len: file_len - HEADER_BYTES - TRAILER_BYTES,
        crc: crc32c::crc32c(&header),
    })
}

/// Reads and checks the trailer that follows a payload of `payload_len`
/// bytes, given the checksum over header and payload.
fn check_trailer(
    file: &mut impl Read,
    path: &Path,
    payload_len: u64,
    crc: u32,
) -> Result<(), StorageError> {
    let mut trailer = [0u8; TRAILER_BYTES as usize];
    file.read_exact(&mut trailer)
        .map_err(io_context(reading(path)))?;
    let trailer_at = HEADER_BYTES + payload_len;
    if trailer[12..16] != TRAILER_MAGIC {
        return Err(corrupt(
            path,
            trailer_at,
            "missing trailer: the snapshot was not written completely".into(),
        ));
    }
    if u64::from_le_bytes(trailer[0..8].try_into().expect("8 bytes")) != payload_len {
        return Err(corrupt(
            path,
            trailer_at,
            "trailer's payload length does not match the file size".into(),
        ));
    }
    if u32::from_le_bytes(trailer[8..12].try_into().expect("4 bytes")) != crc {
        return Err(corrupt(
            path,
            HEADER_BYTES,
            "checksum mismatch over the snapshot payload".into(),
        ));
    }
    Ok(())
}

/// Reads the snapshot at `path` once through, checking header, trailer and
/// checksum; on success returns the payload of the same open file.
pub(crate) fn verified(
    fs: &dyn FileSystem,
    path: &Path,
    index: u64,
    counted_as: Reading,
) -> Result<Payload, StorageError> {
    let Opened {
        file,
        payload_len,
        mut crc,
    } = open(fs, path, index)?;
    let mut reader = BufReader::with_capacity(IO_BUFFER_BYTES, file);
    let mut remaining = payload_len;
    while remaining > 0 {
        let chunk = reader.fill_buf().map_err(io_context(reading(path)))?;
        if chunk.is_empty() {
            return Err(shrank(path));
        }
        let n = chunk
            .len()
            .min(usize::try_from(remaining).unwrap_or(usize::MAX));
        crc = crc32c::crc32c_append(crc, &chunk[..n]);
        reader.consume(n);
        remaining -= n as u64;
    }
    check_trailer(&mut reader, path, payload_len, crc)?;
    let mut file = reader.into_inner();
    file.seek(SeekFrom::Start(HEADER_BYTES))
        .map_err(io_context(reading(path)))?;
    Ok(Payload {
        file: file.take(payload_len),
        counted_as,
    })
}

/// A verified snapshot's open file, positioned at its payload and ending
/// with it, counted as a reading of the snapshot while it lives.
pub(crate) struct Payload {
    file: io::Take<Box<dyn ReadableFile>>,
    counted_as: Reading,
}

impl Payload {
    pub(crate) fn buffered(self) -> SnapshotReader {
        Box::new(
            self.counted_as
                .guard(BufReader::with_capacity(IO_BUFFER_BYTES, self.file)),
        )
    }
}

/// A snapshot's payload read in pieces, each straight from the file into
/// memory of its own (neither zeroed first nor copied through a buffer),
/// for a caller that hands each piece on, as a leader sending its snapshot
/// to a follower does. The header is checked when it opens and the
/// checksum as the pieces are read: the piece that reaches the payload's
/// end comes only once the trailer matched, so a caller that marks the
/// end of what it sends never marks the end of a damaged snapshot, nor of
/// one cut short while it was read (as a snapshot pruned meanwhile is).
pub struct SnapshotPieces {
    path: PathBuf,
    opened: Opened,
    /// Payload bytes not read yet.
    remaining: u64,
    trailer_checked: bool,
    _counted_as: Reading,
}

pub(crate) fn pieces(
    fs: &dyn FileSystem,
    path: &Path,
    index: u64,
    counted_as: Reading,
) -> Result<SnapshotPieces, StorageError> {
    let opened = open(fs, path, index)?;
    Ok(SnapshotPieces {
        path: path.to_path_buf(),
        remaining: opened.payload_len,
        opened,
        trailer_checked: false,
        _counted_as: counted_as,
    })
}

impl SnapshotPieces {
    /// The next `bytes` of the payload, fewer only at its end, after which
    /// the pieces are empty.
    pub fn next_piece(&mut self, bytes: usize) -> Result<Vec<u8>, StorageError> {
        let want = self.at_most(bytes);
        let mut piece = Vec::with_capacity(want);
        (&mut self.opened.file)
            .take(want as u64)
            .read_to_end(&mut piece)
            .map_err(io_context(reading(&self.path)))?;
        if piece.len() < want {
            return Err(shrank(&self.path));
        }
        self.checked(&piece)?;
        Ok(piece)
    }

    /// `bytes`, or fewer where the payload ends sooner.
    fn at_most(&self, bytes: usize) -> usize {
        usize::try_from(self.remaining).map_or(bytes, |remaining| remaining.min(bytes))
    }

    /// Counts `read`, the payload's next bytes, into the checksum, and
    /// checks the trailer once they reach the payload's end.
    fn checked(&mut self, read: &[u8]) -> Result<(), StorageError> {
        self.opened.crc = crc32c::crc32c_append(self.opened.crc, read);
        self.remaining -= read.len() as u64;
        if self.remaining == 0 && !self.trailer_checked {
            let Opened {
                file,
                payload_len,
                crc,
            } = &mut self.opened;
            check_trailer(file, &self.path, *payload_len, *crc)?;
            self.trailer_checked = true;
        }
        Ok(())
    }
}

/// The payload as one stream, read from the file straight into the
/// caller's buffer, for a server that restores its tree from it: the read
/// that reaches the payload's end returns only once the trailer matched,
/// so a decoder that reads to the end (and then finds nothing more) has
/// read a whole, undamaged snapshot, the file read once. Its errors are
/// the [`StorageError`]s `next_piece` returns, carried in an `io::Error`.
impl Read for SnapshotPieces {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = self.at_most(buf.len());
        if want == 0 {
            return Ok(0);
        }
        let read = self.opened.file.read(&mut buf[..want])?;
        if read == 0 {
            return Err(io::Error::other(shrank(&self.path)));
        }
        self.checked(&buf[..read]).map_err(io::Error::other)?;
        Ok(read)
    }
}

fn reading(path: &Path) -> impl FnOnce() -> String + '_ {
    move || format!("reading snapshot {}", path.display())
}

fn corrupt(path: &Path, offset: u64, reason: String) -> StorageError {
    StorageError::Corrupt {
        file: path.to_path_buf(),
        offset,
        reason,
    }
}

fn shrank(path: &Path) -> StorageError {
    StorageError::Io {
        context: reading(path)(),
        source: io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the file shrank while being read",
        ),
    }
}
