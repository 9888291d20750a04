//! One znode and its persisted metadata, and what the `ephemeralOwner`
//! field encodes (ZooKeeper's `DataNode`, `StatPersisted`, `EphemeralType`).

use jute::Stat;

use crate::acl::AclList;
use crate::node_data::NodeData;
use crate::path;
use crate::path_set::PathSet;
use crate::shared_path::SharedPath;

/// `EphemeralType.CONTAINER_EPHEMERAL_OWNER`.
pub const CONTAINER_EPHEMERAL_OWNER: i64 = i64::MIN;
/// High byte set in every extended (TTL) owner.
const EXTENDED_MASK: u64 = 0xff00_0000_0000_0000;
/// Bits naming the extended feature; zero means TTL.
const RESERVED_BITS_MASK: u64 = 0x00ff_ff00_0000_0000;
/// `EphemeralType.TTL.maxValue()`: the TTL lives in the low 40 bits.
pub const TTL_MAX_MS: i64 = !(EXTENDED_MASK | RESERVED_BITS_MASK) as i64;

/// What a node's `ephemeralOwner` says it is (`EphemeralType.get`, with
/// extended types enabled: TTL nodes can only exist if they were).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerKind {
    /// Persistent (owner 0).
    Void,
    /// Ephemeral, owned by this session.
    Session(i64),
    /// A container node.
    Container,
    /// A TTL node with this TTL in milliseconds.
    Ttl(i64),
}

impl OwnerKind {
    pub fn of(owner: i64) -> Self {
        let bits = owner as u64;
        if bits & EXTENDED_MASK == EXTENDED_MASK && bits & RESERVED_BITS_MASK == 0 {
            return OwnerKind::Ttl(owner & TTL_MAX_MS);
        }
        // An extended owner with unknown feature bits makes ZooKeeper throw;
        // we read it as a plain session, which session ids never look like
        // (see `TxnOp::CreateSession`).
        match owner {
            0 => OwnerKind::Void,
            CONTAINER_EPHEMERAL_OWNER => OwnerKind::Container,
            _ => OwnerKind::Session(owner),
        }
    }
}

/// `EphemeralType.TTL.toEphemeralOwner`: `None` (BadArguments) unless
/// `0 < ttl_ms <= TTL_MAX_MS`.
pub fn ttl_owner(ttl_ms: i64) -> Option<i64> {
    if ttl_ms <= 0 || ttl_ms > TTL_MAX_MS {
        return None;
    }
    Some((EXTENDED_MASK as i64) | ttl_ms)
}

/// ZooKeeper's `StatPersisted`: the metadata a node stores. Zxids live in
/// zxid space, which in Paddock is the replicated log's index space; times
/// are the proposing server's wall-clock milliseconds.
//
// `packed(4)`: its 60 bytes then take 60 in a node, with the data's length
// in the four an eight-byte alignment would pad them with (see `Node`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct StatPersisted {
    pub czxid: i64,
    pub mzxid: i64,
    pub pzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    /// The number of children ever *created* (ZooKeeper's stored
    /// cversion). Sequence numbers come from it; clients see
    /// `2 * cversion - numChildren`, i.e. creates plus deletes.
    pub cversion: i32,
    pub aversion: i32,
    /// Raw owner: a session id, 0, or a container/TTL encoding.
    pub ephemeral_owner: i64,
}

impl StatPersisted {
    /// `DataTree.createStat`.
    pub fn new(zxid: i64, time_ms: i64, ephemeral_owner: i64) -> Self {
        Self {
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            ctime: time_ms,
            mtime: time_ms,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner,
        }
    }
}

/// A znode. Stored behind a [`SharedNode`] in the tree's persistent map,
/// so a version of the tree shares every node it did not change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Null or bytes: a copy of exactly the data, in twelve bytes of the
    /// node (a `Bytes` would take 32, and one more allocation of its own
    /// the first time it is shared).
    data: NodeData,
    pub acl: AclList,
    pub stat: StatPersisted,
    /// Child names (last path component), kept sorted so listings are
    /// deterministic.
    pub children: Children,
}

/// A node of no data, no ACL entries and a stat of zeros but `version`,
/// for tests of the maps that hold nodes.
#[cfg(test)]
pub(crate) fn node_of_version(version: i32) -> SharedNode {
    let stat = StatPersisted {
        version,
        ..Default::default()
    };
    SharedNode::new(Node::new(None, std::sync::Arc::from(vec![]), stat))
}

/// A znode as the tree holds it: shared between versions of the tree, and
/// copied on the first change after a version is cloned. One count, where
/// a `std::sync::Arc` keeps a second for weak references nothing takes.
pub type SharedNode = triomphe::Arc<Node>;

// A node and its count fill the allocator's 96-byte size class (see
// `AclList`, `NodeData` and `StatPersisted`'s packing); a field more would
// cost every znode 16 bytes. With two counts, or eight-byte aligned data
// and stat, a node took 112: among 1M znodes of 128 bytes the bare tree
// took 341-342 MB where it takes 326 (`cargo run --release -p tree
// --example tree_costs -- 1000000 200000`).
const _: () = assert!(std::mem::size_of::<Node>() + 8 <= 96);

/// A znode's children, held by their full paths: the same `SharedPath` the
/// nodes map is keyed by, so a child costs its parent one pointer in a
/// `PathSet` page and no allocation of its own. Siblings share their
/// parent's prefix, so path order is their names' order. Most znodes have
/// no children, so the set exists only while there are children, and is
/// boxed so that a leaf pays one word for it (see `AclList` for the size
/// this keeps a node to).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Children(Option<Box<PathSet>>);

