//! Sets of operations linearized so far, as fixed-size bitsets: cheap to
//! hash and compare, which the search's cache does on every step.

/// A set of operation indices below the size given at construction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Bitset(Box<[u64]>);

impl Bitset {
    pub(super) fn new(len: usize) -> Self {
        Bitset(vec![0; len.div_ceil(64)].into_boxed_slice())
    }

    pub(super) fn insert(&mut self, index: usize) {
        self.0[index / 64] |= 1 << (index % 64);
    }

    pub(super) fn remove(&mut self, index: usize) {
        self.0[index / 64] &= !(1 << (index % 64));
    }

    /// Whether every member of `self` is in `other` (of the same size).
    pub(super) fn is_subset(&self, other: &Bitset) -> bool {
        self.0.iter().zip(&other.0).all(|(a, b)| a & !b == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::Bitset;

    #[test]
    fn insert_then_remove_restores_the_set() {
        let empty = Bitset::new(130);
        let mut set = empty.clone();
        set.insert(0);
        set.insert(64);
        set.insert(129);
        assert_ne!(set, empty);
        assert!(empty.is_subset(&set) && set.is_subset(&set) && !set.is_subset(&empty));
        set.remove(64);
        set.remove(0);
        set.remove(129);
        assert_eq!(set, empty);
    }
}
