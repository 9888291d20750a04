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

pub(crate) fn encode_entry(entry: &Entry, out: &mut Vec<u8>) {
    out.push(KIND_ENTRY);
    entry
        .write_to_vec(out)
        .expect("encoding a raft entry into memory cannot fail");
}

pub(crate) fn encode_hard_state(hs: &HardState, out: &mut Vec<u8>) {
    out.push(KIND_HARD_STATE);
    hs.write_to_vec(out)
        .expect("encoding a hard state into memory cannot fail");
}

pub(crate) fn encode_snapshot_mark(index: u64, out: &mut Vec<u8>) {
    out.push(KIND_SNAPSHOT_MARK);
    out.extend_from_slice(&index.to_be_bytes());
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
