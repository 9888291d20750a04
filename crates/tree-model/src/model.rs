//! The reference model: every znode in one `BTreeMap` keyed by full path,
//! children found by scanning it, and each op's checks written out in the
//! order ZooKeeper's `PrepRequestProcessor` makes them. Slow and obvious
//! on purpose: it shares no code with the tree it checks.
//!
//! ACLs here only ever name `world:anyone` and Txns carry no auth ids, so
//! a permission check is "does some entry grant the bit".

use std::collections::BTreeMap;
use std::sync::Arc;

use jute::{perms, Acl, CreateMode, ErrorCode, EventType, Stat};
use tree::{Applied, Outcome, Trigger, TxnOp};

/// `EphemeralType.TTL.maxValue()`: a TTL lives in the low 40 bits of the
/// owner field.
pub(crate) const TTL_MAX_MS: i64 = (1 << 40) - 1;

/// `DataTree.isSpecialPath`: the nodes every tree starts with, which a
/// client may never delete.
pub(crate) const SPECIAL_PATHS: [&str; 4] =
    ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

#[derive(Debug, Clone)]
struct Node {
    /// `None` is null data.
    data: Option<Vec<u8>>,
    acl: Vec<Acl>,
    kind: Kind,
    version: i32,
    aversion: i32,
    /// Children ever created: ZooKeeper's stored cversion, which numbers
    /// sequential children and differs from the cversion clients see.
    creates: i32,
    czxid: i64,
    mzxid: i64,
    pzxid: i64,
    ctime: i64,
    mtime: i64,
}

impl Node {
    fn new(data: Option<Vec<u8>>, acl: Vec<Acl>, kind: Kind, zxid: i64, time_ms: i64) -> Self {
        Node {
            data,
            acl,
            kind,
            version: 0,
            aversion: 0,
            creates: 0,
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            ctime: time_ms,
            mtime: time_ms,
        }
    }
}

/// What a write needs besides its op.
#[derive(Clone, Copy)]
struct Ctx {
    zxid: i64,
    time_ms: i64,
    session: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct Model {
    nodes: BTreeMap<String, Node>,
    /// Open sessions and their timeouts.
    sessions: BTreeMap<i64, i32>,
}

/// ZooKeeper keeps the root under `""` as well as `"/"`: the parent of
/// `/a` is `""`.
fn key(path: &str) -> &str {
    if path.is_empty() {
        "/"
    } else {
        path
    }
}

/// Everything before the last `/`, as ZooKeeper cuts paths.
fn parent_of(path: &str) -> Option<&str> {
    path.rfind('/').map(|i| &path[..i])
}

/// `PathUtils.validatePath` for the characters this model's paths use.
fn valid_path(path: &str) -> bool {
    if path == "/" {
        return true;
    }
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    rest.split('/').all(|component| {
        !component.is_empty()
            && component != "."
            && component != ".."
            && !component.chars().any(char::is_control)
    })
}

/// `checkAndIncVersion`'s check: -1 matches any version.
fn version_matches(current: i32, expected: i32) -> Result<(), ErrorCode> {
    if expected == -1 || expected == current {
        Ok(())
    } else {
        Err(ErrorCode::BadVersion)
    }
}

/// `fixupACL` for `world:anyone` entries: duplicates go, empty is invalid.
fn fixup_acl(acl: &[Acl]) -> Result<Vec<Acl>, ErrorCode> {
    let mut unique = Vec::new();
    for entry in acl {
        if !unique.contains(entry) {
            unique.push(entry.clone());
        }
    }
    if unique.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    Ok(unique)
}

fn allows(acl: &[Acl], perm: i32) -> bool {
    acl.iter().any(|entry| entry.perms & perm != 0)
}

fn trigger(path: &str, event: EventType, acl: &[Acl]) -> Trigger {
    Trigger {
        path: path.to_owned(),
        event,
        acl: Arc::new(acl.to_vec()),
    }
}

impl Model {
    /// A fresh ZooKeeper 3.9 tree: the config node is read-only, and its
    /// aversion is -1 because `DataTree` sets its ACL with version -1.
    pub(crate) fn new() -> Self {
        let mut nodes = BTreeMap::new();
        for path in SPECIAL_PATHS {
            let mut node = Node::new(Some(vec![]), Acl::open_unsafe(), Kind::Persistent, 0, 0);
            if path == "/zookeeper/config" {
                node.acl = Acl::read_unsafe();
                node.aversion = -1;
            }
            nodes.insert(path.to_owned(), node);
        }
        Model {
            nodes,
            sessions: BTreeMap::new(),
        }
    }

