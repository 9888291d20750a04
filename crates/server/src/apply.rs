//! The apply loop: committed entries, in log order, change the published
//! tree.
//!
//! Each txn is applied to the published tree in place, in one critical
//! section that also moves the applied zxid and queues the watch events of
//! its triggers; the proposers' waiters are completed after the batch. A
//! client therefore receives a watch event before the reply (or any later
//! read) that shows the change, ZooKeeper's ordering guarantee. The reads a
//! session sent after a write, before its next, are answered right after
//! that write is applied, before the next txn (see `session_order`).
//!
//! In place, because a tree shared with a clone pays for every write: the
//! first change to each node of a persistent map copies it (a B-tree node
//! of 64 entries and their reference counts, at every level), and dropping
//! the old version frees it again. Publishing a clone per batch made every
//! write pay that along its whole path, which grew with the tree (at 1M
//! znodes a third of the server's CPU). Now a node is copied at most once
//! per snapshot, while the snapshot writer holds its clone. A reader waits
//! for at most one txn; a txn that may change many znodes (a big multi, a
//! session with many ephemerals closing) is applied to a clone outside the
//! lock and swapped in, as every txn was before.
//!
//! When a snapshot is due (`snapshot_schedule`: by txns or by log size)
//! the loop hands an O(1) clone of the tree to a thread that writes it at
//! the lowest CPU priority while applying continues (`snapshot_job`):
//! a delta of the buckets changed since the last snapshot (`tree::delta`),
//! which follows on the chain `delta_chain` keeps, or the whole tree,
//! folded from that chain's files when there is one (`snapshot_thread`). A
//! server restarted from deltas passes over the entries they hold
//! already.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use consensus::{Applying, CommittedEntry, DeltaMeta, Deltas, Membership, SnapshotMeta, Snapshots};
use tokio::sync::{mpsc, oneshot};
use tree::{Applied, DataTree, Lookups, Outcome, QuotaBreach, Trigger, Txn, TxnOp};

use crate::delta_chain::{ChainTip, DeltaChain};
use crate::pipeline;
use crate::read_ahead;
use crate::shared::{Committed, Published, QueuedEvent, Shared, Waiter, WatchEvent};
use crate::snapshot_arrival::Arrivals;
use crate::snapshot_job::SnapshotJob;
use crate::snapshot_schedule::{SnapshotKind, SnapshotSchedule, TreeSize};
use crate::snapshot_thread::{write_snapshot, SnapshotFiles, Writing};

/// A txn that may change or walk more znodes than this is applied outside
/// the published lock (on an O(1) clone, swapped in), so that readers never
/// wait for a long one.
const ZNODES_TOUCHED_IN_PLACE_MAX: usize = 64;

/// Txns of a batch decoded ahead of being applied, so that the znodes
/// they look up are loaded into the cache together (`DataTree::prefetch`)
/// rather than one miss after another as each is applied. Among 1M znodes
/// a setData's lookup is about five cache misses in a row: in-process a
/// setData took 808-945 ns applied this way and 1498-1691 one by one
/// (`tree_costs 1000000 500000 1000`), and a standalone server with no
/// snapshot running spent 8.40-8.59 µs of CPU per setData of 1M znodes
/// instead of 8.94-9.00 (6.99-7.22 instead of 7.71-7.95 among 1,000).
const PREFETCH_TXNS: usize = 32;

/// A committed entry and its txn, decoded.
struct Decoded {
    /// The entry, its data taken.
    entry: CommittedEntry<Waiter>,
    /// The entry's size in the log.
    bytes: usize,
    /// `None` for raft's own entries, which carry no txn.
    txn: Option<Result<Txn, jute::DecodeError>>,
}

impl Decoded {
    fn of(mut entry: CommittedEntry<Waiter>) -> Self {
        let data = std::mem::take(&mut entry.data);
        Decoded {
            entry,
            bytes: data.len(),
            txn: (!data.is_empty()).then(|| Txn::decode(data)),
        }
    }
}

