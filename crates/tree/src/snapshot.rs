//! Snapshot (de)serialisation of a tree version.
//!
//! The writer streams node by node from an immutable version, so the
//! server can snapshot a clone while apply continues. Format, big-endian
//! with Jute-style length prefixes:
//!
//! ```text
//! magic "PDKTREE\0", format i32
//! approximate data size i64
//! sessions: count i32, then (id i64, timeout_ms i32, password buffer)*
//! quota paths: count i32, then string*
//! nodes: count i64, then in the nodes map's order (format 3: by path
//!   hash; formats 1 and 2: by path)
//!   (path string, data buffer (-1 for null), acl: count i32 + (perms i32, scheme, id)*,
//!    czxid, mzxid, pzxid, ctime, mtime i64, version, cversion,
//!    aversion i32, ephemeral_owner i64)*
//! crc32c u32 of every byte before it
//! ```
//!
//! Children lists, ephemeral/container/TTL indexes are rebuilt on load.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::{mpsc, Arc};

use bytes::{BufMut, Bytes, BytesMut};
use imbl::{OrdMap, OrdSet};
use jute::{Acl, Id};

use crate::acl::AclList;
use crate::node::{Children, Node, OwnerKind, SharedNode, StatPersisted};
use crate::nodes::{path_hash, Nodes, NodesLoader};
use crate::path;
use crate::path_set::PathSet;
use crate::prefetch;
use crate::session::SessionInfo;
use crate::shared_path::SharedPath;
use crate::DataTree;

const MAGIC: &[u8; 8] = b"PDKTREE\0";
/// Format 3 writes nodes in hash order, so a parent may follow its
/// children; format 2 added null data (length -1). Every format is read.
const FORMAT: i32 = 3;
/// The first format whose nodes are in hash order.
const HASH_ORDER_FORMAT: i32 = 3;
const FORMATS_READ: std::ops::RangeInclusive<i32> = 1..=FORMAT;
/// Flush the write buffer to the output at about this size.
const WRITE_CHUNK_BYTES: usize = 64 * 1024;
/// Data at least this long is written to the output as it is, rather than
/// copied through the write buffer first: of a snapshot of 10 KB values,
/// the copies were most of the writer's CPU.
pub(crate) const UNBUFFERED_DATA_BYTES: usize = 4096;

/// The bytes of a node's stat in a snapshot: czxid, mzxid, pzxid, ctime,
/// mtime, then version, cversion, aversion, then the ephemeral owner.
const STAT_BYTES: usize = 5 * 8 + 3 * 4 + 8;

/// Nodes decoded per batch handed to the thread that indexes them.
const LOAD_BATCH_NODES: usize = 4096;

/// Batches decoded ahead of the indexing, at most.
const LOAD_BATCHES_AHEAD: usize = 4;

/// Loaded children, over all parents, below which their sets are built on
/// one thread: starting more costs more than it saves.
const PARALLEL_ADOPTION_CHILDREN_MIN: usize = 1 << 14;

/// How far ahead the writer starts loading what it will write: in hash
/// order a node, its path and its data are each a cache miss of their own.
/// Nodes and paths are asked for twice this many nodes ahead, and data
/// this many, once the node that points to it has arrived: asking for the
/// data in the same step as its node waited for the node. Serialising 1M
/// znodes in-process (`tree_costs 1000000 10000`, alternating runs) took
/// 278-387 ns a znode instead of 444-609, and 463-726 instead of 642-809
/// in a noisier stretch. A path is asked for by its address alone
/// (`SharedPath::prefetch`): reading its length to prefetch it waited for
/// the very miss, one path after another, and serialising took 510-524
/// ns a znode where it now takes 327-364 (`tree_costs 1000000 200000`, four
/// alternated pairs).
const PREFETCH_AHEAD_NODES: usize = 16;

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot I/O: {0}")]
    Io(#[from] io::Error),
    #[error("not a Paddock tree snapshot (bad magic)")]
    BadMagic,
    #[error("unsupported snapshot format {0} (this build reads formats up to {FORMAT})")]
    UnsupportedFormat(i32),
    #[error("corrupt snapshot: {0}")]
    Corrupt(String),
    #[error("snapshot checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
}

pub(crate) fn corrupt(msg: impl Into<String>) -> SnapshotError {
    SnapshotError::Corrupt(msg.into())
}

/// Buffers writes and checksums what it flushes.
pub(crate) struct SnapWriter<'a> {
    out: &'a mut dyn Write,
    pub(crate) buf: BytesMut,
    crc: u32,
}

impl<'a> SnapWriter<'a> {
    pub(crate) fn new(out: &'a mut dyn Write) -> Self {
        SnapWriter {
            out,
            buf: BytesMut::with_capacity(WRITE_CHUNK_BYTES * 2),
            crc: 0,
        }
    }

