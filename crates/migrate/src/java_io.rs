//! Java's `DataInput`/`DataOutput` as ZooKeeper's files use them (through
//! Jute's binary archive): big-endian integers, and buffers and strings
//! prefixed by an `int` length, -1 meaning null. Both ends keep the
//! Adler-32 checksum ZooKeeper's snapshots are sealed with, and the reader
//! counts the offset of what it reads, so damage is reported where it is.

use std::io::{self, Read, Write};

use adler2::Adler32;

/// Why bytes could not be read as the field they should be.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{what} at offset {offset}: {source}")]
    Io {
        what: &'static str,
        offset: u64,
        source: io::Error,
    },
    #[error("{what} at offset {offset}: {reason}")]
    Invalid {
        what: &'static str,
        offset: u64,
        reason: String,
    },
}

impl ReadError {
    /// Whether the input ended where this field should have been.
    pub fn is_end_of_input(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof)
    }
}

/// Reads fields, counting their offset and checksumming what it reads.
pub struct JavaIn<R> {
    input: R,
    offset: u64,
    adler: Adler32,
}

impl<R: Read> JavaIn<R> {
    pub fn new(input: R) -> Self {
        Self {
            input,
            offset: 0,
            adler: Adler32::new(),
        }
    }

    /// Reads `input` as the bytes that follow `offset` bytes whose
    /// Adler-32 was `checksum`.
    pub fn continuing(input: R, checksum: u32, offset: u64) -> Self {
        Self {
            input,
            offset,
            adler: Adler32::from_checksum(checksum),
        }
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The Adler-32 of every byte read so far.
    pub fn checksum(&self) -> u32 {
        self.adler.checksum()
    }

    /// An error about the field that starts at `offset`.
    pub fn invalid(&self, what: &'static str, offset: u64, reason: impl Into<String>) -> ReadError {
        ReadError::Invalid {
            what,
            offset,
            reason: reason.into(),
        }
    }

    fn fill(&mut self, what: &'static str, buf: &mut [u8]) -> Result<(), ReadError> {
        self.input.read_exact(buf).map_err(|source| ReadError::Io {
            what,
            offset: self.offset,
            source,
        })?;
        self.adler.write_slice(buf);
        self.offset += buf.len() as u64;
        Ok(())
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, ReadError> {
        let mut b = [0u8; 1];
        self.fill(what, &mut b)?;
        Ok(b[0])
    }

    pub fn i32(&mut self, what: &'static str) -> Result<i32, ReadError> {
        let mut b = [0u8; 4];
        self.fill(what, &mut b)?;
        Ok(i32::from_be_bytes(b))
    }

    pub fn i64(&mut self, what: &'static str) -> Result<i64, ReadError> {
        let mut b = [0u8; 8];
        self.fill(what, &mut b)?;
        Ok(i64::from_be_bytes(b))
    }

    /// A buffer; `None` for null (length -1). A forged length costs no
    /// more memory than the input really holds: the bytes are read as they
    /// come, not reserved up front.
    pub fn buffer(&mut self, what: &'static str) -> Result<Option<Vec<u8>>, ReadError> {
        let at = self.offset;
        let len = self.i32(what)?;
        if len == -1 {
            return Ok(None);
        }
        let len =
            u64::try_from(len).map_err(|_| self.invalid(what, at, format!("length {len}")))?;
        let mut bytes = Vec::new();
        let got = (&mut self.input)
            .take(len)
            .read_to_end(&mut bytes)
            .map_err(|source| ReadError::Io {
                what,
                offset: self.offset,
                source,
            })?;
        self.adler.write_slice(&bytes);
        self.offset += got as u64;
        if got as u64 != len {
            return Err(ReadError::Io {
                what,
                offset: self.offset,
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{len} bytes announced at offset {at}, {got} there"),
                ),
            });
        }
        Ok(Some(bytes))
    }

    /// A string; null is an error. Jute writes a character outside the
    /// Basic Multilingual Plane as two 3-byte surrogates, which are not
    /// UTF-8 and which ZooKeeper itself reads back as U+FFFD: so do we.
    pub fn string(&mut self, what: &'static str) -> Result<String, ReadError> {
        let at = self.offset;
        let bytes = self
            .buffer(what)?
            .ok_or_else(|| self.invalid(what, at, "null"))?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// What is left of the input, up to `limit` bytes, as it is: neither
    /// counted nor checksummed (see [`JavaIn::continuing`]).
    pub fn rest(&mut self, limit: u64) -> Result<Vec<u8>, ReadError> {
        let mut rest = Vec::new();
        (&mut self.input)
            .take(limit)
            .read_to_end(&mut rest)
            .map_err(|source| ReadError::Io {
                what: "trailer",
                offset: self.offset,
                source,
            })?;
        Ok(rest)
    }

    /// A count that may not be null (a map's or a list's size).
    pub fn required_count(&mut self, what: &'static str) -> Result<usize, ReadError> {
        let at = self.offset;
        self.count(what)?
            .ok_or_else(|| self.invalid(what, at, "null"))
    }

    /// A vector's count: `None` for a null vector.
    pub fn count(&mut self, what: &'static str) -> Result<Option<usize>, ReadError> {
        let at = self.offset;
        match self.i32(what)? {
            -1 => Ok(None),
            n => usize::try_from(n)
                .map(Some)
                .map_err(|_| self.invalid(what, at, format!("count {n}"))),
        }
    }
}

/// ZooKeeper's `FileHeader`, which its snapshots and logs begin with:
/// `magic` as a big-endian int, the format `version`, a database id.
pub fn read_file_header<R: Read>(
    input: &mut JavaIn<R>,
    magic: &[u8; 4],
    version: i32,
) -> Result<(), ReadError> {
    let found = input.i32("file magic")?;
    if found != i32::from_be_bytes(*magic) {
        let expected = String::from_utf8_lossy(magic);
        return Err(input.invalid(
            "file magic",
            0,
            format!("{found:#010x} is not {expected:?}"),
        ));
    }
    let found = input.i32("format version")?;
    if found != version {
        return Err(input.invalid(
            "format version",
            4,
            format!("{found} (this reads version {version})"),
        ));
    }
    input.i64("database id")?;
    Ok(())
}

/// Writes fields, checksumming what it writes.
pub struct JavaOut<W> {
    out: W,
    adler: Adler32,
}

impl<W: Write> JavaOut<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            adler: Adler32::new(),
        }
    }

    /// The Adler-32 of every byte written so far.
    pub fn checksum(&self) -> u32 {
        self.adler.checksum()
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.adler.write_slice(bytes);
        self.out.write_all(bytes)
    }

    pub fn i32(&mut self, v: i32) -> io::Result<()> {
        self.put(&v.to_be_bytes())
    }

    pub fn i64(&mut self, v: i64) -> io::Result<()> {
        self.put(&v.to_be_bytes())
    }

    pub fn buffer(&mut self, b: Option<&[u8]>) -> io::Result<()> {
        match b {
            None => self.i32(-1),
            Some(b) => {
                self.i32(jute::jute_len(b.len()))?;
                self.put(b)
            }
        }
    }

    pub fn string(&mut self, s: &str) -> io::Result<()> {
        self.buffer(Some(s.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_with_the_same_checksum() {
        let mut out = JavaOut::new(Vec::new());
        out.i32(-7).unwrap();
        out.i64(1 << 40).unwrap();
        out.buffer(None).unwrap();
        out.string("/a/b").unwrap();
        let sum = out.checksum();
        let bytes = out.into_inner();

        let mut input = JavaIn::new(&bytes[..]);
        assert_eq!(input.i32("int").unwrap(), -7);
        assert_eq!(input.i64("long").unwrap(), 1 << 40);
        assert_eq!(input.buffer("null").unwrap(), None);
        assert_eq!(input.string("path").unwrap(), "/a/b");
        assert_eq!(input.checksum(), sum);
        assert_eq!(input.offset(), bytes.len() as u64);
        assert!(input.i32("more").unwrap_err().is_end_of_input());
    }

    #[test]
    fn adler32_is_javas() {
        // java.util.zip.Adler32 over "Wikipedia" (the algorithm's example).
        let mut out = JavaOut::new(Vec::new());
        out.put(b"Wikipedia").unwrap();
        assert_eq!(out.checksum(), 0x11E6_0398);
    }

    #[test]
    fn a_forged_length_is_an_error_not_an_allocation() {
        let mut bytes = i32::MAX.to_be_bytes().to_vec();
        bytes.extend_from_slice(b"short");
        let err = JavaIn::new(&bytes[..]).buffer("data").unwrap_err();
        assert!(err.is_end_of_input());
        assert!(
            err.to_string()
                .contains("2147483647 bytes announced at offset 0, 5 there"),
            "{err}"
        );
        let err = JavaIn::new(&(-2i32).to_be_bytes()[..])
            .buffer("data")
            .unwrap_err();
        assert_eq!(err.to_string(), "data at offset 0: length -2");
    }
}
