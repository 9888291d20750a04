//! The search's memory of configurations it explored to the end without
//! finding a linearization. A configuration is the definite operations
//! linearized, the unknown ones linearized, and the model state. One is
//! not worth exploring if a failed one had the same definite operations
//! and state and a subset of its unknown operations: that one had every
//! move this one has, and more (its latest invocation is no later, so no
//! unknown operation had expired there that has not here).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher, Hash};

use super::bitset::Bitset;

/// Failed configurations, found by a hash of their definite operations
/// and state so that a lookup need not clone them.
#[derive(Debug)]
pub(super) struct Explored<S> {
    hasher: BuildHasherDefault<DefaultHasher>,
    failed: HashMap<u64, Vec<Failed<S>>>,
}

#[derive(Debug)]
struct Failed<S> {
    definite: Bitset,
    state: S,
    unknown: Bitset,
}

impl<S: Clone + Eq + Hash> Explored<S> {
    pub(super) fn new() -> Self {
        Explored {
            hasher: BuildHasherDefault::default(),
            failed: HashMap::new(),
        }
    }

    /// Whether a failed configuration had every move this one has.
    pub(super) fn covers(&self, definite: &Bitset, state: &S, unknown: &Bitset) -> bool {
        let hash = self.hasher.hash_one((definite, state));
        self.failed
            .get(&hash)
            .is_some_and(|failed| failed.iter().any(|f| f.covers(definite, state, unknown)))
    }

    /// Remembers a configuration explored to the end without success.
    pub(super) fn insert(&mut self, definite: &Bitset, state: &S, unknown: &Bitset) {
        let hash = self.hasher.hash_one((definite, state));
        let new = Failed {
            definite: definite.clone(),
            state: state.clone(),
            unknown: unknown.clone(),
        };
        let failed = self.failed.entry(hash).or_default();
        failed.retain(|f| !new.covers(&f.definite, &f.state, &f.unknown));
        failed.push(new);
    }
}

impl<S: Eq> Failed<S> {
    fn covers(&self, definite: &Bitset, state: &S, unknown: &Bitset) -> bool {
        self.unknown.is_subset(unknown) && self.definite == *definite && self.state == *state
    }
}

#[cfg(test)]
mod tests {
    use super::{Bitset, Explored};

    #[test]
    fn a_failure_covers_configurations_with_more_unknown_operations() {
        let definite = Bitset::new(3);
        let none = Bitset::new(2);
        let mut one = none.clone();
        one.insert(1);

        let mut explored = Explored::new();
        explored.insert(&definite, &7, &one);
        assert!(explored.covers(&definite, &7, &one));
        assert!(!explored.covers(&definite, &7, &none));
        assert!(!explored.covers(&definite, &8, &one));

        explored.insert(&definite, &7, &none);
        assert!(explored.covers(&definite, &7, &none));
        assert!(explored.covers(&definite, &7, &one));
    }
}