    /// A whole snapshot's magic and format.
    pub(crate) fn snapshot_header(&mut self) {
        self.buf.put_slice(MAGIC);
        self.buf.put_i32(FORMAT);
    }

    /// The tables that are written whole: the approximate data size,
    /// sessions and quota paths.
    pub(crate) fn tables(&mut self, tables: &Tables) {
        self.buf.put_i64(tables.data_bytes_approx);
        self.buf.put_i32(jute::jute_len(tables.sessions.len()));
        for (id, s) in tables.sessions.iter() {
            self.buf.put_i64(*id);
            self.buf.put_i32(s.timeout_ms);
            self.bytes(&s.password);
        }
        self.buf.put_i32(jute::jute_len(tables.quota_paths.len()));
        for p in tables.quota_paths.iter() {
            self.bytes(p.as_bytes());
        }
    }

    /// The node at path `p`, flushing once enough is gathered.
    pub(crate) fn node(&mut self, p: &str, node: &Node) -> io::Result<()> {
        self.bytes(p.as_bytes());
        self.data(node.data())?;
        self.buf.put_i32(jute::jute_len(node.acl.len()));
        for acl in node.acl.iter() {
            self.buf.put_i32(acl.perms);
            self.bytes(acl.id.scheme.as_bytes());
            self.bytes(acl.id.id.as_bytes());
        }
        let s = &node.stat;
        for v in [s.czxid, s.mzxid, s.pzxid, s.ctime, s.mtime] {
            self.buf.put_i64(v);
        }
        for v in [s.version, s.cversion, s.aversion] {
            self.buf.put_i32(v);
        }
        self.buf.put_i64(s.ephemeral_owner);
        self.maybe_flush()
    }

    /// A node as the bytes it takes, as [`peek_node`] measured them.
    pub(crate) fn encoded_node(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.len() < UNBUFFERED_DATA_BYTES {
            self.buf.put_slice(bytes);
            return self.maybe_flush();
        }
        self.flush()?;
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.out.write_all(bytes)
    }

    /// Writes what is gathered and then the checksum of everything.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        self.flush()?;
        self.out.write_all(&self.crc.to_be_bytes())
    }

    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= WRITE_CHUNK_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, &self.buf);
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    fn bytes(&mut self, b: &[u8]) {
        self.buf.put_i32(jute::jute_len(b.len()));
        self.buf.put_slice(b);
    }

    fn opt_bytes(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => self.bytes(b),
            None => self.buf.put_i32(-1),
        }
    }

    /// A node's data, as [`Self::opt_bytes`] writes it.
    fn data(&mut self, data: Option<&[u8]>) -> io::Result<()> {
        match data {
            Some(b) if b.len() >= UNBUFFERED_DATA_BYTES => {
                self.buf.put_i32(jute::jute_len(b.len()));
                self.flush()?;
                self.crc = crc32c::crc32c_append(self.crc, b);
                self.out.write_all(b)
            }
            small => {
                self.opt_bytes(small);
                Ok(())
            }
        }
    }
}

impl DataTree {
    /// Writes this version of the tree. Buffers internally, so `out` need
    /// not be buffered; flushing or syncing `out` is the caller's job.
    pub fn write_snapshot(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut w = SnapWriter::new(out);
        w.snapshot_header();
        w.tables(&Tables::of(self));
        w.buf.put_i64(self.nodes.len() as i64);
        let mut far = self.nodes.iter().inspect(|(p, node)| {
            p.prefetch();
            prefetch::object(&***node);
        });
        far.by_ref().take(PREFETCH_AHEAD_NODES).for_each(drop);
        let mut near = self.nodes.iter();
        let mut prefetch_next = || {
            far.next();
            if let Some(data) = near.next().and_then(|(_, node)| node.data()) {
                prefetch::object(data);
            }
        };
        for _ in 0..PREFETCH_AHEAD_NODES {
            prefetch_next();
        }
        for (p, node) in self.nodes.iter() {
            prefetch_next();
            w.node(p, node)?;
        }
        w.finish()
    }

    /// Reads a snapshot written by [`DataTree::write_snapshot`], which
    /// must be the whole of `input`: it is read in chunks of its own, so
    /// it need not be buffered, and whatever follows the snapshot may be
    /// read too.
    pub fn read_snapshot(input: &mut (dyn Read + Send)) -> Result<DataTree, SnapshotError> {
        let (_, tables, nodes) = SnapshotNodes::open(input)?;
        DataTree::load(tables, nodes)
    }

    /// A tree of `tables` and of the nodes `source` gives.
    pub(crate) fn load(tables: Tables, source: impl NodeSource) -> Result<DataTree, SnapshotError> {
        let Tables {
            data_bytes_approx,
            sessions,
            quota_paths,
        } = tables;
        let mut tree = DataTree {
            nodes: Nodes::default(),
            sessions,
            ephemerals: OrdMap::new(),
            containers: PathSet::default(),
            ttls: PathSet::default(),
            quota_paths,
            data_bytes_approx,
        };
        tree.load_nodes(source)?;
        Ok(tree)
    }

