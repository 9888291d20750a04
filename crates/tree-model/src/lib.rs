//! A reference model of Paddock's data tree, and a [`Checker`] that runs
//! the same operations on a [`tree::DataTree`] and on the model and
//! compares the outcome, the watch triggers and then the whole state
//! (paths, data, every stat field including the derived cversion,
//! numChildren and pzxid, ACLs, sessions, ephemerals, reaper candidates)
//! after every step.
//!
//! The model is naive on purpose (one ordered map of paths, linear scans)
//! and written from ZooKeeper's `PrepRequestProcessor` and `DataTree`, so
//! that it and the tree are unlikely to share a mistake.
//!
//! Steps come from a generator or a fuzzer as [`Step`]s: small numbers
//! turned into concrete [`Command`]s against the model's current state.
//! With the `arbitrary` feature, the seeds implement
//! `arbitrary::Arbitrary`, for fuzzing.
//!
//! ```
//! use tree_model::{Checker, OpSeed, PathSeed, Step};
//!
//! let mut checker = Checker::new();
//! let create = OpSeed {
//!     kind: 0,
//!     path: PathSeed::Fresh { absolute: true, components: vec![0] },
//!     version: 0,
//!     data: Some(b"x".to_vec()),
//!     mode: 3, // ephemeral sequential
//!     ttl: 0,
//!     acl: 0,
//! };
//! checker.step(&Step::Write { session: 0, op: create }).unwrap();
//! checker.step(&Step::CloseSession { session: 0 }).unwrap();
//! checker.check_snapshot().unwrap();
//! ```

mod checker;
#[cfg(feature = "arbitrary")]
mod fuzz_input;
mod model;
mod op;
mod seed;

pub use checker::Checker;
pub use op::Command;
pub use seed::{component, OpSeed, PathSeed, Step, SESSIONS};