/// What applying `ahead` will look up: each txn's znodes, and those of the
/// reads held behind each write so far, which the apply loop answers right
/// after it (see `read_ahead`).
fn lookups_of(ahead: &[Decoded]) -> Lookups {
    let mut lookups = Lookups::default();
    for decoded in ahead {
        if let Some(Ok(txn)) = &decoded.txn {
            lookups.add_txn(txn);
        }
        let gate = decoded
            .entry
            .waiter
            .as_ref()
            .and_then(|waiter| waiter.gate.as_ref());
        if let Some(gate) = gate {
            gate.each_held(|read| {
                if let Some(path) = read_ahead::request_path(&read.request) {
                    lookups.add_path(path);
                }
            });
        }
    }
    lookups
}

/// How long servers a reconfig removed stay reachable: a removed leader
/// hands over and answers within an election timeout or two.
const DEPARTED_PEERS_GRACE: Duration = Duration::from_secs(5);

/// How often a snapshot a membership change asked for is tried again
/// while another is being written.
const SNAPSHOT_RETRY: Duration = Duration::from_millis(200);

/// Applies committed entries to `shared.published.tree`, the one tree of
/// the server, which only this loop changes.
pub struct ApplyLoop {
    pub shared: Arc<Shared>,
    pub snapshots: Arc<Snapshots>,
    pub deltas: Arc<Deltas>,
    /// What the next delta follows on.
    pub delta_chain: Arc<DeltaChain>,
    /// The tree holds every entry up to this log index already: it was
    /// loaded from deltas that hold them, at the start, and they are not
    /// applied again.
    pub loaded_through: u64,
    /// The snapshots the leader sends, decoded while they arrive.
    pub arrivals: Arc<Arrivals>,
    pub snapshot_job: SnapshotJob,
    /// The group's voters and learners as of the last entry applied, for
    /// the snapshots taken here.
    pub membership: Membership,
    /// Set when a membership change is applied and not yet in a snapshot:
    /// the index and term the tree is applied through (kept up to date by
    /// every batch, so a snapshot taken on it is labelled right).
    pub membership_snapshot: Option<(u64, u64)>,
    pub snapshot_schedule: SnapshotSchedule,
    /// The index and term of the last entry applied, which a snapshot
    /// started between batches is labelled with.
    pub applied_through: Option<(u64, u64)>,
}

/// Why the apply loop stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("cannot restore the snapshot at {index} sent by the leader: {reason}")]
    Restore { index: u64, reason: String },
    #[error("committed entry {index} is not a transaction this server can read ({source}); the log is damaged or was written by an incompatible version")]
    BadEntry {
        index: u64,
        source: jute::DecodeError,
    },
}

impl ApplyLoop {
    pub async fn run(
        mut self,
        mut committed: mpsc::UnboundedReceiver<Applying<Waiter>>,
    ) -> Result<(), ApplyError> {
        let mut retry = tokio::time::interval(SNAPSHOT_RETRY);
        loop {
            let waiting = self.membership_snapshot.is_some() || self.snapshot_schedule.is_due();
            tokio::select! {
                applying = committed.recv() => match applying {
                    // The batch's share of the backlog goes when the arm ends,
                    // once the batch is applied.
                    Some(Applying::Entries(batch, _unapplied)) => self.apply_batch(batch)?,
                    Some(Applying::Restore(meta)) => self.restore(&meta)?,
                    None => return Ok(()),
                },
                _ = retry.tick(), if waiting => self.start_waiting_snapshot(),
            }
        }
    }

    /// Starts the snapshot a membership change asks for, or the one the
    /// schedule says is due; either waits while another is being written.
    fn start_waiting_snapshot(&mut self) {
        if self.membership_snapshot.is_some() {
            self.snapshot_membership();
        } else if let Some(kind) = self.scheduled_snapshot_may_start() {
            if let Some((index, term)) = self.applied_through {
                self.start_snapshot(index, term, kind);
            }
        }
    }

