//! Concrete operations: what a [`crate::Step`] becomes once its paths and
//! versions are chosen, and the [`TxnOp`] the tree is given for it.

use bytes::Bytes;
use jute::{Acl, CreateMode};
use tree::TxnOp;

/// The op of one Txn. Multis may hold any op; the ones ZooKeeper does not
/// allow in a multi make the whole multi fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    OpenSession {
        timeout_ms: i32,
    },
    CloseSession,
    Create {
        path: String,
        data: Vec<u8>,
        acl: Vec<Acl>,
        mode: CreateMode,
        ttl_ms: i64,
    },
    Delete {
        path: String,
        version: i32,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    Check {
        path: String,
        version: i32,
    },
    Reap {
        path: String,
    },
    Multi(Vec<Op>),
}

/// One step of a run, concrete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A Txn from `session`, applied at the next zxid.
    Write { session: i64, op: Op },
    /// Every read the tree offers, on one path, compared with the model.
    Read { path: String },
    /// The clock moves on (for TTLs and the reaper's candidates).
    Sleep { ms: u16 },
}

impl Op {
    pub fn to_txn(&self) -> TxnOp {
        match self {
            Op::OpenSession { timeout_ms } => TxnOp::CreateSession {
                timeout_ms: *timeout_ms,
                password: Bytes::from_static(b"0123456789abcdef"),
            },
            Op::CloseSession => TxnOp::CloseSession,
            Op::Create {
                path,
                data,
                acl,
                mode,
                ttl_ms,
            } => TxnOp::Create {
                path: path.clone(),
                data: Bytes::copy_from_slice(data),
                acl: acl.clone(),
                mode: *mode,
                ttl_ms: *ttl_ms,
            },
            Op::Delete { path, version } => TxnOp::Delete {
                path: path.clone(),
                version: *version,
            },
            Op::SetData {
                path,
                data,
                version,
            } => TxnOp::SetData {
                path: path.clone(),
                data: Bytes::copy_from_slice(data),
                version: *version,
            },
            Op::SetAcl { path, acl, version } => TxnOp::SetAcl {
                path: path.clone(),
                acl: acl.clone(),
                version: *version,
            },
            Op::Check { path, version } => TxnOp::Check {
                path: path.clone(),
                version: *version,
            },
            Op::Reap { path } => TxnOp::Reap { path: path.clone() },
            Op::Multi(ops) => TxnOp::Multi(ops.iter().map(Op::to_txn).collect()),
        }
    }
}
