//! The compression a ZooKeeper snapshot may be written with
//! (`zookeeper.snapshot.compression.method`, 3.6+), told by the file name's
//! suffix as `SnapStream` tells it.
//!
//! Snappy is xerial's snappy-java stream (`SnappyOutputStream`), not the
//! framing format of the Snappy project: an 8-byte magic (0x82 "SNAPPY"
//! 0x00), two big-endian ints (version, compatible version), then blocks,
//! each a big-endian int length and that many bytes of raw Snappy.

use std::io::{self, Read};
use std::path::Path;

use flate2::read::GzDecoder;

/// xerial's `SnappyCodec.MAGIC_HEADER`.
const SNAPPY_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// The magic and the two version ints.
const SNAPPY_HEADER_BYTES: usize = 16;
/// A block longer than this is damage, not data: snappy-java writes
/// blocks of 32 KB (compressed, at most a little more).
const SNAPPY_BLOCK_BYTES_MAX: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
}

impl Compression {
    /// `SnapStream.getStreamMode(fileName)`.
    pub fn of(path: &Path) -> Compression {
        match path.extension().and_then(|e| e.to_str()) {
            Some("gz") => Compression::Gzip,
            Some("snappy") => Compression::Snappy,
            _ => Compression::None,
        }
    }
}

/// The uncompressed stream of `input`.
pub fn reader<'a, R: Read + 'a>(
    compression: Compression,
    input: R,
) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match compression {
        Compression::None => Box::new(input),
        Compression::Gzip => Box::new(GzDecoder::new(input)),
        Compression::Snappy => Box::new(SnappyJavaReader::new(input)?),
    })
}

/// Reads snappy-java's stream a block at a time.
struct SnappyJavaReader<R> {
    input: R,
    block: Vec<u8>,
    at: usize,
    decoder: snap::raw::Decoder,
}

impl<R: Read> SnappyJavaReader<R> {
    fn new(mut input: R) -> io::Result<Self> {
        let mut header = [0u8; SNAPPY_HEADER_BYTES];
        input.read_exact(&mut header)?;
        if header[..8] != SNAPPY_MAGIC {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a snappy-java stream (bad magic at offset 0)",
            ));
        }
        Ok(Self {
            input,
            block: Vec::new(),
            at: 0,
            decoder: snap::raw::Decoder::new(),
        })
    }

    /// The next block, or `false` at the end of the stream.
    fn next_block(&mut self) -> io::Result<bool> {
        let mut len = [0u8; 4];
        match self.input.read_exact(&mut len) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
            other => other?,
        }
        let len = i32::from_be_bytes(len);
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= SNAPPY_BLOCK_BYTES_MAX)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("snappy block of {len} bytes"),
                )
            })?;
        let mut compressed = vec![0u8; len];
        self.input.read_exact(&mut compressed)?;
        self.block = self
            .decoder
            .decompress_vec(&compressed)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        self.at = 0;
        Ok(true)
    }
}

impl<R: Read> Read for SnappyJavaReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What snappy-java writes: header, then blocks.
    fn snappy_java(blocks: &[&[u8]]) -> Vec<u8> {
        let mut out = SNAPPY_MAGIC.to_vec();
        out.extend_from_slice(&1i32.to_be_bytes());
        out.extend_from_slice(&1i32.to_be_bytes());
        for block in blocks {
            let compressed = snap::raw::Encoder::new().compress_vec(block).unwrap();
            out.extend_from_slice(&(compressed.len() as i32).to_be_bytes());
            out.extend_from_slice(&compressed);
        }
        out
    }

    #[test]
    fn snappy_java_blocks_read_as_one_stream() {
        let bytes = snappy_java(&[b"hello ", b"", b"world"]);
        let mut text = String::new();
        reader(Compression::Snappy, &bytes[..])
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "hello world");
        assert!(reader(Compression::Snappy, &b"ZKSN...........x"[..]).is_err());
    }

    #[test]
    fn the_suffix_names_the_compression() {
        assert_eq!(Compression::of(Path::new("snapshot.1a")), Compression::None);
        assert_eq!(
            Compression::of(Path::new("snapshot.1a.gz")),
            Compression::Gzip
        );
        assert_eq!(
            Compression::of(Path::new("snapshot.1a.snappy")),
            Compression::Snappy
        );
    }
}
