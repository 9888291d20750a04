//! A persistent map from 64-bit keys to values: a hash array mapped trie.
//!
//! The keys are hashes, spread evenly, so the trie stays balanced without
//! rebalancing: each level takes the next six bits of the key (most
//! significant first) and a branch keeps only the slots in use, found
//! through a 64-bit map of them. A lookup among 10M keys reads four or
//! five branches, one small header and one slot each, where a B-tree of
//! 64-entry nodes binary-searches through every node on its path: at 10M
//! znodes the nodes map's lookups were a fifth of a write's cost, nearly
//! all of it cache misses.
//!
//! Branches are shared between clones (`Arc`) and copied on the first
//! change after a clone, as the tree's other persistent maps are, so a
//! clone is O(1) and changing one path copies only the branches on it.
//! Iteration is in ascending key order. The shape depends only on the
//! keys: a branch below the root holds two keys or more, so equal maps are
//! equal in shape too.

use std::sync::Arc;

use crate::prefetch;

/// Bits of the key each level takes.
const LEVEL_BITS: u32 = 6;

#[derive(Debug, Clone)]
pub(crate) struct HashTrie<V> {
    root: Branch<V>,
}

/// A branch, held in its parent's slot: the map of slots in use sits with
/// the pointer to them, so a level costs one read of the slot array.
#[derive(Debug, Clone)]
struct Branch<V> {
    /// Bit `i` is set when the slot for index `i` is in use.
    used: u64,
    /// The slots in use, in index order.
    slots: Arc<[Slot<V>]>,
}

#[derive(Debug, Clone, Default)]
enum Slot<V> {
    Leaf(u64, V),
    Branch(Branch<V>),
    /// Left behind in an array being rebuilt, whose slots were moved out.
    #[default]
    Vacant,
}

/// A value whose clones share something counted: copying an array of them
/// counts one more reference for each.
pub(crate) trait Counted {
    /// Starts loading the counts a clone of this value adds to.
    fn prefetch_counts(&self);
}

/// What a slot holding `V` takes in its branch's array.
pub(crate) const fn slot_bytes<V>() -> usize {
    std::mem::size_of::<Slot<V>>()
}

const VACANT: &str = "a vacant slot is seen only while its array is rebuilt";

impl<V> Default for Branch<V> {
    fn default() -> Self {
        Branch {
            used: 0,
            slots: Arc::from(Vec::new()),
        }
    }
}

impl<V> Default for HashTrie<V> {
    fn default() -> Self {
        HashTrie {
            root: Branch::default(),
        }
    }
}

/// The bit for `key`'s slot at `level`: six bits of the key from the top,
/// the last level taking the four that remain.
fn slot_bit(key: u64, level: u32) -> u64 {
    let index = key.checked_shl(level * LEVEL_BITS).unwrap_or(0) >> (64 - LEVEL_BITS);
    1 << index
}

impl<V> Branch<V> {
    /// Where the slot for `bit` is, or would go, in `slots`.
    fn position(&self, bit: u64) -> usize {
        (self.used & (bit - 1)).count_ones() as usize
    }

    fn slot(&self, key: u64, level: u32) -> Option<&Slot<V>> {
        let bit = slot_bit(key, level);
        (self.used & bit != 0).then(|| &self.slots[self.position(bit)])
    }

    /// A branch at `level` holding two leaves whose keys differ.
    fn of_two(level: u32, a: (u64, V), b: (u64, V)) -> Self {
        let (bit_a, bit_b) = (slot_bit(a.0, level), slot_bit(b.0, level));
        let slots = if bit_a == bit_b {
            vec![Slot::Branch(Branch::of_two(level + 1, a, b))]
        } else if bit_a < bit_b {
            vec![Slot::Leaf(a.0, a.1), Slot::Leaf(b.0, b.1)]
        } else {
            vec![Slot::Leaf(b.0, b.1), Slot::Leaf(a.0, a.1)]
        };
        Branch {
            used: bit_a | bit_b,
            slots: Arc::from(slots),
        }
    }
}

