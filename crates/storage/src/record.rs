//! The WAL segment format and the recovery scan over one segment's bytes.
//! Pure code: no I/O, so every corruption case is testable on a `Vec<u8>`.
//!
//! A segment file is:
//!
//! ```text
//! offset 0   8 bytes  SEGMENT_MAGIC ("PDKWAL", 0, format version 1)
//! offset 8   records, back to back, each:
//!              u32 header_crc   crc32c of the next 16 header bytes
//!              u32 len          payload length in bytes
//!              u64 index        the caller's index for this record
//!              u32 payload_crc  crc32c of the payload
//!              len bytes        payload
//! then       zeros (preallocated, never written) up to the end of the file
//! ```
//!
//! All integers are little-endian. The header carries its own checksum so that
//! `len` is trusted only once verified: a flipped bit in a length cannot make
//! recovery mistake the rest of the file for a torn tail, and recovery can
//! look for valid records past a bad one cheaply (see [`find_valid_record`]).
//! An all-zero header never verifies (asserted in a test), so it marks the end
//! of written data in a preallocated file.

use std::ops::Range;

/// First bytes of every segment file; the last byte is the format version.
pub(crate) const SEGMENT_MAGIC: [u8; 8] = *b"PDKWAL\x00\x01";
/// Bytes before the first record of a segment.
pub(crate) const SEGMENT_HEADER_BYTES: usize = SEGMENT_MAGIC.len();
/// Bytes of a record header.
pub(crate) const RECORD_HEADER_BYTES: usize = 20;
/// The largest payload [`crate::Wal::append`] accepts, in bytes.
pub const RECORD_PAYLOAD_BYTES_MAX: usize = 1 << 30;

const _: () = assert!(RECORD_PAYLOAD_BYTES_MAX <= u32::MAX as usize);

/// A record's payload, which encodes itself into the log's buffer, after
/// the header [`encode`] leaves room for. A caller that would otherwise
/// encode into a buffer of its own, for the log to copy, saves that copy of
/// every byte it logs.
pub trait Payload {
    /// The bytes [`Payload::encode_into`] appends.
    fn encoded_len(&self) -> usize;
    /// Appends exactly [`Payload::encoded_len`] bytes to `out`.
    fn encode_into(&self, out: &mut Vec<u8>);
}

