//! Delta snapshots: the buckets of the nodes map that changed since the
//! last snapshot, base or delta, with the tables the tree keeps whole.
//!
//! A whole-tree snapshot writes every node, so taking one every
//! `snapCount` txns would make each write pay for `nodes / snapCount`
//! nodes written out; the server takes one only about every `nodes` txns
//! instead, and a restart replays up to that many (about 1.2 µs each
//! among 10M znodes: 5.8 s for 4.87M). A delta writes only what changed,
//! from a clone that lives as briefly, so it can be taken every
//! `snapCount` txns: a restart then loads the base and its deltas, merged
//! (each bucket read once, as the newest file holding it has it), and
//! replays at most a `snapCount` of log.
//!
//! Format, big-endian as a snapshot's (see `snapshot`):
//!
//! ```text
//! magic "PDKDELTA", format i32
//! approximate data size i64, sessions, quota paths: as in a snapshot
//! buckets: count i64, then in ascending hash order
//!   (hash u64, nodes i32 (0: no znode has that hash any more),
//!    then that many znodes as a snapshot writes them, in path order)*
//! crc32c u32 of every byte before it
//! ```

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};

use bytes::BufMut;

use crate::changes::tidy;
use crate::node::Node;
use crate::shared_path::SharedPath;
use crate::snapshot::{
    corrupt, peek_node, read_node, AclsSeen, NodeSource, SnapReader, SnapWriter, SnapshotError,
    SnapshotNodes, Tables,
};
use crate::DataTree;

const MAGIC: &[u8; 8] = b"PDKDELTA";
const FORMAT: i32 = 1;

/// Bytes a delta is read in at a time: a restart reads every delta of a
/// chain at once, each through a buffer of its own.
const READ_CHUNK_BYTES: usize = 256 << 10;

/// Buckets whose nodes are looked up together while a delta is written:
/// their lookups' cache misses overlap (`DataTree::prefetch`).
const PREFETCH_BUCKETS: usize = 32;

/// The buckets of the nodes map a tree changed since the last take
/// ([`DataTree::take_changes`]): their hashes, as they were noted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes(Vec<u64>);

impl Changes {
    /// How many buckets changed. Tidies the record, so that a delta
    /// written of it then has little left to sort.
    pub fn bucket_count(&mut self) -> usize {
        tidy(&mut self.0);
        self.0.len()
    }

    /// The hashes, ascending, each once: sorted by whoever writes the
    /// delta, not by the apply loop that takes them; borrowed when
    /// [`Changes::bucket_count`] sorted them already.
    fn buckets(&self) -> Cow<'_, [u64]> {
        if self.0.is_sorted_by(|a, b| a < b) {
            return Cow::Borrowed(&self.0);
        }
        let mut hashes = self.0.clone();
        tidy(&mut hashes);
        Cow::Owned(hashes)
    }
}

impl DataTree {
    /// Records from now on which buckets change, for deltas. A clone
    /// shares the record (see `changes`).
    pub fn track_changes(&mut self) {
        self.nodes.track_changes();
    }

    /// What changed since the last take (or since tracking started), and
    /// a fresh start for the next; `None` unless changes are tracked.
    pub fn take_changes(&mut self) -> Option<Changes> {
        self.nodes.take_changes().map(Changes)
    }

    /// Writes a delta of the buckets `changes` names, as this version of
    /// the tree holds them, after the tables it holds whole; returns how
    /// many buckets it holds. Buffers internally, as
    /// [`DataTree::write_snapshot`] does.
    pub fn write_delta(&self, changes: &Changes, out: &mut dyn Write) -> io::Result<usize> {
        let buckets = changes.buckets();
        let mut w = SnapWriter::new(out);
        w.buf.put_slice(MAGIC);
        w.buf.put_i32(FORMAT);
        w.tables(&Tables::of(self));
        w.buf.put_i64(buckets.len() as i64);
        for group in buckets.chunks(PREFETCH_BUCKETS) {
            self.nodes.prefetch(group);
            for &hash in group {
                let nodes: Vec<_> = self.nodes.bucket(hash).collect();
                w.buf.put_u64(hash);
                w.buf.put_i32(jute::jute_len(nodes.len()));
                for (p, node) in nodes {
                    w.node(p, node)?;
                }
            }
        }
        w.finish()?;
        Ok(buckets.len())
    }

