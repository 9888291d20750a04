//! Applying a Txn: ZooKeeper's `PrepRequestProcessor` checks (in its
//! order, since the order decides which error a client sees) followed by
//! the `DataTree` mutation. Paddock evaluates both at apply time, on every
//! replica, against the tree as of the previous log entry.
//!
//! Every op function runs all its checks before its first mutation, so an
//! `Err` leaves the tree untouched.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use jute::{perms, Acl, CreateMode, ErrorCode};

use crate::acl::{check_acl, fixup_acl, AclList};
use crate::node::{next_version, ttl_owner, OwnerKind, CONTAINER_EPHEMERAL_OWNER};
use crate::outcome::{Applied, Outcome, Trigger};
use crate::path::{self, validate_path};
use crate::quota::{self, QuotaBreach};
use crate::session::SessionInfo;
use crate::shared_path::SharedPath;
use crate::txn::{Txn, TxnOp};
use crate::DataTree;

/// What every op needs from its Txn.
struct Ctx<'a> {
    zxid: i64,
    txn: &'a Txn,
    /// The tree quota checks read limits and usage from: the tree before
    /// the multi for a multi's ops (ZooKeeper's prep stage reads the
    /// committed tree, not the multi's earlier ops), else the tree itself.
    quota_base: Option<&'a DataTree>,
}

/// What applying ops produces besides their outcomes.
#[derive(Default)]
struct Effects {
    triggers: Vec<Trigger>,
    quota_breaches: Vec<QuotaBreach>,
}

type OpResult = Result<Outcome, ErrorCode>;

impl DataTree {
    /// Applies `txn`, the log entry at index `zxid`. Never fails: a failed
    /// check is an [`Outcome::Failed`] (or a failed multi's results) and
    /// leaves the tree unchanged, as ZooKeeper's error txns do.
    pub fn apply(&mut self, zxid: i64, txn: &Txn) -> Applied {
        let ctx = Ctx {
            zxid,
            txn,
            quota_base: None,
        };
        let mut fx = Effects::default();
        let outcome = match &txn.op {
            TxnOp::Multi(ops) => self.multi(&ctx, ops, &mut fx),
            op => self
                .apply_op(&ctx, op, &mut fx)
                .unwrap_or_else(Outcome::Failed),
        };
        Applied {
            outcome,
            triggers: fx.triggers,
            quota_breaches: fx.quota_breaches,
        }
    }

    /// The most znodes applying `txn` can change or walk: a multi's ops, a
    /// closing session's ephemerals, a quota's subtree when its stats node
    /// is created (counted as the whole tree), else one. What a reader
    /// waits when a server applies the txn in place is proportional to it.
    pub fn znodes_touched_at_most(&self, txn: &Txn) -> usize {
        match &txn.op {
            TxnOp::CloseSession => self
                .ephemerals
                .get(&txn.session_id)
                .map_or(0, |paths| paths.len()),
            op => self.op_touches_at_most(op),
        }
    }

    fn op_touches_at_most(&self, op: &TxnOp) -> usize {
        match op {
            TxnOp::Multi(ops) => ops.iter().map(|op| self.op_touches_at_most(op)).sum(),
            TxnOp::Create { path, .. } if quota::recounts_subtree(path) => self.nodes.len(),
            _ => 1,
        }
    }

    fn apply_op(&mut self, ctx: &Ctx, op: &TxnOp, fx: &mut Effects) -> OpResult {
        match op {
            TxnOp::CreateSession {
                timeout_ms,
                password,
            } => Ok(self.create_session(ctx, *timeout_ms, password)),
            TxnOp::CloseSession => Ok(self.close_session(ctx, &mut fx.triggers)),
            TxnOp::Create {
                path,
                data,
                acl,
                mode,
                ttl_ms,
            } => self.create(ctx, path, data, acl, *mode, *ttl_ms, fx),
            TxnOp::Delete { path, version } => self.delete(ctx, path, *version, &mut fx.triggers),
            TxnOp::SetData {
                path,
                data,
                version,
            } => self.set_data(ctx, path, data, *version, fx),
            TxnOp::SetAcl { path, acl, version } => self.set_acl(ctx, path, acl, *version),
            TxnOp::Check { path, version } => self.check(ctx, path, *version),
            TxnOp::Reap { path } => self.reap(ctx, path, &mut fx.triggers),
            TxnOp::Reconfig { members } => Ok(self.reconfigure(ctx, members, fx)),
            TxnOp::Error { code } => Err(*code),
            // A multi inside a multi cannot be decoded; ZooKeeper answers
            // an undecodable multi with a marshalling error.
            TxnOp::Multi(_) => Err(ErrorCode::MarshallingError),
        }
    }