    /// Reads the nodes `source` gives, decoding on a thread of its own
    /// while this one indexes what was decoded: the two halves of loading
    /// cost about the same, and a restart at 10M znodes waits for both.
    /// Each node is allocated where it will stay, its path and data by the
    /// decoding thread and the node itself by the indexing one: a first
    /// touch of memory costs a page fault, most of the decoding's time, and
    /// with all three allocated there the decoding thread was the one a
    /// restart waited for (among 7.8M znodes it spent 2.2 s of CPU to the
    /// indexing thread's 1.1; 1.7 and 1.5 this way).
    fn load_nodes(&mut self, mut source: impl NodeSource) -> Result<(), SnapshotError> {
        std::thread::scope(|scope| {
            let (batches, decoded) =
                mpsc::sync_channel::<Vec<(SharedPath, Node)>>(LOAD_BATCHES_AHEAD);
            let decoder = scope.spawn(move || -> Result<(), SnapshotError> {
                let mut acls = AclsSeen::default();
                loop {
                    let mut batch = Vec::with_capacity(LOAD_BATCH_NODES);
                    while batch.len() < LOAD_BATCH_NODES {
                        match source.next_node(&mut acls)? {
                            Some(node) => batch.push(node),
                            None => break,
                        }
                    }
                    let last = batch.len() < LOAD_BATCH_NODES;
                    if batches.send(batch).is_err() {
                        return Ok(()); // the indexing half failed, and says why
                    }
                    if last {
                        return Ok(());
                    }
                }
            });
            let mut loading = Loading::new();
            for batch in decoded {
                for (p, node) in batch {
                    self.insert_loaded(&mut loading, p, SharedNode::new(node))?;
                }
            }
            decoder
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            self.finish_loading(loading)
        })
    }

    /// Adds a node read from a snapshot and indexes it, as ZooKeeper's
    /// `DataTree.deserialize` does. Nodes may come in any order; a path
    /// there twice is refused. The node's path is noted for its parent,
    /// which [`Self::finish_loading`] gives all its children at once.
    pub(crate) fn insert_loaded(
        &mut self,
        loading: &mut Loading,
        p: SharedPath,
        node: SharedNode,
    ) -> Result<(), SnapshotError> {
        if &*p != path::ROOT {
            let parent_path = path::parent_of(&p)
                .ok_or_else(|| corrupt(format!("node path {p:?} has no parent")))?;
            let parent_key = path::lookup_key(parent_path);
            match loading.children.get_mut(parent_key) {
                Some(children) => children.push(p.clone()),
                None => {
                    loading
                        .children
                        .insert(SharedPath::from(parent_key), vec![p.clone()]);
                }
            }
        }
        match node.kind() {
            OwnerKind::Void => {}
            OwnerKind::Container => {
                self.containers.insert(p.clone());
            }
            OwnerKind::Ttl(_) => {
                self.ttls.insert(p.clone());
            }
            OwnerKind::Session(id) => {
                self.ephemerals.entry(id).or_default().insert(p.clone());
            }
        }
        loading
            .nodes
            .add(p, node)
            .map_err(|p| corrupt(format!("node {p:?} is there twice")))
    }

    /// Makes the loaded nodes this tree's, and gives every parent the
    /// names of its children.
    pub(crate) fn finish_loading(&mut self, loading: Loading) -> Result<(), SnapshotError> {
        self.nodes = loading.nodes.finish();
        if !self.nodes.contains(path::ROOT) {
            return Err(corrupt("no root znode".to_owned()));
        }
        for (parent_path, children) in children_sets(loading.children) {
            let parent = self.nodes.get_mut(&parent_path).ok_or_else(|| {
                corrupt(format!(
                    "{parent_path:?}, parent of {:?}, is missing",
                    children.iter().next()
                ))
            })?;
            SharedNode::make_mut(parent).children = children;
        }
        Ok(())
    }
}

