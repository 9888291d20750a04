//! The one owner of raft's `RawNode`: a thread that takes proposals from a
//! channel, ticks on a timer, and handles each Ready in raft-rs's documented
//! order — persist entries and hard state (one sync for the whole batch),
//! then hand committed entries to the state machine, then advance.
//!
//! Group commit falls out of the loop: while one batch is being synced,
//! proposals queue in the channel, and the next turn drains them all.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use raft::prelude::{Entry, EntryType};
use raft::storage::MemStorage;
use raft::{RawNode, StateRole};
use tokio::sync::mpsc::UnboundedSender;

use crate::durable::DurableLog;
use crate::snapshot::SnapshotMeta;
use crate::status::{Role, Status};
use crate::Error;

/// Proposals taken from the channel per turn of the loop: bounds the time a
/// turn spends before it syncs, so latency stays flat under load.
const PROPOSALS_PER_TURN_MAX: usize = 4096;

/// How the replicated log is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// This server's id (ZooKeeper's `myid`).
    pub id: u64,
    /// Ids of the voting servers. Standalone is `[id]`.
    pub voters: Vec<u64>,
    /// Where the write-ahead log lives.
    pub log_dir: PathBuf,
    /// One raft tick.
    pub tick: Duration,
}

/// An entry the group has committed, in log order, with the waiter of the
/// proposal that produced it when that proposal was made on this server in
/// the same term.
pub struct CommittedEntry<W> {
    /// Log index: the zxid of the transaction the entry carries.
    pub index: u64,
    pub term: u64,
    /// Empty for raft's own entries (a new leader's no-op, membership).
    pub data: Bytes,
    pub waiter: Option<W>,
}

enum Command<W> {
    Propose { data: Vec<u8>, waiter: W },
    Compact { index: u64 },
}

/// The handle the server holds. Cloning shares the same thread.
pub struct Consensus<W> {
    commands: mpsc::Sender<Command<W>>,
    status: Arc<Status>,
}

impl<W> Clone for Consensus<W> {
    fn clone(&self) -> Self {
        Self {
            commands: self.commands.clone(),
            status: self.status.clone(),
        }
    }
}

impl<W: Send + 'static> Consensus<W> {
    /// Recovers the log on top of `snapshot` (the one the state machine was
    /// restored from) and starts the thread. Committed entries after the
    /// snapshot arrive on `committed`, replayed ones first.
    ///
    /// When the thread stops — every handle dropped, or a storage error,
    /// which it logs — it drops `committed`, so the receiver sees the end.
    pub fn start(
        config: Config,
        snapshot: Option<&SnapshotMeta>,
        committed: UnboundedSender<Vec<CommittedEntry<W>>>,
    ) -> Result<Self, Error> {
        let log = DurableLog::open(&config.log_dir, &config.voters, snapshot)?;
        let raft_config = raft::Config {
            id: config.id,
            election_tick: 10,
            heartbeat_tick: 1,
            applied: snapshot.map_or(0, |s| s.index),
            pre_vote: true,
            check_quorum: true,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            ..Default::default()
        };
        raft_config.validate()?;
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let mut raw = RawNode::new(&raft_config, log.raft_storage(), &logger)?;
        if config.voters == [config.id] {
            // A group of one needs no election timeout to find its leader.
            raw.campaign()?;
        }

        let (commands, inbox) = mpsc::channel();
        let status = Arc::new(Status::default());
        let mut driver = Driver {
            raw,
            log,
            inbox,
            committed,
            pending: BTreeMap::new(),
            status: status.clone(),
            tick: config.tick,
        };
        thread::Builder::new()
            .name("consensus".into())
            .spawn(move || {
                if let Err(error) = driver.run() {
                    tracing::error!(
                        "the replicated log in {} failed and this server must stop: {error}",
                        driver.log.dir().display()
                    );
                }
            })
            .map_err(|e| {
                Error::Storage(storage::StorageError::Io {
                    context: "starting the consensus thread".into(),
                    source: e,
                })
            })?;
        Ok(Self { commands, status })
    }

    /// Proposes `data`. Its `waiter` comes back with the committed entry,
    /// or is dropped if the proposal is lost (not leader, leader changed).
    pub fn propose(&self, data: Vec<u8>, waiter: W) -> Result<(), Error> {
        self.commands
            .send(Command::Propose { data, waiter })
            .map_err(|_| Error::Stopped)
    }

    /// Tells the log that a durable snapshot covers everything up to `index`.
    pub fn compact(&self, index: u64) -> Result<(), Error> {
        self.commands
            .send(Command::Compact { index })
            .map_err(|_| Error::Stopped)
    }

    pub fn status(&self) -> &Status {
        &self.status
    }
}

struct Driver<W> {
    raw: RawNode<MemStorage>,
    log: DurableLog,
    inbox: mpsc::Receiver<Command<W>>,
    committed: UnboundedSender<Vec<CommittedEntry<W>>>,
    /// Proposals made here that are not yet committed, by the log index
    /// raft gave them, with the term they were proposed in.
    pending: BTreeMap<u64, (u64, W)>,
    status: Arc<Status>,
    tick: Duration,
}