    /// `SessionTracker.checkSession`: a request from a session the tree
    /// does not know (never created, or already closed) is expired.
    fn check_session(&self, session_id: i64) -> Result<(), ErrorCode> {
        if self.sessions.contains_key(&session_id) {
            Ok(())
        } else {
            Err(ErrorCode::SessionExpired)
        }
    }

    fn create_session(&mut self, ctx: &Ctx, timeout_ms: i32, password: &Bytes) -> Outcome {
        // Re-creating a known session (a retried proposal) refreshes it and
        // keeps its ephemerals, as ZooKeeper's session tracker does.
        self.sessions.insert(
            ctx.txn.session_id,
            SessionInfo {
                timeout_ms,
                password: password.clone(),
            },
        );
        Outcome::SessionCreated
    }

    /// `DataTree.killSession`: delete the session's ephemerals. ZooKeeper
    /// walks a hash set; we walk path order so replicas agree on the order
    /// of the watch events.
    fn close_session(&mut self, ctx: &Ctx, triggers: &mut Vec<Trigger>) -> Outcome {
        let id = ctx.txn.session_id;
        self.sessions.remove(&id);
        let paths: Vec<SharedPath> = self
            .ephemerals
            .get(&id)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default();
        for p in paths {
            // Ephemerals cannot have children, so each delete is valid.
            if self.node(&p).is_some() {
                self.delete_node(&p, ctx.zxid, triggers);
            }
        }
        self.ephemerals.remove(&id);
        Outcome::SessionClosed
    }