/// Each parent's children as the set its node keeps. Building a set
/// compares paths, a cache miss each: at 1,000 children a parent that was
/// half of loading a snapshot, so the parents are shared out among the
/// cores by their children's count, and built at once.
fn children_sets(children: ChildPaths) -> Vec<(SharedPath, Children)> {
    let total: usize = children.values().map(Vec::len).sum();
    let threads = match total {
        0..PARALLEL_ADOPTION_CHILDREN_MIN => 1,
        _ => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let mut shares: Vec<Vec<Adoption>> = (0..threads).map(|_| Vec::new()).collect();
    let mut shared_out = vec![0; threads];
    for (parent, paths) in children {
        let least = (0..threads)
            .min_by_key(|&i| shared_out[i])
            .expect("a thread");
        shared_out[least] += paths.len();
        shares[least].push((parent, paths));
    }
    let build = |share: Vec<Adoption>| {
        share
            .into_iter()
            .map(|(parent, paths)| {
                let children = children_set(&parent, paths);
                (parent, children)
            })
            .collect::<Vec<_>>()
    };
    if threads == 1 {
        return shares.into_iter().flat_map(build).collect();
    }
    std::thread::scope(|scope| {
        let built: Vec<_> = shares
            .into_iter()
            .map(|share| scope.spawn(move || build(share)))
            .collect();
        built
            .into_iter()
            .flat_map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// A parent's children, sorted and then packed into full pages: in
/// snapshot (hash) order, each insert would find its place by comparing
/// paths from all over the set, a cache miss each once the set outgrows
/// the caches, where a sort reads them mostly in turn.
///
/// The sort compares keys read once from each name rather than the paths
/// (`ChildSortKey`), so that it works in one array: comparing the paths
/// themselves, each comparison read two strings from anywhere in memory.
/// Loading a snapshot of one parent's 1M children in-process took 392-423
/// ns a znode instead of 499-528 (`tree_costs 1000000 100000`, four
/// alternated pairs); at 1,000 children a parent, whose sorts stay in the
/// caches, nothing moved.
fn children_set(parent: &str, paths: Vec<SharedPath>) -> Children {
    let name_at = path::child_path(parent, "").len();
    let mut keyed: Vec<(ChildSortKey, SharedPath)> = paths
        .into_iter()
        .map(|child| {
            (
                ChildSortKey::of(child.get(name_at..).unwrap_or_default()),
                child,
            )
        })
        .collect();
    keyed.sort_unstable_by(|(key_a, a), (key_b, b)| key_a.cmp(key_b).then_with(|| a.cmp(b)));
    Children::from_sorted(keyed.into_iter().map(|(_, child)| child).collect())
}

/// The first 16 bytes of a child's name, zero-padded, as one big-endian
/// number: keys that differ order their names as the names order
/// (siblings share the parent's path, and padding orders a name before
/// any name it begins), and equal keys leave the order to the whole
/// paths. Sequential names (`lock-0000000042`) and most others differ
/// within 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ChildSortKey(u128);

impl ChildSortKey {
    fn of(name: &str) -> Self {
        let mut bytes = [0; 16];
        let taken = name.len().min(bytes.len());
        bytes[..taken].copy_from_slice(&name.as_bytes()[..taken]);
        ChildSortKey(u128::from_be_bytes(bytes))
    }
}

/// What loading a snapshot keeps until every node is in: the nodes map
/// being built, and each parent's children, so that a parent is looked up
/// in the whole tree once rather than once per child.
pub(crate) struct Loading {
    nodes: NodesLoader,
    children: ChildPaths,
}

/// Parent path -> its children's paths, in snapshot order.
type ChildPaths = HashMap<SharedPath, Vec<SharedPath>>;

/// A parent's path and its children's.
type Adoption = (SharedPath, Vec<SharedPath>);

impl Loading {
    pub(crate) fn new() -> Self {
        Loading {
            nodes: NodesLoader::new(),
            children: HashMap::new(),
        }
    }
}

/// What a snapshot holds whole, ahead of its nodes.
pub(crate) struct Tables {
    data_bytes_approx: i64,
    sessions: OrdMap<i64, SessionInfo>,
    quota_paths: OrdSet<String>,
}

impl Tables {
    /// The tree's tables, shared with it.
    pub(crate) fn of(tree: &DataTree) -> Self {
        Tables {
            data_bytes_approx: tree.data_bytes_approx,
            sessions: tree.sessions.clone(),
            quota_paths: tree.quota_paths.clone(),
        }
    }

    /// Reads what [`SnapWriter::tables`] wrote.
    pub(crate) fn read(r: &mut SnapReader) -> Result<Self, SnapshotError> {
        let data_bytes_approx = r.i64()?;
        let mut sessions = OrdMap::new();
        for _ in 0..r.count()? {
            let id = r.i64()?;
            let timeout_ms = r.i32()?;
            let password = Bytes::from(r.bytes()?);
            sessions.insert(
                id,
                SessionInfo {
                    timeout_ms,
                    password,
                },
            );
        }
        let mut quota_paths = OrdSet::new();
        for _ in 0..r.count()? {
            quota_paths.insert(r.string()?);
        }
        Ok(Tables {
            data_bytes_approx,
            sessions,
            quota_paths,
        })
    }
}

/// Where a load's nodes come from, decoded one at a time.
pub(crate) trait NodeSource: Send {
    /// The next node; `None` once every node was given and every checksum
    /// over them matched. Not called again after an error or `None`.
    fn next_node(
        &mut self,
        acls: &mut AclsSeen,
    ) -> Result<Option<(SharedPath, Node)>, SnapshotError>;
}

/// A snapshot's nodes, in the order it lists them.
pub(crate) struct SnapshotNodes<'a> {
    r: SnapReader<'a>,
    left: u64,
}

impl<'a> SnapshotNodes<'a> {
    /// Reads a snapshot's header and tables: its format, what it holds
    /// whole, and its nodes, still to be read.
    pub(crate) fn open(
        input: &'a mut (dyn Read + Send),
    ) -> Result<(i32, Tables, Self), SnapshotError> {
        let mut r = SnapReader::new(input);
        let magic: [u8; 8] = r.array()?;
        if &magic != MAGIC {
            return Err(SnapshotError::BadMagic);
        }
        let format = r.i32()?;
        if !FORMATS_READ.contains(&format) {
            return Err(SnapshotError::UnsupportedFormat(format));
        }
        let tables = Tables::read(&mut r)?;
        let count = r.i64()?;
        if count < 1 {
            return Err(corrupt(format!("node count {count}")));
        }
        Ok((
            format,
            tables,
            SnapshotNodes {
                r,
                left: count as u64,
            },
        ))
    }

    /// Whether a snapshot of `format` lists its nodes by path hash, as a
    /// delta's buckets are merged with them (`delta`).
    pub(crate) fn in_hash_order(format: i32) -> bool {
        format >= HASH_ORDER_FORMAT
    }
}

impl SnapshotNodes<'_> {
    /// The path hash and length of the next node, left to be read
    /// ([`SnapshotNodes::read_peeked`]); `None` once every node was read
    /// and the checksum matched.
    pub(crate) fn peek(&mut self) -> Result<Option<(u64, usize)>, SnapshotError> {
        if self.left == 0 {
            self.r.check_crc()?;
            return Ok(None);
        }
        peek_node(&mut self.r).map(Some)
    }

    /// The node last peeked at, as `read` reads it.
    pub(crate) fn read_peeked<T>(
        &mut self,
        read: impl FnOnce(&mut SnapReader) -> Result<T, SnapshotError>,
    ) -> Result<T, SnapshotError> {
        self.left -= 1;
        read(&mut self.r)
    }

    /// The next node as `read` reads it; `None` once every node was read
    /// and the checksum matched.
    pub(crate) fn next_with<T>(
        &mut self,
        read: impl FnOnce(&mut SnapReader) -> Result<T, SnapshotError>,
    ) -> Result<Option<T>, SnapshotError> {
        if self.left == 0 {
            self.r.check_crc()?;
            return Ok(None);
        }
        self.left -= 1;
        read(&mut self.r).map(Some)
    }
}

impl NodeSource for SnapshotNodes<'_> {
    fn next_node(
        &mut self,
        acls: &mut AclsSeen,
    ) -> Result<Option<(SharedPath, Node)>, SnapshotError> {
        self.next_with(|r| read_node(r, acls))
    }
}

/// The path hash of the node the reader is at and all the bytes it takes,
/// as [`SnapWriter::node`] wrote them, found by their lengths and left to
/// be read: a merge reads only the nodes it keeps, and skips the rest.
pub(crate) fn peek_node(r: &mut SnapReader) -> Result<(u64, usize), SnapshotError> {
    let path_len = r.length_at(0)?;
    let data_at = 4 + path_len;
    let data_len = match r.i32_at(data_at)? {
        -1 => 0,
        len => usize::try_from(len).map_err(|_| corrupt(format!("negative length {len}")))?,
    };
    let acl_at = data_at + 4 + data_len;
    let len = acl_at + r.acl_len_at(acl_at)? + STAT_BYTES;
    let path =
        std::str::from_utf8(&r.peek(data_at)?[4..]).map_err(|_| corrupt("string is not UTF-8"))?;
    Ok((path_hash(path), len))
}

pub(crate) fn read_node(
    r: &mut SnapReader,
    acls: &mut AclsSeen,
) -> Result<(SharedPath, Node), SnapshotError> {
    let p = SharedPath::from(r.str()?);
    let data = r.opt_bytes()?.map(Vec::into_boxed_slice);
    let acl = read_acl(r, acls)?;
    let stat = StatPersisted {
        czxid: r.i64()?,
        mzxid: r.i64()?,
        pzxid: r.i64()?,
        ctime: r.i64()?,
        mtime: r.i64()?,
        version: r.i32()?,
        cversion: r.i32()?,
        aversion: r.i32()?,
        ephemeral_owner: r.i64()?,
    };
    Ok((p, Node::new(data, acl, stat)))
}

/// The ACL lists a load has met, by their bytes in the snapshot: nodes
/// with identical lists share one allocation, as ZooKeeper's ACL cache
/// shares them, and a list met before is recognised by its bytes without
/// being decoded (decoding each node's list into owned strings, only to
/// find it in a map, was a quarter of the decoding thread's time).
#[derive(Default)]
pub(crate) struct AclsSeen {
    by_bytes: HashMap<Vec<u8>, AclList>,
    /// The list met last, recognised by comparing its bytes: most trees
    /// give nearly every node one list, and hashing each node's list to
    /// find it in the map took 3.4% of a 10M-znode restart's CPU.
    last: Option<(Vec<u8>, AclList)>,
}

impl AclsSeen {
    fn get(&mut self, bytes: &[u8]) -> Option<AclList> {
        if let Some((last, acl)) = &self.last {
            if last[..] == *bytes {
                return Some(acl.clone());
            }
        }
        let acl = self.by_bytes.get(bytes)?.clone();
        self.last = Some((bytes.to_vec(), acl.clone()));
        Some(acl)
    }

    fn insert(&mut self, bytes: Vec<u8>, acl: AclList) {
        self.last = Some((bytes.clone(), acl.clone()));
        self.by_bytes.insert(bytes, acl);
    }
}

fn read_acl(r: &mut SnapReader, acls: &mut AclsSeen) -> Result<AclList, SnapshotError> {
    let len = r.acl_len_at(0)?;
    if let Some(shared) = acls.get(r.peek(len)?) {
        r.take(len)?;
        return Ok(shared);
    }
    let bytes = r.peek(len)?.to_vec();
    let mut acl = Vec::new();
    for _ in 0..r.count()? {
        let perms = r.i32()?;
        let scheme = r.string()?;
        let id = r.string()?;
        acl.push(Acl {
            perms,
            id: Id { scheme, id },
        });
    }
    let shared: AclList = Arc::new(acl);
    acls.insert(bytes, shared.clone());
    Ok(shared)
}

/// Reads a snapshot's fields from chunks of its input, and checksums each
/// chunk once it is decoded. A node is a dozen fields of a few bytes
/// each: read one at a time through `Read`, and checksummed one at a
/// time, the calls alone cost more than decoding them.
pub(crate) struct SnapReader<'a> {
    input: &'a mut (dyn Read + Send),
    /// `buf[..end]` was read from `input`, and is decoded up to `at`.
    buf: Vec<u8>,
    /// Bytes read at a time; the buffer grows by as many when full.
    chunk_bytes: usize,
    at: usize,
    end: usize,
    /// The checksum of every byte decoded before `buf`.
    crc: u32,
}

