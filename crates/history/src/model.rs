//! What the linearizability checker needs to know about the system: a
//! sequential specification, split into independent objects.

use std::fmt::Debug;
use std::hash::Hash;

use crate::operation::Operation;

/// A sequential specification made of independent objects, one per key.
///
/// Keying is what makes the check P-compositional: a history is
/// linearizable iff each key's sub-history is, so the checker searches
/// each key alone and the search space stays small.
pub trait Model {
    /// `Eq + Hash` so the search can tell identical operations apart
    /// from the rest; `Debug`, like the other types, so a report can show
    /// them.
    type Op: Clone + Eq + Hash + Debug;
    type Ret: Clone + Debug;
    /// The state of one object. The checker caches states it has explored,
    /// hence `Eq + Hash`.
    type State: Clone + Eq + Hash + Debug;
    /// Names an object; `Ord` so keys are checked and reported in a
    /// reproducible order.
    type Key: Clone + Ord + Debug;

    /// The object `op` acts on.
    fn key(&self, op: &Self::Op) -> Self::Key;

    /// The state every object starts in.
    fn init(&self) -> Self::State;

    /// The state after `op` takes effect in `state`, or `None` if `op`
    /// cannot have returned `ret` there. `ret` is `None` for an operation
    /// of unknown outcome: any return is acceptable, and the state is the
    /// one it would leave. Models are therefore deterministic in their
    /// effects, which ZooKeeper's operations are.
    fn step(
        &self,
        state: &Self::State,
        op: &Self::Op,
        ret: Option<&Self::Ret>,
    ) -> Option<Self::State>;

    /// The operations of one key (in invocation order) as the search
    /// should step them; by default as they are. A model may merge
    /// operations that no return in `ops` can tell apart: states then
    /// repeat more often, so the search's cache prunes more, and of
    /// several identical operations of unknown outcome that could go
    /// next the search tries only one. Reports show the operations as
    /// recorded.
    fn search_ops(&self, ops: &[&Operation<Self::Op, Self::Ret>]) -> Vec<Self::Op> {
        ops.iter().map(|op| op.op.clone()).collect()
    }
}