    /// Reads a snapshot and the deltas written after it, oldest first,
    /// each the delta of the one before: the tree as of the newest. With
    /// no delta, as [`DataTree::read_snapshot`]. A snapshot of a format
    /// before nodes were listed by hash takes no delta.
    pub fn read_snapshot_and_deltas<'a>(
        base: &'a mut (dyn Read + Send),
        deltas: Vec<&'a mut (dyn Read + Send)>,
    ) -> Result<DataTree, SnapshotError> {
        if deltas.is_empty() {
            return DataTree::read_snapshot(base);
        }
        let (tables, nodes) = MergedNodes::<Decoded>::open(base, deltas)?;
        DataTree::load(tables, nodes)
    }
}

/// Writes a snapshot and the deltas written after it, oldest first, as
/// one whole snapshot of the tree as of the newest delta: the snapshot a
/// load of them would give, without building the tree. So a server takes
/// a whole snapshot without holding a clone of its tree while it is
/// written, which would make every write meanwhile copy what it changes.
/// `nodes` is the tree's [`DataTree::snapshot_node_count`], which a
/// snapshot states ahead of its znodes: a merge that gives another count
/// is refused.
pub fn fold_deltas<'a>(
    base: &'a mut (dyn Read + Send),
    deltas: Vec<&'a mut (dyn Read + Send)>,
    nodes: u64,
    out: &mut dyn Write,
) -> Result<(), SnapshotError> {
    let (tables, mut merged) = MergedNodes::<Encoded>::open(base, deltas)?;
    let mut w = SnapWriter::new(out);
    w.snapshot_header();
    w.tables(&tables);
    w.buf
        .put_i64(i64::try_from(nodes).map_err(|_| corrupt(format!("{nodes} znodes")))?);
    let mut spare = Vec::new();
    let mut written = 0;
    while let Some(node) = merged.next(&mut spare)? {
        w.encoded_node(&node)?;
        spare.push(node);
        written += 1;
    }
    if written != nodes {
        return Err(corrupt(format!(
            "the snapshot and its deltas hold {written} znodes, where the tree has {nodes}"
        )));
    }
    Ok(w.finish()?)
}

/// How a merge reads each node it keeps: decoded into the tree's types,
/// for a load, or left as the bytes it takes, for a fold, which only
/// copies it. A node it leaves out (one a newer file replaced) is skipped
/// by its length, unread.
trait NodeForm {
    type Node: Send;
    /// What reading nodes keeps from one to the next.
    type Scratch;

    /// Reads the node the reader is at, `len` bytes.
    fn read(
        r: &mut SnapReader,
        len: usize,
        scratch: &mut Self::Scratch,
    ) -> Result<Self::Node, SnapshotError>;
}

/// Nodes decoded, to be loaded.
struct Decoded;

impl NodeForm for Decoded {
    type Node = (SharedPath, Node);
    type Scratch = AclsSeen;

    fn read(
        r: &mut SnapReader,
        _: usize,
        acls: &mut AclsSeen,
    ) -> Result<Self::Node, SnapshotError> {
        read_node(r, acls)
    }
}

/// Nodes as the bytes they take in a snapshot, to be written again.
struct Encoded;

impl NodeForm for Encoded {
    type Node = Vec<u8>;
    /// Buffers of nodes written, to read the next into: a fold copies
    /// millions of nodes, and need not allocate for each.
    type Scratch = Vec<Vec<u8>>;

    fn read(
        r: &mut SnapReader,
        len: usize,
        spare: &mut Vec<Vec<u8>>,
    ) -> Result<Self::Node, SnapshotError> {
        let mut node = spare.pop().unwrap_or_default();
        node.clear();
        node.extend_from_slice(r.take(len)?);
        Ok(node)
    }
}

/// A delta's buckets, each read as far as its header until it is taken.
struct DeltaBuckets<'a> {
    r: SnapReader<'a>,
    left: u64,
    /// The next bucket's hash and count of nodes, the reader at its first
    /// node; `None` once every bucket was read and the checksum matched.
    next: Option<(u64, i32)>,
    last_hash: Option<u64>,
}

