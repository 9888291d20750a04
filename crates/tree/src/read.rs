//! Reads, with the checks ZooKeeper's `FinalRequestProcessor` makes:
//! `NoNode` first, then the ACL against the reading session's auth ids.
//! Watches are registered by the server, atomically with the read, on the
//! same immutable version of the tree.

use bytes::Bytes;
use jute::{perms, Acl, ErrorCode, Id, Stat};

use crate::acl::{check_acl, redact_digest};
use crate::node::{Children, SharedNode};
use crate::path;
use crate::prefetch;
use crate::session::SessionInfo;
use crate::DataTree;

impl DataTree {
    fn readable(&self, path: &str, perm: i32, auth: &[Id]) -> Result<&SharedNode, ErrorCode> {
        let node = self.node(path).ok_or(ErrorCode::NoNode)?;
        if !check_acl(&node.acl, perm, auth) {
            return Err(ErrorCode::NoAuth);
        }
        Ok(node)
    }

    /// getData: a copy of the data (`None` when null) and the stat; READ
    /// needed.
    pub fn get_data(&self, path: &str, auth: &[Id]) -> Result<(Option<Bytes>, Stat), ErrorCode> {
        let node = self.readable(path, perms::READ, auth)?;
        Ok((node.data().map(Bytes::copy_from_slice), node.client_stat()))
    }

    /// getData's node itself, for a server that encodes the data once it
    /// has let go of the tree: one count more on a node just read, where
    /// [`DataTree::get_data`] allocates a copy of the data. READ needed.
    ///
    /// The data, an allocation of its own, is prefetched: the server copies
    /// it into the reply a task later, and by then it is in the cache
    /// rather than one more miss waited for in turn.
    pub fn get_data_node(&self, path: &str, auth: &[Id]) -> Result<SharedNode, ErrorCode> {
        let node = self.readable(path, perms::READ, auth)?;
        if let Some(data) = node.data() {
            prefetch::object(data);
        }
        Ok(node.clone())
    }

    /// The stat of `path`, if it exists, with no permission check. For the
    /// exists request use [`DataTree::exists_checked`]: ZooKeeper 3.9
    /// checks READ on an existing node.
    pub fn exists(&self, path: &str) -> Option<Stat> {
        self.node(path).map(|n| n.client_stat())
    }

    /// The exists request as `FinalRequestProcessor` answers it:
    /// `BadArguments` for a path with NUL, `NoAuth` when the node exists
    /// but is not readable, `NoNode` when it does not exist (the server
    /// still sets an exist watch then).
    pub fn exists_checked(&self, path: &str, auth: &[Id]) -> Result<Stat, ErrorCode> {
        if path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        self.readable(path, perms::READ, auth)
            .map(|node| node.client_stat())
    }

    /// getChildren/getChildren2: child names, sorted, and the stat; READ
    /// needed.
    pub fn get_children(&self, path: &str, auth: &[Id]) -> Result<(Vec<String>, Stat), ErrorCode> {
        let (children, stat) = self.children(path, auth)?;
        let names = children.iter().map(str::to_owned).collect();
        Ok((names, stat))
    }

    /// [`get_children`](Self::get_children) as a copy of the set of names,
    /// made in O(1) whatever their count: a server lists a million
    /// children from the copy without holding up the tree.
    pub fn children(&self, path: &str, auth: &[Id]) -> Result<(Children, Stat), ErrorCode> {
        let node = self.readable(path, perms::READ, auth)?;
        Ok((node.children.clone(), node.client_stat()))
    }

    /// Paddock's paginated getChildren: the children after `start_after`
    /// in sorted order, at most `max_children` of them and no more once
    /// their names (as the reply encodes them) reach `max_bytes`; whether
    /// children follow the page; the stat. READ needed.
    pub fn get_children_page(
        &self,
        path: &str,
        auth: &[Id],
        start_after: &str,
        max_children: usize,
        max_bytes: usize,
    ) -> Result<(Vec<String>, Stat, bool), ErrorCode> {
        let node = self.readable(path, perms::READ, auth)?;
        let bound = path::child_path(path, start_after);
        let mut rest = node.children.after(&bound);
        let mut names = Vec::new();
        let mut bytes = 0;
        for name in rest.by_ref() {
            names.push(name.to_string());
            // a jute string: its length, then its bytes
            bytes += 4 + name.len();
            if names.len() >= max_children || bytes >= max_bytes {
                break;
            }
        }
        let more = rest.next().is_some();
        Ok((names, node.client_stat(), more))
    }

