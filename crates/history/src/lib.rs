//! Concurrent client histories, recorded and checked Jepsen/Porcupine
//! style. A fault-injection harness records what its clients asked of
//! Paddock and what they learned; the checkers then say whether some
//! sequential order of those operations explains every answer
//! (linearizability) and whether each session saw ZooKeeper's ordering
//! guarantees.
//!
//! Layout:
//! - `znode`: the operations a harness records ([`Op`], [`Action`],
//!   [`Ret`]) and the [`ZnodeModel`] specifying them: each path an
//!   independent register holding a value and a data version.
//! - `model`: the [`Model`] trait the checker is generic over.
//! - `operation`: one recorded [`Operation`] and its [`Outcome`]; an
//!   outcome is a definite return or `Unknown` (connection loss: the
//!   operation may take effect at any time after its invocation, or never).
//! - `recorder`: the thread-safe [`Recorder`] clients stamp invocations and
//!   completions on.
//! - `history`: a finished [`History`] and its invariants.
//! - `jsonl`: a history as JSON lines, one event per line, to save a
//!   failing run and re-check it offline.
//! - [`checker`]: the linearizability check: keys checked separately
//!   (P-compositionality), each by a Wing-Gong/Lowe search with Porcupine's
//!   cache, extended to operations of unknown outcome and bounded by a
//!   [`checker::Budget`].
//! - [`session`]: per-session zxid monotonicity and FIFO order.
//!
//! What a harness should do for the checks to be sharp and fast: write a
//! value no other write used, so a read names the write it saw; use one
//! client id per ZooKeeper session; invoke just before sending and
//! complete as soon as the reply (or the failure) is in; map connection
//! loss, timeouts and session expiry to [`Outcome::Unknown`]; and record
//! the creates that set a run up, since every znode starts absent.
//!
//! ```
//! use history::checker::{self, Budget, Verdict};
//! use history::{Action, Op, Outcome, Recorder, Ret, ZnodeModel};
//!
//! let recorder = Recorder::new();
//! let op = |action| Op { path: "/k".into(), action };
//! let create = recorder.invoke(1, op(Action::Create(7)));
//! recorder.complete(create, Outcome::Returned { ret: Ret::Done, zxid: Some(1) });
//! let read = recorder.invoke(2, op(Action::Read));
//! recorder.complete(read, Outcome::Returned { ret: Ret::Data { value: 7, version: 0 }, zxid: Some(1) });
//! let write = recorder.invoke(1, op(Action::Write(8)));
//! recorder.complete(write, Outcome::Unknown);
//!
//! let history = recorder.finish();
//! let report = checker::check(&ZnodeModel, &history, &Budget::default());
//! assert!(matches!(report.verdict, Verdict::Linearizable), "{report}");
//! assert!(history::session::check(&history).is_empty());
//! ```

pub mod checker;
mod history;
mod jsonl;
mod model;
mod operation;
mod recorder;
pub mod session;
mod znode;

pub use history::{History, HistoryError};
pub use model::Model;
pub use operation::{Completion, OpId, Operation, Outcome};
pub use recorder::Recorder;
pub use znode::{Action, Node, Op, Ret, ZnodeModel};