impl<'a> DeltaBuckets<'a> {
    /// Reads a delta's header and tables.
    fn open(input: &'a mut (dyn Read + Send)) -> Result<(Tables, Self), SnapshotError> {
        let mut r = SnapReader::with_chunk(input, READ_CHUNK_BYTES);
        let magic: [u8; 8] = r.array()?;
        if &magic != MAGIC {
            return Err(SnapshotError::BadMagic);
        }
        let format = r.i32()?;
        if format != FORMAT {
            return Err(SnapshotError::UnsupportedFormat(format));
        }
        let tables = Tables::read(&mut r)?;
        let count = r.i64()?;
        let left = u64::try_from(count).map_err(|_| corrupt(format!("bucket count {count}")))?;
        let delta = DeltaBuckets {
            r,
            left,
            next: None,
            last_hash: None,
        };
        Ok((tables, delta))
    }

    fn next_hash(&self) -> Option<u64> {
        self.next.map(|(hash, _)| hash)
    }

    /// Reads the next bucket's header, or checks the checksum after the
    /// last.
    fn advance(&mut self) -> Result<(), SnapshotError> {
        if self.left == 0 {
            self.next = None;
            return self.r.check_crc();
        }
        self.left -= 1;
        let hash = u64::from_be_bytes(self.r.array()?);
        if self.last_hash.is_some_and(|last| last >= hash) {
            return Err(corrupt(format!(
                "a delta's buckets are out of order at {hash:#018x}"
            )));
        }
        self.last_hash = Some(hash);
        self.next = Some((hash, self.r.count()?));
        Ok(())
    }

    /// The next bucket's nodes, read as `F` reads them if `keep`, else
    /// skipped; then the bucket after it.
    fn take<F: NodeForm>(
        &mut self,
        keep: bool,
        scratch: &mut F::Scratch,
    ) -> Result<Vec<F::Node>, SnapshotError> {
        let (hash, count) = self.next.expect("a bucket read ahead");
        let mut nodes = Vec::new();
        for _ in 0..count {
            let (node_hash, len) = peek_node(&mut self.r)?;
            if node_hash != hash {
                return Err(corrupt(format!(
                    "a znode of hash {node_hash:#018x} is in a delta's bucket {hash:#018x}"
                )));
            }
            if keep {
                nodes.push(F::read(&mut self.r, len, scratch)?);
            } else {
                self.r.take(len)?;
            }
        }
        self.advance()?;
        Ok(nodes)
    }
}

/// A base snapshot's nodes merged with its deltas', in hash order: each
/// bucket as the newest file that holds it has it, a bucket a delta holds
/// empty left out. Only the nodes given are read; the ones replaced are
/// skipped (among 10M znodes, a chain of deltas commonly replaces most of
/// a million of the base's).
struct MergedNodes<'a, F: NodeForm> {
    base: SnapshotNodes<'a>,
    /// The hash and length of the base's next node, peeked at; `None`
    /// once the base is read to its end.
    base_next: Option<(u64, usize)>,
    base_last_hash: u64,
    /// Oldest first.
    deltas: Vec<DeltaBuckets<'a>>,
    /// The hash of each delta's next bucket, with the delta's place in
    /// `deltas`, least first: a chain may be long, and a restart asks for
    /// the least once a node.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    started: bool,
    /// The last bucket a delta gave: the base's nodes of that hash are
    /// left out.
    replaced: Option<u64>,
    /// The nodes of that bucket still to give, last first.
    giving: Vec<F::Node>,
}

impl<'a, F: NodeForm> MergedNodes<'a, F> {
    /// Reads the headers of a snapshot and its deltas, oldest first: the
    /// newest delta's tables, and the nodes still to be merged.
    fn open(
        base: &'a mut (dyn Read + Send),
        deltas: Vec<&'a mut (dyn Read + Send)>,
    ) -> Result<(Tables, Self), SnapshotError> {
        let (format, mut tables, nodes) = SnapshotNodes::open(base)?;
        if !SnapshotNodes::in_hash_order(format) {
            return Err(corrupt(format!(
                "a snapshot of format {format} lists its znodes by path, and no delta can be merged with it"
            )));
        }
        let mut buckets = Vec::with_capacity(deltas.len());
        for input in deltas {
            let (newer, delta) = DeltaBuckets::open(input)?;
            tables = newer;
            buckets.push(delta);
        }
        let merged = MergedNodes {
            base: nodes,
            base_next: None,
            base_last_hash: 0,
            deltas: buckets,
            heads: BinaryHeap::new(),
            started: false,
            replaced: None,
            giving: Vec::new(),
        };
        Ok((tables, merged))
    }

