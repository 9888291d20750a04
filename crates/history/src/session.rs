//! ZooKeeper's per-session guarantees, which linearizability of each znode
//! does not imply: a session never sees the server's state go back in
//! time (the zxids of its replies, reads included, never decrease), and
//! its requests are answered in the order it sent them. One client of the
//! history is one session; operations of unknown outcome have neither a
//! zxid nor a reply, so they are left out.

use std::collections::BTreeMap;
use std::fmt;

use crate::history::History;
use crate::operation::Operation;

/// A broken guarantee and the two operations that show it; `earlier` was
/// invoked first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation<O, R> {
    /// `later`'s reply carried a smaller zxid than `earlier`'s.
    ZxidWentBackwards {
        client: u32,
        earlier: Operation<O, R>,
        later: Operation<O, R>,
    },
    /// `later` completed before `earlier`.
    Overtaken {
        client: u32,
        earlier: Operation<O, R>,
        later: Operation<O, R>,
    },
}

/// Every violation in `history`: by client, the zxid ones and then the
/// overtakings, each in the order the later operations were invoked.
/// Each later operation is paired with the earlier one that shows the
/// violation most clearly (the largest zxid, the latest completion).
pub fn check<O: Clone, R: Clone>(history: &History<O, R>) -> Vec<Violation<O, R>> {
    let mut by_client: BTreeMap<u32, Vec<&Operation<O, R>>> = BTreeMap::new();
    for op in history.ops() {
        if op.returned_at().is_some() {
            by_client.entry(op.client).or_default().push(op);
        }
    }
    let mut violations = Vec::new();
    for (client, ops) in by_client {
        // `ops` is in invocation order, like the history.
        for (earlier, later) in inversions(&ops, Operation::zxid) {
            violations.push(Violation::ZxidWentBackwards {
                client,
                earlier: earlier.clone(),
                later: later.clone(),
            });
        }
        for (earlier, later) in inversions(&ops, Operation::returned_at) {
            violations.push(Violation::Overtaken {
                client,
                earlier: earlier.clone(),
                later: later.clone(),
            });
        }
    }
    violations
}

/// An earlier and a later operation.
type Pair<'a, O, R> = (&'a Operation<O, R>, &'a Operation<O, R>);

/// Pairs each operation whose `measure` is below that of an operation
/// before it with the one before it that has the largest. Operations
/// without a measure are skipped.
fn inversions<'a, O, R, T: Ord>(
    ops: &[&'a Operation<O, R>],
    measure: impl Fn(&Operation<O, R>) -> Option<T>,
) -> Vec<Pair<'a, O, R>> {
    let mut out = Vec::new();
    let mut highest: Option<(T, &Operation<O, R>)> = None;
    for &op in ops {
        let Some(value) = measure(op) else { continue };
        match &highest {
            Some((top, top_op)) if value < *top => out.push((*top_op, op)),
            _ => highest = Some((value, op)),
        }
    }
    out
}

impl<O: fmt::Debug, R: fmt::Debug> fmt::Display for Violation<O, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, client, earlier, later) = match self {
            Violation::ZxidWentBackwards {
                client,
                earlier,
                later,
            } => ("saw the zxid go backwards", client, earlier, later),
            Violation::Overtaken {
                client,
                earlier,
                later,
            } => ("got replies out of order", client, earlier, later),
        };
        write!(f, "client {client} {what}:\n  {earlier}\n  {later}")
    }
}
