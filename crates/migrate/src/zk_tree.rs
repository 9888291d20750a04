//! Apache ZooKeeper's tree as its snapshot and log describe it, and the
//! replay of its logged transactions with ZooKeeper's own semantics
//! (`DataTree.processTxn`, `FileTxnSnapLog.processTransaction`).
//!
//! Replay is not Paddock's `DataTree::apply`: a logged transaction is a
//! result whose checks (ACLs, versions, names) the leader already made,
//! and a ZooKeeper snapshot is fuzzy (taken while transactions were
//! applied), so the log may repeat what the snapshot holds. ZooKeeper
//! replays tolerantly: a failed step is skipped, a repeated create moves
//! the parent's cversion forward. Once replayed, the tree becomes Paddock
//! records.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use jute::Acl;
use tree::{
    DataTree, OwnerKind, SessionInfo, SnapshotError, StatPersisted, ZnodeRecord,
    CONTAINER_EPHEMERAL_OWNER,
};

use crate::password::zookeeper_password;
use crate::zk_txn::{CreateTxn, LoggedTxn, TxnHeader, ZkOwner, ZkTxn};

/// One znode as ZooKeeper keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkNode {
    pub data: Option<Bytes>,
    pub acl: Arc<[Acl]>,
    pub stat: StatPersisted,
    /// Child names.
    pub children: BTreeSet<String>,
}

/// Why a logged step did not apply (ZooKeeper logs it and goes on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    NoNode,
    NodeExists,
}

/// ZooKeeper's tree: nodes by path with the root under `""`, as
/// ZooKeeper's own map holds it, and its sessions with their timeouts.
#[derive(Debug, Default)]
pub struct ZkTree {
    nodes: HashMap<String, ZkNode>,
    sessions: BTreeMap<i64, i32>,
    ephemerals: HashMap<i64, BTreeSet<String>>,
}

/// ZooKeeper's parent of a path: everything before the last `/`.
fn split(path: &str) -> Option<(&str, &str)> {
    path.rfind('/').map(|i| (&path[..i], &path[i + 1..]))
}

impl ZkTree {
    pub fn contains(&self, path: &str) -> bool {
        self.nodes.contains_key(path)
    }

    pub fn add_session(&mut self, id: i64, timeout_ms: i32) {
        self.sessions.insert(id, timeout_ms);
    }

    /// A node read from a snapshot, which ZooKeeper writes parent first:
    /// `Err` names the missing parent (`DataTree.deserialize` refuses the
    /// same) or the path seen twice.
    pub fn add_loaded(&mut self, path: String, node: ZkNode) -> Result<(), String> {
        if !path.is_empty() {
            let (parent, name) =
                split(&path).ok_or_else(|| format!("path {path:?} has no parent"))?;
            let parent_node = self.nodes.get_mut(parent).ok_or_else(|| {
                format!("the parent {parent:?} of {path:?} comes after it or not at all")
            })?;
            parent_node.children.insert(name.to_owned());
        }
        self.index_owner(&path, node.stat.ephemeral_owner);
        if self.nodes.insert(path.clone(), node).is_some() {
            return Err(format!("{path:?} is there twice"));
        }
        Ok(())
    }

    fn index_owner(&mut self, path: &str, owner: i64) {
        if let OwnerKind::Session(owner) = OwnerKind::of(owner) {
            self.ephemerals
                .entry(owner)
                .or_default()
                .insert(path.to_owned());
        }
    }

    /// `FileTxnSnapLog.processTransaction`: the sessions, then
    /// `DataTree.processTxn`. Returns the steps that were skipped.
    pub fn replay(&mut self, logged: &LoggedTxn) -> Vec<Skipped> {
        let mut skipped = Vec::new();
        self.process(&logged.header, &logged.txn, &mut skipped);
        skipped
    }