    fn start(&mut self) -> Result<(), SnapshotError> {
        self.started = true;
        self.peek_base()?;
        for at in 0..self.deltas.len() {
            self.deltas[at].advance()?;
            self.push_head(at);
        }
        Ok(())
    }

    fn push_head(&mut self, at: usize) {
        if let Some(hash) = self.deltas[at].next_hash() {
            self.heads.push(Reverse((hash, at)));
        }
    }

    fn peek_base(&mut self) -> Result<(), SnapshotError> {
        self.base_next = self.base.peek()?;
        if let Some((hash, _)) = self.base_next {
            if hash < self.base_last_hash {
                return Err(corrupt(format!(
                    "the snapshot's znodes are out of hash order at hash {hash:#018x}"
                )));
            }
            self.base_last_hash = hash;
        }
        Ok(())
    }

    /// The base's next node, and a peek at the one after it.
    fn read_base(&mut self, scratch: &mut F::Scratch) -> Result<F::Node, SnapshotError> {
        let (_, len) = self.base_next.expect("a node peeked at");
        let node = self.base.read_peeked(|r| F::read(r, len, scratch))?;
        self.peek_base()?;
        Ok(node)
    }

    /// Skips the base's next node, replaced by a delta's bucket.
    fn skip_base(&mut self) -> Result<(), SnapshotError> {
        let (_, len) = self.base_next.expect("a node peeked at");
        self.base.read_peeked(|r| r.take(len).map(drop))?;
        self.peek_base()
    }

    /// The bucket at `hash`, the least of the deltas' next, as the newest
    /// delta holding it has it; every delta holding it moves past it.
    fn take_newest(
        &mut self,
        hash: u64,
        scratch: &mut F::Scratch,
    ) -> Result<Vec<F::Node>, SnapshotError> {
        let Reverse((_, mut newest)) = self.heads.pop().expect("a delta holds the bucket");
        // Deltas holding the same hash come off the heap oldest first.
        while let Some(&Reverse((head, at))) = self.heads.peek() {
            if head != hash {
                break;
            }
            self.heads.pop();
            self.deltas[newest].take::<F>(false, scratch)?;
            self.push_head(newest);
            newest = at;
        }
        let nodes = self.deltas[newest].take::<F>(true, scratch)?;
        self.push_head(newest);
        Ok(nodes)
    }

