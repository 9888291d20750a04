//! Records a history while clients run. Shared by reference (typically an
//! `Arc`) between threads or tokio tasks; each call holds a std mutex for
//! a push or a store, never across an await.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use crate::history::History;
use crate::operation::{Completion, OpId, Operation, Outcome};
use crate::znode::{Op, Ret};

/// Stamps invocations and completions with a monotonic clock started when
/// the recorder was made.
#[derive(Debug)]
pub struct Recorder<O = Op, R = Ret> {
    start: Instant,
    ops: Mutex<Vec<Operation<O, R>>>,
}

impl Recorder {
    /// A recorder of znode operations. For other types, and for the
    /// compiler's sake where nothing else names them, use
    /// [`Recorder::default`].
    pub fn new() -> Self {
        Self::default()
    }
}

impl<O, R> Recorder<O, R> {
    /// Call just before sending the request. The time is taken under the
    /// lock, so ids follow invocation times.
    pub fn invoke(&self, client: u32, op: O) -> OpId {
        let mut ops = self.lock();
        let id = OpId(ops.len() as u64);
        let invoked_at = self.now();
        ops.push(Operation {
            id,
            client,
            op,
            invoked_at,
            completion: None,
        });
        id
    }

    /// Call as soon as the client knows the outcome. For the per-client
    /// FIFO check the stamps of one client must follow the order its
    /// replies arrived in, so stamp them from the task that reads them.
    ///
    /// # Panics
    /// If `id` was not handed out by this recorder or was completed before:
    /// both are bugs in the harness, and a wrong history is worse than none.
    pub fn complete(&self, id: OpId, outcome: Outcome<R>) {
        let mut ops = self.lock();
        let at = self.now();
        let op = usize::try_from(id.0)
            .ok()
            .and_then(|index| ops.get_mut(index))
            .unwrap_or_else(|| panic!("operation {id} was not invoked on this recorder"));
        assert!(op.completion.is_none(), "operation {id} completed twice");
        op.completion = Some(Completion { at, outcome });
    }

    /// The history so far. Operations still in flight appear without a
    /// completion, i.e. of unknown outcome; recording may go on, and a
    /// later call sees their completions.
    pub fn finish(&self) -> History<O, R>
    where
        O: Clone,
        R: Clone,
    {
        History::from_ops(self.lock().clone())
            .expect("a recorder hands out unique ids and completes after invoking")
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// A panic in another client while it held the lock leaves the
    /// operations consistent (each update is a single push or store), so
    /// poisoning is ignored rather than losing the history.
    fn lock(&self) -> MutexGuard<'_, Vec<Operation<O, R>>> {
        self.ops.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<O, R> Default for Recorder<O, R> {
    /// Starts the clock.
    fn default() -> Self {
        Recorder {
            start: Instant::now(),
            ops: Mutex::new(Vec::new()),
        }
    }
}
