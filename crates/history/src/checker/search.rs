//! The depth-first search for a linearization of one key's operations:
//! Wing and Gong's algorithm with Lowe's entry list and Porcupine's cache
//! of explored configurations.
//!
//! Operations of unknown outcome return at +infinity, so they have no
//! return entry: they stay candidates from their invocation on, and the
//! search succeeds once every definite operation is linearized, leaving
//! the unknown ones that never took effect behind. Left alone, they make
//! the search exponential: the search patches every dead end it meets
//! with some of them, and every subset of the pending ones is a distinct
//! configuration. These rules keep them cheap without losing any
//! linearization:
//! - An unknown operation that would leave the state unchanged is not
//!   linearized: there is no return to explain, and nothing later can
//!   tell whether it happened.
//! - Of identical unknown operations that could go next, only the one
//!   that must take effect soonest is tried: a linearization using
//!   another can use that one instead.
//! - Definite candidates are tried first, by return time, so an unknown
//!   operation is only tried where no definite one leads on.
//! - A definite operation may not follow an unknown one it could have
//!   preceded to the same effect: that order is tried as well, and
//!   first. So unknown operations go right before what needs them.
//! - A configuration is not explored again, nor one with the same
//!   definite operations and state but more unknown ones linearized.
//!
//! That still leaves lost operations, which never took effect and stay
//! candidates to the end: every dead end the search meets after a wrong
//! choice, it tries to patch with them, and some patches lead on for a
//! long way. So a search runs in one of two phases (see [`Unknowns`]).
//! The first assumes that an unknown operation took effect, if at all,
//! before its client gave up on it, which is nearly always so: then only
//! the few recent unknown operations can patch anything, and a typical
//! history of thousands of operations checks about as fast as one without
//! unknown ones. Only if that finds nothing does the second, exact phase
//! run; refuting a history with many lost operations in it can exhaust
//! the budget there.

use std::collections::HashMap;
use std::mem;

use super::bitset::Bitset;
use super::budget::{Exhausted, Meter};
use super::entries::{Entries, Entry};
use super::explored::Explored;
use crate::model::Model;
use crate::operation::Operation;

/// When an unknown operation may take effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unknowns {
    /// Between its invocation and the time its client gave up on it.
    Timely,
    /// Any time after its invocation, as linearizability has it.
    Anytime,
}

/// How a search ended.
#[derive(Debug)]
pub(super) enum Search<S> {
    Linearizable,
    /// No linearization. `restricted` says whether [`Unknowns::Timely`]
    /// kept an unknown operation out of a configuration; if not, there is
    /// none at all.
    Refuted {
        deepest: Deepest<S>,
        restricted: bool,
    },
}

/// The furthest the search got, by operations linearized: the
/// explanation of a refutation. Operations are indices into the key's
/// operations.
#[derive(Debug)]
pub(super) struct Deepest<S> {
    /// The linearized operations, in linearization order.
    pub(super) prefix: Vec<usize>,
    /// The state after `prefix`.
    pub(super) state: S,
    /// The operation whose return came before any candidate led on.
    pub(super) stuck: usize,
    /// The operations that could have come next, by invocation time.
    pub(super) candidates: Vec<usize>,
}

/// One key's operations, prepared for searching.
pub(super) struct KeyOps<'h, M: Model> {
    ops: &'h [&'h Operation<M::Op, M::Ret>],
    /// What the search steps: [`Model::search_ops`].
    steps: Vec<M::Op>,
    /// Invocation and, if definite, return times.
    spans: Vec<(u64, Option<u64>)>,
    definite: Vec<bool>,
    /// When the client gave up on an unknown operation; `u64::MAX` if it
    /// was still waiting when the history was taken.
    gave_up: Vec<u64>,
    /// Numbers the distinct operations to step: identical ones share one.
    class: Vec<usize>,
}

