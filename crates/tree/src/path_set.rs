//! A persistent sorted set of paths: a B+ tree whose pages are packed
//! arrays, sized to what they hold.
//!
//! A node's children were an `imbl::OrdSet`, whose B-tree nodes each have
//! room for 64 keys and 65 child pointers, leaves included (1.5 KB), and
//! are left half full by splits: among 1M znodes a child cost its parent
//! 79 bytes for a 16-byte pointer (`tree_costs`' memory figures). Here a
//! leaf holds only its paths, grown one at a time (the allocator moves it
//! only when it outgrows its size class), and a leaf filled by appending,
//! as children named in order are, is split so that it stays full.
//!
//! Pages are shared between clones (`Arc`) and copied on the first change
//! after a clone, as the tree's other persistent maps are. Equality is of
//! the paths held, not of the pages' shape, which depends on history: a
//! replica restored from a snapshot and one that applied the log hold the
//! same set in differently split pages.

use std::fmt;
use std::sync::Arc;

use crate::shared_path::SharedPath;

/// Paths in a leaf, and pages under a branch, at most.
const PAGE_MAX: usize = 64;
/// A leaf shrunk below this is merged into a neighbour it fits in.
const LEAF_MERGE_BELOW: usize = PAGE_MAX / 4;

#[derive(Clone, Default)]
pub(crate) struct PathSet {
    root: Option<Arc<Page>>,
    len: usize,
}

#[derive(Clone)]
enum Page {
    Leaf(Vec<SharedPath>),
    /// `bounds[i]` is at most the least path under `pages[i]` and more than
    /// every path under `pages[i - 1]`; `bounds[0]` is not read.
    Branch {
        bounds: Vec<SharedPath>,
        pages: Vec<Arc<Page>>,
    },
}

/// What an insert into a page left for its parent to do.
enum Grown {
    Unchanged,
    Inserted,
    /// Inserted, and the page split: this page goes to its right, from the
    /// bound given.
    Split(SharedPath, Arc<Page>),
}

impl PathSet {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `path`; false if it was there.
    pub(crate) fn insert(&mut self, path: SharedPath) -> bool {
        let Some(root) = &mut self.root else {
            self.root = Some(Arc::new(Page::Leaf(vec![path])));
            self.len = 1;
            return true;
        };
        match Arc::make_mut(root).insert(path) {
            Grown::Unchanged => return false,
            Grown::Inserted => {}
            Grown::Split(bound, right) => {
                let left = self.root.take().expect("the root just split");
                let bounds = vec![bound.clone(), bound];
                self.root = Some(Arc::new(Page::Branch {
                    bounds,
                    pages: vec![left, right],
                }));
            }
        }
        self.len += 1;
        true
    }

    /// Removes `path`; false if it was not there.
    pub(crate) fn remove(&mut self, path: &str) -> bool {
        let Some(root) = &mut self.root else {
            return false;
        };
        let root = Arc::make_mut(root);
        if !root.remove(path) {
            return false;
        }
        self.len -= 1;
        if self.len == 0 {
            self.root = None;
        } else if let Page::Branch { pages, .. } = root {
            if pages.len() == 1 {
                self.root = pages.pop();
            }
        }
        true
    }

    /// The set of `paths`, which are in order with no path twice, built a
    /// level at a time from full pages.
    pub(crate) fn from_sorted(paths: Vec<SharedPath>) -> Self {
        debug_assert!(paths.windows(2).all(|pair| pair[0] < pair[1]));
        let len = paths.len();
        let mut level: Vec<(SharedPath, Arc<Page>)> = paths
            .chunks(PAGE_MAX)
            .map(|leaf| (leaf[0].clone(), Arc::new(Page::Leaf(leaf.to_vec()))))
            .collect();
        while level.len() > 1 {
            level = level
                .chunks(PAGE_MAX)
                .map(|under| {
                    let (bounds, pages) = under.iter().cloned().unzip();
                    (under[0].0.clone(), Arc::new(Page::Branch { bounds, pages }))
                })
                .collect();
        }
        PathSet {
            root: level.pop().map(|(_, root)| root),
            len,
        }
    }

    /// The paths in order.
    pub(crate) fn iter(&self) -> Iter<'_> {
        Iter::from(self.root.as_deref(), |_| 0)
    }

    /// The paths after `path` (which need not be in the set), in order,
    /// found in O(log n).
    pub(crate) fn after<'a>(&'a self, path: &str) -> Iter<'a> {
        Iter::from(self.root.as_deref(), |page| match page {
            Page::Leaf(paths) => paths.partition_point(|p| **p <= *path),
            Page::Branch { bounds, .. } => page_for(bounds, path),
        })
    }
}

/// The page under a branch with these bounds that would hold `path`.
fn page_for(bounds: &[SharedPath], path: &str) -> usize {
    bounds[1..].partition_point(|bound| **bound <= *path)
}

