//! One operation of a history: what a client asked, when, and what it
//! learned. Generic over the op and return types so the checker can be
//! exercised with any [`Model`](crate::Model); the defaults are the znode
//! types the fault-injection harness records.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::znode::{Op, Ret};

/// Names one operation of a history. The recorder hands them out in
/// invocation order; the JSON lines format pairs an invocation with its
/// completion by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OpId(pub u64);

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// What a client learned about an operation when it stopped waiting.
///
/// Definite successes and definite failures (`NoNode`, `BadVersion`, ...)
/// are both just returns the model has to explain, so they share
/// `Returned`; only an operation whose effect the client cannot know is
/// different.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome<R = Ret> {
    /// The server answered.
    Returned {
        /// The answer, success or failure.
        ret: R,
        /// The zxid in the reply header, if the client has it; only the
        /// session checks look at it.
        zxid: Option<i64>,
    },
    /// Connection loss, timeout: the operation may or may not take
    /// effect, at any time after its invocation, even after the client
    /// gave up.
    Unknown,
}

/// When an operation completed, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion<R = Ret> {
    /// Nanoseconds since the recorder started.
    pub at: u64,
    pub outcome: Outcome<R>,
}

/// One operation of one client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation<O = Op, R = Ret> {
    pub id: OpId,
    /// The issuing client; one client is one ZooKeeper session.
    pub client: u32,
    pub op: O,
    /// Nanoseconds since the recorder started, stamped before the request
    /// was sent.
    pub invoked_at: u64,
    /// `None` while the operation is in flight; an operation still in
    /// flight when the history is taken counts as [`Outcome::Unknown`].
    pub completion: Option<Completion<R>>,
}

impl<O, R> Operation<O, R> {
    /// The return the model must explain, if the outcome is definite.
    pub fn ret(&self) -> Option<&R> {
        match &self.completion {
            Some(Completion {
                outcome: Outcome::Returned { ret, .. },
                ..
            }) => Some(ret),
            _ => None,
        }
    }

    /// When a definite operation returned. `None` stands for +infinity:
    /// an operation of unknown outcome may take effect at any later time.
    pub fn returned_at(&self) -> Option<u64> {
        match &self.completion {
            Some(Completion {
                at,
                outcome: Outcome::Returned { .. },
            }) => Some(*at),
            _ => None,
        }
    }

    /// The zxid reported with a definite return.
    pub fn zxid(&self) -> Option<i64> {
        match &self.completion {
            Some(Completion {
                outcome: Outcome::Returned { zxid, .. },
                ..
            }) => *zxid,
            _ => None,
        }
    }
}

/// One line for a report: `#7 client 2 [1.250000ms, 1.900417ms] <op> ->
/// <ret>`.
impl<O: fmt::Debug, R: fmt::Debug> fmt::Display for Operation<O, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} client {} [{}, ",
            self.id,
            self.client,
            Millis(self.invoked_at)
        )?;
        match &self.completion {
            Some(Completion { at, outcome }) => {
                write!(f, "{}] {:?} -> ", Millis(*at), self.op)?;
                match outcome {
                    Outcome::Returned { ret, zxid: None } => write!(f, "{ret:?}"),
                    Outcome::Returned {
                        ret,
                        zxid: Some(zxid),
                    } => write!(f, "{ret:?} (zxid {zxid:#x})"),
                    Outcome::Unknown => write!(f, "unknown"),
                }
            }
            None => write!(f, "never completed] {:?} -> unknown", self.op),
        }
    }
}

/// Nanoseconds shown as milliseconds, to the nanosecond: the order of
/// close stamps is what a reader of a counterexample checks.
struct Millis(u64);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}ms", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}
