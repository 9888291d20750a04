//! The nodes map: full path -> node, ordered by a hash of the path.
//!
//! A map ordered by path finds a key by comparing it with a dozen keys on
//! the way down, and each comparison follows a pointer to a string that
//! shares a long prefix with the one sought: at a million znodes a lookup
//! cost about 4 µs, most of it cache misses, and a write makes two. Here
//! the path's 64-bit hash leads through a hash trie (`hash_trie`), one
//! slot read a level, and one string is read, at the end. Against a
//! B-tree keyed by the same hashes (imbl's `OrdMap`), a setData applied in
//! place took 1.4-1.6 µs instead of 2.0-2.1 among 1M znodes and 1.75
//! instead of 2.8 among 10M; a getData 0.9 instead of 1.5-2.0 and 1.3
//! instead of 2.4 (`cargo run --release -p tree --example tree_costs --
//! 1000000 2000000`, then 10000000; both maps measured under glibc's
//! malloc, before the example took jemalloc).
//!
//! The order is the hash's, so nothing may rely on it but determinism:
//! subtrees are walked through each node's children, which are in path
//! order. Paths whose hashes collide share a bucket ordered by path, so
//! paths crafted to collide cost a path-ordered lookup, never a scan.
//!
//! The node a path leads to is prefetched while the path is compared, so
//! that the two cache misses overlap: in-process among 1M znodes
//! (`tree_costs 1000000 500000 1000`, five runs and six), a getData took
//! 731-1064 ns instead of 1075-1261 and a setData 1088-1453 instead of
//! 1499-1722.
//!
//! A group's data is prefetched too, a round after its nodes, and a
//! setData of data as long as the old copies it over the old
//! (`NodeData::overwrite`), into lines so loaded, rather than into a new
//! allocation, whose lines at 1M znodes are rarely in the cache: a
//! setData prefetched 32 at a time took 737-823 ns instead of 880-1032
//! (`tree_costs 1000000 500000`, eight runs each), and a standalone
//! server read at 1M znodes at 0.91-0.93 of its empty tree's rate instead
//! of 0.73-0.75 (`paddock bench treesize --sizes 0,1000000`, two
//! alternated pairs; 0.78-0.82 instead of 0.72-0.73 with `--sizes
//! 0,100000,1000000`, as `bench/compare` runs it, its CPU per read 1.77-1.83
//! µs instead of 2.04-2.07). Applied one by one, with nothing prefetched, the
//! overwrite is slower, 1.66-1.94 µs against 1.34-1.49: its store into a
//! line not in the cache comes after the lookup rather than beside it.

use imbl::OrdMap;

use crate::changes::ChangeRecord;
use crate::hash_trie::{Counted, HashTrie, SortedBuilder};
use crate::node::{Node, SharedNode};
use crate::prefetch;
use crate::shared_path::SharedPath;

#[derive(Debug, Clone, Default)]
pub(crate) struct Nodes {
    by_hash: HashTrie<Bucket>,
    len: usize,
    /// The buckets changed, once asked to record them (`DataTree::track_changes`).
    changes: ChangeRecord,
}

/// Equal maps hold the same nodes, whatever either recorded of how.
impl PartialEq for Nodes {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.by_hash == other.by_hash
    }
}

impl Eq for Nodes {}

/// The nodes whose paths have one hash. `Many` always holds two or more,
/// so equal maps are equal in shape too.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Bucket {
    One(SharedPath, SharedNode),
    Many(Box<OrdMap<SharedPath, SharedNode>>),
}

// Two words, so that a trie slot holding a bucket and its hash is four
// (see `SharedPath`): one slot per znode.
const _: () = assert!(std::mem::size_of::<Bucket>() == 16);
const _: () = assert!(crate::hash_trie::slot_bytes::<Bucket>() == 32);

impl Nodes {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get(&self, path: &str) -> Option<&SharedNode> {
        self.by_hash.get(path_hash(path))?.get(path)
    }

    pub(crate) fn contains(&self, path: &str) -> bool {
        self.get(path).is_some()
    }

    /// Starts loading what lookups of the paths hashed to `hashes`
    /// (`path_hash`) will read, all at once: the hash trie's slots, then
    /// each path and its node (see [`HashTrie::prefetch`]), then each
    /// node's data, which a read copies out and a setData of the same
    /// length copies over.
    pub(crate) fn prefetch(&self, hashes: &[u64]) {
        // Reading each node waits for the first to arrive, while the rest
        // are on their way: one miss for the group, not one each.
        for (_, bucket) in self.prefetch_buckets(hashes) {
            if let Bucket::One(_, node) = bucket {
                if let Some(data) = node.data() {
                    prefetch::object(data);
                }
            }
        }
    }