    fn process(&mut self, header: &TxnHeader, txn: &ZkTxn, skipped: &mut Vec<Skipped>) {
        let result = match txn {
            ZkTxn::CreateSession { timeout_ms } => {
                self.sessions.insert(header.client_id, *timeout_ms);
                Ok(())
            }
            ZkTxn::CloseSession => {
                self.sessions.remove(&header.client_id);
                self.kill_session(header.client_id, header.zxid, skipped);
                Ok(())
            }
            ZkTxn::Create(create) => self.create(header, create),
            ZkTxn::Delete { path } => self.delete(path, header.zxid),
            ZkTxn::SetData {
                path,
                data,
                version,
            } => self.set_data(header, path, data, *version),
            ZkTxn::SetAcl { path, acl, version } => self.set_acl(path, acl, *version),
            ZkTxn::Error { .. } | ZkTxn::Check { .. } => Ok(()),
            ZkTxn::Multi(txns) => {
                // A multi that failed is logged as errors only; one that
                // did not applies every step, skipping those that fail.
                if !txns.iter().any(|t| matches!(t, ZkTxn::Error { .. })) {
                    for sub in txns {
                        self.process(header, sub, skipped);
                    }
                }
                Ok(())
            }
        };
        if let Err(why) = result {
            skipped.push(why);
        }
    }

    /// `DataTree.createNode`; on NodeExists for a plain create (opcode 1,
    /// also inside a multi), `setCversionPzxid` on the parent, as
    /// `processTxn` does for the fuzzy snapshot's sake.
    fn create(&mut self, header: &TxnHeader, create: &CreateTxn) -> Result<(), Skipped> {
        let (parent_path, name) = split(&create.path).ok_or(Skipped::NoNode)?;
        let owner = match create.owner {
            ZkOwner::Persistent => 0,
            ZkOwner::Session => header.client_id,
            ZkOwner::Container => CONTAINER_EPHEMERAL_OWNER,
            ZkOwner::Ttl(ttl) => tree::ttl_owner(ttl).ok_or(Skipped::NoNode)?,
        };
        let parent = self.nodes.get_mut(parent_path).ok_or(Skipped::NoNode)?;
        if parent.children.contains(name) {
            if create.op == jute::OpCode::Create.code() {
                move_cversion(parent, create.parent_cversion, header.zxid);
            }
            return Err(Skipped::NodeExists);
        }
        let parent_cversion = match create.parent_cversion {
            -1 => parent.stat.cversion.wrapping_add(1),
            given => given,
        };
        if parent_cversion > parent.stat.cversion {
            parent.stat.cversion = parent_cversion;
            parent.stat.pzxid = header.zxid;
        }
        parent.children.insert(name.to_owned());
        let node = ZkNode {
            data: create.data.clone(),
            acl: Arc::from(create.acl.clone()),
            stat: StatPersisted::new(header.zxid, header.time_ms, owner),
            children: BTreeSet::new(),
        };
        self.index_owner(&create.path, owner);
        self.nodes.insert(create.path.clone(), node);
        Ok(())
    }

    /// `DataTree.deleteNode`: the parent first, so that a child a fuzzy
    /// snapshot already lost still moves the parent's pzxid. A node logged
    /// as deleted has no children (the leader checked); should a fuzzy
    /// replay find some, they go with it rather than be left without a
    /// parent.
    fn delete(&mut self, path: &str, zxid: i64) -> Result<(), Skipped> {
        let (parent_path, name) = split(path).ok_or(Skipped::NoNode)?;
        let parent = self.nodes.get_mut(parent_path).ok_or(Skipped::NoNode)?;
        parent.children.remove(name);
        if zxid > parent.stat.pzxid {
            parent.stat.pzxid = zxid;
        }
        let node = self.nodes.remove(path).ok_or(Skipped::NoNode)?;
        for child in &node.children {
            let _ = self.delete(&format!("{path}/{child}"), zxid);
        }
        if let Some(owned) = self.ephemerals.get_mut(&{ node.stat.ephemeral_owner }) {
            owned.remove(path);
        }
        Ok(())
    }

    /// `DataTree.killSession`: the session's ephemerals are deleted.
    fn kill_session(&mut self, id: i64, zxid: i64, skipped: &mut Vec<Skipped>) {
        for path in self.ephemerals.remove(&id).unwrap_or_default() {
            if let Err(why) = self.delete(&path, zxid) {
                skipped.push(why);
            }
        }
    }

    fn set_data(
        &mut self,
        header: &TxnHeader,
        path: &str,
        data: &Option<Bytes>,
        version: i32,
    ) -> Result<(), Skipped> {
        let node = self.nodes.get_mut(path).ok_or(Skipped::NoNode)?;
        node.data = data.clone();
        node.stat.mtime = header.time_ms;
        node.stat.mzxid = header.zxid;
        node.stat.version = version;
        Ok(())
    }