impl<V> Branch<V> {
    /// Starts loading the counts of the slot array, which sit before the
    /// slots in `Arc`'s allocation: asking whether the array is shared,
    /// before changing it, is a locked compare-and-swap there, which waits
    /// for the line.
    fn prefetch_array_counts(&self) {
        let counts = Arc::as_ptr(&self.slots)
            .cast::<u8>()
            .wrapping_sub(2 * std::mem::size_of::<usize>());
        prefetch::line(counts);
    }
}

impl<V: Clone + Counted> Branch<V> {
    /// The slots, to change in place: copied first when a clone shares
    /// them. Copying adds a reference to what each slot points to, a
    /// locked add into a line that is rarely in the cache among 1M keys
    /// and waits for it before the next; so the counts are all asked for
    /// first, and arrive together. In-process, a setData among 1M znodes
    /// while a clone shares the tree (`tree_costs 1000000 200000`, five
    /// alternated pairs) took 1253-1352 ns instead of 1331-1440.
    fn slots_mut(&mut self) -> &mut [Slot<V>] {
        if Arc::get_mut(&mut self.slots).is_none() {
            self.prefetch_counts();
        }
        Arc::make_mut(&mut self.slots)
    }

    fn prefetch_counts(&self) {
        for slot in self.slots.iter() {
            match slot {
                Slot::Leaf(_, value) => value.prefetch_counts(),
                Slot::Branch(child) => child.prefetch_array_counts(),
                Slot::Vacant => unreachable!("{VACANT}"),
            }
        }
    }

    /// Slot `at`, moved out when no clone shares the array.
    fn take_slot(&mut self, at: usize) -> Slot<V> {
        match Arc::get_mut(&mut self.slots) {
            Some(unique) => std::mem::take(&mut unique[at]),
            None => self.slots[at].clone(),
        }
    }

    /// Replaces the slot array by one with `removed` slots from `at` left
    /// out and `inserted` put in their place, in a single allocation: the
    /// slots are moved when no clone shares them, and copied otherwise.
    fn splice(&mut self, at: usize, removed: usize, inserted: Option<Slot<V>>) {
        // Each side is a chain of exact-size iterators, which `Arc<[_]>`
        // collects into one allocation of the right size.
        self.slots = match Arc::get_mut(&mut self.slots) {
            Some(unique) => {
                let (head, rest) = unique.split_at_mut(at);
                let tail = &mut rest[removed..];
                let take = std::mem::take;
                (head.iter_mut().map(take))
                    .chain(inserted)
                    .chain(tail.iter_mut().map(take))
                    .collect()
            }
            None => {
                self.prefetch_counts();
                let (head, rest) = self.slots.split_at(at);
                (head.iter().cloned())
                    .chain(inserted)
                    .chain(rest[removed..].iter().cloned())
                    .collect()
            }
        };
    }

    fn get_or_insert_with(&mut self, level: u32, key: u64, make: impl FnOnce() -> V) -> &mut V {
        let bit = slot_bit(key, level);
        let at = self.position(bit);
        if self.used & bit == 0 {
            self.splice(at, 0, Some(Slot::Leaf(key, make())));
            self.used |= bit;
            let slots = Arc::get_mut(&mut self.slots).expect("the splice made it");
            let Slot::Leaf(_, value) = &mut slots[at] else {
                unreachable!("the leaf just added")
            };
            return value;
        }
        let slot = &mut self.slots_mut()[at];
        if matches!(slot, Slot::Leaf(k, _) if *k != key) {
            let Slot::Leaf(k, v) = std::mem::take(slot) else {
                unreachable!("matched a leaf")
            };
            *slot = Slot::Branch(Branch::of_two(level + 1, (k, v), (key, make())));
            let Slot::Branch(child) = slot else {
                unreachable!("the branch just made")
            };
            return child.get_mut(level + 1, key).expect("the key just added");
        }
        match slot {
            Slot::Leaf(_, value) => value,
            Slot::Branch(child) => child.get_or_insert_with(level + 1, key, make),
            Slot::Vacant => unreachable!("{VACANT}"),
        }
    }