/// Bytes read from the input at a time. More than the snapshot store's
/// 1 MiB read buffer, so that `BufReader` passes each read straight to the
/// file rather than copying it through its buffer (with 256 KB chunks a
/// 1.1M-znode snapshot loaded in 0.85-0.94 s, with 2 MiB in 0.77-0.91).
const READ_CHUNK_BYTES: usize = 2 << 20;

impl<'a> SnapReader<'a> {
    pub(crate) fn new(input: &'a mut (dyn Read + Send)) -> Self {
        Self::with_chunk(input, READ_CHUNK_BYTES)
    }

    /// A reader of `input` that reads `chunk_bytes` at a time.
    pub(crate) fn with_chunk(input: &'a mut (dyn Read + Send), chunk_bytes: usize) -> Self {
        SnapReader {
            input,
            buf: vec![0; chunk_bytes],
            chunk_bytes,
            at: 0,
            end: 0,
            crc: 0,
        }
    }

    /// Reads the checksum that ends the snapshot and compares it with
    /// that of every byte read before it.
    pub(crate) fn check_crc(&mut self) -> Result<(), SnapshotError> {
        self.checksum_decoded();
        let computed = self.crc;
        let stored = u32::from_be_bytes(self.array()?);
        if stored != computed {
            return Err(SnapshotError::Checksum { stored, computed });
        }
        Ok(())
    }

