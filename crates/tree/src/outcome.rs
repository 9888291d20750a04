//! What applying a Txn produced: the result the owning server replies
//! with, and the watch triggers every server fires for its own clients.

use bytes::Bytes;
use jute::{ErrorCode, EventType, Stat};

use crate::acl::AclList;
use crate::quota::QuotaBreach;

/// The result of [`crate::DataTree::apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub outcome: Outcome,
    /// In the order ZooKeeper fires them; empty when nothing changed.
    pub triggers: Vec<Trigger>,
    /// Quota limits the Txn's writes passed, when it enforces quotas, in
    /// the order they were found; a hard one failed its op. Kept even
    /// when a later op failed the multi, as ZooKeeper logs them first.
    pub quota_breaches: Vec<QuotaBreach>,
}

/// The result of one Txn. Stats are what the client sees (see
/// `DataNode.copyStat`: cversion counts deletes, container and TTL owners
/// read 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The actual path, with the sequence suffix if any.
    Created {
        path: String,
        stat: Stat,
    },
    Deleted,
    SetData {
        stat: Stat,
    },
    SetAcl {
        stat: Stat,
    },
    /// The ensemble's new configuration, as `/zookeeper/config` now holds
    /// it, and that node's stat: what ZooKeeper's reconfig answers.
    Reconfigured {
        config: Bytes,
        stat: Stat,
    },
    Checked,
    SessionCreated,
    SessionClosed,
    /// One result per op, in order.
    ///
    /// All ops succeeded: every element is `Ok`. Some op failed: nothing
    /// was applied, and the results are exactly ZooKeeper's `ErrorResult`s
    /// (`DataTree.processTxn`, multi case): ops before the failing one are
    /// `Err(ErrorCode::Ok)` (clients call it a rolled-back result), the
    /// failing op is `Err(code)`, ops after it are
    /// `Err(ErrorCode::RuntimeInconsistency)`.
    ///
    /// The multi's own reply header carries `err = 0` in both cases:
    /// `FinalRequestProcessor` never sets `err` for a multi; clients find
    /// the failure in the results. See [`Outcome::reply_err`].
    Multi(Vec<Result<Outcome, ErrorCode>>),
    /// The op failed its checks and changed nothing. The reply header
    /// carries this code.
    Failed(ErrorCode),
}

impl Outcome {
    /// The `err` of the reply header ZooKeeper sends for this outcome.
    pub fn reply_err(&self) -> ErrorCode {
        match self {
            Outcome::Failed(code) => *code,
            _ => ErrorCode::Ok,
        }
    }

    /// For a failed multi, the code of the op that failed (what the Java
    /// client throws); `None` for a multi that succeeded or any other
    /// outcome.
    pub fn multi_error(&self) -> Option<ErrorCode> {
        match self {
            Outcome::Multi(results) => results.iter().find_map(|r| match r {
                Err(code) if *code != ErrorCode::Ok => Some(*code),
                _ => None,
            }),
            _ => None,
        }
    }
}

/// A watch trigger.
///
/// `NodeDeleted` fires both the data watches and the child watches set on
/// `path` (`DataTree.deleteNode` triggers both managers); the other types
/// fire their own kind (`NodeCreated`/`NodeDataChanged`: data and exist
/// watches; `NodeChildrenChanged`: child watches). Persistent recursive
/// watches on ancestors are the server's to match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    pub path: String,
    pub event: EventType,
    /// The ACL ZooKeeper passes along with the event: the node's for
    /// `NodeCreated`/`NodeDeleted`/`NodeDataChanged`, the parent's for
    /// `NodeChildrenChanged`. The server delivers the event only to
    /// watchers whose session passes READ on it (`NIOServerCnxn.process`).
    pub acl: AclList,
}