    fn set_acl(&mut self, path: &str, acl: &[Acl], version: i32) -> Result<(), Skipped> {
        let node = self.nodes.get_mut(path).ok_or(Skipped::NoNode)?;
        node.acl = Arc::from(acl.to_vec());
        node.stat.aversion = version;
        Ok(())
    }

    /// What `ZooKeeperServer.loadData` does once the log is replayed:
    /// ephemerals whose session is not in the session table (a fuzzy
    /// snapshot can hold such) are deleted at `zxid`. Returns how many.
    pub fn remove_orphaned_ephemerals(&mut self, zxid: i64) -> usize {
        let orphaned: Vec<i64> = self
            .ephemerals
            .keys()
            .filter(|owner| !self.sessions.contains_key(owner))
            .copied()
            .collect();
        let mut removed = 0;
        for owner in orphaned {
            removed += self.ephemerals.get(&owner).map_or(0, BTreeSet::len);
            self.kill_session(owner, zxid, &mut Vec::new());
        }
        removed
    }

    /// The tree as Paddock's, as ZooKeeper loads it at `zxid` (orphaned
    /// ephemerals removed), and how many ephemerals were orphaned.
    pub fn into_data_tree(mut self, zxid: i64) -> Result<(DataTree, usize), SnapshotError> {
        let orphaned = self.remove_orphaned_ephemerals(zxid);
        Ok((self.into_tree()?, orphaned))
    }

    /// The tree as Paddock's, as it is.
    pub fn into_tree(self) -> Result<DataTree, SnapshotError> {
        let (sessions, znodes) = self.into_records();
        DataTree::from_records(sessions, znodes)
    }

    /// The sessions, each with the password ZooKeeper gave its clients,
    /// and every znode (the root as `"/"`), for `DataTree::from_records`.
    pub fn into_records(self) -> (Vec<(i64, SessionInfo)>, impl Iterator<Item = ZnodeRecord>) {
        let sessions = self
            .sessions
            .iter()
            .map(|(&id, &timeout_ms)| {
                (
                    id,
                    SessionInfo {
                        timeout_ms,
                        password: Bytes::from(zookeeper_password(id)),
                    },
                )
            })
            .collect();
        let znodes = self.nodes.into_iter().map(|(path, node)| ZnodeRecord {
            path: if path.is_empty() {
                "/".to_owned()
            } else {
                path
            },
            data: node.data,
            acl: node.acl.to_vec(),
            stat: node.stat,
        });
        (sessions, znodes)
    }
}

