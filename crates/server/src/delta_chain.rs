//! What the next delta snapshot follows on: the newest snapshot written,
//! whole or delta, as long as every change since it is still recorded in
//! the tree. Shared by the apply loop, which starts snapshots, and the
//! thread that writes each.
//!
//! A snapshot takes the tree's recorded changes when it starts, so one
//! that is not written loses them for good: the next snapshot must then
//! be whole. And when the tree is replaced by a snapshot from the leader,
//! a snapshot of the old tree still being written must not become what
//! the next delta follows on, or that delta would describe the new tree's
//! changes as if they were made to the old one: the chain is reset, and
//! whatever a snapshot started before the reset reports is ignored.

use std::sync::{Mutex, PoisonError};

/// Deltas in one chain, at most: a restart reads every one of them, each
/// through a buffer of its own, so past this a whole snapshot is taken.
pub const DELTAS_PER_CHAIN_MAX: usize = 256;

/// The newest snapshot written and what it builds on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainTip {
    /// The log index of the whole snapshot the chain starts from.
    pub base: u64,
    /// The log index of the newest snapshot in the chain (the base's own
    /// when it has no delta yet).
    pub last: u64,
    /// Deltas after the base.
    pub deltas: usize,
}

impl ChainTip {
    /// A chain of a whole snapshot alone.
    pub fn whole(index: u64) -> Self {
        ChainTip {
            base: index,
            last: index,
            deltas: 0,
        }
    }

    /// The chain with one more delta, at `index`.
    pub fn then(self, index: u64) -> Self {
        ChainTip {
            last: index,
            deltas: self.deltas + 1,
            ..self
        }
    }

    /// Whether a delta may follow on.
    pub fn takes_a_delta(&self) -> bool {
        self.deltas < DELTAS_PER_CHAIN_MAX
    }
}

#[derive(Debug, Default)]
pub struct DeltaChain(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    tip: Option<ChainTip>,
    /// Moved on by every reset.
    epoch: u64,
}

/// The chain as a snapshot started on it; handed back with its outcome.
#[derive(Debug, Clone, Copy)]
pub struct Followed {
    pub tip: Option<ChainTip>,
    epoch: u64,
}

impl DeltaChain {
    /// A chain ending at `tip`, if there is one to follow on.
    pub fn starting_at(tip: Option<ChainTip>) -> Self {
        DeltaChain(Mutex::new(State { tip, epoch: 0 }))
    }

    /// The chain a snapshot starting now follows on.
    pub fn follow(&self) -> Followed {
        let state = self.state();
        Followed {
            tip: state.tip,
            epoch: state.epoch,
        }
    }

    /// The snapshot that started on `followed` ended: written, and the
    /// chain now ends at `tip`, or not written (`None`), so that the next
    /// must be whole. Ignored after a reset.
    pub fn ended(&self, followed: Followed, tip: Option<ChainTip>) {
        let mut state = self.state();
        if state.epoch == followed.epoch {
            state.tip = tip;
        }
    }

    /// The tree was replaced: the chain ends at `tip` from now on.
    pub fn reset(&self, tip: Option<ChainTip>) {
        let mut state = self.state();
        state.epoch += 1;
        state.tip = tip;
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_snapshot_ends_the_chain_and_a_lost_one_breaks_it() {
        let chain = DeltaChain::starting_at(Some(ChainTip::whole(10)));
        let first = chain.follow();
        assert_eq!(first.tip, Some(ChainTip::whole(10)));
        chain.ended(first, first.tip.map(|tip| tip.then(20)));
        let second = chain.follow();
        assert_eq!(
            second.tip,
            Some(ChainTip {
                base: 10,
                last: 20,
                deltas: 1
            })
        );
        chain.ended(second, None);
        assert_eq!(chain.follow().tip, None);
    }

    #[test]
    fn a_snapshot_started_before_a_reset_changes_nothing() {
        let chain = DeltaChain::starting_at(Some(ChainTip::whole(10)));
        let old_tree = chain.follow();
        chain.reset(Some(ChainTip::whole(50)));
        chain.ended(old_tree, Some(ChainTip::whole(30)));
        assert_eq!(chain.follow().tip, Some(ChainTip::whole(50)));
        chain.ended(old_tree, None);
        assert_eq!(chain.follow().tip, Some(ChainTip::whole(50)));
    }

    #[test]
    fn a_full_chain_takes_no_more_deltas() {
        let mut tip = ChainTip::whole(1);
        for index in 2..=DELTAS_PER_CHAIN_MAX as u64 + 1 {
            assert!(tip.takes_a_delta());
            tip = tip.then(index);
        }
        assert!(!tip.takes_a_delta());
    }
}
