//! ZooKeeper's committed txns as the tree's own (`tree::Txn`), for a tree
//! that follows a live ensemble txn by txn, its watches firing as they
//! would on a ZooKeeper server.
//!
//! A ZooKeeper txn is a result: the leader chose a sequential node's name
//! and counted the new version. Each becomes the request that, applied to
//! the same tree, makes the same change: a create of the exact path, a
//! setData (or check) expecting the version before the one recorded. The auth is the
//! superuser's, as the leader checked the ACLs. Applied to a tree that
//! holds what the leader's held, the outcome agrees with the txn
//! ([`agrees`]); one that does not is a tree that has diverged.
//!
//! This holds in steady state only. Right after a SNAP the leader's
//! snapshot is fuzzy and the txns that follow may repeat what it holds:
//! those are replayed on [`crate::zk_tree::ZkTree`], as an import replays
//! a log.

use bytes::Bytes;
use jute::{CreateMode, ErrorCode, Id};
use tree::{Outcome, Txn, TxnOp};

use crate::password::zookeeper_password;
use crate::zk_txn::{CreateTxn, LoggedTxn, ZkOwner, ZkTxn};

/// ZooKeeper's node of the ensemble's membership (`ZooDefs.CONFIG_NODE`).
const CONFIG_NODE: &str = "/zookeeper/config";

/// What a ZooKeeper txn is to the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeChange {
    Txn(Txn),
    /// A reconfig: `/zookeeper/config` holds the new membership, which is
    /// ZooKeeper's to keep, not the tree's to check.
    Config(Bytes),
}

/// The tree's change for `logged`.
pub fn tree_change(logged: &LoggedTxn) -> TreeChange {
    if let ZkTxn::SetData { path, data, .. } = &logged.txn {
        if path == CONFIG_NODE {
            return TreeChange::Config(data.clone().unwrap_or_default());
        }
    }
    let session_id = logged.header.client_id;
    TreeChange::Txn(Txn {
        time_ms: logged.header.time_ms,
        session_id,
        auth: vec![Id::new("super", "")],
        enforce_quota: false,
        op: op(session_id, &logged.txn),
    })
}

/// A reconfig's change as the tree's own txn, for a tree whose
/// `/zookeeper/config` must follow ZooKeeper's: the new membership's
/// `server.N` lines, to which the tree adds `version=` and the txn's zxid,
/// as ZooKeeper's leader writes it.
pub fn reconfig_txn(logged: &LoggedTxn, config: &[u8]) -> Txn {
    let members = String::from_utf8_lossy(config)
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with("version="))
        .map(|line| format!("{line}\n"))
        .collect();
    Txn {
        time_ms: logged.header.time_ms,
        session_id: logged.header.client_id,
        auth: vec![Id::new("super", "")],
        enforce_quota: false,
        op: TxnOp::Reconfig { members },
    }
}

fn op(session_id: i64, txn: &ZkTxn) -> TxnOp {
    match txn {
        ZkTxn::CreateSession { timeout_ms } => TxnOp::CreateSession {
            timeout_ms: *timeout_ms,
            password: Bytes::from(zookeeper_password(session_id)),
        },
        ZkTxn::CloseSession => TxnOp::CloseSession,
        ZkTxn::Create(create) => create_op(create),
        ZkTxn::Delete { path } => TxnOp::Delete {
            path: path.clone(),
            version: -1,
        },
        ZkTxn::SetData {
            path,
            data,
            version,
        } => TxnOp::SetData {
            path: path.clone(),
            data: data.clone(),
            version: version.wrapping_sub(1),
        },
        ZkTxn::SetAcl { path, acl, version } => TxnOp::SetAcl {
            path: path.clone(),
            acl: acl.clone(),
            version: version.wrapping_sub(1),
        },
        // The leader records a check's version as one more than the node's
        // (`checkAndIncVersion`), as it does a setData's.
        ZkTxn::Check { path, version } => TxnOp::Check {
            path: path.clone(),
            version: version.wrapping_sub(1),
        },
        ZkTxn::Error { code } => TxnOp::Error {
            code: ErrorCode::from_code(*code).unwrap_or(ErrorCode::SystemError),
        },
        ZkTxn::Multi(txns) => TxnOp::Multi(txns.iter().map(|t| op(session_id, t)).collect()),
    }
}

fn create_op(create: &CreateTxn) -> TxnOp {
    let (mode, ttl_ms) = match create.owner {
        ZkOwner::Persistent => (CreateMode::Persistent, -1),
        ZkOwner::Session => (CreateMode::Ephemeral, -1),
        ZkOwner::Container => (CreateMode::Container, -1),
        ZkOwner::Ttl(ttl) => (CreateMode::PersistentWithTtl, ttl),
    };
    TxnOp::Create {
        path: create.path.clone(),
        data: create.data.clone(),
        acl: create.acl.clone(),
        mode,
        ttl_ms,
    }
}

/// Whether the tree's `outcome` of `txn` is what the leader's was: a
/// failure where ZooKeeper failed (an error txn, a multi with one), a
/// success where it did not.
pub fn agrees(txn: &ZkTxn, outcome: &Outcome) -> bool {
    match (txn, outcome) {
        (ZkTxn::Error { code }, Outcome::Failed(failed)) => failed.code() == *code,
        (ZkTxn::Multi(txns), Outcome::Multi(_)) => {
            let failed_there = txns.iter().any(|t| matches!(t, ZkTxn::Error { .. }));
            failed_there == outcome.multi_error().is_some()
        }
        (ZkTxn::Error { .. } | ZkTxn::Multi(_), _) => false,
        (_, outcome) => !matches!(outcome, Outcome::Failed(_) | Outcome::Multi(_)),
    }
}