    fn scheduled_snapshot_may_start(&self) -> Option<SnapshotKind> {
        self.snapshot_schedule.may_start(self.shared.is_serving())
    }

    /// Takes the snapshot a membership change asks for, unless one is
    /// being written; then the next batch or tick tries again. A server
    /// that joins is sent the newest snapshot, and raft refuses one that
    /// does not list it: there must be one taken after its joining.
    fn snapshot_membership(&mut self) {
        if let Some((index, term)) = self.membership_snapshot {
            if self.start_snapshot(index, term, SnapshotKind::Whole) {
                self.membership_snapshot = None;
            }
        }
    }

    /// Replaces the tree with a snapshot the leader sent, which is already
    /// durable in the snapshot directory. Watches are not fired for what
    /// the snapshot changed; sessions it holds get a fresh full timeout.
    fn restore(&mut self, meta: &SnapshotMeta) -> Result<(), ApplyError> {
        let arrived = self.arrivals.take(meta.index);
        let decoded_as_it_arrived = matches!(arrived, Some(Ok(_)));
        let (found, mut tree) = match arrived {
            Some(Ok(decoded)) => decoded,
            Some(Err(reason)) => {
                tracing::warn!(
                    index = meta.index,
                    "decoding the snapshot as it arrived failed ({reason}); reading it from disk"
                );
                self.read_snapshot(meta.index)?
            }
            None => self.read_snapshot(meta.index)?,
        };
        if tracks_changes(&self.shared) {
            tree.track_changes();
        }
        crate::membership::install(&mut tree, &self.shared.config);
        // Deltas of the old tree follow on nothing now.
        self.delta_chain.reset(Some(ChainTip::whole(found.index)));
        self.deltas.keep_only_chain(found.index, found.index);
        let now = Instant::now();
        for (id, info) in tree.sessions() {
            self.shared
                .sessions
                .track(id, crate::session::session_timeout(info.timeout_ms), now);
        }
        self.snapshot_schedule.restart(TreeSize::of(&tree));
        self.membership = found.membership.clone();
        // The leader's snapshot is newer than any change still to be
        // snapshotted here, and a snapshot now must be labelled with its
        // index, not an older one.
        self.membership_snapshot = None;
        self.applied_through = Some((found.index, found.term));
        let nodes = tree.node_count();
        let replaced = {
            let mut published = self.shared.published();
            published.applied_index = found.index;
            published.last_zxid = found.index as i64;
            std::mem::replace(&mut published.tree, tree)
        };
        self.shared.applied.send_replace(found.index);
        self.arrivals.forget_through(found.index);
        // The old tree shares no node with the snapshot's: freeing it here
        // would hold up the entries after the snapshot for as long.
        crate::shared::free_elsewhere(replaced);
        tracing::info!(
            zxid = found.index,
            nodes,
            decoded_as_it_arrived,
            "restored a snapshot from the leader"
        );
        Ok(())
    }

    /// The snapshot at `index` from the snapshot directory.
    fn read_snapshot(&self, index: u64) -> Result<(SnapshotMeta, DataTree), ApplyError> {
        let restore_error = |reason: String| ApplyError::Restore { index, reason };
        let loaded = self
            .snapshots
            .at(index)
            .map_err(|e| restore_error(e.to_string()))?;
        let Some((found, mut reader)) = loaded else {
            return Err(restore_error(
                "it is no longer on disk (newer snapshots replaced it)".into(),
            ));
        };
        let tree =
            DataTree::read_snapshot(&mut reader).map_err(|e| restore_error(e.to_string()))?;
        Ok((found, tree))
    }