    fn get_mut(&mut self, level: u32, key: u64) -> Option<&mut V> {
        let bit = slot_bit(key, level);
        if self.used & bit == 0 {
            return None;
        }
        let at = self.position(bit);
        match &mut self.slots_mut()[at] {
            Slot::Branch(child) => child.get_mut(level + 1, key),
            Slot::Leaf(k, v) => (*k == key).then_some(v),
            Slot::Vacant => unreachable!("{VACANT}"),
        }
    }

    fn remove(&mut self, level: u32, key: u64) -> Option<V> {
        let bit = slot_bit(key, level);
        if self.used & bit == 0 {
            return None;
        }
        let at = self.position(bit);
        match &self.slots[at] {
            Slot::Leaf(k, _) if *k != key => None,
            Slot::Leaf(..) => {
                let Slot::Leaf(_, value) = self.take_slot(at) else {
                    unreachable!("matched a leaf")
                };
                self.splice(at, 1, None);
                self.used &= !bit;
                Some(value)
            }
            Slot::Branch(_) => {
                let slot = &mut self.slots_mut()[at];
                let Slot::Branch(child) = slot else {
                    unreachable!("matched a branch")
                };
                let removed = child.remove(level + 1, key)?;
                // A branch left with one leaf gives way to it.
                if let [Slot::Leaf(..)] = child.slots[..] {
                    *slot = child.take_slot(0);
                }
                Some(removed)
            }
            Slot::Vacant => unreachable!("{VACANT}"),
        }
    }
}

impl<V: Clone + Counted> HashTrie<V> {
    pub(crate) fn get(&self, key: u64) -> Option<&V> {
        let mut branch = &self.root;
        let mut level = 0;
        loop {
            match branch.slot(key, level)? {
                Slot::Leaf(k, v) => return (*k == key).then_some(v),
                Slot::Branch(child) => branch = child,
                Slot::Vacant => unreachable!("{VACANT}"),
            }
            level += 1;
        }
    }

    /// Starts loading what lookups of `keys` will read, a level at a time
    /// for all of them, so that their cache misses overlap where one
    /// lookup after another waits for each in turn; `found` is given the
    /// value of each key that leads to one, with the key's index in
    /// `keys`, to start loading what it points to. Each round reads the
    /// slot the round before asked for, and asks for the counts of each
    /// array it enters, which a write to the key then changes or checks
    /// (`Branch::prefetch_array_counts`): among 1M znodes in-process,
    /// prefetched 32 at a time, a setData took 504-528 ns instead of
    /// 604-651 and a create 1688-1799 instead of 1996-2091 (`tree_costs
    /// 1000000 200000`, four alternated pairs).
    pub(crate) fn prefetch<'s>(&'s self, keys: &[u64], mut found: impl FnMut(usize, &'s V)) {
        let mut walks: Vec<(usize, &Slot<V>)> = Vec::with_capacity(keys.len());
        walks.extend(keys.iter().enumerate().filter_map(|(at, &key)| {
            let slot = self.root.slot(key, 0)?;
            prefetch::object(slot);
            Some((at, slot))
        }));
        let mut level = 0;
        while !walks.is_empty() {
            level += 1;
            walks.retain_mut(|(at, slot)| match slot {
                Slot::Leaf(k, value) => {
                    if *k == keys[*at] {
                        found(*at, value);
                    }
                    false
                }
                Slot::Branch(child) => {
                    // A write changes each array on its path, and an
                    // insert the one where its key is missing.
                    child.prefetch_array_counts();
                    match child.slot(keys[*at], level) {
                        Some(next) => {
                            prefetch::object(next);
                            *slot = next;
                            true
                        }
                        None => false,
                    }
                }
                Slot::Vacant => unreachable!("{VACANT}"),
            });
        }
    }