    /// getACL: READ or ADMIN needed; without ADMIN, digest ids are shown
    /// as `user:x` (ZooKeeper 3.9 hides the password hash).
    pub fn get_acl(&self, path: &str, auth: &[Id]) -> Result<(Vec<Acl>, Stat), ErrorCode> {
        let node = self.readable(path, perms::READ | perms::ADMIN, auth)?;
        let acl = if check_acl(&node.acl, perms::ADMIN, auth) {
            node.acl.to_vec()
        } else {
            redact_digest(&node.acl)
        };
        Ok((acl, node.client_stat()))
    }

    /// Whether `auth` may do every permission in `perms` on `path`, each
    /// checked on its own as ZooKeeper's AdminServer checks a command's
    /// (since 3.9.4): one entry granting another bit does not stand in
    /// for a missing one. `None` when there is no such znode.
    pub fn permits_each(&self, path: &str, perms: i32, auth: &[Id]) -> Option<bool> {
        let node = self.node(path)?;
        let mut bits = (0..i32::BITS)
            .map(|b| 1 << b)
            .filter(|bit| perms & bit != 0);
        Some(bits.all(|bit| check_acl(&node.acl, bit, auth)))
    }

    /// getEphemerals: the session's ephemeral paths starting with `prefix`
    /// (all of them for a blank prefix or `/`), sorted.
    pub fn get_ephemerals(&self, session_id: i64, prefix: &str) -> Vec<String> {
        let Some(paths) = self.ephemerals.get(&session_id) else {
            return Vec::new();
        };
        let trimmed = prefix.trim_matches(|c: char| c <= ' ');
        let all = trimmed.is_empty() || trimmed == "/";
        paths
            .iter()
            .filter(|p| all || p.starts_with(prefix))
            .map(|p| p.to_string())
            .collect()
    }

    /// getAllChildrenNumber: the number of descendants (all depths); READ
    /// needed on `path`.
    pub fn all_children_number(&self, path: &str, auth: &[Id]) -> Result<i32, ErrorCode> {
        self.readable(path, perms::READ, auth)?;
        // ZooKeeper's map holds the root twice, under "/" and "": "/"
        // answers nodes.size() - 2, and "" counts its keys that start with
        // "/", which takes in the root itself.
        let count = match path {
            path::ROOT => self.nodes.len() - 1,
            "" => self.nodes.len(),
            _ => self.descendants(path).count(),
        };
        Ok(count as i32)
    }

    pub fn session(&self, session_id: i64) -> Option<&SessionInfo> {
        self.sessions.get(&session_id)
    }

    /// All sessions, ordered by id.
    pub fn sessions(&self) -> impl Iterator<Item = (i64, &SessionInfo)> {
        self.sessions.iter().map(|(id, s)| (*id, s))
    }

    /// ZooKeeper's `getNodeCount` (mntr `zk_znode_count`): the number of
    /// nodes plus one, because ZooKeeper's map holds the root under both
    /// `""` and `"/"`. A fresh tree reports 5.
    pub fn node_count(&self) -> usize {
        self.nodes.len() + 1
    }

    /// The znodes a snapshot of this tree lists: each once, the root too
    /// (one fewer than [`DataTree::node_count`]).
    pub fn snapshot_node_count(&self) -> u64 {
        self.nodes.len() as u64
    }

    /// ZooKeeper's cached approximate data size (mntr
    /// `zk_approximate_data_size`): path lengths in UTF-16 units plus data
    /// lengths.
    pub fn approximate_data_bytes(&self) -> u64 {
        self.data_bytes_approx.max(0) as u64
    }

    /// The number of ephemeral nodes across all sessions.
    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(|s| s.len()).sum()
    }

    /// `PathUtils.validatePath`, for the server's read paths.
    pub fn validate_path(path: &str) -> Result<(), ErrorCode> {
        path::validate_path(path)
    }
}