    /// Starts loading the trie's slots for `hashes`, then the path and the
    /// node of each bucket found; gives those buckets, each with the index
    /// of its hash. The path is asked for by its address alone
    /// (`SharedPath::prefetch`), as reading its length first waits for it:
    /// a setData prefetched 32 at a time among 1M znodes took 596-646 ns
    /// instead of 719-725 (`tree_costs 1000000 200000`, four alternated
    /// pairs).
    fn prefetch_buckets(&self, hashes: &[u64]) -> Vec<(usize, &Bucket)> {
        let mut found = Vec::with_capacity(hashes.len());
        self.by_hash.prefetch(hashes, |at, bucket| {
            if let Bucket::One(path, node) = bucket {
                path.prefetch();
                prefetch::object(&**node);
            }
            found.push((at, bucket));
        });
        found
    }

    /// The nodes at `paths`, every one of which is in the map, looked up
    /// together: the paths' bytes, hashed first, are loaded all at once,
    /// then the trie's slots, and the paths and nodes they lead to (as
    /// [`Self::prefetch`] loads them), whose buckets then give the nodes
    /// without a second walk down the trie. Counting the 1M children of
    /// a node in-process (`tree_costs 1000000 100000`, three runs each)
    /// took 104-106 ns a child instead of 436-452 looked up one by one.
    pub(crate) fn get_group<'a>(
        &'a self,
        paths: Vec<&'a SharedPath>,
    ) -> Vec<(&'a SharedPath, &'a Node)> {
        for path in &paths {
            path.prefetch();
        }
        let hashes: Vec<u64> = paths.iter().map(|path| path_hash(path)).collect();
        let mut nodes: Vec<Option<&Node>> = vec![None; paths.len()];
        for (at, bucket) in self.prefetch_buckets(&hashes) {
            nodes[at] = bucket.get(paths[at]).map(|node| &**node);
        }
        let in_map = |node: Option<&'a Node>| node.expect("a path the map holds");
        paths
            .into_iter()
            .zip(nodes.into_iter().map(in_map))
            .collect()
    }

    /// The node at `path`, to change in place (copying what this version
    /// shares with another first).
    pub(crate) fn get_mut(&mut self, path: &str) -> Option<&mut SharedNode> {
        let hash = path_hash(path);
        self.changes.note(hash);
        match self.by_hash.get_mut(hash)? {
            Bucket::One(p, node) => {
                prefetch::object(&**node);
                (**p == *path).then_some(node)
            }
            Bucket::Many(nodes) => nodes.get_mut(path),
        }
    }

    /// Adds or replaces the node at `path`; returns the one replaced.
    pub(crate) fn insert(&mut self, path: SharedPath, node: SharedNode) -> Option<SharedNode> {
        let hash = path_hash(&path);
        self.changes.note(hash);
        let mut new = Some((path, node));
        let bucket = self.by_hash.get_or_insert_with(hash, || {
            let (path, node) = new.take().expect("made once");
            Bucket::One(path, node)
        });
        // `new` is still there when the hash had a bucket already.
        let replaced = new.and_then(|(path, node)| bucket.insert(path, node));
        if replaced.is_none() {
            self.len += 1;
        }
        replaced
    }

    pub(crate) fn remove(&mut self, path: &str) -> Option<SharedNode> {
        let hash = path_hash(path);
        self.changes.note(hash);
        let removed = match self.by_hash.get(hash)? {
            Bucket::One(p, _) if **p == *path => match self.by_hash.remove(hash) {
                Some(Bucket::One(_, node)) => node,
                _ => unreachable!("the bucket just read"),
            },
            Bucket::One(..) => return None,
            Bucket::Many(_) => {
                let Some(bucket @ Bucket::Many(_)) = self.by_hash.get_mut(hash) else {
                    unreachable!("the bucket just read")
                };
                bucket.remove_from_many(path)?
            }
        };
        self.len -= 1;
        Some(removed)
    }

    /// Every path and node, in the map's (hash) order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&SharedPath, &SharedNode)> {
        self.by_hash.iter().flat_map(|(_, bucket)| bucket.entries())
    }

    /// The paths and nodes whose paths hash to `hash`, in path order.
    pub(crate) fn bucket(&self, hash: u64) -> impl Iterator<Item = (&SharedPath, &SharedNode)> {
        self.by_hash.get(hash).into_iter().flat_map(Bucket::entries)
    }

    /// Records from now on which buckets change (see [`ChangeRecord`]).
    pub(crate) fn track_changes(&mut self) {
        self.changes.start();
    }

    /// The hashes of the buckets changed since the last take, ascending;
    /// `None` unless changes are tracked.
    pub(crate) fn take_changes(&self) -> Option<Vec<u64>> {
        self.changes.take()
    }
}