/// A point of the search: the configuration reached, how, and which
/// candidates to try from it.
struct Node<S> {
    /// The operation linearized to get here and the state before it;
    /// `None` at the root.
    via: Option<(usize, S)>,
    /// The latest invocation among the linearized operations: nothing
    /// can take effect before it any more.
    horizon: u64,
    /// Definite candidates by return time, then unknown ones by
    /// invocation time.
    candidates: Vec<usize>,
    /// How many of `candidates` were tried.
    tried: usize,
    /// The definite operation that returns first: everything linearized
    /// from here on until it is must have been invoked before that.
    first_return: Option<usize>,
}

impl<'h, M: Model> KeyOps<'h, M> {
    /// `ops` are one key's operations in invocation order.
    pub(super) fn new(model: &M, ops: &'h [&'h Operation<M::Op, M::Ret>]) -> Self {
        let spans: Vec<_> = ops
            .iter()
            .map(|op| (op.invoked_at, op.returned_at()))
            .collect();
        let steps = model.search_ops(ops);
        let mut classes = HashMap::new();
        let class = steps
            .iter()
            .map(|op| {
                let next = classes.len();
                *classes.entry(op).or_insert(next)
            })
            .collect();
        KeyOps {
            ops,
            class,
            steps,
            definite: spans.iter().map(|(_, ret)| ret.is_some()).collect(),
            gave_up: ops
                .iter()
                .map(|op| op.completion.as_ref().map_or(u64::MAX, |c| c.at))
                .collect(),
            spans,
        }
    }

    /// Searches for a linearization.
    pub(super) fn search(
        &self,
        model: &M,
        unknowns: Unknowns,
        meter: &mut Meter,
    ) -> Result<Search<M::State>, Exhausted> {
        let expiry: Vec<u64> = match unknowns {
            Unknowns::Timely => self.gave_up.clone(),
            Unknowns::Anytime => vec![u64::MAX; self.ops.len()],
        };
        let mut entries = Entries::new(&self.spans);
        let mut remaining = self.definite.iter().filter(|d| **d).count();
        let mut state = model.init();
        let mut linearized = Linearized::new(&self.definite);
        let mut explored = Explored::new();
        let mut deepest: Option<Deepest<M::State>> = None;
        let mut restricted = false;
        let root = self.node(&expiry, &entries, None, 0, &mut restricted);
        let mut stack = vec![root];

        while remaining > 0 {
            let node = stack.last_mut().expect("the root is never popped");
            if let Some(&op) = node.candidates.get(node.tried) {
                node.tried += 1;
                meter.tick()?;
                let Some(next) = self.next_state(model, &expiry, node, &state, op) else {
                    continue;
                };
                linearized.insert(op);
                if explored.covers(&linearized.definite, &next, &linearized.unknown) {
                    linearized.remove(op);
                    continue;
                }
                entries.lift(op);
                remaining -= usize::from(self.definite[op]);
                let horizon = node.horizon.max(self.spans[op].0);
                let via = Some((op, mem::replace(&mut state, next)));
                let child = self.node(&expiry, &entries, via, horizon, &mut restricted);
                stack.push(child);
                continue;
            }
            // Every candidate failed here: note how far we got, then undo
            // the latest choice and try the one after it.
            let node = stack.pop().expect("the root is never popped");
            if deepest
                .as_ref()
                .is_none_or(|d| stack.len() > d.prefix.len())
            {
                let path = stack.iter().chain([&node]);
                deepest = Some(Deepest {
                    prefix: path.filter_map(|n| n.via.as_ref().map(|v| v.0)).collect(),
                    state: state.clone(),
                    stuck: node.first_return.expect("a definite operation is left"),
                    candidates: window(&entries),
                });
            }
            let Some((op, before)) = node.via else {
                let deepest = deepest.expect("recorded just above");
                return Ok(Search::Refuted {
                    deepest,
                    restricted,
                });
            };
            explored.insert(&linearized.definite, &state, &linearized.unknown);
            entries.unlift(op);
            linearized.remove(op);
            state = before;
            remaining += usize::from(self.definite[op]);
        }
        Ok(Search::Linearizable)
    }

    /// The node for the configuration just reached.
    fn node(
        &self,
        expiry: &[u64],
        entries: &Entries,
        via: Option<(usize, M::State)>,
        horizon: u64,
        restricted: &mut bool,
    ) -> Node<M::State> {
        let mut candidates = Vec::new();
        let mut unknown = Vec::new();
        let mut node = entries.first();
        let first_return = loop {
            match entries.entry(node) {
                Entry::Call(op) if self.definite[op] => candidates.push(op),
                Entry::Call(op) if expiry[op] < horizon => *restricted = true,
                Entry::Call(op) => {
                    let key = |op: usize| (expiry[op], op);
                    match unknown
                        .iter_mut()
                        .find(|u| self.class[**u] == self.class[op])
                    {
                        Some(twin) if key(op) < key(*twin) => *twin = op,
                        Some(_) => {}
                        None => unknown.push(op),
                    }
                }
                Entry::Return(op) => break Some(op),
                Entry::End => break None,
            }
            node = entries.next(node);
        };
        candidates.sort_unstable_by_key(|&op| (self.spans[op].1, op));
        candidates.append(&mut unknown);
        Node {
            via,
            horizon,
            candidates,
            tried: 0,
            first_return,
        }
    }

    /// The state after `op` in `state` at `node`, unless the search skips
    /// `op` there: an unknown operation that changes nothing, or a
    /// definite one that could have gone before the unknown one just
    /// linearized, to the same effect.
    fn next_state(
        &self,
        model: &M,
        expiry: &[u64],
        node: &Node<M::State>,
        state: &M::State,
        op: usize,
    ) -> Option<M::State> {
        let next = model.step(state, &self.steps[op], self.ops[op].ret())?;
        if !self.definite[op] {
            return (next != *state).then_some(next);
        }
        match &node.via {
            Some((unknown, before))
                if !self.definite[*unknown] && expiry[*unknown] >= self.spans[op].0 =>
            {
                let swapped = model
                    .step(before, &self.steps[op], self.ops[op].ret())
                    .and_then(|after| model.step(&after, &self.steps[*unknown], None));
                (swapped.as_ref() != Some(&next)).then_some(next)
            }
            _ => Some(next),
        }
    }
}