impl Children {
    /// The children whose full paths are `paths`, sorted, none twice.
    pub(crate) fn from_sorted(paths: Vec<SharedPath>) -> Self {
        if paths.is_empty() {
            return Children::default();
        }
        Children(Some(Box::new(PathSet::from_sorted(paths))))
    }

    /// The children whose full paths are `paths`, in any order: a set
    /// for code outside the tree, which holds no `SharedPath`.
    pub fn from_paths<'a>(paths: impl IntoIterator<Item = &'a str>) -> Self {
        let mut paths: Vec<SharedPath> = paths.into_iter().map(SharedPath::from).collect();
        paths.sort_unstable();
        paths.dedup();
        Self::from_sorted(paths)
    }

    /// Adds the child whose full path is `path`.
    pub(crate) fn insert(&mut self, path: SharedPath) {
        self.0.get_or_insert_with(Box::default).insert(path);
    }

    /// Removes the child whose full path is `path`.
    pub fn remove(&mut self, path: &str) {
        if let Some(set) = &mut self.0 {
            set.remove(path);
            if set.is_empty() {
                self.0 = None;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |set| set.len())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Names in sorted order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.paths().map(|child| path::child_name(child))
    }

    /// The children's full paths, in order.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &SharedPath> {
        self.0.iter().flat_map(|set| set.iter())
    }

    /// Names of the children whose paths sort after `path` (a sibling's
    /// path, which need not exist), found in O(log n).
    pub fn after<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a str> {
        self.0
            .iter()
            .flat_map(move |set| set.after(path))
            .map(|child| path::child_name(child))
    }
}

impl Node {
    pub fn new(data: Option<Box<[u8]>>, acl: AclList, stat: StatPersisted) -> Self {
        Self {
            data: NodeData::from(data),
            acl,
            stat,
            children: Children::default(),
        }
    }

    /// Gives `node` new data, and returns it and the length of the data it
    /// had. Data as long as the old is copied over it when no clone shares
    /// the node; otherwise the data gets an allocation of its own, and a
    /// node a clone shares is copied first, as `Arc::make_mut` copies, but
    /// without the data it loses.
    pub(crate) fn replace_data<'a>(
        node: &'a mut SharedNode,
        data: Option<&[u8]>,
    ) -> (&'a mut Node, usize) {
        let old_len = node.data_len();
        if SharedNode::get_mut(node).is_none() {
            *node = SharedNode::new(Node {
                data: NodeData::NULL,
                acl: node.acl.clone(),
                stat: node.stat,
                children: node.children.clone(),
            });
        }
        let unique = SharedNode::get_mut(node).expect("a node just made is not shared");
        let overwritten = data.is_some_and(|data| unique.data.overwrite(data));
        if !overwritten {
            unique.data = NodeData::from(data.map(Box::from));
        }
        (unique, old_len)
    }

    /// The data, or `None` for null data.
    pub fn data(&self) -> Option<&[u8]> {
        self.data.as_deref()
    }

    /// `dataLength`: 0 for null data, as `DataNode.copyStat` counts it.
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    pub fn kind(&self) -> OwnerKind {
        OwnerKind::of(self.stat.ephemeral_owner)
    }

    /// `DataNode.copyStat`: the `Stat` a client sees. Container and TTL
    /// owners read as 0 and cversion counts deletes too (Java int math).
    pub fn client_stat(&self) -> Stat {
        let num_children = self.children.len() as i32;
        let owner = match self.kind() {
            OwnerKind::Session(id) => id,
            _ => 0,
        };
        Stat {
            czxid: self.stat.czxid,
            mzxid: self.stat.mzxid,
            ctime: self.stat.ctime,
            mtime: self.stat.mtime,
            version: self.stat.version,
            cversion: self
                .stat
                .cversion
                .wrapping_mul(2)
                .wrapping_sub(num_children),
            aversion: self.stat.aversion,
            ephemeral_owner: owner,
            data_length: self.data_len() as i32,
            num_children,
            pzxid: self.stat.pzxid,
        }
    }
}

/// `PrepRequestProcessor.checkAndIncVersion`: `-1` matches any version;
/// the next version skips `-1` when it wraps (ZOOKEEPER-4743), so a client
/// can always name it.
pub fn next_version(current: i32, expected: i32) -> Result<i32, jute::ErrorCode> {
    if expected != -1 && expected != current {
        return Err(jute::ErrorCode::BadVersion);
    }
    let next = current.wrapping_add(1);
    Ok(if next == -1 { 0 } else { next })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_kinds() {
        // EphemeralType.get
        assert_eq!(OwnerKind::of(0), OwnerKind::Void);
        assert_eq!(OwnerKind::of(0x1234), OwnerKind::Session(0x1234));
        assert_eq!(OwnerKind::of(i64::MIN), OwnerKind::Container);
        let owner = ttl_owner(5000).unwrap();
        assert_eq!(owner as u64, 0xff00_0000_0000_1388);
        assert_eq!(OwnerKind::of(owner), OwnerKind::Ttl(5000));
        assert_eq!(TTL_MAX_MS, 0xff_ffff_ffff);
        assert_eq!(ttl_owner(0), None);
        assert_eq!(ttl_owner(-1), None);
        assert_eq!(ttl_owner(TTL_MAX_MS + 1), None);
        assert!(ttl_owner(TTL_MAX_MS).is_some());
    }

    #[test]
    fn version_wraps_past_minus_one() {
        // PrepRequestProcessor.checkAndIncVersion
        assert_eq!(next_version(0, -1), Ok(1));
        assert_eq!(next_version(3, 3), Ok(4));
        assert_eq!(next_version(3, 2), Err(jute::ErrorCode::BadVersion));
        assert_eq!(next_version(i32::MAX, -1), Ok(i32::MIN));
        assert_eq!(next_version(-2, -2), Ok(0));
    }
}
