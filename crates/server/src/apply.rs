//! The apply loop: committed entries, in log order, become tree versions.
//!
//! For each batch the loop applies every txn to its working tree, then in
//! one critical section publishes the new version and queues the watch
//! events of its triggers, and only then completes the proposers' waiters.
//! A client therefore receives a watch event before the reply (or any later
//! read) that shows the change, ZooKeeper's ordering guarantee.
//!
//! When a snapshot is due (`snapshot_schedule`: by txns or by log size)
//! the loop hands an O(1) clone of the tree to a blocking task that writes
//! it while applying continues.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use consensus::{Applying, CommittedEntry, SnapshotMeta, Snapshots};
use tokio::sync::mpsc;
use tree::{DataTree, Outcome, Trigger, Txn, TxnOp};

use crate::shared::{Committed, QueuedEvent, Shared, Waiter, WatchEvent};
use crate::snapshot_schedule::SnapshotSchedule;

pub struct ApplyLoop {
    pub shared: Arc<Shared>,
    pub tree: DataTree,
    pub snapshots: Arc<Snapshots>,
    pub snapshot_in_progress: Arc<AtomicBool>,
    pub voters: Vec<u64>,
    pub snapshot_schedule: SnapshotSchedule,
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
        while let Some(applying) = committed.recv().await {
            match applying {
                Applying::Entries(batch) => self.apply_batch(batch)?,
                Applying::Restore(meta) => self.restore(&meta)?,
            }
        }
        Ok(())
    }

    /// Replaces the tree with a snapshot the leader sent, which is already
    /// durable in the snapshot directory. Watches are not fired for what
    /// the snapshot changed; sessions it holds get a fresh full timeout.
    fn restore(&mut self, meta: &SnapshotMeta) -> Result<(), ApplyError> {
        let loaded = self.snapshots.latest().map_err(|e| ApplyError::Restore {
            index: meta.index,
            reason: e.to_string(),
        })?;
        let Some((found, mut reader)) = loaded.filter(|(found, _)| found.index == meta.index)
        else {
            return Err(ApplyError::Restore {
                index: meta.index,
                reason: "it is not the newest snapshot on disk".into(),
            });
        };
        self.tree = DataTree::read_snapshot(&mut reader).map_err(|e| ApplyError::Restore {
            index: found.index,
            reason: e.to_string(),
        })?;
        let now = Instant::now();
        for (id, info) in self.tree.sessions() {
            self.shared
                .sessions
                .track(id, crate::session::session_timeout(info.timeout_ms), now);
        }
        self.snapshot_schedule
            .restart(self.tree.approximate_data_bytes());
        self.publish(found.index, Some(found.index as i64), Vec::new());
        tracing::info!(
            zxid = found.index,
            nodes = self.tree.node_count(),
            "restored a snapshot from the leader"
        );
        Ok(())
    }

    fn apply_batch(&mut self, batch: Vec<CommittedEntry<Waiter>>) -> Result<(), ApplyError> {
        let mut replies: Vec<(Waiter, Committed)> = Vec::new();
        let mut events: Vec<(i64, Vec<Trigger>)> = Vec::new();
        let mut closed_sessions: Vec<i64> = Vec::new();
        let mut last = None;
        let mut last_txn = None;
        for entry in batch {
            last = Some((entry.index, entry.term));
            if entry.data.is_empty() {
                continue;
            }
            last_txn = Some(entry.index as i64);
            self.snapshot_schedule.count(entry.data.len());
            let txn = Txn::decode(entry.data).map_err(|source| ApplyError::BadEntry {
                index: entry.index,
                source,
            })?;
            let zxid = entry.index as i64;
            let applied = self.tree.apply(zxid, &txn);
            self.track_session(&txn, &applied.outcome, &mut closed_sessions);
            if !applied.triggers.is_empty() {
                events.push((zxid, applied.triggers));
            }
            if let Some(waiter) = entry.waiter {
                replies.push((
                    waiter,
                    Committed {
                        zxid,
                        outcome: applied.outcome,
                    },
                ));
            }
        }
        let Some((last_index, last_term)) = last else {
            return Ok(());
        };
        self.publish(last_index, last_txn, events);
        for (waiter, committed) in replies {
            // The connection may have gone; its reply has nowhere to go.
            let _ = waiter.send(committed);
        }
        for session_id in closed_sessions {
            if let Some(owner) = self.shared.sessions.forget(session_id) {
                self.shared.kill_connection(owner);
            }
        }
        if self.snapshot_schedule.is_due() {
            self.start_snapshot(last_index, last_term);
        }
        Ok(())
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

    fn publish(&self, applied_index: u64, last_txn: Option<i64>, events: Vec<(i64, Vec<Trigger>)>) {
        let mut published = self.shared.published();
        published.tree = self.tree.clone();
        published.applied_index = applied_index;
        if let Some(zxid) = last_txn {
            published.last_zxid = zxid;
        }
        self.shared.applied.send_replace(applied_index);
        if events.is_empty() {
            return;
        }
        let connections = self.shared.connections();
        for (zxid, triggers) in events {
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
    }

    fn start_snapshot(&mut self, index: u64, term: u64) {
        if self.snapshot_in_progress.swap(true, Ordering::AcqRel) {
            return;
        }
        self.snapshot_schedule
            .restart(self.tree.approximate_data_bytes());
        let tree = self.tree.clone();
        let meta = SnapshotMeta {
            index,
            term,
            voters: self.voters.clone(),
            learners: Vec::new(),
        };
        let snapshots = self.snapshots.clone();
        let retain = self.shared.config.snapshots_retained();
        let in_progress = self.snapshot_in_progress.clone();
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            match snapshots.save(&meta, retain, |out| tree.write_snapshot(out)) {
                Ok(()) => {
                    shared.stats.snapshots.record(started.elapsed());
                    tracing::info!(
                        zxid = index,
                        nodes = tree.node_count(),
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "snapshot written"
                    );
                    // The log may now forget what the snapshot holds.
                    let _ = shared.consensus.compact(meta);
                }
                Err(error) => tracing::error!(
                    "writing a snapshot at zxid {index:#x} failed: {error}; the log keeps growing until a snapshot succeeds"
                ),
            }
            in_progress.store(false, Ordering::Release);
        });
    }
}
