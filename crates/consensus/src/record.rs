//! What the write-ahead log holds for raft: entries and hard states, each a
//! kind byte followed by its protobuf encoding (raft-rs's own codec).

use protobuf::Message as _;
use raft::prelude::{Entry, HardState};

const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const KIND_SNAPSHOT_MARK: u8 = 3;

/// A record as recovery reads it: an entry is only recognised here (its
/// index is its record's own); [`decode_entry`] decodes the ones kept.
pub(crate) enum LogRecord {
    Entry,
    HardState(HardState),
    /// A snapshot received from the leader was installed here, at this log
    /// index: every entry recorded before the mark is superseded by it.
    SnapshotMark {
        index: u64,
    },
}

/// A record as the log writes it: a kind byte, then an entry's or a hard
/// state's protobuf encoding, or a snapshot mark's index. It encodes itself
/// straight into the WAL's buffer, so an entry's bytes are copied once on
/// their way to the page cache instead of twice.
pub(crate) enum Record<'a> {
    Entry(&'a Entry),
    HardState(&'a HardState),
    SnapshotMark(u64),
}

impl storage::Payload for Record<'_> {
    fn encoded_len(&self) -> usize {
        let body = match self {
            Record::Entry(entry) => entry.compute_size() as usize,
            Record::HardState(hs) => hs.compute_size() as usize,
            Record::SnapshotMark(index) => std::mem::size_of_val(index),
        };
        1 + body
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Record::Entry(entry) => {
                out.push(KIND_ENTRY);
                entry
                    .write_to_vec(out)
                    .expect("encoding a raft entry into memory cannot fail");
            }
            Record::HardState(hs) => {
                out.push(KIND_HARD_STATE);
                hs.write_to_vec(out)
                    .expect("encoding a hard state into memory cannot fail");
            }
            Record::SnapshotMark(index) => {
                out.push(KIND_SNAPSHOT_MARK);
                out.extend_from_slice(&index.to_be_bytes());
            }
        }
    }
}

pub(crate) fn decode(payload: &[u8]) -> Result<LogRecord, String> {
    let (kind, body) = payload.split_first().ok_or("empty record")?;
    match *kind {
        KIND_ENTRY => Ok(LogRecord::Entry),
        KIND_HARD_STATE => HardState::parse_from_bytes(body)
            .map(LogRecord::HardState)
            .map_err(|e| e.to_string()),
        KIND_SNAPSHOT_MARK => <[u8; 8]>::try_from(body)
            .map(|b| LogRecord::SnapshotMark {
                index: u64::from_be_bytes(b),
            })
            .map_err(|_| "snapshot mark of the wrong length".to_string()),
        other => Err(format!("unknown record kind {other}")),
    }
}

/// The term of the entry the record written for `index` holds, read
/// without decoding the entry: its protobuf fields are walked and only its
/// term and index read, nothing copied. Recovery needs no more of the
/// entries it does not keep decoded, which are read back when applied.
pub(crate) fn entry_term(payload: &[u8], index: u64) -> Result<u64, String> {
    let mut body = match payload.split_first() {
        Some((&KIND_ENTRY, body)) => body,
        _ => return Err("it holds something other than an entry".to_string()),
    };
    let (mut term, mut found_index) = (0, 0);
    while !body.is_empty() {
        let key = varint(&mut body)?;
        let value = match key & 7 {
            WIRE_VARINT => varint(&mut body)?,
            WIRE_FIXED64 => skip(&mut body, 8)?,
            WIRE_LENGTH_DELIMITED => {
                let len = varint(&mut body)?;
                skip(&mut body, len)?
            }
            WIRE_FIXED32 => skip(&mut body, 4)?,
            wire => return Err(format!("protobuf wire type {wire} in an entry")),
        };
        match key >> 3 {
            ENTRY_FIELD_TERM => term = value,
            ENTRY_FIELD_INDEX => found_index = value,
            _ => {}
        }
    }
    if found_index != index {
        return Err(format!("it holds entry {found_index}"));
    }
    Ok(term)
}

