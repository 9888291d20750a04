//! Linearizability checking, Porcupine style: the history is split by key
//! (P-compositionality: it is linearizable iff every key's part is) and
//! each key's operations are searched for a linearization on their own.
//! See `search` for the search itself and what makes operations of
//! unknown outcome affordable.

mod bitset;
mod budget;
mod entries;
mod explored;
mod search;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

use budget::Meter;
pub use budget::{Budget, Exhausted};
use search::{Deepest, KeyOps, Search, Unknowns};

use crate::history::History;
use crate::model::Model;
use crate::operation::Operation;

/// The verdict and how much was checked.
#[derive(Debug)]
pub struct Report<M: Model> {
    pub verdict: Verdict<M>,
    /// Operations in the history, of every key and outcome.
    pub ops: usize,
    /// Keys in the history.
    pub keys: usize,
    /// Model steps the search tried, over all keys.
    pub steps: u64,
}

#[derive(Debug)]
pub enum Verdict<M: Model> {
    Linearizable,
    /// The first key, in key order, with no linearization.
    NotLinearizable(Box<Counterexample<M>>),
    /// The budget ran out on `key` (the first such key) and no other key
    /// was found not linearizable.
    Unknown {
        key: M::Key,
        reason: Exhausted,
        /// Set if `key` has no linearization in which every operation of
        /// unknown outcome took effect, if at all, before its client gave
        /// up on it: why not. Such a history is most likely not
        /// linearizable; proving it means also trying every later point
        /// for every such operation, which is what ran out of budget.
        timely: Option<Box<Counterexample<M>>>,
    },
}

/// Why one key is not linearizable: the longest prefix the search could
/// linearize, and the operations none of which could extend it into a
/// linearization. Times are in the operations.
#[derive(Debug)]
pub struct Counterexample<M: Model> {
    pub key: M::Key,
    /// The longest linearizable prefix found, in linearization order.
    pub prefix: Vec<Operation<M::Op, M::Ret>>,
    /// The model state after `prefix`.
    pub state: M::State,
    /// The definite operation that returned before any candidate could be
    /// linearized.
    pub stuck: Operation<M::Op, M::Ret>,
    /// The operations that could have come next, `stuck` among them.
    pub candidates: Vec<Operation<M::Op, M::Ret>>,
}

/// Checks `history` against `model`. Keys are checked in order; the
/// first key found not linearizable ends the check.
pub fn check<M: Model>(model: &M, history: &History<M::Op, M::Ret>, budget: &Budget) -> Report<M> {
    let mut by_key = BTreeMap::<M::Key, Vec<_>>::new();
    for op in history.ops() {
        by_key.entry(model.key(&op.op)).or_default().push(op);
    }
    let keys = by_key.len();
    let deadline = budget.timeout.map(|timeout| Instant::now() + timeout);

    let mut steps = 0;
    let mut verdict = Verdict::Linearizable;
    for (key, ops) in by_key {
        let mut meter = Meter::new(budget.max_steps, deadline);
        let result = check_key(model, &ops, &mut meter);
        steps += meter.steps();
        match result {
            KeyVerdict::Linearizable => {}
            KeyVerdict::NotLinearizable(deepest) => {
                verdict = Verdict::NotLinearizable(Box::new(explain(key, &ops, deepest)));
                break;
            }
            KeyVerdict::Unknown { reason, timely } => {
                if matches!(verdict, Verdict::Linearizable) {
                    let timely =
                        timely.map(|deepest| Box::new(explain(key.clone(), &ops, deepest)));
                    verdict = Verdict::Unknown {
                        key,
                        reason,
                        timely,
                    };
                }
            }
        }
    }
    Report {
        verdict,
        ops: history.ops().len(),
        keys,
        steps,
    }
}

/// [`Verdict`] for one key, operations named by index.
enum KeyVerdict<S> {
    Linearizable,
    NotLinearizable(Deepest<S>),
    Unknown {
        reason: Exhausted,
        timely: Option<Deepest<S>>,
    },
}

/// Searches one key, first assuming operations of unknown outcome took
/// effect before their clients gave up, which finds the linearization of
/// a typical history fast, then, if that was not enough, without.
fn check_key<M: Model>(
    model: &M,
    ops: &[&Operation<M::Op, M::Ret>],
    meter: &mut Meter,
) -> KeyVerdict<M::State> {
    let key_ops = KeyOps::new(model, ops);
    let timely = match key_ops.search(model, Unknowns::Timely, meter) {
        Err(reason) => {
            return KeyVerdict::Unknown {
                reason,
                timely: None,
            }
        }
        Ok(Search::Linearizable) => return KeyVerdict::Linearizable,
        Ok(Search::Refuted {
            deepest,
            restricted: false,
        }) => return KeyVerdict::NotLinearizable(deepest),
        Ok(Search::Refuted {
            deepest,
            restricted: true,
        }) => deepest,
    };
    match key_ops.search(model, Unknowns::Anytime, meter) {
        Err(reason) => KeyVerdict::Unknown {
            reason,
            timely: Some(timely),
        },
        Ok(Search::Linearizable) => KeyVerdict::Linearizable,
        Ok(Search::Refuted { deepest, .. }) => KeyVerdict::NotLinearizable(deepest),
    }
}

fn explain<M: Model>(
    key: M::Key,
    ops: &[&Operation<M::Op, M::Ret>],
    deepest: Deepest<M::State>,
) -> Counterexample<M> {
    let op = |index: usize| ops[index].clone();
    Counterexample {
        key,
        prefix: deepest.prefix.into_iter().map(op).collect(),
        state: deepest.state,
        stuck: op(deepest.stuck),
        candidates: deepest.candidates.into_iter().map(op).collect(),
    }
}

impl<M: Model> fmt::Display for Report<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ops on {} keys, {} steps: ",
            self.ops, self.keys, self.steps
        )?;
        match &self.verdict {
            Verdict::Linearizable => write!(f, "linearizable"),
            Verdict::NotLinearizable(counterexample) => write!(f, "{counterexample}"),
            Verdict::Unknown {
                key,
                reason,
                timely,
            } => {
                write!(f, "unknown: {reason} on key {key:?}")?;
                match timely {
                    Some(counterexample) => write!(
                        f,
                        "; assuming operations of unknown outcome took effect before \
                         their clients gave up, {counterexample}"
                    ),
                    None => Ok(()),
                }
            }
        }
    }
}

impl<M: Model> fmt::Display for Counterexample<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "key {:?} is not linearizable", self.key)?;
        writeln!(
            f,
            "longest linearizable prefix ({} ops):",
            self.prefix.len()
        )?;
        for op in &self.prefix {
            writeln!(f, "  {op}")?;
        }
        writeln!(f, "state after it: {:?}", self.state)?;
        writeln!(
            f,
            "{} returned before any of these could go next:",
            self.stuck.id
        )?;
        for op in &self.candidates {
            writeln!(f, "  {op}")?;
        }
        Ok(())
    }
}