    /// The next node in hash order; `None` once every node was given and
    /// every checksum over them matched.
    fn next(&mut self, scratch: &mut F::Scratch) -> Result<Option<F::Node>, SnapshotError> {
        if !self.started {
            self.start()?;
        }
        loop {
            if let Some(node) = self.giving.pop() {
                return Ok(Some(node));
            }
            while self.replaced.is_some() && self.base_next.map(|(hash, _)| hash) == self.replaced {
                self.skip_base()?;
            }
            let base = self.base_next.map(|(hash, _)| hash);
            let delta = self.heads.peek().map(|Reverse((hash, _))| *hash);
            let from_base = match (base, delta) {
                (None, None) => return Ok(None),
                (Some(base), Some(delta)) => base < delta,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            if from_base {
                return self.read_base(scratch).map(Some);
            }
            let hash = delta.expect("a delta's bucket comes first");
            self.giving = self.take_newest(hash, scratch)?;
            self.giving.reverse();
            self.replaced = Some(hash);
        }
    }
}

impl NodeSource for MergedNodes<'_, Decoded> {
    fn next_node(
        &mut self,
        acls: &mut AclsSeen,
    ) -> Result<Option<(SharedPath, Node)>, SnapshotError> {
        self.next(acls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{node_of_version as node, SharedNode};
    use crate::nodes::path_hash;
    use crate::snapshot::UNBUFFERED_DATA_BYTES;

    fn snapshot(tree: &DataTree) -> Vec<u8> {
        let mut out = Vec::new();
        tree.write_snapshot(&mut out).unwrap();
        out
    }

    fn delta(tree: &mut DataTree) -> Vec<u8> {
        let changes = tree.take_changes().expect("tracked");
        let mut out = Vec::new();
        tree.write_delta(&changes, &mut out).unwrap();
        out
    }

    fn load(base: &[u8], deltas: &[Vec<u8>]) -> Result<DataTree, SnapshotError> {
        let mut base = base;
        let mut inputs: Vec<&[u8]> = deltas.iter().map(Vec::as_slice).collect();
        let deltas = inputs
            .iter_mut()
            .map(|input| input as &mut (dyn Read + Send))
            .collect();
        DataTree::read_snapshot_and_deltas(&mut base, deltas)
    }

    /// A tree of the four nodes a fresh tree has and `/a` .. `/d`.
    fn tracked_tree() -> DataTree {
        let mut tree = DataTree::new();
        for (i, name) in ["/a", "/b", "/c", "/d"].into_iter().enumerate() {
            tree.nodes.insert(SharedPath::from(name), node(i as i32));
            let root = tree.nodes.get_mut("/").unwrap();
            SharedNode::make_mut(root)
                .children
                .insert(SharedPath::from(name));
        }
        tree.track_changes();
        tree
    }

    fn remove(tree: &mut DataTree, p: &str) {
        tree.nodes.remove(p).unwrap();
        let root = tree.nodes.get_mut("/").unwrap();
        SharedNode::make_mut(root).children.remove(p);
    }

    #[test]
    fn a_base_and_its_deltas_load_as_the_tree_of_the_newest() {
        let mut tree = tracked_tree();
        let base = snapshot(&tree);
        remove(&mut tree, "/b");
        SharedNode::make_mut(tree.nodes.get_mut("/c").unwrap())
            .stat
            .version = 30;
        let first = delta(&mut tree);
        let after_first = tree.clone();
        SharedNode::make_mut(tree.nodes.get_mut("/c").unwrap())
            .stat
            .version = 31;
        remove(&mut tree, "/d");
        tree.nodes.insert(SharedPath::from("/e"), node(5));
        let root = tree.nodes.get_mut("/").unwrap();
        SharedNode::make_mut(root)
            .children
            .insert(SharedPath::from("/e"));
        let second = delta(&mut tree);

        assert_eq!(
            load(&base, std::slice::from_ref(&first)).unwrap(),
            after_first
        );
        assert_eq!(load(&base, &[first, second]).unwrap(), tree);
    }

    /// A delta of a fresh tree's tables and of empty buckets at `hashes`,
    /// in that order.
    fn delta_of_empty_buckets(hashes: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = SnapWriter::new(&mut out);
        w.buf.put_slice(MAGIC);
        w.buf.put_i32(FORMAT);
        w.tables(&Tables::of(&DataTree::new()));
        w.buf.put_i64(hashes.len() as i64);
        for &hash in hashes {
            w.buf.put_u64(hash);
            w.buf.put_i32(0);
        }
        w.finish().unwrap();
        out
    }

    /// A delta of one bucket, at `hash`, holding `/a`.
    fn delta_of_a_at(hash: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = SnapWriter::new(&mut out);
        w.buf.put_slice(MAGIC);
        w.buf.put_i32(FORMAT);
        w.tables(&Tables::of(&DataTree::new()));
        w.buf.put_i64(1);
        w.buf.put_u64(hash);
        w.buf.put_i32(1);
        w.node(&SharedPath::from("/a"), &node(7)).unwrap();
        w.finish().unwrap();
        out
    }

    /// Whether the merge reads the bucket (the newest holding its hash) or
    /// skips it (a newer delta replaced it), a znode in the wrong bucket
    /// is found.
    #[test]
    fn a_znode_in_a_bucket_of_another_hash_is_refused_read_or_skipped() {
        let base = snapshot(&tracked_tree());
        assert!(load(&base, &[delta_of_a_at(path_hash("/a"))]).is_ok());
        let elsewhere = path_hash("/a") ^ 1;
        let replaced = [
            delta_of_a_at(elsewhere),
            delta_of_empty_buckets(&[elsewhere]),
        ];
        for deltas in [&replaced[..1], &replaced[..]] {
            let refused = load(&base, deltas);
            assert!(
                matches!(&refused, Err(SnapshotError::Corrupt(e)) if e.contains("is in a delta's bucket")),
                "{} deltas: {refused:?}",
                deltas.len()
            );
        }
    }

    #[test]
    fn a_delta_out_of_bucket_order_is_refused() {
        let base = snapshot(&tracked_tree());
        assert!(load(&base, &[delta_of_empty_buckets(&[3, 5])]).is_ok());
        for hashes in [[5, 3], [3, 3]] {
            let refused = load(&base, &[delta_of_empty_buckets(&hashes)]);
            assert!(
                matches!(&refused, Err(SnapshotError::Corrupt(e)) if e.contains("out of order")),
                "{hashes:?}: {refused:?}"
            );
        }
    }

    #[test]
    fn a_delta_writes_each_bucket_noted_once() {
        let mut tree = tracked_tree();
        for version in 1..=3 {
            SharedNode::make_mut(tree.nodes.get_mut("/a").unwrap())
                .stat
                .version = version;
        }
        let changes = tree.take_changes().unwrap();
        assert_eq!(changes.0.len(), 3);
        assert_eq!(tree.write_delta(&changes, &mut Vec::new()).unwrap(), 1);
    }

    #[test]
    fn a_damaged_delta_fails_the_load() {
        let mut tree = tracked_tree();
        let base = snapshot(&tree);
        SharedNode::make_mut(tree.nodes.get_mut("/a").unwrap())
            .stat
            .version = 10;
        let mut changed = delta(&mut tree);
        let last = changed.len() - 5;
        changed[last] ^= 1;
        assert!(load(&base, &[changed]).is_err());
    }

    /// As the apply loop applies a long txn: to a clone, which then
    /// replaces the tree.
    #[test]
    fn a_change_to_a_clone_that_replaces_the_tree_is_in_the_delta() {
        let mut tree = tracked_tree();
        let base = snapshot(&tree);
        let mut clone = tree.clone();
        remove(&mut clone, "/c");
        tree = clone;
        let changed = delta(&mut tree);
        assert_eq!(load(&base, &[changed]).unwrap(), tree);
    }

    #[test]
    fn a_base_and_its_deltas_fold_into_a_snapshot_of_the_newest_tree_and_its_count() {
        let mut tree = tracked_tree();
        let base = snapshot(&tree);
        remove(&mut tree, "/b");
        let changed = delta(&mut tree);
        let fold = |nodes| {
            let mut out = Vec::new();
            fold_deltas(&mut &base[..], vec![&mut &changed[..]], nodes, &mut out).map(|()| out)
        };
        let folded = fold(tree.snapshot_node_count()).unwrap();
        assert_eq!(DataTree::read_snapshot(&mut &folded[..]).unwrap(), tree);
        let miscounted = fold(tree.snapshot_node_count() + 1);
        assert!(
            matches!(&miscounted, Err(SnapshotError::Corrupt(e)) if e.contains("where the tree has")),
            "{miscounted:?}"
        );
    }

    /// A node of every shape a fold copies by its lengths: data past the
    /// writer's buffer, null data, and more than one ACL entry.
    #[test]
    fn a_fold_copies_large_null_and_many_acl_nodes_whole() {
        let acl = |scheme: &str, id: &str| jute::Acl {
            perms: 31,
            id: jute::Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        };
        let acls: crate::AclList =
            std::sync::Arc::new(vec![acl("world", "anyone"), acl("digest", "u:h")]);
        let mut tree = tracked_tree();
        let base = snapshot(&tree);
        for (name, data) in [
            ("/big", Some(vec![7u8; 3 * UNBUFFERED_DATA_BYTES])),
            ("/null", None),
            ("/small", Some(b"s".to_vec())),
        ] {
            let stat = crate::StatPersisted::new(5, 6, 0);
            let node = Node::new(data.map(Vec::into_boxed_slice), acls.clone(), stat);
            tree.nodes
                .insert(SharedPath::from(name), SharedNode::new(node));
            let root = tree.nodes.get_mut("/").unwrap();
            SharedNode::make_mut(root)
                .children
                .insert(SharedPath::from(name));
        }
        let changed = delta(&mut tree);
        let mut folded = Vec::new();
        let nodes = tree.snapshot_node_count();
        fold_deltas(&mut &base[..], vec![&mut &changed[..]], nodes, &mut folded).unwrap();
        assert_eq!(DataTree::read_snapshot(&mut &folded[..]).unwrap(), tree);
    }

    #[test]
    fn changes_are_recorded_only_once_tracking_starts() {
        let mut tree = DataTree::new();
        assert_eq!(tree.take_changes(), None);
        tree.nodes.insert(SharedPath::from("/a"), node(0));
        tree.track_changes();
        assert!(tree.take_changes().unwrap().0.is_empty());
        tree.nodes.insert(SharedPath::from("/b"), node(0));
        assert_eq!(tree.take_changes().unwrap().0, [path_hash("/b")]);
    }
}
