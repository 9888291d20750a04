//! Shared helpers: a harness that stamps Txns with increasing zxids and
//! times, as the server and the log would.
#![allow(dead_code)]

use bytes::Bytes;
use jute::{Acl, CreateMode, ErrorCode, EventType, Id, Stat};
use tree::{Applied, DataTree, Outcome, Txn, TxnOp};

pub const SESSION: i64 = 0x0100_0000_0000_0001;
pub const T0: i64 = 1_700_000_000_000;

pub struct Harness {
    pub tree: DataTree,
    /// The zxid (log index) of the last applied Txn.
    pub zxid: i64,
    /// The time stamped on the last applied Txn.
    pub time_ms: i64,
    pub auth: Vec<Id>,
    /// Stamped on every Txn, as the server's `enforceQuota`.
    pub enforce_quota: bool,
}

impl Harness {
    /// A fresh tree with `SESSION` created at zxid 1.
    pub fn new() -> Self {
        let mut h = Harness {
            tree: DataTree::new(),
            zxid: 0,
            time_ms: T0,
            auth: vec![Id::new("ip", "127.0.0.1")],
            enforce_quota: false,
        };
        h.session(SESSION);
        h
    }

    pub fn session(&mut self, id: i64) {
        let out = self.apply_as(
            id,
            TxnOp::CreateSession {
                timeout_ms: 30_000,
                password: Bytes::from_static(b"0123456789abcdef"),
            },
        );
        assert_eq!(out.outcome, Outcome::SessionCreated);
    }

    /// Applies `op` from `SESSION` at the next zxid, 10 ms later.
    pub fn apply(&mut self, op: TxnOp) -> Applied {
        self.apply_as(SESSION, op)
    }

    pub fn apply_as(&mut self, session_id: i64, op: TxnOp) -> Applied {
        let auth = self.auth.clone();
        self.apply_full(session_id, auth, op)
    }

    pub fn apply_full(&mut self, session_id: i64, auth: Vec<Id>, op: TxnOp) -> Applied {
        self.zxid += 1;
        self.time_ms += 10;
        let txn = Txn {
            time_ms: self.time_ms,
            session_id,
            auth,
            enforce_quota: self.enforce_quota,
            op,
        };
        self.tree.apply(self.zxid, &txn)
    }

    /// Creates a persistent node with open ACL and returns its path.
    pub fn mk(&mut self, path: &str, data: &str) -> String {
        match self
            .apply(create(path, data, CreateMode::Persistent))
            .outcome
        {
            Outcome::Created { path, .. } => path,
            other => panic!("create {path}: {other:?}"),
        }
    }

    pub fn stat(&self, path: &str) -> Stat {
        self.tree
            .exists(path)
            .unwrap_or_else(|| panic!("{path} missing"))
    }

    pub fn err(&mut self, op: TxnOp) -> ErrorCode {
        let applied = self.apply(op);
        assert!(applied.triggers.is_empty(), "a failed op fires nothing");
        match applied.outcome {
            Outcome::Failed(code) => code,
            other => panic!("expected failure, got {other:?}"),
        }
    }
}

pub fn create(path: &str, data: &str, mode: CreateMode) -> TxnOp {
    create_acl(path, data, mode, Acl::open_unsafe())
}

pub fn create_acl(path: &str, data: &str, mode: CreateMode, acl: Vec<Acl>) -> TxnOp {
    TxnOp::Create {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data.as_bytes())),
        acl,
        mode,
        ttl_ms: -1,
    }
}

pub fn create_ttl(path: &str, mode: CreateMode, ttl_ms: i64) -> TxnOp {
    TxnOp::Create {
        path: path.into(),
        data: Some(Bytes::new()),
        acl: Acl::open_unsafe(),
        mode,
        ttl_ms,
    }
}

pub fn delete(path: &str, version: i32) -> TxnOp {
    TxnOp::Delete {
        path: path.into(),
        version,
    }
}

pub fn set_data(path: &str, data: &str, version: i32) -> TxnOp {
    TxnOp::SetData {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data.as_bytes())),
        version,
    }
}

pub fn set_acl(path: &str, acl: Vec<Acl>, version: i32) -> TxnOp {
    TxnOp::SetAcl {
        path: path.into(),
        acl,
        version,
    }
}

pub fn check(path: &str, version: i32) -> TxnOp {
    TxnOp::Check {
        path: path.into(),
        version,
    }
}

pub fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl {
        perms,
        id: Id::new(scheme, id),
    }
}

/// (path, event) pairs of a trigger list, for compact assertions.
pub fn events(applied: &Applied) -> Vec<(String, EventType)> {
    applied
        .triggers
        .iter()
        .map(|t| (t.path.clone(), t.event))
        .collect()
}