    /// Adds the bytes decoded to the checksum, and moves the rest to the
    /// front of the buffer.
    fn checksum_decoded(&mut self) {
        self.crc = crc32c::crc32c_append(self.crc, &self.buf[..self.at]);
        self.buf.copy_within(self.at..self.end, 0);
        self.end -= self.at;
        self.at = 0;
    }

    /// The next `len` bytes, left to be read again.
    fn peek(&mut self, len: usize) -> Result<&[u8], SnapshotError> {
        if self.end - self.at < len {
            self.fill(len)?;
        }
        Ok(&self.buf[self.at..self.at + len])
    }

    /// The next `len` bytes.
    pub(crate) fn take(&mut self, len: usize) -> Result<&[u8], SnapshotError> {
        self.peek(len)?;
        let field = &self.buf[self.at..self.at + len];
        self.at += len;
        Ok(field)
    }

    /// The length of the ACL list `offset` bytes ahead, its count and
    /// every entry (perms, then a length-prefixed scheme and id), found
    /// without reading it.
    fn acl_len_at(&mut self, offset: usize) -> Result<usize, SnapshotError> {
        let mut end = offset + 4;
        for _ in 0..self.length_at(offset)? {
            end += 4; // perms
            for _scheme_then_id in 0..2 {
                end += 4 + self.length_at(end)?;
            }
        }
        Ok(end - offset)
    }

