//! The tree's door for other systems' formats: a tree built from znode
//! records another system stored, and a tree's znodes parent first, the
//! order another system's loader needs. The migration room reads and
//! writes Apache ZooKeeper's files through these.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use imbl::{OrdMap, OrdSet};
use jute::Acl;

use crate::acl::AclList;
use crate::node::{Node, SharedNode, StatPersisted};
use crate::nodes::Nodes;
use crate::path::{self, CONFIG_ZOOKEEPER, ROOT};
use crate::path_set::PathSet;
use crate::session::SessionInfo;
use crate::shared_path::SharedPath;
use crate::snapshot::{Loading, SnapshotError};
use crate::DataTree;

/// One znode as another system stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZnodeRecord {
    pub path: String,
    /// `None` is null data, kept apart from empty.
    pub data: Option<Bytes>,
    pub acl: Vec<Acl>,
    pub stat: StatPersisted,
}

impl DataTree {
    /// A tree of exactly these sessions and znodes. Znodes may come in any
    /// order, but each needs its parent and none may come twice. Then what
    /// ZooKeeper does when it loads a snapshot: every quota under
    /// `/zookeeper/quota` is registered and its usage recounted
    /// (`DataTree.setupQuota`), and the approximate data size is counted
    /// afresh.
    /// A tree from before ZooKeeper 3.5 has no `/zookeeper/config`; it
    /// gets the empty one a fresh tree has.
    pub fn from_records(
        sessions: impl IntoIterator<Item = (i64, SessionInfo)>,
        znodes: impl IntoIterator<Item = ZnodeRecord>,
    ) -> Result<DataTree, SnapshotError> {
        let mut tree = DataTree {
            nodes: Nodes::default(),
            sessions: sessions.into_iter().collect::<OrdMap<_, _>>(),
            ephemerals: OrdMap::new(),
            containers: PathSet::default(),
            ttls: PathSet::default(),
            quota_paths: OrdSet::new(),
            data_bytes_approx: 0,
        };
        let mut acls: HashMap<Vec<Acl>, AclList> = HashMap::new();
        let mut loading = Loading::new();
        for record in znodes {
            path::validate_path(&record.path).map_err(|_| {
                SnapshotError::Corrupt(format!("znode path {:?} is not valid", record.path))
            })?;
            let acl = acls
                .entry(record.acl.clone())
                .or_insert_with(|| Arc::from(record.acl))
                .clone();
            let node = Node::new(record.data.as_deref().map(Box::from), acl, record.stat);
            tree.insert_loaded(
                &mut loading,
                SharedPath::from(record.path),
                SharedNode::new(node),
            )?;
        }
        tree.finish_loading(loading)?;
        if !tree.nodes.contains(CONFIG_ZOOKEEPER) {
            tree.add_config_node();
        }
        // Counted before the quota stats are rewritten, as ZooKeeper
        // counts while it deserializes and rewrites them after.
        tree.data_bytes_approx = tree.count_data_bytes();
        tree.setup_quotas();
        Ok(tree)
    }

    /// Every znode with its path, each after its parent: the root, then
    /// depth first with children in name order.
    pub fn znodes_parent_first(&self) -> impl Iterator<Item = (&str, &Node)> + '_ {
        let root = self.nodes.get(ROOT).map(|root| (ROOT, &**root)).into_iter();
        root.chain(
            self.descendant_entries(ROOT)
                .map(|(path, node)| (&**path, node)),
        )
    }

    /// `/zookeeper/config` as `DataTree::new` makes it.
    fn add_config_node(&mut self) {
        let fresh = DataTree::new();
        let config = fresh
            .nodes
            .get(CONFIG_ZOOKEEPER)
            .expect("a fresh tree has the config node")
            .clone();
        let key = SharedPath::from(CONFIG_ZOOKEEPER);
        if let Some(parent) = self.nodes.get_mut(path::PROC_ZOOKEEPER) {
            SharedNode::make_mut(parent).children.insert(key.clone());
            self.nodes.insert(key, config);
        }
    }

    /// ZooKeeper's `nodeDataSize` as a fresh tree counts it: every path's
    /// length in UTF-16 units plus its data's length.
    fn count_data_bytes(&self) -> i64 {
        self.nodes
            .iter()
            .map(|(p, node)| path::java_len(p) as i64 + node.data_len() as i64)
            .sum()
    }
}
