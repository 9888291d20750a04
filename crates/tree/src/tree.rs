//! The tree's state and the mutations every op is built from
//! (`DataTree.createNode`, `deleteNode`, `setData`, `setACL`).
//!
//! Callers (the `apply` module) run all of ZooKeeper's checks first and
//! only then call these, so a mutation never fails halfway.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use imbl::{OrdMap, OrdSet};
use jute::{Acl, EventType, Stat};

use crate::acl::AclList;
use crate::lookups::Lookups;
use crate::node::{Node, OwnerKind, SharedNode, StatPersisted};
use crate::nodes::Nodes;
use crate::outcome::Trigger;
use crate::path::{self, CONFIG_ZOOKEEPER, PROC_ZOOKEEPER, QUOTA_ZOOKEEPER, ROOT};
use crate::path_set::PathSet;
use crate::session::SessionInfo;
use crate::shared_path::SharedPath;

/// The data tree: znodes, sessions, and the indexes ZooKeeper keeps
/// beside them. Every map is persistent (imbl), so `clone` is O(1) and a
/// clone is an immutable version readers and the snapshot writer can use
/// while apply continues on the original.
#[derive(Clone, PartialEq, Eq)]
pub struct DataTree {
    /// Full path -> node. The root is stored once, under `"/"`.
    pub(crate) nodes: Nodes,
    /// Session id -> session, ordered by id.
    pub(crate) sessions: OrdMap<i64, SessionInfo>,
    /// Owner session id -> paths of its ephemeral nodes. Kept separately
    /// from `sessions`, as ZooKeeper does, so it always mirrors the nodes.
    pub(crate) ephemerals: OrdMap<i64, PathSet>,
    /// Paths of container nodes (reaper candidates).
    pub(crate) containers: PathSet,
    /// Paths of TTL nodes (reaper candidates).
    pub(crate) ttls: PathSet,
    /// Paths with a quota, as ZooKeeper's `PathTrie` holds them (see the
    /// `quota` module). Persisted in snapshots so that a restored replica
    /// stays identical to one that replayed the log.
    pub(crate) quota_paths: OrdSet<String>,
    /// ZooKeeper's cached `nodeDataSize`: Java path lengths plus data
    /// lengths, updated the way `DataTree` updates it.
    pub(crate) data_bytes_approx: i64,
}

impl Default for DataTree {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for DataTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataTree")
            .field("nodes", &self.nodes.len())
            .field("sessions", &self.sessions.len())
            .field("ephemerals", &self.ephemeral_count())
            .finish()
    }
}

impl DataTree {
    /// A tree as a fresh ZooKeeper 3.9 standalone server has it: `/`,
    /// `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config`, all with
    /// zeroed stats; the config node readable by all and, since the
    /// `DataTree` constructor sets its ACL with version -1, aversion -1.
    pub fn new() -> Self {
        let open: AclList = Arc::new(Acl::open_unsafe());
        let read_only: AclList = Arc::new(Acl::read_unsafe());
        let empty = || Node::new(Some(Box::default()), open.clone(), StatPersisted::default());
        let mut root = empty();
        root.children.insert(SharedPath::from(PROC_ZOOKEEPER));
        let mut proc_node = empty();
        proc_node.children.insert(SharedPath::from(QUOTA_ZOOKEEPER));
        proc_node
            .children
            .insert(SharedPath::from(CONFIG_ZOOKEEPER));
        let mut config = Node::new(Some(Box::default()), read_only, StatPersisted::default());
        config.stat.aversion = -1;

        let mut nodes = Nodes::default();
        for (p, n) in [
            (ROOT, root),
            (PROC_ZOOKEEPER, proc_node),
            (QUOTA_ZOOKEEPER, empty()),
            (CONFIG_ZOOKEEPER, config),
        ] {
            nodes.insert(SharedPath::from(p), SharedNode::new(n));
        }
        // ZooKeeper counts "" and "/" (both the root) and the three others.
        let data_bytes_approx = [ROOT, PROC_ZOOKEEPER, QUOTA_ZOOKEEPER, CONFIG_ZOOKEEPER]
            .iter()
            .map(|p| path::java_len(p) as i64)
            .sum();
        DataTree {
            nodes,
            sessions: OrdMap::new(),
            ephemerals: OrdMap::new(),
            containers: PathSet::default(),
            ttls: PathSet::default(),
            quota_paths: OrdSet::new(),
            data_bytes_approx,
        }
    }

    /// The node at `path`, with ZooKeeper's `""` alias for the root.
    pub(crate) fn node(&self, path: &str) -> Option<&SharedNode> {
        self.nodes.get(path::lookup_key(path))
    }