    fn apply_batch(&mut self, batch: Vec<CommittedEntry<Waiter>>) -> Result<(), ApplyError> {
        let mut replies: Vec<(oneshot::Sender<Committed>, Committed)> = Vec::new();
        let mut closed_sessions: Vec<i64> = Vec::new();
        let last = batch.last().map(|entry| (entry.index, entry.term));
        let mut entries = self.pass_loaded(batch).into_iter();
        loop {
            let ahead: Vec<Decoded> = entries
                .by_ref()
                .take(PREFETCH_TXNS)
                .map(Decoded::of)
                .collect();
            if ahead.is_empty() {
                break;
            }
            self.shared.published().tree.prefetch(&lookups_of(&ahead));
            for decoded in ahead {
                let reply = self.apply_entry(decoded, &mut closed_sessions)?;
                replies.extend(reply);
            }
        }
        let Some((last_index, last_term)) = last else {
            return Ok(());
        };
        self.applied_through = last;
        self.shared.applied.send_replace(last_index);
        self.arrivals.forget_through(last_index);
        for (waiter, committed) in replies {
            // The connection may have gone; its reply has nowhere to go.
            let _ = waiter.send(committed);
        }
        for session_id in closed_sessions {
            if let Some(owner) = self.shared.sessions.forget(session_id) {
                self.shared.kill_connection(owner);
            }
        }
        if self.membership_snapshot.is_some() {
            // Of everything applied, the change included.
            self.membership_snapshot = Some((last_index, last_term));
            self.snapshot_membership();
        } else if let Some(kind) = self.scheduled_snapshot_may_start() {
            self.start_snapshot(last_index, last_term, kind);
        }
        if self.snapshot_schedule.is_far_overdue() && self.snapshot_job.give_up_background() {
            tracing::warn!(
                "the snapshot being written at low priority has fallen behind the log (the server's requests leave it no CPU); giving it up to write the next at normal priority"
            );
        }
        Ok(())
    }

    /// Passes over the entries the tree was loaded with (from deltas, at
    /// the start), following only their membership changes; gives the
    /// rest of `batch`. Raft hands them out only when its log did not
    /// record them committed before the restart; the tree's applied index
    /// and zxid already stand at the last delta's.
    fn pass_loaded(&mut self, batch: Vec<CommittedEntry<Waiter>>) -> Vec<CommittedEntry<Waiter>> {
        if batch
            .first()
            .is_none_or(|entry| entry.index > self.loaded_through)
        {
            return batch;
        }
        let mut rest = Vec::new();
        for mut entry in batch {
            if entry.index > self.loaded_through {
                rest.push(entry);
                continue;
            }
            self.take_membership(&mut entry);
        }
        rest
    }

    /// Follows the membership change `entry` makes, if it makes one.
    fn take_membership(&mut self, entry: &mut CommittedEntry<Waiter>) {
        if let Some(membership) = entry.membership.take() {
            self.follow_membership(&membership);
            self.membership = membership;
            self.membership_snapshot = Some((entry.index, entry.term));
        }
    }

    /// Applies one committed entry; for a txn this server proposed, the
    /// answer to send its waiter once the batch is applied.
    fn apply_entry(
        &mut self,
        decoded: Decoded,
        closed_sessions: &mut Vec<i64>,
    ) -> Result<Option<(oneshot::Sender<Committed>, Committed)>, ApplyError> {
        let Decoded {
            mut entry,
            bytes,
            txn,
        } = decoded;
        self.take_membership(&mut entry);
        let Some(txn) = txn else {
            // Raft's own entry (a new leader's no-op): no txn, no zxid.
            self.shared.published().applied_index = entry.index;
            return Ok(None);
        };
        self.snapshot_schedule.count(bytes);
        let txn = txn.map_err(|source| ApplyError::BadEntry {
            index: entry.index,
            source,
        })?;
        let zxid = entry.index as i64;
        let (outcome, quota_breaches) = self.apply_txn(entry.index, &txn);
        if let TxnOp::Reconfig { members } = &txn.op {
            self.reach_members(members);
        }
        self.track_session(&txn, &outcome, closed_sessions);
        let Some(waiter) = entry.waiter else {
            return Ok(None);
        };
        self.shared.quota_report.report(&quota_breaches);
        // Before the next txn: the reads held behind this write see it and
        // none of their session's later writes.
        let reads = waiter.gate.as_ref().map_or_else(Vec::new, |gate| {
            pipeline::answer_held(&self.shared, gate.pass())
        });
        let committed = Committed {
            zxid,
            outcome,
            reads,
        };
        Ok(Some((waiter.reply, committed)))
    }

