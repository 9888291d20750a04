//! The znode register: what the harness does to ZooKeeper and what it
//! may observe, as a [`Model`]. Each path is an independent register that
//! is absent or holds a value and a data version, the version counting
//! setData calls since the node was created. Values are `u64`s the
//! harness encodes into the node's data.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::model::Model;
use crate::operation::Operation;

/// One request on one znode.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Op {
    pub path: String,
    pub action: Action,
}

/// The request, named after the ZooKeeper call it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// `getData`.
    Read,
    /// `setData` with version -1.
    Write(u64),
    /// `setData` with an expected version; -1 means any version, as in
    /// ZooKeeper.
    Cas { expected_version: i32, value: u64 },
    /// `create` (persistent) with this value.
    Create(u64),
    /// `delete` with version -1.
    Delete,
}

/// The reply, success or ZooKeeper error code, so a harness maps a
/// client result onto it with one `match`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ret {
    /// `getData` found the node: its value and `Stat.version`.
    Data {
        value: u64,
        version: i32,
    },
    /// `setData` succeeded: the node's new `Stat.version`.
    Set {
        version: i32,
    },
    /// `create` or `delete` succeeded.
    Done,
    NoNode,
    NodeExists,
    BadVersion,
}

/// A present znode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub value: u64,
    pub version: i32,
}

impl Action {
    /// Runs the action on a znode (`None` = absent) the way ZooKeeper's
    /// leader does: the node's existence is checked before its version.
    /// Returns the znode afterwards and the reply.
    pub fn apply(self, node: Option<Node>) -> (Option<Node>, Ret) {
        match (self, node) {
            (Action::Read, Some(Node { value, version })) => (node, Ret::Data { value, version }),
            (Action::Create(value), None) => (Some(Node { value, version: 0 }), Ret::Done),
            (Action::Create(_), Some(_)) => (node, Ret::NodeExists),
            (Action::Delete, Some(_)) => (None, Ret::Done),
            (Action::Write(value), Some(Node { version, .. })) => set(value, version),
            (
                Action::Cas {
                    expected_version,
                    value,
                },
                Some(Node { version, .. }),
            ) => {
                if expected_version == -1 || expected_version == version {
                    set(value, version)
                } else {
                    (node, Ret::BadVersion)
                }
            }
            (Action::Read | Action::Write(_) | Action::Cas { .. } | Action::Delete, None) => {
                (None, Ret::NoNode)
            }
        }
    }

    /// The value the action would store, if any.
    fn value_mut(&mut self) -> Option<&mut u64> {
        match self {
            Action::Write(value) | Action::Create(value) | Action::Cas { value, .. } => Some(value),
            Action::Read | Action::Delete => None,
        }
    }
}

/// A successful `setData` on a node at `version`.
fn set(value: u64, version: i32) -> (Option<Node>, Ret) {
    let version = version.wrapping_add(1);
    (Some(Node { value, version }), Ret::Set { version })
}

/// Znodes as independent registers keyed by path, all absent at first: a
/// harness that creates nodes before the run records those creates too.
#[derive(Clone, Copy, Debug, Default)]
pub struct ZnodeModel;

impl Model for ZnodeModel {
    type Op = Op;
    type Ret = Ret;
    type State = Option<Node>;
    type Key = String;

    fn key(&self, op: &Op) -> String {
        op.path.clone()
    }

    fn init(&self) -> Option<Node> {
        None
    }

    fn step(&self, state: &Option<Node>, op: &Op, ret: Option<&Ret>) -> Option<Option<Node>> {
        let (next, expected) = op.action.apply(*state);
        match ret {
            Some(ret) if *ret != expected => None,
            _ => Some(next),
        }
    }

    /// Values no read returned are all replaced by one of them: a value
    /// is only ever compared with what a read returned, so no step can
    /// tell them apart, and with unique values (as a harness should
    /// write) lost writes of unknown outcome become identical.
    fn search_ops(&self, ops: &[&Operation]) -> Vec<Op> {
        let read: HashSet<u64> = ops
            .iter()
            .filter_map(|op| match op.ret() {
                Some(Ret::Data { value, .. }) => Some(*value),
                _ => None,
            })
            .collect();
        let mut stand_in = None;
        ops.iter()
            .map(|op| {
                let mut op = op.op.clone();
                if let Some(value) = op.action.value_mut().filter(|v| !read.contains(v)) {
                    *value = *stand_in.get_or_insert(*value);
                }
                op
            })
            .collect()
    }
}