    /// The length field `offset` bytes ahead, left to be read again.
    fn length_at(&mut self, offset: usize) -> Result<usize, SnapshotError> {
        let value = self.i32_at(offset)?;
        usize::try_from(value).map_err(|_| corrupt(format!("negative length {value}")))
    }

    /// The `i32` `offset` bytes ahead, left to be read again.
    fn i32_at(&mut self, offset: usize) -> Result<i32, SnapshotError> {
        let field = &self.peek(offset + 4)?[offset..];
        Ok(i32::from_be_bytes(field.try_into().expect("4 bytes")))
    }

    /// Reads until `len` bytes wait to be decoded. The buffer grows a
    /// chunk at a time, once full, so a corrupt length cannot allocate
    /// more than the input holds.
    fn fill(&mut self, len: usize) -> Result<(), SnapshotError> {
        self.checksum_decoded();
        while self.end < len {
            if self.end == self.buf.len() {
                self.buf.resize(self.end + self.chunk_bytes, 0);
            }
            match read_some(self.input, &mut self.buf[self.end..])? {
                0 => return Err(SnapshotError::Io(io::ErrorKind::UnexpectedEof.into())),
                read => self.end += read,
            }
        }
        Ok(())
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, SnapshotError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, SnapshotError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    pub(crate) fn count(&mut self) -> Result<i32, SnapshotError> {
        let n = self.i32()?;
        if n < 0 {
            return Err(corrupt(format!("negative count {n}")));
        }
        Ok(n)
    }

    /// A length-prefixed field.
    fn field(&mut self) -> Result<&[u8], SnapshotError> {
        let len = self.count()?;
        self.take(len as usize)
    }

    fn bytes(&mut self) -> Result<Vec<u8>, SnapshotError> {
        Ok(self.field()?.to_vec())
    }

    /// A buffer that may be null (length -1).
    fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>, SnapshotError> {
        match self.i32()? {
            -1 => Ok(None),
            n if n < 0 => Err(corrupt(format!("negative length {n}"))),
            n => Ok(Some(self.take(n as usize)?.to_vec())),
        }
    }

    fn str(&mut self) -> Result<&str, SnapshotError> {
        std::str::from_utf8(self.field()?).map_err(|_| corrupt("string is not UTF-8"))
    }

    fn string(&mut self) -> Result<String, SnapshotError> {
        self.str().map(str::to_owned)
    }
}

/// `Read::read`, again when a signal interrupted it.
fn read_some(input: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match input.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ACL entry as (perms, scheme, id).
    type AclEntry<'a> = (i32, &'a str, &'a str);

    /// A snapshot of znodes at `paths`, in that order, each with no data,
    /// no ACL entries and a zero stat.
    fn snapshot_of(paths: &[&str]) -> Vec<u8> {
        let nodes: Vec<(&str, &[AclEntry])> = paths.iter().map(|p| (*p, &[][..])).collect();
        snapshot_with_acls(&nodes)
    }

    /// Like [`snapshot_of`], each znode with its ACL list.
    fn snapshot_with_acls(nodes: &[(&str, &[AclEntry])]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = SnapWriter {
            out: &mut out,
            buf: BytesMut::new(),
            crc: 0,
        };
        w.snapshot_header();
        w.buf.put_i64(0);
        w.buf.put_i32(0);
        w.buf.put_i32(0);
        w.buf.put_i64(nodes.len() as i64);
        for (p, acl) in nodes {
            w.bytes(p.as_bytes());
            w.opt_bytes(Some(b""));
            w.buf.put_i32(acl.len() as i32);
            for (perms, scheme, id) in acl.iter() {
                w.buf.put_i32(*perms);
                w.bytes(scheme.as_bytes());
                w.bytes(id.as_bytes());
            }
            w.buf.put_bytes(0, STAT_BYTES);
        }
        w.flush().unwrap();
        let crc = w.crc;
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    fn load(paths: &[&str]) -> Result<DataTree, SnapshotError> {
        DataTree::read_snapshot(&mut &snapshot_of(paths)[..])
    }

    #[test]
    fn nodes_load_in_any_order_each_under_its_parent() {
        let tree = load(&["/a/x", "/b", "/", "/a-b", "/a"]).unwrap();
        assert_eq!(tree.nodes.len(), 5);
        let names = |p: &str| -> Vec<String> {
            let node = tree.nodes.get(p).unwrap();
            node.children.iter().map(str::to_owned).collect()
        };
        assert_eq!(names("/"), ["a", "a-b", "b"]);
        assert_eq!(names("/a"), ["x"]);

        for bad in [
            &["/a"][..],
            &["/", "/b/x", "/a"],
            &["/", "/a", "/a"],
            &["/", "/a/x"],
        ] {
            assert!(
                matches!(load(bad), Err(SnapshotError::Corrupt(_))),
                "{bad:?} loaded"
            );
        }
    }

    /// Nodes with equal ACL lists share one after a load, and lists that
    /// differ (here only in a byte, at the same length) stay apart.
    #[test]
    fn equal_acl_lists_load_shared_and_different_ones_apart() {
        let (alice, bob) = ([(31, "digest", "alice")], [(31, "digest", "bobby")]);
        // Met anew, met again after another, met again straight after.
        let nodes: [(&str, &[AclEntry]); 6] = [
            ("/", &[]),
            ("/a", &alice),
            ("/b", &bob),
            ("/c", &alice),
            ("/d", &alice),
            ("/e", &bob),
        ];
        let tree = DataTree::read_snapshot(&mut &snapshot_with_acls(&nodes)[..]).unwrap();
        let acl = |p: &str| tree.nodes.get(p).unwrap().acl.clone();
        assert!(Arc::ptr_eq(&acl("/a"), &acl("/c")));
        assert!(Arc::ptr_eq(&acl("/a"), &acl("/d")));
        assert!(Arc::ptr_eq(&acl("/b"), &acl("/e")));
        assert!(!Arc::ptr_eq(&acl("/a"), &acl("/b")));
        assert_eq!(acl("/a")[0].id, Id::new("digest", "alice"));
        assert_eq!(acl("/b")[0].id, Id::new("digest", "bobby"));
        assert_eq!(acl("/b")[0].perms, 31);
    }

    /// A parent of many children gets every one of them, listed in order,
    /// whatever order the snapshot had them in.
    #[test]
    fn a_parent_of_many_children_loads_every_one() {
        let count: usize = (1 << 16) + 1;
        // 2^16 + 1 is prime, so multiplying by any smaller number permutes.
        let scrambled: Vec<String> = (0..count)
            .map(|i| format!("/p/c{:06}", (i * 40_503) % count))
            .collect();
        let mut paths = vec!["/", "/p"];
        paths.extend(scrambled.iter().map(String::as_str));
        let tree = load(&paths).unwrap();
        let listed: Vec<&str> = tree.nodes.get("/p").unwrap().children.iter().collect();
        let expected: Vec<String> = (0..count).map(|i| format!("c{i:06}")).collect();
        assert_eq!(listed, expected);
    }

    /// Names whose first 16 bytes tie, names that begin others, and
    /// names of several bytes a character cut at the sort key's end, under
    /// the root and under a parent: each set loads in name order.
    #[test]
    fn children_load_in_name_order_whatever_their_keys_share() {
        let names = [
            "0000000000000000",
            "0000000000000000a",
            "00000000000000009",
            "000000000000000",
            "a",
            "ab",
            "a\u{e9}",
            "\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}z",
            "\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}",
            "Z",
            "lock-0000000042",
            "lock-0000000041",
        ];
        let mut paths = vec!["/".to_owned(), "/p".to_owned()];
        // Reversed, so that nothing arrives in order.
        for name in names.iter().rev() {
            paths.push(format!("/{name}"));
            paths.push(format!("/p/{name}"));
        }
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        let tree = load(&paths).unwrap();
        let mut expected: Vec<&str> = names.to_vec();
        expected.push("p");
        expected.sort_unstable();
        let listed: Vec<&str> = tree.nodes.get("/").unwrap().children.iter().collect();
        assert_eq!(listed, expected);
        expected.retain(|name| *name != "p");
        let listed: Vec<&str> = tree.nodes.get("/p").unwrap().children.iter().collect();
        assert_eq!(listed, expected);
    }

    /// Enough children, over many parents, for their sets to be built on
    /// several threads (given the cores): each parent gets its own, in
    /// order, and a parent missing among them is still refused.
    #[test]
    fn many_parents_of_many_children_each_get_theirs() {
        let (parents, per_parent) = (20, PARALLEL_ADOPTION_CHILDREN_MIN / 16);
        let mut paths = vec!["/".to_owned()];
        for c in (0..per_parent).rev() {
            for p in 0..parents {
                paths.push(format!("/p{p:02}/c{c:05}"));
            }
        }
        paths.extend((0..parents).map(|p| format!("/p{p:02}")));
        let as_strs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let tree = load(&as_strs).unwrap();
        let expected: Vec<String> = (0..per_parent).map(|c| format!("c{c:05}")).collect();
        for p in 0..parents {
            let node = tree.nodes.get(&format!("/p{p:02}")).unwrap();
            assert_eq!(node.children.iter().collect::<Vec<_>>(), expected);
        }

        let without_p07: Vec<&str> = as_strs.into_iter().filter(|p| *p != "/p07").collect();
        assert!(matches!(load(&without_p07), Err(SnapshotError::Corrupt(e)) if e.contains("/p07")));
    }
}