impl Payload for [u8] {
    fn encoded_len(&self) -> usize {
        self.len()
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

impl<const N: usize> Payload for [u8; N] {
    fn encoded_len(&self) -> usize {
        N
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

impl<P: Payload + ?Sized> Payload for &P {
    fn encoded_len(&self) -> usize {
        (**self).encoded_len()
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        (**self).encode_into(out);
    }
}

/// Appends the encoding of one record to `buf`: its header, then the
/// payload encoded in place.
///
/// # Panics
/// If `payload` is longer than [`RECORD_PAYLOAD_BYTES_MAX`] (callers check
/// first), or appends other than the length it gives.
pub(crate) fn encode<P: Payload + ?Sized>(buf: &mut Vec<u8>, index: u64, payload: &P) {
    let len = payload.encoded_len();
    assert!(len <= RECORD_PAYLOAD_BYTES_MAX);
    let start = buf.len();
    buf.reserve(RECORD_HEADER_BYTES + len);
    buf.extend_from_slice(&[0; RECORD_HEADER_BYTES]);
    payload.encode_into(buf);
    let (header, body) = buf[start..].split_at_mut(RECORD_HEADER_BYTES);
    assert_eq!(
        body.len(),
        len,
        "a WAL payload appended other than its length"
    );
    header[4..8].copy_from_slice(&(len as u32).to_le_bytes());
    header[8..16].copy_from_slice(&index.to_le_bytes());
    header[16..20].copy_from_slice(&crc32c::crc32c(body).to_le_bytes());
    let header_crc = crc32c::crc32c(&header[4..]);
    header[0..4].copy_from_slice(&header_crc.to_le_bytes());
}

/// What sits at one byte offset of a segment.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// A verified record. `payload` and `next` are byte offsets in the segment.
    Record {
        index: u64,
        payload: Range<usize>,
        next: usize,
    },
    /// End of file, or an all-zero header (end of written data).
    End,
    /// Not a valid record. `reason` is for the operator; `resume` is the
    /// byte offset from which a later valid record could start: just past
    /// this one if its header verified (its payload, torn or not, may hold
    /// anything, even bytes that look like a record), else the next byte.
    Bad { reason: String, resume: usize },
}

fn le_u32(bytes: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(bytes);
    u32::from_le_bytes(a)
}

fn le_u64(bytes: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(bytes);
    u64::from_le_bytes(a)
}

/// Decodes the record starting at byte offset `at` of `buf` (`at <= buf.len()`).
pub(crate) fn decode_at(buf: &[u8], at: usize) -> Decoded {
    let rest = &buf[at..];
    if rest.len() < RECORD_HEADER_BYTES {
        if rest.iter().all(|&b| b == 0) {
            return Decoded::End;
        }
        return Decoded::Bad {
            reason: format!(
                "incomplete record header: only {} bytes before the end of the file",
                rest.len()
            ),
            resume: at + 1,
        };
    }
    let header = &rest[..RECORD_HEADER_BYTES];
    if header.iter().all(|&b| b == 0) {
        return Decoded::End;
    }
    if crc32c::crc32c(&header[4..]) != le_u32(&header[0..4]) {
        return Decoded::Bad {
            reason: "record header checksum mismatch".to_string(),
            resume: at + 1,
        };
    }
    let len = le_u32(&header[4..8]) as usize;
    let index = le_u64(&header[8..16]);
    let available = rest.len() - RECORD_HEADER_BYTES;
    if len > available {
        return Decoded::Bad {
            reason: format!(
                "record at index {index} claims {len} payload bytes but only {available} remain in \
                 the file"
            ),
            resume: buf.len(),
        };
    }
    let payload = at + RECORD_HEADER_BYTES..at + RECORD_HEADER_BYTES + len;
    if crc32c::crc32c(&buf[payload.clone()]) != le_u32(&header[16..20]) {
        return Decoded::Bad {
            reason: format!("payload checksum mismatch in record at index {index}"),
            resume: payload.end,
        };
    }
    let next = payload.end;
    Decoded::Record {
        index,
        payload,
        next,
    }
}

/// The result of reading one segment's records from the start.
#[derive(Debug)]
pub(crate) struct Scan {
    /// Verified records in file order: (caller's index, payload byte range).
    pub records: Vec<(u64, Range<usize>)>,
    /// Byte offset just past the last verified record: where appending resumes.
    pub valid_end: usize,
    /// `None` if everything after `valid_end` is zeros; else why it is not,
    /// and the byte offset from which to look for later valid records.
    pub bad: Option<(String, usize)>,
}

/// Reads records from byte offset `start` until the first position that does
/// not hold one, and says whether what follows is clean (all zeros).
pub(crate) fn scan(buf: &[u8], start: usize) -> Scan {
    let mut records = Vec::new();
    let mut at = start;
    loop {
        match decode_at(buf, at) {
            Decoded::Record {
                index,
                payload,
                next,
            } => {
                records.push((index, payload));
                at = next;
            }
            Decoded::End => {
                let bad = first_nonzero(buf, at).map(|nz| {
                    let reason = format!(
                        "end-of-data marker (zero header) is followed by non-zero bytes at offset {nz}"
                    );
                    (reason, at + 1)
                });
                return Scan {
                    records,
                    valid_end: at,
                    bad,
                };
            }
            Decoded::Bad { reason, resume } => {
                return Scan {
                    records,
                    valid_end: at,
                    bad: Some((reason, resume)),
                };
            }
        }
    }
}

fn first_nonzero(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..].iter().position(|&b| b != 0).map(|d| from + d)
}

/// The byte offset of the first verified record starting at or after `from`,
/// trying every byte offset. Zero runs are skipped in one step, so the cost
/// is one header checksum per non-zero byte (plus a payload checksum for the
/// rare header that verifies); it runs only when recovery has already met a
/// bad record.
pub(crate) fn find_valid_record(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while at + RECORD_HEADER_BYTES <= buf.len() {
        // A header's first non-zero byte is within its first RECORD_HEADER_BYTES
        // bytes, so no header starts before `nz + 1 - RECORD_HEADER_BYTES`.
        let nz = first_nonzero(buf, at)?;
        at = at.max((nz + 1).saturating_sub(RECORD_HEADER_BYTES));
        if at + RECORD_HEADER_BYTES > buf.len() {
            return None;
        }
        if let Decoded::Record { .. } = decode_at(buf, at) {
            return Some(at);
        }
        at += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(records: &[(u64, &[u8])], zeros: usize) -> Vec<u8> {
        let mut buf = SEGMENT_MAGIC.to_vec();
        for &(index, payload) in records {
            encode(&mut buf, index, payload);
        }
        buf.resize(buf.len() + zeros, 0);
        buf
    }

    /// A payload that writes other than the length it gave would leave a
    /// header that lies about it: refused before the record goes anywhere.
    #[test]
    #[should_panic(expected = "a WAL payload appended other than its length")]
    fn a_payload_longer_than_it_says_is_refused() {
        struct Lying;
        impl Payload for Lying {
            fn encoded_len(&self) -> usize {
                3
            }
            fn encode_into(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(b"four");
            }
        }
        encode(&mut Vec::new(), 1, &Lying);
    }

    #[test]
    fn zero_header_never_verifies() {
        // The end marker must be distinguishable from the emptiest record.
        let mut buf = Vec::new();
        encode(&mut buf, 0, b"");
        assert_ne!(&buf[..], &[0u8; RECORD_HEADER_BYTES][..]);
        assert_ne!(crc32c::crc32c(&[0u8; 16]), 0);
    }

    #[test]
    fn scan_reads_records_then_stops_at_zeros() {
        let buf = segment(&[(1, b"a"), (2, b""), (7, b"xyz")], 100);
        let s = scan(&buf, SEGMENT_HEADER_BYTES);
        assert_eq!(s.bad, None);
        let idx: Vec<u64> = s.records.iter().map(|r| r.0).collect();
        assert_eq!(idx, vec![1, 2, 7]);
        assert_eq!(&buf[s.records[2].1.clone()], b"xyz");
        assert_eq!(s.valid_end, buf.len() - 100);
    }

    #[test]
    fn flipped_length_bit_is_a_header_error_not_a_short_file() {
        let mut buf = segment(&[(1, b"hello"), (2, b"world")], 0);
        buf[SEGMENT_HEADER_BYTES + 4] ^= 0x40;
        let s = scan(&buf, SEGMENT_HEADER_BYTES);
        assert_eq!(s.valid_end, SEGMENT_HEADER_BYTES);
        let (reason, resume) = s.bad.expect("bad");
        assert!(reason.contains("header checksum"));
        assert_eq!(resume, SEGMENT_HEADER_BYTES + 1);
        let second = SEGMENT_HEADER_BYTES + RECORD_HEADER_BYTES + 5;
        assert_eq!(
            find_valid_record(&buf, SEGMENT_HEADER_BYTES + 1),
            Some(second)
        );
    }

    #[test]
    fn a_record_embedded_in_a_torn_payload_is_not_taken_for_a_later_record() {
        let mut inner = Vec::new();
        encode(&mut inner, 5, b"looks like a record");
        inner.extend_from_slice(b"tail");
        let mut buf = segment(&[(1, b"ok"), (2, &inner)], 64);
        let second = SEGMENT_HEADER_BYTES + RECORD_HEADER_BYTES + 2;
        let last_payload_byte = second + RECORD_HEADER_BYTES + inner.len() - 1;
        buf[last_payload_byte] ^= 1;
        let s = scan(&buf, SEGMENT_HEADER_BYTES);
        assert_eq!(s.valid_end, second);
        let (_, resume) = s.bad.expect("bad");
        assert_eq!(resume, last_payload_byte + 1);
        assert_eq!(find_valid_record(&buf, resume), None);
        assert_eq!(
            find_valid_record(&buf, second + 1),
            Some(second + RECORD_HEADER_BYTES)
        );
    }

    #[test]
    fn find_valid_record_skips_zeros_and_garbage() {
        let mut buf = vec![0u8; 1000];
        buf.extend_from_slice(&[0xAB; 37]);
        buf.extend_from_slice(&[0; 3]);
        let at = buf.len();
        encode(&mut buf, 9, b"payload");
        buf.resize(buf.len() + 50, 0);
        assert_eq!(find_valid_record(&buf, 0), Some(at));
        assert_eq!(find_valid_record(&buf, at + 1), None);
    }
}