/// The operations linearized so far, definite and unknown ones apart, as
/// [`Explored`] compares them.
struct Linearized {
    definite: Bitset,
    unknown: Bitset,
    /// Each operation's index among those of its kind.
    slot: Vec<usize>,
    is_definite: Vec<bool>,
}

impl Linearized {
    fn new(is_definite: &[bool]) -> Self {
        let (mut definite, mut unknown) = (0, 0);
        let slot = is_definite
            .iter()
            .map(|&d| {
                let count = if d { &mut definite } else { &mut unknown };
                *count += 1;
                *count - 1
            })
            .collect();
        Linearized {
            definite: Bitset::new(definite),
            unknown: Bitset::new(unknown),
            slot,
            is_definite: is_definite.to_vec(),
        }
    }

    fn set_of(&mut self, op: usize) -> &mut Bitset {
        if self.is_definite[op] {
            &mut self.definite
        } else {
            &mut self.unknown
        }
    }

    fn insert(&mut self, op: usize) {
        let slot = self.slot[op];
        self.set_of(op).insert(slot);
    }

    fn remove(&mut self, op: usize) {
        let slot = self.slot[op];
        self.set_of(op).remove(slot);
    }
}

/// The calls before the first return: the operations that could be
/// linearized next.
fn window(entries: &Entries) -> Vec<usize> {
    let mut out = Vec::new();
    let mut node = entries.first();
    while let Entry::Call(op) = entries.entry(node) {
        out.push(op);
        node = entries.next(node);
    }
    out
}