    /// A membership change divides the requests in process this server
    /// allows anew, as ZooKeeper divides them among the voters it has now.
    fn follow_membership(&self, membership: &Membership) {
        let shared = &self.shared;
        let limit =
            crate::membership::outstanding_limit(&shared.config, membership, shared.server_id);
        shared.requests.set_outstanding_limit(limit);
    }

    /// After a reconfig: the peer transport talks to the new members at
    /// once, and stops talking to those that left a while later, so that
    /// a leader that removed itself can still hand over and answer.
    fn reach_members(&self, members: &str) {
        let Some((_, network)) = &self.shared.peers else {
            return;
        };
        match crate::membership::parse_config_text(members) {
            Ok((servers, _)) => network.add_peers(&crate::ensemble::peer_addresses(
                self.shared.server_id,
                &servers,
            )),
            Err(reason) => tracing::error!("a committed reconfig cannot be read: {reason}"),
        }
        let shared = self.shared.clone();
        let network = network.clone();
        tokio::spawn(async move {
            tokio::time::sleep(DEPARTED_PEERS_GRACE).await;
            let servers = crate::membership::reconfigured(&shared.published().tree);
            if let Some(servers) = servers {
                network.set_peers(&crate::ensemble::peer_addresses(shared.server_id, &servers));
            }
        });
    }

    /// Applies the txn at log index `index` to the published tree and, in
    /// the same critical section, moves the applied zxid and queues the
    /// watch events of its triggers. Returns the outcome and the quota
    /// limits the txn passed.
    fn apply_txn(&self, index: u64, txn: &Txn) -> (Outcome, Vec<QuotaBreach>) {
        let zxid = index as i64;
        let mut published = self.shared.published();
        let (applied, replaced) =
            if published.tree.znodes_touched_at_most(txn) <= ZNODES_TOUCHED_IN_PLACE_MAX {
                (published.tree.apply(zxid, txn), None)
            } else {
                let mut tree = published.tree.clone();
                drop(published);
                let applied = tree.apply(zxid, txn);
                published = self.shared.published();
                let replaced = std::mem::replace(&mut published.tree, tree);
                (applied, Some(replaced))
            };
        published.applied_index = index;
        published.last_zxid = zxid;
        let Applied {
            outcome,
            triggers,
            quota_breaches,
        } = applied;
        let audited = self.ephemerals_to_audit(txn, &triggers);
        self.fire(&mut published, zxid, triggers);
        drop(published);
        for path in audited {
            crate::audit::ephemeral_deleted(&self.shared.server_user, txn.session_id, &path);
        }
        // Freed after the lock is released: it may hold many old nodes.
        drop(replaced);
        (outcome, quota_breaches)
    }

    /// The ephemerals a closed session took with it, when the audit log
    /// wants them: every server logs them, as every ZooKeeper server does.
    fn ephemerals_to_audit(&self, txn: &Txn, triggers: &[Trigger]) -> Vec<String> {
        if !self.shared.config.audit_enabled || !matches!(txn.op, TxnOp::CloseSession) {
            return Vec::new();
        }
        triggers
            .iter()
            .filter(|t| t.event == jute::EventType::NodeDeleted)
            .map(|t| t.path.clone())
            .collect()
    }

    /// Keeps liveness tracking in step with the replicated session table.
    fn track_session(&self, txn: &Txn, outcome: &Outcome, closed: &mut Vec<i64>) {
        match (&txn.op, outcome) {
            (TxnOp::CreateSession { timeout_ms, .. }, Outcome::SessionCreated) => {
                self.shared.sessions.track(
                    txn.session_id,
                    crate::session::session_timeout(*timeout_ms),
                    Instant::now(),
                );
            }
            (TxnOp::CloseSession, Outcome::SessionClosed) => closed.push(txn.session_id),
            _ => {}
        }
    }