impl Page {
    fn insert(&mut self, path: SharedPath) -> Grown {
        match self {
            Page::Leaf(paths) => {
                let Err(at) = paths.binary_search_by(|p| (**p).cmp(&*path)) else {
                    return Grown::Unchanged;
                };
                insert_packed(paths, at, path);
                match split(paths, at) {
                    Some(right) => Grown::Split(right[0].clone(), Arc::new(Page::Leaf(right))),
                    None => Grown::Inserted,
                }
            }
            Page::Branch { bounds, pages } => {
                let at = page_for(bounds, &path);
                let (bound, page) = match Arc::make_mut(&mut pages[at]).insert(path) {
                    Grown::Split(bound, page) => (bound, page),
                    grown => return grown,
                };
                insert_packed(bounds, at + 1, bound);
                insert_packed(pages, at + 1, page);
                match split(pages, at + 1) {
                    Some(right_pages) => {
                        let right_bounds = bounds.split_off(pages.len());
                        let bound = right_bounds[0].clone();
                        let right = Page::Branch {
                            bounds: right_bounds,
                            pages: right_pages,
                        };
                        Grown::Split(bound, Arc::new(right))
                    }
                    None => Grown::Inserted,
                }
            }
        }
    }

    /// Removes `path`; an emptied page is left for its parent to drop.
    fn remove(&mut self, path: &str) -> bool {
        match self {
            Page::Leaf(paths) => match paths.binary_search_by(|p| (**p).cmp(path)) {
                Ok(at) => {
                    paths.remove(at);
                    true
                }
                Err(_) => false,
            },
            Page::Branch { bounds, pages } => {
                let at = page_for(bounds, path);
                if !Arc::make_mut(&mut pages[at]).remove(path) {
                    return false;
                }
                if pages[at].len() == 0 {
                    bounds.remove(at);
                    pages.remove(at);
                } else if pages[at].is_small_leaf() {
                    merge_with_neighbour(bounds, pages, at);
                }
                true
            }
        }
    }

    /// Paths in a leaf, pages under a branch.
    fn len(&self) -> usize {
        match self {
            Page::Leaf(paths) => paths.len(),
            Page::Branch { pages, .. } => pages.len(),
        }
    }

    fn is_small_leaf(&self) -> bool {
        matches!(self, Page::Leaf(paths) if paths.len() < LEAF_MERGE_BELOW)
    }
}

/// Inserts at `at`, growing the array by one element only: a page holds
/// no room it does not use.
fn insert_packed<T>(items: &mut Vec<T>, at: usize, item: T) {
    items.reserve_exact(1);
    items.insert(at, item);
}

/// Splits a page grown past `PAGE_MAX` by an insert at `at`, returning the
/// right half. An append splits off the new item alone and a prepend keeps
/// it alone, so a page filled in order stays full.
fn split<T>(items: &mut Vec<T>, at: usize) -> Option<Vec<T>> {
    if items.len() <= PAGE_MAX {
        return None;
    }
    let keep = if at + 1 == items.len() {
        PAGE_MAX
    } else if at == 0 {
        1
    } else {
        items.len() / 2
    };
    let right = items.split_off(keep);
    items.shrink_to_fit();
    Some(right)
}

/// Merges the small leaf at `at` into a neighbour, when together they fit
/// in one leaf.
fn merge_with_neighbour(bounds: &mut Vec<SharedPath>, pages: &mut Vec<Arc<Page>>, at: usize) {
    let left = if at > 0 { at - 1 } else { at };
    if left + 1 >= pages.len() || pages[left].len() + pages[left + 1].len() > PAGE_MAX {
        return;
    }
    let right = pages.remove(left + 1);
    bounds.remove(left + 1);
    let Page::Leaf(moved) = &*right else {
        unreachable!("a leaf's neighbours are leaves")
    };
    let Page::Leaf(into) = Arc::make_mut(&mut pages[left]) else {
        unreachable!("a leaf's neighbours are leaves")
    };
    into.reserve_exact(moved.len());
    into.extend(moved.iter().cloned());
}

/// An in-order walk from a starting position: a stack of the branches
/// above the current leaf.
pub(crate) struct Iter<'a> {
    branches: Vec<(&'a [Arc<Page>], usize)>,
    leaf: std::slice::Iter<'a, SharedPath>,
}

impl<'a> Iter<'a> {
    /// Descends from `root`, taking in each page the position `start` says.
    fn from(root: Option<&'a Page>, start: impl Fn(&Page) -> usize) -> Self {
        let mut iter = Iter {
            branches: Vec::new(),
            leaf: [].iter(),
        };
        let mut page = root;
        while let Some(current) = page {
            let at = start(current);
            page = match current {
                Page::Leaf(paths) => {
                    iter.leaf = paths[at..].iter();
                    None
                }
                Page::Branch { pages, .. } => {
                    iter.branches.push((pages, at + 1));
                    Some(&*pages[at])
                }
            };
        }
        iter
    }