impl<W> Driver<W> {
    fn run(&mut self) -> Result<(), Error> {
        let mut next_tick = Instant::now() + self.tick;
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match self.inbox.recv_timeout(wait) {
                Ok(command) => {
                    self.handle(command)?;
                    for _ in 1..PROPOSALS_PER_TURN_MAX {
                        let Ok(command) = self.inbox.try_recv() else {
                            break;
                        };
                        self.handle(command)?;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
            if Instant::now() >= next_tick {
                self.raw.tick();
                next_tick += self.tick;
            }
            self.handle_ready()?;
            if self.committed.is_closed() {
                return Ok(());
            }
        }
    }

    fn handle(&mut self, command: Command<W>) -> Result<(), Error> {
        match command {
            Command::Propose { data, waiter } => {
                let before = self.raw.raft.raft_log.last_index();
                let term = self.raw.raft.term;
                // A refused or silently dropped proposal drops its waiter,
                // which its caller sees as a lost request.
                if self.raw.propose(Vec::new(), data).is_ok() {
                    let index = self.raw.raft.raft_log.last_index();
                    if index > before {
                        self.pending.insert(index, (term, waiter));
                    }
                }
                Ok(())
            }
            Command::Compact { index } => self.log.compact(index),
        }
    }

    fn handle_ready(&mut self) -> Result<(), Error> {
        if !self.raw.has_ready() {
            return Ok(());
        }
        let mut ready = self.raw.ready();
        debug_assert!(
            ready.messages().is_empty() && ready.snapshot().data.is_empty(),
            "a one-voter group has no peers to talk to"
        );
        self.forward(ready.take_committed_entries());
        self.log.persist(ready.entries(), ready.hs())?;
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.log.set_commit(commit);
        }
        self.forward(light.take_committed_entries());
        self.raw.advance_apply();
        self.publish_status();
        Ok(())
    }

    /// Sends committed entries to the state machine, pairing each with the
    /// waiter proposed at exactly its (term, index).
    fn forward(&mut self, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        let batch = entries
            .into_iter()
            .map(|entry| {
                let waiter = self.take_waiter(entry.index, entry.term);
                let data = match entry.get_entry_type() {
                    EntryType::EntryNormal => Bytes::from(entry.data.to_vec()),
                    EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => Bytes::new(),
                };
                CommittedEntry {
                    index: entry.index,
                    term: entry.term,
                    data,
                    waiter,
                }
            })
            .collect();
        // A closed receiver means the server is stopping; the loop ends on
        // its next turn.
        let _ = self.committed.send(batch);
    }

    fn take_waiter(&mut self, index: u64, term: u64) -> Option<W> {
        // Anything pending at or below this index is now decided: ours if
        // the term matches, otherwise another leader's entry replaced it.
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > index {
                break;
            }
            let at = *entry.key();
            let (proposed_term, waiter) = entry.remove();
            if at == index && proposed_term == term {
                return Some(waiter);
            }
        }
        None
    }

    fn publish_status(&self) {
        let raft = &self.raw.raft;
        let role = match raft.state {
            StateRole::Leader => Role::Leader,
            StateRole::Follower => Role::Follower,
            StateRole::Candidate | StateRole::PreCandidate => Role::Candidate,
        };
        self.status.role.store(role as u8, Ordering::Relaxed);
        self.status.term.store(raft.term, Ordering::Relaxed);
        self.status
            .leader_id
            .store(raft.leader_id, Ordering::Relaxed);
        self.status
            .commit_index
            .store(raft.raft_log.committed, Ordering::Relaxed);
        self.status
            .last_index
            .store(raft.raft_log.last_index(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &std::path::Path) -> Config {
        Config {
            id: 1,
            voters: vec![1],
            log_dir: dir.to_path_buf(),
            tick: Duration::from_millis(10),
        }
    }

    /// Collects committed entries with data until `count` have arrived.
    fn collect(
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<CommittedEntry<u32>>>,
        count: usize,
    ) -> Vec<(u64, Vec<u8>, Option<u32>)> {
        let mut seen = Vec::new();
        while seen.len() < count {
            let batch = rx.blocking_recv().expect("consensus stopped");
            seen.extend(
                batch
                    .into_iter()
                    .filter(|e| !e.data.is_empty())
                    .map(|e| (e.index, e.data.to_vec(), e.waiter)),
            );
        }
        seen
    }

    #[test]
    fn proposals_commit_in_order_with_their_waiters_and_replay_after_restart() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let node = Consensus::start(config(dir.path()), None, tx).unwrap();
        for i in 0..3u32 {
            node.propose(vec![b'a' + i as u8], i).unwrap();
        }
        let first = collect(&mut rx, 3);
        assert_eq!(
            first
                .iter()
                .map(|(_, d, w)| (d.clone(), *w))
                .collect::<Vec<_>>(),
            vec![
                (b"a".to_vec(), Some(0)),
                (b"b".to_vec(), Some(1)),
                (b"c".to_vec(), Some(2))
            ]
        );
        assert!(
            first.windows(2).all(|w| w[0].0 < w[1].0),
            "indexes increase"
        );
        assert_eq!(node.status().role(), Role::Leader);
        drop(node);
        drop(rx);

        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let _node = Consensus::<u32>::start(config(dir.path()), None, tx).unwrap();
        let replayed = collect(&mut rx, 3);
        assert_eq!(
            replayed
                .iter()
                .map(|(i, d, w)| (*i, d.clone(), *w))
                .collect::<Vec<_>>(),
            first
                .iter()
                .map(|(i, d, _)| (*i, d.clone(), None))
                .collect::<Vec<_>>(),
            "the same entries at the same indexes, without waiters"
        );
    }
}