    /// Every path, sorted.
    pub(crate) fn paths(&self) -> Vec<&str> {
        self.nodes.keys().map(String::as_str).collect()
    }

    pub(crate) fn exists(&self, path: &str) -> bool {
        self.nodes.contains_key(key(path))
    }

    pub(crate) fn version(&self, path: &str) -> Option<i32> {
        self.nodes.get(key(path)).map(|n| n.version)
    }

    pub(crate) fn aversion(&self, path: &str) -> Option<i32> {
        self.nodes.get(key(path)).map(|n| n.aversion)
    }

    pub(crate) fn sessions(&self) -> Vec<(i64, i32)> {
        self.sessions.iter().map(|(id, t)| (*id, *t)).collect()
    }

    /// Names of the children of the node at `path`, sorted.
    pub(crate) fn children(&self, path: &str) -> Vec<String> {
        let path = key(path);
        self.nodes
            .keys()
            .filter(|k| k.as_str() != "/" && parent_of(k).map(key) == Some(path))
            .map(|k| k[k.rfind('/').unwrap() + 1..].to_owned())
            .collect()
    }

    /// The stat a client sees for `path`, which must exist.
    pub(crate) fn stat(&self, path: &str) -> Stat {
        let n = &self.nodes[key(path)];
        let num_children = self.children(path).len() as i32;
        Stat {
            czxid: n.czxid,
            mzxid: n.mzxid,
            ctime: n.ctime,
            mtime: n.mtime,
            version: n.version,
            // Clients count deletes too: every child created and no
            // longer there was deleted once.
            cversion: 2 * n.creates - num_children,
            aversion: n.aversion,
            ephemeral_owner: match n.kind {
                Kind::Ephemeral(session) => session,
                _ => 0,
            },
            data_length: n.data.as_ref().map_or(0, Vec::len) as i32,
            num_children,
            pzxid: n.pzxid,
        }
    }

    pub(crate) fn data(&self, path: &str) -> Option<&[u8]> {
        self.nodes[key(path)].data.as_deref()
    }

    pub(crate) fn acl(&self, path: &str) -> &[Acl] {
        &self.nodes[key(path)].acl
    }

    /// A read's checks: `NoNode`, then `perm` for a client without auth.
    pub(crate) fn readable(&self, path: &str, perm: i32) -> Result<(), ErrorCode> {
        let node = self.nodes.get(key(path)).ok_or(ErrorCode::NoNode)?;
        if allows(&node.acl, perm) {
            Ok(())
        } else {
            Err(ErrorCode::NoAuth)
        }
    }

    /// `DataTree.getAllChildrenNumber`.
    pub(crate) fn all_children_number(&self, path: &str) -> i32 {
        let count = if path == "/" {
            self.nodes.len() - 1
        } else {
            let below = format!("{path}/");
            self.nodes.keys().filter(|k| k.starts_with(&below)).count()
        };
        count as i32
    }

    /// The session's ephemerals under `prefix`, as `getEphemerals` filters
    /// them (Java's `trim` drops every char up to the space).
    pub(crate) fn ephemerals(&self, session: i64, prefix: &str) -> Vec<String> {
        let trimmed = prefix.trim_matches(|c: char| c <= ' ');
        let all = trimmed.is_empty() || trimmed == "/";
        self.nodes
            .iter()
            .filter(|(path, node)| {
                node.kind == Kind::Ephemeral(session) && (all || path.starts_with(prefix))
            })
            .map(|(path, _)| path.clone())
            .collect()
    }

    pub(crate) fn ephemeral_count(&self) -> usize {
        self.nodes
            .values()
            .filter(|n| matches!(n.kind, Kind::Ephemeral(_)))
            .count()
    }