    /// The value at `key`, to change in place (copying the branches on its
    /// path that this map shares with a clone).
    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        self.root.get_mut(0, key)
    }

    /// The value at `key`, made by `make` if there is none, to change in
    /// place: one descent where a lookup and then an insert take two.
    pub(crate) fn get_or_insert_with(&mut self, key: u64, make: impl FnOnce() -> V) -> &mut V {
        self.root.get_or_insert_with(0, key, make)
    }

    /// Adds or replaces the value at `key`; returns the one replaced.
    /// The server inserts only through [`Self::get_or_insert_with`].
    #[cfg(test)]
    pub(crate) fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let mut new = Some(value);
        let slot = self.get_or_insert_with(key, || new.take().expect("made once"));
        new.map(|value| std::mem::replace(slot, value))
    }

    pub(crate) fn remove(&mut self, key: u64) -> Option<V> {
        self.root.remove(0, key)
    }

    /// Every key and value, in ascending key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &V)> {
        let mut path = vec![self.root.slots.iter()];
        std::iter::from_fn(move || loop {
            match path.last_mut()?.next() {
                None => {
                    path.pop();
                }
                Some(Slot::Leaf(k, v)) => return Some((*k, v)),
                Some(Slot::Branch(child)) => {
                    let siblings = path.last().map(|rest| rest.as_slice());
                    if let Some([.., Slot::Branch(ahead)]) =
                        siblings.and_then(|rest| rest.get(..ITER_BRANCHES_AHEAD))
                    {
                        prefetch::object(&*ahead.slots);
                    }
                    path.push(child.slots.iter());
                }
                Some(Slot::Vacant) => unreachable!("{VACANT}"),
            }
        })
    }
}

/// How many branches ahead of the one it enters an iteration asks for
/// the slots of: among 1M keys each array at the bottom is a miss of its
/// own, and it holds about four leaves. Serialising a snapshot of 1M
/// znodes in-process, which iterates in this order, took 295-317 ns a
/// znode instead of 351-383 (`tree_costs 1000000 100000`, four alternated
/// pairs; 2 and 8 ahead did as well as 4).
const ITER_BRANCHES_AHEAD: usize = 4;

/// Builds a trie from keys given in ascending order, as a snapshot lists
/// them, making each slot array once: inserting them one by one would
/// copy a leaf's array for every key added to it (at 10M keys, about 40
/// slots each time).
///
/// A key's level is where it first differs from both neighbours, so each
/// key waits for the next before it is placed. The branches on the last
/// key's path stay open, and close when a key leaves their prefix.
pub(crate) struct SortedBuilder<V> {
    /// The open branches, the root's first.
    open: Vec<OpenBranch<V>>,
    /// The last key given, with the levels it shares with the one before.
    waiting: Option<(u64, V, u32)>,
}

struct OpenBranch<V> {
    /// This branch's bit in its parent's map (0 for the root).
    bit: u64,
    used: u64,
    slots: Vec<Slot<V>>,
}

/// How many levels, from the top, lead two different keys the same way.
fn shared_levels(a: u64, b: u64) -> u32 {
    (a ^ b).leading_zeros() / LEVEL_BITS
}

impl<V> Default for SortedBuilder<V> {
    fn default() -> Self {
        SortedBuilder {
            open: Vec::new(),
            waiting: None,
        }
    }
}

impl<V> SortedBuilder<V> {
    /// Adds `key`, which must be above every key given so far; otherwise
    /// hands it back untouched.
    pub(crate) fn push(&mut self, key: u64, value: V) -> Result<(), (u64, V)> {
        let shared = match &self.waiting {
            Some((last, ..)) if key <= *last => return Err((key, value)),
            Some((last, ..)) => shared_levels(*last, key),
            None => 0,
        };
        if let Some((last, last_value, shared_before)) = self.waiting.take() {
            self.place(last, last_value, shared_before.max(shared));
            self.close_to(shared);
        }
        self.waiting = Some((key, value, shared));
        Ok(())
    }

    pub(crate) fn finish(mut self) -> HashTrie<V> {
        if let Some((last, value, shared_before)) = self.waiting.take() {
            self.place(last, value, shared_before);
        }
        self.close_to(0);
        let root = match self.open.pop() {
            Some(root) => Branch {
                used: root.used,
                slots: Arc::from(root.slots),
            },
            None => Branch::default(),
        };
        HashTrie { root }
    }

