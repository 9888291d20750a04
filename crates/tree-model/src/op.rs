//! Concrete steps: what a [`crate::Step`] becomes once its paths and
//! versions are chosen. Writes are the tree's own [`TxnOp`]s, so model and
//! tree are handed exactly the same thing.

use bytes::Bytes;
use tree::TxnOp;

/// One step of a run, concrete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A Txn from `session`, applied at the next zxid.
    Write { session: i64, op: TxnOp },
    /// Every read the tree offers, on one path, compared with the model.
    Read { path: String },
    /// The clock moves on (for TTLs and the reaper's candidates).
    Sleep { ms: u16 },
}

/// A session's creation; its password matters to neither side.
pub fn open_session(timeout_ms: i32) -> TxnOp {
    TxnOp::CreateSession {
        timeout_ms,
        password: Bytes::from_static(b"0123456789abcdef"),
    }
}