    /// ZooKeeper's `nodeDataSize`: path lengths plus data lengths (its
    /// extra `""` root key adds nothing).
    pub(crate) fn approximate_data_bytes(&self) -> u64 {
        self.nodes
            .iter()
            .map(|(path, node)| (path.len() + node.data.as_ref().map_or(0, Vec::len)) as u64)
            .sum()
    }

    /// `ContainerManager.getCandidates`, sorted.
    pub(crate) fn reap_candidates(&self, now_ms: i64, container_never_used_ms: i64) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(path, node)| {
                if !self.children(path).is_empty() {
                    return false;
                }
                let idle = now_ms - node.mtime;
                match node.kind {
                    Kind::Container => {
                        node.creates > 0
                            || (container_never_used_ms != 0 && idle > container_never_used_ms)
                    }
                    Kind::Ttl(ttl_ms) => idle > ttl_ms,
                    Kind::Persistent | Kind::Ephemeral(_) => false,
                }
            })
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// Applies `op` as the Txn from `session` at `zxid` and `time_ms`.
    pub(crate) fn apply(&mut self, zxid: i64, time_ms: i64, session: i64, op: &TxnOp) -> Applied {
        let ctx = Ctx {
            zxid,
            time_ms,
            session,
        };
        let mut triggers = Vec::new();
        let outcome = match op {
            TxnOp::Multi(ops) => self.multi(ctx, ops, &mut triggers),
            op => self
                .apply_op(ctx, op, &mut triggers)
                .unwrap_or_else(Outcome::Failed),
        };
        Applied {
            outcome,
            triggers,
            quota_breaches: Vec::new(),
        }
    }

    fn apply_op(
        &mut self,
        ctx: Ctx,
        op: &TxnOp,
        triggers: &mut Vec<Trigger>,
    ) -> Result<Outcome, ErrorCode> {
        match op {
            TxnOp::CreateSession { timeout_ms, .. } => {
                self.sessions.insert(ctx.session, *timeout_ms);
                Ok(Outcome::SessionCreated)
            }
            TxnOp::CloseSession => Ok(self.close_session(ctx, triggers)),
            TxnOp::Create {
                path,
                data,
                acl,
                mode,
                ttl_ms,
            } => self.create(ctx, path, data.as_deref(), acl, *mode, *ttl_ms, triggers),
            TxnOp::Delete { path, version } => self.delete(ctx, path, *version, triggers),
            TxnOp::SetData {
                path,
                data,
                version,
            } => self.set_data(ctx, path, data.as_deref(), *version, triggers),
            TxnOp::SetAcl { path, acl, version } => self.set_acl(ctx, path, acl, *version),
            TxnOp::Check { path, version } => self.check(ctx, path, *version),
            TxnOp::Reap { path } => self.reap(ctx, path, triggers),
            TxnOp::Reconfig { members } => Ok(self.reconfigure(ctx, members, triggers)),
            TxnOp::Error { code } => Err(*code),
            // ZooKeeper cannot decode a multi inside a multi.
            TxnOp::Multi(_) => Err(ErrorCode::MarshallingError),
        }
    }

    fn session_open(&self, ctx: Ctx) -> Result<(), ErrorCode> {
        if self.sessions.contains_key(&ctx.session) {
            Ok(())
        } else {
            Err(ErrorCode::SessionExpired)
        }
    }