    /// Moves to the next leaf; false at the end.
    fn next_leaf(&mut self) -> bool {
        while let Some((pages, next)) = self.branches.last_mut() {
            let Some(page) = pages.get(*next) else {
                self.branches.pop();
                continue;
            };
            *next += 1;
            let mut page: &'a Page = page;
            loop {
                match page {
                    Page::Leaf(paths) => {
                        self.leaf = paths.iter();
                        return true;
                    }
                    Page::Branch { pages, .. } => {
                        self.branches.push((pages, 1));
                        page = &pages[0];
                    }
                }
            }
        }
        false
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a SharedPath;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(path) = self.leaf.next() {
                return Some(path);
            }
            if !self.next_leaf() {
                return None;
            }
        }
    }
}

impl PartialEq for PathSet {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for PathSet {}

impl fmt::Debug for PathSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn path(i: u32) -> SharedPath {
        SharedPath::from(format!("/p/n{i:06}"))
    }

    /// Every page but the root holds something and no more than it may,
    /// and every path lies within its bounds.
    fn check_shape(page: &Page, low: Option<&str>, high: Option<&str>, is_root: bool) {
        assert!(page.len() <= PAGE_MAX);
        assert!(is_root || page.len() > 0);
        match page {
            Page::Leaf(paths) => {
                assert!(paths.windows(2).all(|w| w[0] < w[1]));
                for p in paths {
                    assert!(low.is_none_or(|low| **p >= *low));
                    assert!(high.is_none_or(|high| **p < *high));
                }
            }
            Page::Branch { bounds, pages } => {
                assert_eq!(bounds.len(), pages.len());
                for (i, child) in pages.iter().enumerate() {
                    let child_low = if i == 0 { low } else { Some(&*bounds[i]) };
                    let child_high = bounds.get(i + 1).map(|b| &**b).or(high);
                    check_shape(child, child_low, child_high, false);
                }
            }
        }
    }

    fn check(set: &PathSet, model: &BTreeSet<SharedPath>) {
        assert_eq!(set.len(), model.len());
        assert!(set.iter().eq(model.iter()));
        if let Some(root) = &set.root {
            check_shape(root, None, None, true);
        }
    }

    #[test]
    fn appends_fill_their_leaves() {
        let mut set = PathSet::default();
        for i in 0..PAGE_MAX as u32 * 10 {
            assert!(set.insert(path(i)));
        }
        let Some(Page::Branch { pages, .. }) = set.root.as_deref() else {
            panic!("ten leaves need a branch")
        };
        assert_eq!(pages.len(), 10);
        assert!(pages.iter().all(|page| page.len() == PAGE_MAX));
        assert!(!set.insert(path(3)));
    }

    #[test]
    fn built_from_sorted_paths_as_if_inserted() {
        for count in [0, 1, PAGE_MAX, PAGE_MAX + 1, PAGE_MAX * PAGE_MAX + 3] {
            let paths: Vec<SharedPath> = (0..count as u32).map(path).collect();
            let built = PathSet::from_sorted(paths.clone());
            check(&built, &paths.iter().cloned().collect());
            let mut grown = built.clone();
            grown.insert(path(count as u32));
            grown.remove(&path(0));
            assert_eq!(grown.len(), count);
        }
    }

    #[test]
    fn after_starts_past_the_path_given() {
        let mut set = PathSet::default();
        for i in (0..5000).step_by(2) {
            set.insert(path(i));
        }
        for from in [0, 1, 2, 127, 128, 129, 4997, 4998, 4999] {
            let first = set.after(&path(from)).next().cloned();
            let expected = (from + 1..5000).find(|i| i % 2 == 0).map(path);
            assert_eq!(first, expected, "after {from}");
        }
        assert_eq!(set.after("").count(), 2500);
    }

    #[test]
    fn a_clone_keeps_its_version() {
        let mut set = PathSet::default();
        for i in 0..1000 {
            set.insert(path(i));
        }
        let before = set.clone();
        for i in 0..500 {
            set.remove(&path(i * 2));
        }
        set.insert(path(5000));
        assert_eq!(before.len(), 1000);
        assert!(before.iter().cloned().eq((0..1000).map(path)));
        assert_eq!(set.len(), 501);
    }

    #[test]
    fn equality_ignores_shape() {
        let (mut forward, mut backward) = (PathSet::default(), PathSet::default());
        for i in 0..1000 {
            forward.insert(path(i));
            backward.insert(path(999 - i));
        }
        assert_eq!(forward, backward);
        backward.remove(&path(7));
        assert_ne!(forward, backward);
    }

    proptest! {
        #[test]
        fn matches_an_ordered_set(ops in prop::collection::vec((any::<bool>(), 0u32..600), 0..3000)) {
            let mut set = PathSet::default();
            let mut model = BTreeSet::new();
            for (insert, i) in ops {
                if insert {
                    prop_assert_eq!(set.insert(path(i)), model.insert(path(i)));
                } else {
                    prop_assert_eq!(set.remove(&path(i)), model.remove(&path(i)));
                }
            }
            check(&set, &model);
        }
    }
}