impl Counted for Bucket {
    fn prefetch_counts(&self) {
        // A bucket of many is copied whole, and rarely: not worth a hint.
        if let Bucket::One(path, node) = self {
            path.prefetch_count();
            prefetch::line(SharedNode::heap_ptr(node).cast());
        }
    }
}

impl Bucket {
    /// Its paths and nodes, in path order.
    fn entries(&self) -> impl Iterator<Item = (&SharedPath, &SharedNode)> {
        let (one, many) = match self {
            Bucket::One(p, node) => (Some((p, node)), None),
            Bucket::Many(nodes) => (None, Some(nodes.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// The node at `path`, which has this bucket's hash; the node is
    /// loaded while the path is compared.
    fn get(&self, path: &str) -> Option<&SharedNode> {
        match self {
            Bucket::One(p, node) => {
                prefetch::object(&**node);
                (**p == *path).then_some(node)
            }
            Bucket::Many(nodes) => nodes.get(path),
        }
    }

    /// Adds or replaces the node at `path`, which has this bucket's hash;
    /// returns the one replaced.
    fn insert(&mut self, path: SharedPath, node: SharedNode) -> Option<SharedNode> {
        match self {
            Bucket::One(p, old) if *p == path => Some(std::mem::replace(old, node)),
            Bucket::One(p, old) => {
                let pair = (p.clone(), old.clone());
                *self = Bucket::Many(Box::new(OrdMap::from(vec![pair, (path, node)])));
                None
            }
            Bucket::Many(nodes) => nodes.insert(path, node),
        }
    }

    /// Removes `path` from a `Many` bucket, which becomes `One` when a
    /// single node is left.
    fn remove_from_many(&mut self, path: &str) -> Option<SharedNode> {
        let Bucket::Many(nodes) = self else {
            unreachable!("called on a Many bucket")
        };
        let removed = nodes.remove(path)?;
        if nodes.len() == 1 {
            let (p, node) = nodes.iter().next().expect("one left");
            *self = Bucket::One(p.clone(), node.clone());
        }
        Some(removed)
    }
}

/// Builds the nodes map of a tree being loaded. A snapshot lists its
/// nodes in the map's own order, so they go straight into a
/// [`SortedBuilder`]: the 1M-znode load of `tree_costs` spent a third of
/// its indexing time copying slot arrays, one insert at a time. Nodes
/// listed in any other order (an imported ZooKeeper snapshot) are
/// inserted one by one from the first that is out of order.
pub(crate) struct NodesLoader {
    nodes: Nodes,
    /// `Some` while the nodes have come in order.
    sorted: Option<SortedBuilder<Bucket>>,
    /// The last hash given and its bucket, which a path of the same hash
    /// may still join; held back from `sorted`.
    held: Option<(u64, Bucket)>,
}

impl NodesLoader {
    pub(crate) fn new() -> Self {
        NodesLoader {
            nodes: Nodes::default(),
            sorted: Some(SortedBuilder::default()),
            held: None,
        }
    }

    /// Adds the node at `path`; hands the path back if it was added
    /// before.
    pub(crate) fn add(&mut self, path: SharedPath, node: SharedNode) -> Result<(), SharedPath> {
        let hash = path_hash(&path);
        if self.held.as_ref().is_some_and(|(held, _)| *held > hash) {
            self.stop_sorting();
        }
        if self.sorted.is_none() {
            return match self.nodes.insert(path.clone(), node) {
                None => Ok(()),
                Some(_) => Err(path),
            };
        }
        match &mut self.held {
            Some((held, bucket)) if *held == hash => {
                if bucket.insert(path.clone(), node).is_some() {
                    return Err(path);
                }
            }
            held => {
                if let Some((last, bucket)) = held.replace((hash, Bucket::One(path, node))) {
                    self.push_sorted(last, bucket);
                }
            }
        }
        self.nodes.len += 1;
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Nodes {
        self.stop_sorting();
        self.nodes
    }

    fn push_sorted(&mut self, hash: u64, bucket: Bucket) {
        let sorted = self.sorted.as_mut().expect("pushed only while sorting");
        if sorted.push(hash, bucket).is_err() {
            unreachable!("each hash held is above the last pushed")
        }
    }

    /// Builds what came in order; the rest is inserted.
    fn stop_sorting(&mut self) {
        if let Some((hash, bucket)) = self.held.take() {
            self.push_sorted(hash, bucket);
        }
        if let Some(sorted) = self.sorted.take() {
            self.nodes.by_hash = sorted.finish();
        }
    }
}

/// A 64-bit hash of a path, the same on every replica and every run.
/// Each 8-byte word is xored into the state, which is then multiplied by
/// an odd constant to 128 bits and folded back by xoring the halves (the
/// mixing step of wyhash and foldhash), starting from the length. Not
/// built to resist crafted collisions: the buckets make them harmless.
pub(crate) fn path_hash(path: &str) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let step = |state: u64, word: u64| {
        let product = u128::from(state ^ word) * u128::from(K);
        (product as u64) ^ ((product >> 64) as u64)
    };
    let bytes = path.as_bytes();
    let mut words = bytes.chunks_exact(8);
    let mut state = bytes.len() as u64;
    for word in &mut words {
        state = step(state, u64::from_le_bytes(word.try_into().expect("8 bytes")));
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    step(state, u64::from_le_bytes(tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::node::node_of_version as node;

    /// Two paths forced into one bucket behave as two keys.
    #[test]
    fn colliding_paths_share_a_bucket_and_stay_apart() {
        let mut nodes = Nodes::default();
        let (a, b): (SharedPath, SharedPath) = (SharedPath::from("/a"), SharedPath::from("/b"));
        let hash = path_hash("/a");
        nodes.by_hash.insert(hash, Bucket::One(a.clone(), node(1)));
        nodes.len = 1;
        // Stand-in for a collision: put /b where /a's hash leads.
        let Some(bucket @ Bucket::One(..)) = nodes.by_hash.get_mut(hash) else {
            panic!()
        };
        *bucket = Bucket::Many(Box::new(OrdMap::from(vec![
            (a.clone(), node(1)),
            (b.clone(), node(2)),
        ])));
        nodes.len = 2;
        assert_eq!(nodes.get("/a").unwrap().stat.version, 1);
        assert!(nodes.iter().any(|(p, n)| *p == b && n.stat.version == 2));
        let bucket: Vec<(&str, i32)> = nodes
            .bucket(hash)
            .map(|(p, n)| (&**p, n.stat.version))
            .collect();
        assert_eq!(
            bucket,
            [("/a", 1), ("/b", 2)],
            "a delta writes the bucket whole"
        );
        assert_eq!(nodes.remove("/a").unwrap().stat.version, 1);
        assert!(matches!(nodes.by_hash.get(hash), Some(Bucket::One(p, _)) if *p == b));
        assert_eq!(nodes.len(), 1);
        assert!(nodes.get("/a").is_none());
    }

    #[test]
    fn insert_replace_remove_keep_the_count() {
        let mut nodes = Nodes::default();
        for i in 0..1000 {
            assert!(nodes
                .insert(SharedPath::from(format!("/n{i}")), node(i))
                .is_none());
        }
        assert_eq!(nodes.len(), 1000);
        assert_eq!(
            nodes
                .insert(SharedPath::from("/n7"), node(70))
                .unwrap()
                .stat
                .version,
            7
        );
        assert_eq!(nodes.get("/n7").unwrap().stat.version, 70);
        SharedNode::make_mut(nodes.get_mut("/n8").unwrap())
            .stat
            .version = 80;
        assert_eq!(nodes.get("/n8").unwrap().stat.version, 80);
        assert!(nodes.remove("/n1000").is_none());
        assert!(nodes.remove("/n9").is_some());
        assert!(!nodes.contains("/n9"));
        assert_eq!(nodes.len(), 999);
        assert_eq!(nodes.iter().count(), 999);
    }

    /// Sequential names differ in the last two words of the path, where
    /// a weaker mix (FxHash's) collided.
    #[test]
    fn sequential_names_do_not_collide() {
        for format in [
            |i| format!("/app/lock-{i:010}"),
            |i| format!("/b/t/p{}/n{i}", i / 1000),
        ] {
            let hashes: std::collections::HashSet<u64> =
                (0..1_000_000).map(|i| path_hash(&format(i))).collect();
            assert_eq!(hashes.len(), 1_000_000);
        }
    }
}