/// Protobuf's wire types, and `eraftpb.Entry`'s field numbers.
const WIRE_VARINT: u64 = 0;
const WIRE_FIXED64: u64 = 1;
const WIRE_LENGTH_DELIMITED: u64 = 2;
const WIRE_FIXED32: u64 = 5;
const ENTRY_FIELD_TERM: u64 = 2;
const ENTRY_FIELD_INDEX: u64 = 3;

/// Takes a protobuf varint off the front of `input`.
fn varint(input: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first().ok_or("a truncated varint")?;
        *input = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a varint longer than 10 bytes".to_string())
}

/// Takes `len` bytes off the front of `input`; the value of a field read
/// past is 0.
fn skip(input: &mut &[u8], len: u64) -> Result<u64, String> {
    let len = usize::try_from(len)
        .ok()
        .filter(|&len| len <= input.len())
        .ok_or("a truncated field")?;
    *input = &input[len..];
    Ok(0)
}

/// Decodes the entry the record written for `index` holds, refusing a
/// record that holds anything else.
pub(crate) fn decode_entry(payload: &[u8], index: u64) -> Result<Entry, String> {
    let body = match payload.split_first() {
        Some((&KIND_ENTRY, body)) => body,
        _ => return Err("it holds something other than an entry".to_string()),
    };
    let entry = Entry::parse_from_bytes(body).map_err(|e| e.to_string())?;
    if entry.index != index {
        return Err(format!("it holds entry {}", entry.index));
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use raft::prelude::EntryType;

    use super::*;

    fn encoded(record: Record) -> Vec<u8> {
        use storage::Payload as _;
        let mut out = Vec::new();
        record.encode_into(&mut out);
        assert_eq!(out.len(), record.encoded_len());
        out
    }

    #[test]
    fn an_entrys_term_is_read_as_decoding_reads_it() {
        for (term, index, data, context, entry_type) in [
            (0, 1, vec![], vec![], EntryType::EntryNormal),
            (7, 300, vec![1; 200], vec![], EntryType::EntryNormal),
            (
                u64::MAX,
                u64::MAX - 1,
                vec![9; 70_000],
                vec![2; 3],
                EntryType::EntryConfChangeV2,
            ),
        ] {
            let mut entry = Entry::default();
            entry.set_entry_type(entry_type);
            (entry.term, entry.index) = (term, index);
            entry.data = data.into();
            entry.context = context.into();
            let payload = encoded(Record::Entry(&entry));
            assert_eq!(entry_term(&payload, index), Ok(term));
            assert_eq!(decode_entry(&payload, index).unwrap().term, term);
            assert_eq!(
                entry_term(&payload, index.wrapping_add(1)),
                Err(format!("it holds entry {index}"))
            );
        }
    }

    /// Cut anywhere, an entry's record is refused exactly when decoding
    /// refuses it: a cut between two fields leaves a shorter entry that
    /// both read, a cut inside one is damage to both.
    #[test]
    fn a_cut_entry_is_read_as_decoding_reads_it() {
        let mut entry = Entry::default();
        (entry.term, entry.index) = (300, 5);
        entry.data = vec![7; 200].into();
        let payload = encoded(Record::Entry(&entry));
        let mut refused = 0;
        for cut in 1..=payload.len() {
            let cut = &payload[..cut];
            let decoded = decode_entry(cut, 5).map(|entry| entry.term);
            assert_eq!(
                entry_term(cut, 5).is_ok(),
                decoded.is_ok(),
                "cut at {}",
                cut.len()
            );
            if let Ok(term) = decoded {
                assert_eq!(entry_term(cut, 5), Ok(term));
            }
            refused += usize::from(decoded.is_err());
        }
        assert!(refused > 200, "{refused}");
    }

    #[test]
    fn a_record_of_another_kind_is_refused() {
        let hard_state = encoded(Record::HardState(&HardState::default()));
        assert!(entry_term(&hard_state, 5).is_err());
        let mark = encoded(Record::SnapshotMark(5));
        assert!(entry_term(&mark, 5).is_err());
        assert!(entry_term(&[], 5).is_err());
    }
}