    /// Queues the watch events of one txn's triggers for the connections
    /// that registered them and may read the znode.
    fn fire(&self, published: &mut Published, zxid: i64, triggers: Vec<Trigger>) {
        if triggers.is_empty() {
            return;
        }
        let connections = self.shared.connections();
        for trigger in triggers {
            for connection in published.watches.trigger(&trigger.path, trigger.event) {
                let Some(handle) = connections.get(&connection) else {
                    continue;
                };
                let auth = handle.auth.lock().expect("auth poisoned").clone();
                if !tree::check_acl(&trigger.acl, jute::perms::READ, &auth) {
                    continue;
                }
                let event = WatchEvent {
                    zxid,
                    event: trigger.event,
                    path: trigger.path.clone(),
                };
                // A client that cannot keep up with its events is
                // disconnected rather than silently losing one; it
                // re-registers its watches when it reconnects.
                let queued = QueuedEvent {
                    event,
                    after_answers: handle.answers_built.load(Ordering::Acquire),
                };
                if handle.events.try_send(queued).is_err() {
                    tracing::warn!(
                        remote = %handle.remote,
                        "closing a connection whose client is not reading its watch events"
                    );
                    handle.kill.cancel();
                }
            }
        }
    }

    /// Starts writing a snapshot of the tree as applied through `index`:
    /// a delta if `kind` asks for one and one may follow on the chain,
    /// else the whole tree, folded from the chain and a delta if there is
    /// a chain (`snapshot_thread`). False if a snapshot is being written
    /// already.
    fn start_snapshot(&mut self, index: u64, term: u64, kind: SnapshotKind) -> bool {
        let Some(running) = self.snapshot_job.start() else {
            return false;
        };
        let followed = self.delta_chain.follow();
        let (tree, changes) = {
            let mut published = self.shared.published();
            let changes = published.tree.take_changes();
            (published.tree.clone(), changes)
        };
        let tip_and_changes = followed.tip.filter(|tip| tip.last < index).zip(changes);
        let writing = match tip_and_changes {
            Some((tip, changes)) if kind == SnapshotKind::Delta && tip.takes_a_delta() => {
                self.snapshot_schedule.delta_started();
                Writing::Delta(self.delta_meta(index, term, tip), changes)
            }
            Some((tip, changes)) => {
                self.snapshot_schedule.restart(TreeSize::of(&tree));
                let meta = self.whole_meta(index, term);
                Writing::Folded(meta, self.delta_meta(index, term, tip), changes)
            }
            None => {
                self.snapshot_schedule.restart(TreeSize::of(&tree));
                Writing::Whole(self.whole_meta(index, term))
            }
        };
        let files = SnapshotFiles {
            snapshots: self.snapshots.clone(),
            deltas: self.deltas.clone(),
            chain: self.delta_chain.clone(),
        };
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name("snapshot".into())
            .spawn(move || write_snapshot(&shared, &files, writing, followed, tree, running));
        if let Err(error) = spawned {
            tracing::error!("cannot start a thread to write a snapshot: {error}; the log keeps growing until one starts");
        }
        true
    }

    fn whole_meta(&self, index: u64, term: u64) -> SnapshotMeta {
        SnapshotMeta {
            index,
            term,
            membership: self.membership.clone(),
        }
    }

    /// A delta at `index` following on `tip`.
    fn delta_meta(&self, index: u64, term: u64, tip: ChainTip) -> DeltaMeta {
        DeltaMeta {
            index,
            term,
            base: tip.base,
            previous: tip.last,
            membership: self.membership.clone(),
        }
    }
}

/// Whether a server's tree records what changes, for deltas: not while
/// it observes ZooKeeper, whose restart reads no log to replay after them.
fn tracks_changes(shared: &Shared) -> bool {
    !shared.config.observes_zookeeper()
}