/// `DataTree.setCversionPzxid`.
fn move_cversion(node: &mut ZkNode, cversion: i32, zxid: i64) {
    let cversion = match cversion {
        -1 => node.stat.cversion.wrapping_add(1),
        given => given,
    };
    if cversion > node.stat.cversion {
        node.stat.cversion = cversion;
        node.stat.pzxid = zxid;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: i64 = 0x100;

    fn header(zxid: i64, op: jute::OpCode) -> TxnHeader {
        TxnHeader {
            client_id: SESSION,
            cxid: 1,
            zxid,
            time_ms: 1_000 + zxid,
            op: op.code(),
        }
    }

    fn create(path: &str, owner: ZkOwner, parent_cversion: i32) -> ZkTxn {
        ZkTxn::Create(CreateTxn {
            op: jute::OpCode::Create.code(),
            path: path.to_owned(),
            data: Some(Bytes::from_static(b"d")),
            acl: Acl::open_unsafe(),
            owner,
            parent_cversion,
        })
    }

    fn replay(tree: &mut ZkTree, zxid: i64, txn: ZkTxn) -> Vec<Skipped> {
        let op = match &txn {
            ZkTxn::Multi(_) => jute::OpCode::Multi,
            ZkTxn::CloseSession => jute::OpCode::CloseSession,
            ZkTxn::CreateSession { .. } => jute::OpCode::CreateSession,
            ZkTxn::Delete { .. } => jute::OpCode::Delete,
            _ => jute::OpCode::Create,
        };
        tree.replay(&LoggedTxn {
            header: header(zxid, op),
            txn,
        })
    }

    fn fresh() -> ZkTree {
        let mut tree = ZkTree::default();
        let node = || ZkNode {
            data: Some(Bytes::new()),
            acl: Arc::from(Acl::open_unsafe()),
            stat: StatPersisted::default(),
            children: BTreeSet::new(),
        };
        tree.add_loaded(String::new(), node()).unwrap();
        tree.add_loaded("/zookeeper".into(), node()).unwrap();
        tree
    }

    #[test]
    fn a_create_the_snapshot_already_holds_moves_the_parents_cversion() {
        let mut tree = fresh();
        assert!(replay(&mut tree, 5, create("/a", ZkOwner::Persistent, 1)).is_empty());
        // The fuzzy snapshot held /a but not the parent's change: replaying
        // the create is NodeExists, and the parent still moves forward.
        tree.nodes.get_mut("").unwrap().stat.cversion = 0;
        assert_eq!(
            replay(&mut tree, 6, create("/a", ZkOwner::Persistent, 2)),
            [Skipped::NodeExists]
        );
        let root = &tree.nodes[""];
        assert_eq!((root.stat.cversion, root.stat.pzxid), (2, 6));
    }

    #[test]
    fn a_delete_of_a_child_already_gone_still_moves_the_parents_pzxid() {
        let mut tree = fresh();
        replay(&mut tree, 5, create("/a", ZkOwner::Persistent, 1));
        replay(&mut tree, 6, ZkTxn::Delete { path: "/a".into() });
        assert_eq!(
            replay(&mut tree, 7, ZkTxn::Delete { path: "/a".into() }),
            [Skipped::NoNode]
        );
        assert_eq!({ tree.nodes[""].stat.pzxid }, 7);
    }

    #[test]
    fn a_create_without_parent_cversion_counts_one_more() {
        let mut tree = fresh();
        replay(&mut tree, 5, create("/a", ZkOwner::Persistent, -1));
        replay(&mut tree, 6, create("/b", ZkOwner::Persistent, -1));
        assert_eq!(tree.nodes[""].stat.cversion, 2);
    }

    #[test]
    fn a_failed_multi_applies_nothing_and_a_closed_session_takes_its_ephemerals() {
        let mut tree = fresh();
        replay(&mut tree, 2, ZkTxn::CreateSession { timeout_ms: 30_000 });
        let failed = ZkTxn::Multi(vec![
            create("/x", ZkOwner::Persistent, 1),
            ZkTxn::Error { code: -101 },
        ]);
        replay(&mut tree, 3, failed);
        assert!(!tree.nodes.contains_key("/x"));
        replay(&mut tree, 4, create("/e", ZkOwner::Session, 1));
        assert_eq!({ tree.nodes["/e"].stat.ephemeral_owner }, SESSION);
        let (sessions, _) = ZkTree {
            nodes: HashMap::new(),
            sessions: tree.sessions.clone(),
            ephemerals: HashMap::new(),
        }
        .into_records();
        assert_eq!(sessions[0].1.password, zookeeper_password(SESSION));
        replay(&mut tree, 5, ZkTxn::CloseSession);
        assert!(!tree.nodes.contains_key("/e"));
        assert!(tree.sessions.is_empty());
        assert_eq!({ tree.nodes[""].stat.pzxid }, 5);
    }

    #[test]
    fn ephemerals_of_a_session_not_in_the_table_are_removed_at_load() {
        let mut tree = fresh();
        replay(&mut tree, 2, ZkTxn::CreateSession { timeout_ms: 30_000 });
        replay(&mut tree, 3, create("/e", ZkOwner::Session, 1));
        assert_eq!(tree.remove_orphaned_ephemerals(9), 0);
        tree.sessions.clear();
        assert_eq!(tree.remove_orphaned_ephemerals(9), 1);
        assert!(!tree.nodes.contains_key("/e"));
        assert_eq!({ tree.nodes[""].stat.pzxid }, 9);
    }

    #[test]
    fn a_snapshot_node_before_its_parent_is_refused() {
        let mut tree = ZkTree::default();
        let node = ZkNode {
            data: None,
            acl: Arc::from(Acl::open_unsafe()),
            stat: StatPersisted::default(),
            children: BTreeSet::new(),
        };
        let err = tree.add_loaded("/a/b".into(), node).unwrap_err();
        assert!(err.contains("\"/a\""), "{err}");
    }
}
