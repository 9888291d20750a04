//! A finished history: every operation the clients issued, checked once
//! for the invariants the checkers rely on, so they need not re-check.

use std::collections::HashSet;

use thiserror::Error;

use crate::operation::{OpId, Operation};
use crate::znode::{Op, Ret};

/// The operations of one run, in invocation order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History<O = Op, R = Ret> {
    ops: Vec<Operation<O, R>>,
}

/// Why a set of operations is not a history.
#[derive(Debug, Error)]
pub enum HistoryError {
    #[error("operation {0} appears twice")]
    DuplicateId(OpId),
    #[error("operation {0} completed before it was invoked")]
    CompletedBeforeInvoked(OpId),
    #[error("operation {0} completed twice")]
    DuplicateCompletion(OpId),
    #[error("operation {0} completed but was never invoked")]
    CompletionWithoutInvocation(OpId),
    #[error("line {line}: {source}")]
    Json {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl<O, R> History<O, R> {
    /// Builds a history from operations in any order, e.g. ones written by
    /// hand in a test. Ids must be unique and no operation may complete
    /// before it was invoked.
    pub fn from_ops(mut ops: Vec<Operation<O, R>>) -> Result<Self, HistoryError> {
        let mut ids = HashSet::with_capacity(ops.len());
        for op in &ops {
            if !ids.insert(op.id) {
                return Err(HistoryError::DuplicateId(op.id));
            }
            if op.completion.as_ref().is_some_and(|c| c.at < op.invoked_at) {
                return Err(HistoryError::CompletedBeforeInvoked(op.id));
            }
        }
        ops.sort_by_key(|op| (op.invoked_at, op.id));
        Ok(History { ops })
    }

    /// The operations, ordered by invocation time (then id).
    pub fn ops(&self) -> &[Operation<O, R>] {
        &self.ops
    }
}