    /// Puts `key`'s leaf in the branch at `level`, opening the branches
    /// on its path down to there.
    fn place(&mut self, key: u64, value: V, level: u32) {
        while self.open.len() <= level as usize {
            let depth = self.open.len() as u32;
            self.open.push(OpenBranch {
                bit: depth.checked_sub(1).map_or(0, |up| slot_bit(key, up)),
                used: 0,
                slots: Vec::new(),
            });
        }
        let branch = &mut self.open[level as usize];
        branch.used |= slot_bit(key, level);
        branch.slots.push(Slot::Leaf(key, value));
    }

    /// Closes the open branches below `level` into their parents.
    fn close_to(&mut self, level: u32) {
        while self.open.len() > level as usize + 1 {
            let child = self.open.pop().expect("more than one open");
            let parent = self.open.last_mut().expect("more than one open");
            parent.used |= child.bit;
            parent.slots.push(Slot::Branch(Branch {
                used: child.used,
                slots: Arc::from(child.slots),
            }));
        }
    }
}

impl<V: Clone + Counted + PartialEq> PartialEq for HashTrie<V> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.root.slots, &other.root.slots) || self.iter().eq(other.iter())
    }
}

impl<V: Clone + Counted + Eq> Eq for HashTrie<V> {}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// The tests' values count nothing.
    macro_rules! uncounted {
        ($($value:ty),*) => {$(
            impl Counted for $value {
                fn prefetch_counts(&self) {}
            }
        )*};
    }

    uncounted!(u32, u64, char, ());

    /// Keys that share long prefixes, so branches chain and split deep,
    /// beside keys spread over the whole range.
    fn key() -> impl Strategy<Value = u64> {
        prop_oneof![
            any::<u64>(),
            (0u64..16).prop_map(|low| 0xabcd_ef01_2345_6780 | low),
            (0u64..4).prop_map(|high| high << 62),
        ]
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u32),
        Remove(u64),
        Change(u64, u32),
        GetOrInsert(u64, u32),
        Clone,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (key(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => key().prop_map(Op::Remove),
            1 => (key(), any::<u32>()).prop_map(|(k, v)| Op::Change(k, v)),
            2 => (key(), any::<u32>()).prop_map(|(k, v)| Op::GetOrInsert(k, v)),
            1 => Just(Op::Clone),
        ]
    }

    /// The shape `HashTrie`'s equality and the module's doc rely on: a
    /// branch below the root holds two keys or more.
    fn assert_canonical<V>(branch: &Branch<V>, root: bool) {
        assert_eq!(branch.used.count_ones() as usize, branch.slots.len());
        if !root {
            assert!(
                !matches!(branch.slots[..], [] | [Slot::Leaf(..)]),
                "a branch below the root holds fewer than two keys"
            );
        }
        for slot in branch.slots.iter() {
            match slot {
                Slot::Branch(child) => assert_canonical(child, false),
                Slot::Leaf(..) => {}
                Slot::Vacant => panic!("{VACANT}"),
            }
        }
    }

    proptest! {
        /// Every operation agrees with an ordered map, clones taken along
        /// the way keep what they saw, and the shape stays canonical.
        #[test]
        fn behaves_as_an_ordered_map(ops in proptest::collection::vec(op(), 1..300)) {
            let mut trie = HashTrie::default();
            let mut model = BTreeMap::new();
            let mut clones = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(trie.insert(k, v), model.insert(k, v)),
                    Op::Remove(k) => prop_assert_eq!(trie.remove(k), model.remove(&k)),
                    Op::Change(k, v) => {
                        let found = trie.get_mut(k).map(|old| std::mem::replace(old, v));
                        let expected = model.get_mut(&k).map(|old| std::mem::replace(old, v));
                        prop_assert_eq!(found, expected);
                    }
                    Op::GetOrInsert(k, v) => {
                        let found = trie.get_or_insert_with(k, || v);
                        let expected = model.entry(k).or_insert(v);
                        prop_assert_eq!(*found, *expected);
                        *found = found.wrapping_add(1);
                        *expected = expected.wrapping_add(1);
                    }
                    Op::Clone => clones.push((trie.clone(), model.clone())),
                }
                for k in model.keys() {
                    prop_assert_eq!(trie.get(*k), model.get(k));
                }
            }
            assert_canonical(&trie.root, true);
            let listed: Vec<(u64, u32)> = trie.iter().map(|(k, v)| (k, *v)).collect();
            prop_assert_eq!(listed, model.into_iter().collect::<Vec<_>>());
            for (clone, seen) in clones {
                let listed: Vec<(u64, u32)> = clone.iter().map(|(k, v)| (k, *v)).collect();
                prop_assert_eq!(listed, seen.into_iter().collect::<Vec<_>>());
            }
        }
    }

    proptest! {
        /// The walk that prefetches a group of lookups ends at the values
        /// the lookups find, each given with its key's place, and at no
        /// others.
        #[test]
        fn prefetching_finds_what_lookups_find(
            keys in proptest::collection::btree_set(key(), 0..300),
            sought in proptest::collection::vec(key(), 0..64),
        ) {
            let mut trie = HashTrie::default();
            for &k in &keys {
                trie.insert(k, k);
            }
            // Some keys that are there, some that may not be.
            let sought: Vec<u64> = sought.into_iter().chain(keys.iter().copied().step_by(3)).collect();
            let mut prefetched = Vec::new();
            trie.prefetch(&sought, |at, &v| prefetched.push((at, v)));
            prefetched.sort_unstable();
            let found: Vec<(usize, u64)> = sought
                .iter()
                .enumerate()
                .filter_map(|(at, k)| Some((at, *trie.get(*k)?)))
                .collect();
            prop_assert_eq!(prefetched, found);
        }
    }

    proptest! {
        /// Keys given in order build the very trie that inserting them
        /// does, slot for slot.
        #[test]
        fn sorted_keys_build_the_trie_inserts_make(
            keys in proptest::collection::btree_set(key(), 0..300),
        ) {
            let mut built = SortedBuilder::default();
            let mut inserted = HashTrie::default();
            for &k in &keys {
                prop_assert!(built.push(k, k).is_ok());
                inserted.insert(k, k);
            }
            let built = built.finish();
            assert_canonical(&built.root, true);
            prop_assert_eq!(shape(&built.root), shape(&inserted.root));
        }
    }

    /// A branch's map and keys, level by level.
    fn shape(branch: &Branch<u64>) -> Vec<(u64, Vec<u64>)> {
        let mut levels = vec![(branch.used, Vec::new())];
        for slot in branch.slots.iter() {
            match slot {
                Slot::Leaf(k, _) => levels[0].1.push(*k),
                Slot::Branch(child) => levels.extend(shape(child)),
                Slot::Vacant => panic!("{VACANT}"),
            }
        }
        levels
    }

    #[test]
    fn a_key_out_of_order_is_handed_back() {
        let mut built = SortedBuilder::default();
        assert!(built.push(5, 'a').is_ok());
        assert_eq!(built.push(5, 'b'), Err((5, 'b')));
        assert_eq!(built.push(3, 'c'), Err((3, 'c')));
        assert!(built.push(9, 'd').is_ok());
        let trie = built.finish();
        assert_eq!(trie.iter().collect::<Vec<_>>(), [(5, &'a'), (9, &'d')]);
    }

    #[test]
    fn maps_of_the_same_keys_are_equal_whatever_their_history() {
        let mut a = HashTrie::default();
        let mut b = HashTrie::default();
        for k in [1u64, 2, 3, u64::MAX] {
            a.insert(k, ());
        }
        for k in [u64::MAX, 7, 3, 2, 1] {
            b.insert(k, ());
        }
        assert_ne!(a, b);
        b.remove(7);
        assert_eq!(a, b);
        assert_eq!(a.get(0), None);
    }
}