    /// What ZooKeeper's prep stage checks of a create before it looks at
    /// the ACL, in its order (`validateCreateRequest`: the TTL, then the
    /// session; then `validatePathForCreate`): the new node's owner and
    /// its parent's path, or the first failure. The server also asks this
    /// of a create it refuses for its ACL before proposing it.
    pub fn create_checks_before_acl<'p>(
        &self,
        session_id: i64,
        path: &'p str,
        mode: CreateMode,
        ttl_ms: i64,
    ) -> Result<(i64, &'p str), ErrorCode> {
        let owner = if mode.is_ttl() {
            ttl_owner(ttl_ms).ok_or(ErrorCode::BadArguments)?
        } else if ttl_ms >= 0 {
            return Err(ErrorCode::BadArguments);
        } else if mode.is_container() {
            CONTAINER_EPHEMERAL_OWNER
        } else if mode.is_ephemeral() {
            session_id
        } else {
            0
        };
        self.check_session(session_id)?;
        Ok((owner, path::parent_for_create(path)?))
    }

    /// What ZooKeeper's prep stage checks of a setACL before it looks at
    /// the new ACL: the session, then the path.
    pub fn set_acl_checks_before_acl(&self, session_id: i64, path: &str) -> Result<(), ErrorCode> {
        self.check_session(session_id)?;
        validate_path(path)
    }

    /// `PrepRequestProcessor.pRequest2TxnCreate` + `DataTree.createNode`.
    #[allow(clippy::too_many_arguments)]
    fn create(
        &mut self,
        ctx: &Ctx,
        path: &str,
        data: &Option<Bytes>,
        acl: &[Acl],
        mode: CreateMode,
        ttl_ms: i64,
        fx: &mut Effects,
    ) -> OpResult {
        let (owner, parent_path) =
            self.create_checks_before_acl(ctx.txn.session_id, path, mode, ttl_ms)?;
        let acl = fixup_acl(acl, &ctx.txn.auth)?;
        let parent = self.node(parent_path).ok_or(ErrorCode::NoNode)?;
        if !check_acl(&parent.acl, perms::CREATE, &ctx.txn.auth) {
            return Err(ErrorCode::NoAuth);
        }
        // The sequence number is the parent's stored cversion: the count of
        // children ever created, not the cversion clients see.
        let parent_cversion = parent.stat.cversion;
        let path = if mode.is_sequential() {
            format!("{path}{parent_cversion:010}")
        } else {
            path.to_owned()
        };
        validate_path(&path)?;
        if self.nodes.contains(&path) {
            return Err(ErrorCode::NodeExists);
        }
        if matches!(parent.kind(), OwnerKind::Session(_)) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        if ctx.txn.enforce_quota {
            let base = ctx.quota_base.unwrap_or(self);
            base.check_quota(&path, data_len(data), 1, &mut fx.quota_breaches)?;
        }
        // Share the parent's ACL when equal: most trees use one or two.
        let acl: AclList = if *parent.acl == acl[..] {
            parent.acl.clone()
        } else {
            Arc::new(acl)
        };
        let stat = self.create_node(
            &path,
            data.clone(),
            acl,
            owner,
            parent_cversion.wrapping_add(1),
            ctx.zxid,
            ctx.txn.time_ms,
            &mut fx.triggers,
        );
        Ok(Outcome::Created { path, stat })
    }

    /// `PrepRequestProcessor` delete + `DataTree.deleteNode`.
    fn delete(
        &mut self,
        ctx: &Ctx,
        path: &str,
        version: i32,
        triggers: &mut Vec<Trigger>,
    ) -> OpResult {
        self.check_session(ctx.txn.session_id)?;
        let parent_path = path::parent_for_delete(path)?;
        let parent = self.node(parent_path).ok_or(ErrorCode::NoNode)?;
        if !check_acl(&parent.acl, perms::DELETE, &ctx.txn.auth) {
            return Err(ErrorCode::NoAuth);
        }
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        next_version(node.stat.version, version)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.delete_node(path, ctx.zxid, triggers);
        Ok(Outcome::Deleted)
    }

    /// `PrepRequestProcessor` setData + `DataTree.setData`.
    /// ZooKeeper's reconfig txn, a setData of `/zookeeper/config` whose
    /// checks the leader made: the new configuration, versioned by this
    /// zxid.
    fn reconfigure(&mut self, ctx: &Ctx, members: &str, fx: &mut Effects) -> Outcome {
        let config = Bytes::from(format!("{members}version={:x}", ctx.zxid));
        let stat = self.set_node_data(
            path::CONFIG_ZOOKEEPER,
            Some(config.clone()),
            -1,
            ctx.zxid,
            ctx.txn.time_ms,
            &mut fx.triggers,
        );
        Outcome::Reconfigured { config, stat }
    }

    fn set_data(
        &mut self,
        ctx: &Ctx,
        path: &str,
        data: &Option<Bytes>,
        version: i32,
        fx: &mut Effects,
    ) -> OpResult {
        self.check_session(ctx.txn.session_id)?;
        validate_path(path)?;
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !check_acl(&node.acl, perms::WRITE, &ctx.txn.auth) {
            return Err(ErrorCode::NoAuth);
        }
        if ctx.txn.enforce_quota {
            // The size it replaces is the node's latest, a multi's earlier
            // setData included; limits and usage are the base tree's.
            let bytes_diff = data_len(data) - node.data_len() as i64;
            let base = ctx.quota_base.unwrap_or(self);
            base.check_quota(path, bytes_diff, 0, &mut fx.quota_breaches)?;
        }
        let new_version = next_version(node.stat.version, version)?;
        let stat = self.set_node_data(
            path,
            data.clone(),
            new_version,
            ctx.zxid,
            ctx.txn.time_ms,
            &mut fx.triggers,
        );
        Ok(Outcome::SetData { stat })
    }

    /// `PrepRequestProcessor` setACL + `DataTree.setACL`. The new ACL is
    /// validated before the node is looked up, as in ZooKeeper.
    fn set_acl(&mut self, ctx: &Ctx, path: &str, acl: &[Acl], version: i32) -> OpResult {
        self.set_acl_checks_before_acl(ctx.txn.session_id, path)?;
        let acl = fixup_acl(acl, &ctx.txn.auth)?;
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !check_acl(&node.acl, perms::ADMIN, &ctx.txn.auth) {
            return Err(ErrorCode::NoAuth);
        }
        let new_aversion = next_version(node.stat.aversion, version)?;
        let stat = self.set_node_acl(path, Arc::new(acl), new_aversion);
        Ok(Outcome::SetAcl { stat })
    }

    /// `PrepRequestProcessor` check: READ permission and the version.
    fn check(&self, ctx: &Ctx, path: &str, version: i32) -> OpResult {
        self.check_session(ctx.txn.session_id)?;
        validate_path(path)?;
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !check_acl(&node.acl, perms::READ, &ctx.txn.auth) {
            return Err(ErrorCode::NoAuth);
        }
        next_version(node.stat.version, version)?;
        Ok(Outcome::Checked)
    }

    /// `PrepRequestProcessor` deleteContainer, with the eligibility test
    /// repeated at apply time: a container must be empty; a TTL node empty
    /// and unmodified for longer than its TTL at `Txn::time_ms`. Anything
    /// else is `BadVersion`, ZooKeeper's answer for a node of the wrong
    /// kind. (ZooKeeper itself would also delete an empty persistent node
    /// and a TTL node touched since the reaper looked; we do not.) No
    /// session or ACL check: the reaper is the server itself.
    fn reap(&mut self, ctx: &Ctx, path: &str, triggers: &mut Vec<Trigger>) -> OpResult {
        let parent_path = path::parent_for_delete(path)?;
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        let eligible = match node.kind() {
            OwnerKind::Container => true,
            OwnerKind::Ttl(ttl_ms) => ttl_expired(ttl_ms, node.stat.mtime, ctx.txn.time_ms),
            OwnerKind::Void | OwnerKind::Session(_) => false,
        };
        if !eligible {
            return Err(ErrorCode::BadVersion);
        }
        self.node(parent_path).ok_or(ErrorCode::NoNode)?;
        self.delete_node(path, ctx.zxid, triggers);
        Ok(Outcome::Deleted)
    }

    /// A multi: its ops see each other's effects and share one zxid and
    /// time. They run on a clone (O(1) with persistent maps) that replaces
    /// the tree only if every op succeeds. An `Error` op is one the server
    /// refused before proposing (ZooKeeper's prep stage logs an `ErrorTxn`
    /// in its place), failing the multi at that op.
    fn multi(&mut self, ctx: &Ctx, ops: &[TxnOp], fx: &mut Effects) -> Outcome {
        let allowed = |op: &TxnOp| {
            matches!(
                op,
                TxnOp::Create { .. }
                    | TxnOp::Delete { .. }
                    | TxnOp::SetData { .. }
                    | TxnOp::Check { .. }
                    | TxnOp::Error { .. }
            )
        };
        if !ops.iter().all(allowed) {
            return Outcome::Failed(ErrorCode::MarshallingError);
        }
        let mut scratch = self.clone();
        let mut scratch_fx = Effects::default();
        let op_ctx = Ctx {
            quota_base: Some(self),
            ..*ctx
        };
        let mut results = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            match scratch.apply_op(&op_ctx, op, &mut scratch_fx) {
                Ok(outcome) => results.push(Ok(outcome)),
                Err(code) => {
                    fx.quota_breaches.append(&mut scratch_fx.quota_breaches);
                    return Outcome::Multi(failed_multi(ops.len(), i, code));
                }
            }
        }
        *self = scratch;
        fx.triggers.append(&mut scratch_fx.triggers);
        fx.quota_breaches.append(&mut scratch_fx.quota_breaches);
        Outcome::Multi(results)
    }

    /// `ContainerManager.getCandidates`, sorted: empty containers that had
    /// a child (stored cversion > 0) or, if `container_never_used_ms` is
    /// not 0, that are older than it; empty TTL nodes unmodified for longer
    /// than their TTL. Propose a `TxnOp::Reap` for each.
    pub fn reap_candidates(&self, now_ms: i64, container_never_used_ms: i64) -> Vec<String> {
        let mut out = BTreeSet::new();
        for p in self.containers.iter() {
            let Some(node) = self.nodes.get(p) else {
                continue;
            };
            if !node.children.is_empty() {
                continue;
            }
            let elapsed = now_ms.wrapping_sub(node.stat.mtime);
            if node.stat.cversion > 0
                || (container_never_used_ms != 0 && elapsed > container_never_used_ms)
            {
                out.insert(p.to_string());
            }
        }
        for p in self.ttls.iter() {
            let Some(node) = self.nodes.get(p) else {
                continue;
            };
            if let OwnerKind::Ttl(ttl_ms) = node.kind() {
                if node.children.is_empty() && ttl_expired(ttl_ms, node.stat.mtime, now_ms) {
                    out.insert(p.to_string());
                }
            }
        }
        out.into_iter().collect()
    }
}

/// `ContainerManager`: `ttl != 0 && now - mtime > ttl`.
/// The size quotas count for `data`: null is empty.
fn data_len(data: &Option<Bytes>) -> i64 {
    data.as_ref().map_or(0, |d| d.len() as i64)
}

fn ttl_expired(ttl_ms: i64, mtime: i64, now_ms: i64) -> bool {
    ttl_ms != 0 && now_ms.wrapping_sub(mtime) > ttl_ms
}

/// A failed multi's results, as `DataTree.processTxn` builds them.
fn failed_multi(len: usize, failed_at: usize, code: ErrorCode) -> Vec<OpResult> {
    (0..len)
        .map(|i| match i.cmp(&failed_at) {
            std::cmp::Ordering::Less => Err(ErrorCode::Ok),
            std::cmp::Ordering::Equal => Err(code),
            std::cmp::Ordering::Greater => Err(ErrorCode::RuntimeInconsistency),
        })
        .collect()
}