    fn close_session(&mut self, ctx: Ctx, triggers: &mut Vec<Trigger>) -> Outcome {
        self.sessions.remove(&ctx.session);
        let owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.kind == Kind::Ephemeral(ctx.session))
            .map(|(p, _)| p.clone())
            .collect();
        for path in owned {
            self.remove(&path, ctx.zxid, triggers);
        }
        Outcome::SessionClosed
    }

    /// `pRequest2TxnCreate`, then `DataTree.createNode`.
    #[allow(clippy::too_many_arguments)]
    fn create(
        &mut self,
        ctx: Ctx,
        path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        mode: CreateMode,
        ttl_ms: i64,
        triggers: &mut Vec<Trigger>,
    ) -> Result<Outcome, ErrorCode> {
        let kind = if mode.is_ttl() {
            if !(1..=TTL_MAX_MS).contains(&ttl_ms) {
                return Err(ErrorCode::BadArguments);
            }
            Kind::Ttl(ttl_ms)
        } else if ttl_ms >= 0 {
            return Err(ErrorCode::BadArguments);
        } else if mode.is_container() {
            Kind::Container
        } else if mode.is_ephemeral() {
            Kind::Ephemeral(ctx.session)
        } else {
            Kind::Persistent
        };
        self.session_open(ctx)?;
        if path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = parent_of(path).ok_or(ErrorCode::BadArguments)?;
        let acl = fixup_acl(acl)?;
        let parent = self.nodes.get(key(parent_path)).ok_or(ErrorCode::NoNode)?;
        if !allows(&parent.acl, perms::CREATE) {
            return Err(ErrorCode::NoAuth);
        }
        let path = if mode.is_sequential() {
            format!("{path}{:010}", parent.creates)
        } else {
            path.to_owned()
        };
        if !valid_path(&path) {
            return Err(ErrorCode::BadArguments);
        }
        if self.nodes.contains_key(&path) {
            return Err(ErrorCode::NodeExists);
        }
        if matches!(parent.kind, Kind::Ephemeral(_)) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }

        let parent_key = key(parent_path);
        let parent = self.nodes.get_mut(parent_key).expect("checked above");
        parent.creates += 1;
        parent.pzxid = ctx.zxid;
        triggers.push(trigger(&path, EventType::NodeCreated, &acl));
        triggers.push(trigger(
            parent_key,
            EventType::NodeChildrenChanged,
            &parent.acl,
        ));
        let node = Node::new(data.map(<[u8]>::to_vec), acl, kind, ctx.zxid, ctx.time_ms);
        self.nodes.insert(path.clone(), node);
        Ok(Outcome::Created {
            stat: self.stat(&path),
            path,
        })
    }

    /// `getParentPathAndValidate`, for delete and the reaper's delete.
    fn parent_for_delete(path: &str) -> Result<&str, ErrorCode> {
        if path.contains('\0') || SPECIAL_PATHS.contains(&path) {
            return Err(ErrorCode::BadArguments);
        }
        parent_of(path).ok_or(ErrorCode::BadArguments)
    }

    fn delete(
        &mut self,
        ctx: Ctx,
        path: &str,
        version: i32,
        triggers: &mut Vec<Trigger>,
    ) -> Result<Outcome, ErrorCode> {
        self.session_open(ctx)?;
        let parent_path = Self::parent_for_delete(path)?;
        let parent = self.nodes.get(key(parent_path)).ok_or(ErrorCode::NoNode)?;
        if !allows(&parent.acl, perms::DELETE) {
            return Err(ErrorCode::NoAuth);
        }
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        version_matches(node.version, version)?;
        if !self.children(path).is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.remove(path, ctx.zxid, triggers);
        Ok(Outcome::Deleted)
    }

    /// `DataTree.deleteNode`.
    fn remove(&mut self, path: &str, zxid: i64, triggers: &mut Vec<Trigger>) {
        let node = self.nodes.remove(path).expect("a checked node");
        let parent_key = key(parent_of(path).expect("an absolute path"));
        let parent = self.nodes.get_mut(parent_key).expect("a node's parent");
        parent.pzxid = zxid;
        triggers.push(trigger(path, EventType::NodeDeleted, &node.acl));
        triggers.push(trigger(
            parent_key,
            EventType::NodeChildrenChanged,
            &parent.acl,
        ));
    }

    fn set_data(
        &mut self,
        ctx: Ctx,
        path: &str,
        data: Option<&[u8]>,
        version: i32,
        triggers: &mut Vec<Trigger>,
    ) -> Result<Outcome, ErrorCode> {
        self.session_open(ctx)?;
        if !valid_path(path) {
            return Err(ErrorCode::BadArguments);
        }
        let node = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        if !allows(&node.acl, perms::WRITE) {
            return Err(ErrorCode::NoAuth);
        }
        version_matches(node.version, version)?;
        node.version += 1;
        node.data = data.map(<[u8]>::to_vec);
        node.mzxid = ctx.zxid;
        node.mtime = ctx.time_ms;
        triggers.push(trigger(path, EventType::NodeDataChanged, &node.acl));
        Ok(Outcome::SetData {
            stat: self.stat(path),
        })
    }

    /// The leader checked it; no session or ACL check here.
    fn reconfigure(&mut self, ctx: Ctx, members: &str, triggers: &mut Vec<Trigger>) -> Outcome {
        let path = "/zookeeper/config";
        let config = format!("{members}version={:x}", ctx.zxid).into_bytes();
        let node = self.nodes.get_mut(path).expect("the config node exists");
        node.version = -1;
        node.data = Some(config.clone());
        node.mzxid = ctx.zxid;
        node.mtime = ctx.time_ms;
        triggers.push(trigger(path, EventType::NodeDataChanged, &node.acl));
        Outcome::Reconfigured {
            config: config.into(),
            stat: self.stat(path),
        }
    }

    fn set_acl(
        &mut self,
        ctx: Ctx,
        path: &str,
        acl: &[Acl],
        version: i32,
    ) -> Result<Outcome, ErrorCode> {
        self.session_open(ctx)?;
        if !valid_path(path) {
            return Err(ErrorCode::BadArguments);
        }
        let acl = fixup_acl(acl)?;
        let node = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        if !allows(&node.acl, perms::ADMIN) {
            return Err(ErrorCode::NoAuth);
        }
        version_matches(node.aversion, version)?;
        node.aversion += 1;
        node.acl = acl;
        Ok(Outcome::SetAcl {
            stat: self.stat(path),
        })
    }

    fn check(&self, ctx: Ctx, path: &str, version: i32) -> Result<Outcome, ErrorCode> {
        self.session_open(ctx)?;
        if !valid_path(path) {
            return Err(ErrorCode::BadArguments);
        }
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !allows(&node.acl, perms::READ) {
            return Err(ErrorCode::NoAuth);
        }
        version_matches(node.version, version)?;
        Ok(Outcome::Checked)
    }

    /// The reaper's `deleteContainer`, eligibility checked again at apply
    /// time; a node of the wrong kind (or a TTL node not yet expired) is
    /// `BadVersion`, ZooKeeper's answer for a node that is not a container.
    fn reap(
        &mut self,
        ctx: Ctx,
        path: &str,
        triggers: &mut Vec<Trigger>,
    ) -> Result<Outcome, ErrorCode> {
        Self::parent_for_delete(path)?;
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !self.children(path).is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        let eligible = match node.kind {
            Kind::Container => true,
            Kind::Ttl(ttl_ms) => ctx.time_ms - node.mtime > ttl_ms,
            Kind::Persistent | Kind::Ephemeral(_) => false,
        };
        if !eligible {
            return Err(ErrorCode::BadVersion);
        }
        self.remove(path, ctx.zxid, triggers);
        Ok(Outcome::Deleted)
    }

    /// All or nothing; on failure, the results `DataTree.processTxn` gives:
    /// `Ok` before the failed op, its code, `RuntimeInconsistency` after.
    fn multi(&mut self, ctx: Ctx, ops: &[TxnOp], triggers: &mut Vec<Trigger>) -> Outcome {
        let in_multi = |op: &TxnOp| {
            matches!(
                op,
                TxnOp::Create { .. }
                    | TxnOp::Delete { .. }
                    | TxnOp::SetData { .. }
                    | TxnOp::Check { .. }
                    | TxnOp::Error { .. }
            )
        };
        if !ops.iter().all(in_multi) {
            return Outcome::Failed(ErrorCode::MarshallingError);
        }
        let mut scratch = self.clone();
        let mut scratch_triggers = Vec::new();
        let mut results = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match scratch.apply_op(ctx, op, &mut scratch_triggers) {
                Ok(outcome) => results.push(Ok(outcome)),
                Err(code) => {
                    let mut results = vec![Err(ErrorCode::Ok); i];
                    results.push(Err(code));
                    results.resize(ops.len(), Err(ErrorCode::RuntimeInconsistency));
                    return Outcome::Multi(results);
                }
            }
        }
        *self = scratch;
        triggers.append(&mut scratch_triggers);
        Outcome::Multi(results)
    }
}