    /// Starts loading, into the CPU's cache, the znodes of `lookups`, so
    /// that applying txns or answering reads one after another does not
    /// wait for each miss in turn. Only a hint: it changes nothing.
    pub fn prefetch(&self, lookups: &Lookups) {
        self.nodes.prefetch(lookups.hashes());
    }

    /// Every node strictly below `path`, depth first through the children
    /// sets (the nodes map is in hash order, so a subtree is not a range
    /// of it). Holds, for each level, the children's iterator and a group
    /// of them looked up, not the subtree.
    pub(crate) fn descendants<'a>(&'a self, path: &str) -> impl Iterator<Item = &'a Node> + 'a {
        self.descendant_entries(path).map(|(_, node)| node)
    }

    /// [`Self::descendants`] with each node's path. Children are looked up
    /// [`DESCENDANTS_LOOKED_UP_TOGETHER`] at a time (`Nodes::get_group`),
    /// so that their cache misses overlap.
    pub(crate) fn descendant_entries<'a>(
        &'a self,
        path: &str,
    ) -> impl Iterator<Item = (&'a SharedPath, &'a Node)> + 'a {
        let mut levels: Vec<_> = self
            .node(path)
            .map(|top| descent_level(top))
            .into_iter()
            .collect();
        std::iter::from_fn(move || loop {
            let level = levels.last_mut()?;
            if let Some((child, node)) = level.looked_up.next() {
                levels.push(descent_level(node));
                return Some((child, node));
            }
            let group: Vec<_> = (level.unseen.by_ref())
                .take(DESCENDANTS_LOOKED_UP_TOGETHER)
                .collect();
            if group.is_empty() {
                levels.pop();
            } else {
                level.looked_up = self.nodes.get_group(group).into_iter();
            }
        })
    }

    fn node_mut(&mut self, path: &str) -> Option<&mut Node> {
        self.nodes
            .get_mut(path::lookup_key(path))
            .map(SharedNode::make_mut)
    }

    /// Gives the node at `path` new data; returns the node, to change
    /// further in place, and the length of the data it had.
    fn replace_data(&mut self, path: &str, data: Option<&[u8]>) -> Option<(&mut Node, i64)> {
        let node = self.nodes.get_mut(path::lookup_key(path))?;
        let (node, old_len) = Node::replace_data(node, data);
        Some((node, old_len as i64))
    }

    /// `DataTree.createNode` for a create whose checks passed: the parent
    /// exists and `path` does not. Returns the new node's client stat.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_node(
        &mut self,
        path: &str,
        data: Option<Bytes>,
        acl: AclList,
        owner: i64,
        parent_cversion: i32,
        zxid: i64,
        time_ms: i64,
        triggers: &mut Vec<Trigger>,
    ) -> Stat {
        let parent_path = path::parent_of(path).expect("create of a checked path");
        let key = SharedPath::from(path);
        let parent = self
            .node_mut(parent_path)
            .expect("create under a checked parent");
        // Only move forward: ZooKeeper guards against replays after fuzzy
        // snapshots; with Java's int overflow it also stops at i32::MAX.
        if parent_cversion > parent.stat.cversion {
            parent.stat.cversion = parent_cversion;
            parent.stat.pzxid = zxid;
        }
        parent.children.insert(key.clone());
        let parent_acl = parent.acl.clone();

        let node = Node::new(
            data.as_deref().map(Box::from),
            acl.clone(),
            StatPersisted::new(zxid, time_ms, owner),
        );
        let data_len = node.data_len() as i64;
        let stat = node.client_stat();
        self.nodes.insert(key.clone(), SharedNode::new(node));
        self.data_bytes_approx += path::java_len(path) as i64 + data_len;
        match OwnerKind::of(owner) {
            OwnerKind::Void => {}
            OwnerKind::Container => {
                self.containers.insert(key);
            }
            OwnerKind::Ttl(_) => {
                self.ttls.insert(key);
            }
            OwnerKind::Session(id) => {
                self.ephemerals.entry(id).or_default().insert(key);
            }
        }
        self.quota_on_create(parent_path, path, data_len);

        triggers.push(Trigger {
            path: path.to_owned(),
            event: EventType::NodeCreated,
            acl,
        });
        triggers.push(Trigger {
            path: path::watch_path_of_parent(parent_path).to_owned(),
            event: EventType::NodeChildrenChanged,
            acl: parent_acl,
        });
        stat
    }

    /// `DataTree.deleteNode` for a delete whose checks passed.
    pub(crate) fn delete_node(&mut self, path: &str, zxid: i64, triggers: &mut Vec<Trigger>) {
        let parent_path = path::parent_of(path).expect("delete of a checked path");
        let parent = self
            .node_mut(parent_path)
            .expect("delete under a checked parent");
        parent.children.remove(path);
        // Deletes never move cversion (clients see it move through
        // numChildren) and only move pzxid forward.
        if zxid > parent.stat.pzxid {
            parent.stat.pzxid = zxid;
        }
        let parent_acl = parent.acl.clone();

        let node = self.nodes.remove(path).expect("delete of a checked node");
        self.data_bytes_approx -= path::java_len(path) as i64 + node.data_len() as i64;
        match node.kind() {
            OwnerKind::Void => {}
            OwnerKind::Container => {
                self.containers.remove(path);
            }
            OwnerKind::Ttl(_) => {
                self.ttls.remove(path);
            }
            OwnerKind::Session(id) => {
                if let Some(paths) = self.ephemerals.get_mut(&id) {
                    paths.remove(path);
                    if paths.is_empty() {
                        self.ephemerals.remove(&id);
                    }
                }
            }
        }
        self.quota_on_delete(parent_path, path, node.data_len() as i64);

        triggers.push(Trigger {
            path: path.to_owned(),
            event: EventType::NodeDeleted,
            acl: node.acl.clone(),
        });
        triggers.push(Trigger {
            path: path::watch_path_of_parent(parent_path).to_owned(),
            event: EventType::NodeChildrenChanged,
            acl: parent_acl,
        });
    }

    /// `DataTree.setData` for a setData whose checks passed; `version` is
    /// the already incremented version.
    pub(crate) fn set_node_data(
        &mut self,
        path: &str,
        data: Option<Bytes>,
        version: i32,
        zxid: i64,
        time_ms: i64,
        triggers: &mut Vec<Trigger>,
    ) -> Stat {
        let (node, old_len) = self
            .replace_data(path, data.as_deref())
            .expect("setData of a checked node");
        let new_len = node.data_len() as i64;
        node.stat.mtime = time_ms;
        node.stat.mzxid = zxid;
        node.stat.version = version;
        // The reply's stat is taken before quota bookkeeping may rewrite a
        // stats node's data, as in ZooKeeper.
        let stat = node.client_stat();
        let acl = node.acl.clone();
        self.quota_on_set_data(path, new_len - old_len);
        self.data_bytes_approx += new_len - old_len;
        triggers.push(Trigger {
            path: path.to_owned(),
            event: EventType::NodeDataChanged,
            acl,
        });
        stat
    }

    /// `DataTree.setACL` for a setACL whose checks passed. No watch fires.
    pub(crate) fn set_node_acl(&mut self, path: &str, acl: AclList, aversion: i32) -> Stat {
        let node = self.node_mut(path).expect("setACL of a checked node");
        node.stat.aversion = aversion;
        node.acl = acl;
        node.client_stat()
    }

    /// Puts the ensemble's membership in `/zookeeper/config`, as each
    /// ZooKeeper server does from its own configuration when it starts
    /// (`initConfigInZKDatabase`): the data version -1 and the mzxid the
    /// configuration's version. No watch fires: nobody watches yet. The
    /// mtime is 0 where ZooKeeper takes each server's clock, so that every
    /// replica holds the same node.
    pub fn install_config(&mut self, text: Bytes, version: i64) {
        let (node, old_len) = self
            .replace_data(path::CONFIG_ZOOKEEPER, Some(&text[..]))
            .expect("every tree has the config node");
        node.stat.version = -1;
        node.stat.mzxid = version;
        node.stat.mtime = 0;
        self.data_bytes_approx += text.len() as i64 - old_len;
    }

    /// Empties `/zookeeper/config` as a fresh tree has it (data empty, data
    /// version and mzxid 0): for a tree brought from another deployment,
    /// whose membership is not this one's.
    pub fn forget_config(&mut self) {
        let (node, old_len) = self
            .replace_data(path::CONFIG_ZOOKEEPER, Some(&[]))
            .expect("every tree has the config node");
        node.stat.version = 0;
        node.stat.mzxid = 0;
        node.stat.mtime = 0;
        self.data_bytes_approx -= old_len;
    }

    /// Replaces a node's data without touching its stat, as ZooKeeper's
    /// quota bookkeeping does to `zookeeper_stats` nodes.
    pub(crate) fn overwrite_data(&mut self, path: &str, data: Bytes) {
        self.replace_data(path, Some(&data[..]));
    }
}

/// Children a walk through a subtree looks up together: enough for their
/// cache misses to overlap, as the apply loop's groups of txns do.
const DESCENDANTS_LOOKED_UP_TOGETHER: usize = 32;

/// One node's children, in a walk through its subtree: those looked up
/// and not yet visited, and those not yet looked up.
struct DescentLevel<'a, Unseen> {
    looked_up: std::vec::IntoIter<(&'a SharedPath, &'a Node)>,
    unseen: Unseen,
}

fn descent_level(node: &Node) -> DescentLevel<'_, impl Iterator<Item = &SharedPath>> {
    DescentLevel {
        looked_up: Vec::new().into_iter(),
        unseen: node.children.paths(),
    }
}
