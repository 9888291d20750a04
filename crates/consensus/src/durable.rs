//! The raft log made durable: every entry and hard state raft hands us is
//! appended to the write-ahead log and synced once per Ready (group
//! commit), and mirrored in raft's `MemStorage`, which serves raft's reads.
//!
//! `MemStorage` holds the entries after the latest snapshot (its
//! `entries[i]` sits at log index `first_index + i`); the WAL holds at least
//! those, and is trimmed by whole segments after each snapshot.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use raft::prelude::{ConfState, Entry, HardState};
use raft::storage::MemStorage;
use raft::Storage as _;
use storage::{Wal, WalOptions};

use crate::record::{self, LogRecord};
use crate::snapshot::SnapshotMeta;
use crate::Error;

pub(crate) struct DurableLog {
    dir: PathBuf,
    wal: Wal,
    mem: MemStorage,
    /// The newest durable snapshot, which raft may send to a follower.
    latest_snapshot: Arc<Mutex<Option<SnapshotMeta>>>,
    /// Reused encoding buffer, so persisting a batch allocates nothing new.
    scratch: Vec<u8>,
}

impl DurableLog {
    /// Recovers the log in `dir` on top of `snapshot` (the newest snapshot
    /// the state machine was restored from), or starts a new group of
    /// `voters` when there is neither snapshot nor log.
    pub(crate) fn open(
        dir: &Path,
        voters: &[u64],
        learners: &[u64],
        snapshot: Option<&SnapshotMeta>,
    ) -> Result<Self, Error> {
        let (wal, records) = Wal::open(dir, WalOptions::default())?;
        let mem =
            MemStorage::new_with_conf_state(ConfState::from((voters.to_vec(), learners.to_vec())));
        let snapshot_index = snapshot.map_or(0, |s| s.index);
        if let Some(meta) = snapshot {
            mem.wl().apply_snapshot(meta.to_raft())?;
        }

        let mut entries: Vec<Entry> = Vec::new();
        let mut hard_state = HardState::default();
        // Entries start after the newest snapshot the state machine holds.
        let mut snapshot_index = snapshot_index;
        for rec in records {
            let decoded = record::decode(&rec.payload).map_err(|reason| Error::BadRecord {
                dir: dir.to_path_buf(),
                index: rec.index,
                reason,
            })?;
            match decoded {
                LogRecord::HardState(hs) => hard_state = hs,
                // What came before a received snapshot is superseded by it;
                // the snapshot itself is the one we were given.
                LogRecord::SnapshotMark { index } => {
                    entries.clear();
                    snapshot_index = snapshot_index.max(index);
                }
                LogRecord::Entry(entry) if entry.index <= snapshot_index => {}
                LogRecord::Entry(entry) => {
                    // A later record for an index already seen is raft
                    // overwriting a conflicting suffix: drop the old tail.
                    let expected_next = entries.last().map_or(snapshot_index + 1, |e| e.index + 1);
                    if entry.index > expected_next {
                        return Err(Error::LogGap {
                            dir: dir.to_path_buf(),
                            expected_after: expected_next - 1,
                            found: entry.index,
                        });
                    }
                    let keep = (entry.index - (snapshot_index + 1)) as usize;
                    entries.truncate(keep);
                    entries.push(entry);
                }
            }
        }

        let last_index = entries.last().map_or(snapshot_index, |e| e.index);
        let snapshot_term = snapshot.map_or(0, |s| s.term);
        hard_state.term = hard_state.term.max(snapshot_term);
        hard_state.commit = hard_state.commit.clamp(snapshot_index, last_index);
        {
            let mut core = mem.wl();
            core.append(&entries)?;
            core.set_hardstate(hard_state);
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            wal,
            mem,
            latest_snapshot: Arc::new(Mutex::new(snapshot.cloned())),
            scratch: Vec::new(),
        })
    }

    /// Installs a snapshot received from the leader (already durable in the
    /// snapshot directory): the log restarts after it.
    pub(crate) fn install_snapshot(&mut self, meta: &SnapshotMeta) -> Result<(), Error> {
        self.scratch.clear();
        record::encode_snapshot_mark(meta.index, &mut self.scratch);
        self.wal.append(&[(meta.index, &self.scratch[..])])?;
        self.wal.sync()?;
        self.mem.wl().apply_snapshot(meta.to_raft())?;
        *self.latest_snapshot.lock().expect("snapshot meta poisoned") = Some(meta.clone());
        Ok(())
    }

    /// What raft reads from; cheap to clone (it shares the core).
    pub(crate) fn raft_storage(&self) -> RaftStore {
        RaftStore {
            mem: self.mem.clone(),
            latest_snapshot: self.latest_snapshot.clone(),
        }
    }

    /// Makes `entries` and `hard_state` durable with one sync, then exposes
    /// them to raft. Entries may overwrite a suffix of the log.
    pub(crate) fn persist(
        &mut self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), Error> {
        if entries.is_empty() && hard_state.is_none() {
            return Ok(());
        }
        let mut records: Vec<(u64, std::ops::Range<usize>)> = Vec::with_capacity(entries.len() + 1);
        self.scratch.clear();
        for entry in entries {
            let start = self.scratch.len();
            record::encode_entry(entry, &mut self.scratch);
            records.push((entry.index, start..self.scratch.len()));
        }
        let last_index = entries
            .last()
            .map_or_else(|| self.mem.last_index().unwrap_or(0), |e| e.index);
        if let Some(hs) = hard_state {
            let start = self.scratch.len();
            record::encode_hard_state(hs, &mut self.scratch);
            records.push((last_index, start..self.scratch.len()));
        }
        let slices: Vec<(u64, &[u8])> = records
            .iter()
            .map(|(index, range)| (*index, &self.scratch[range.clone()]))
            .collect();
        self.wal.append(&slices)?;
        self.wal.sync()?;

        let mut core = self.mem.wl();
        core.append(entries)?;
        if let Some(hs) = hard_state {
            core.set_hardstate(hs.clone());
        }
        Ok(())
    }

    /// Records a commit index raft learned after persisting (kept in memory;
    /// the next hard state record carries it to disk).
    pub(crate) fn set_commit(&mut self, commit: u64) {
        self.mem.wl().mut_hard_state().commit = commit;
    }

    /// Forgets what a durable snapshot covers: entries before it in
    /// memory, whole WAL segments up to it on disk; raft may now send it to
    /// followers behind it. The current hard state is written again so that
    /// trimming never loses the vote.
    pub(crate) fn compact(&mut self, snapshot: SnapshotMeta) -> Result<(), Error> {
        let index = snapshot.index;
        let first = self.mem.first_index()?;
        let last = self.mem.last_index()?;
        if index < first || index > last {
            return Ok(());
        }
        // First, so that trimming the segments that held it never loses the
        // vote; and so that a full disk fails the call before it changes
        // anything, for the caller to repeat.
        let hard_state = self.mem.rl().hard_state().clone();
        self.persist(&[], Some(&hard_state))?;
        *self.latest_snapshot.lock().expect("snapshot meta poisoned") = Some(snapshot);
        self.mem.wl().compact(index)?;
        self.wal.release_through(index.saturating_sub(1))?;
        Ok(())
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Raft's view of the log: `MemStorage`, except for snapshots. MemStorage
/// would describe one at its commit index with no data; ours describes the
/// newest snapshot on disk, whose bytes the server streams to the follower
/// before raft's message announcing it.
#[derive(Clone)]
pub(crate) struct RaftStore {
    mem: MemStorage,
    latest_snapshot: Arc<Mutex<Option<SnapshotMeta>>>,
}

impl raft::Storage for RaftStore {
    fn initial_state(&self) -> raft::Result<raft::RaftState> {
        self.mem.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: raft::GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.mem.entries(low, high, max_size, context)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        self.mem.term(index)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.mem.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.mem.last_index()
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<raft::prelude::Snapshot> {
        match &*self.latest_snapshot.lock().expect("snapshot meta poisoned") {
            Some(meta) if meta.index >= request_index => Ok(meta.to_raft()),
            _ => Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
        Entry {
            index,
            term,
            data: data.to_vec().into(),
            ..Default::default()
        }
    }

    fn hard_state(term: u64, vote: u64, commit: u64) -> HardState {
        HardState {
            term,
            vote,
            commit,
            ..Default::default()
        }
    }

    #[test]
    fn entries_and_hard_state_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut log = DurableLog::open(dir.path(), &[1], &[], None).unwrap();
            log.persist(
                &[entry(1, 1, b"a"), entry(2, 1, b"b")],
                Some(&hard_state(1, 1, 2)),
            )
            .unwrap();
        }
        let log = DurableLog::open(dir.path(), &[1], &[], None).unwrap();
        let mem = log.raft_storage().mem;
        assert_eq!(mem.last_index().unwrap(), 2);
        assert_eq!(mem.rl().hard_state(), &hard_state(1, 1, 2));
        let entries = mem
            .entries(1, 3, None, raft::GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(entries[1].data.as_ref(), b"b");
    }

    #[test]
    fn an_overwritten_suffix_is_replaced_on_recovery() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut log = DurableLog::open(dir.path(), &[1], &[], None).unwrap();
            log.persist(
                &[entry(1, 1, b"a"), entry(2, 1, b"b"), entry(3, 1, b"c")],
                None,
            )
            .unwrap();
            log.persist(&[entry(2, 2, b"B")], Some(&hard_state(2, 1, 1)))
                .unwrap();
        }
        let log = DurableLog::open(dir.path(), &[1], &[], None).unwrap();
        let mem = log.raft_storage().mem;
        assert_eq!(mem.last_index().unwrap(), 2);
        assert_eq!(mem.term(2).unwrap(), 2);
    }

    #[test]
    fn recovery_starts_after_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut log = DurableLog::open(dir.path(), &[1], &[], None).unwrap();
            let batch: Vec<Entry> = (1..=10).map(|i| entry(i, 1, b"x")).collect();
            log.persist(&batch, Some(&hard_state(1, 1, 10))).unwrap();
            log.compact(SnapshotMeta {
                index: 6,
                term: 1,
                voters: vec![1],
                learners: vec![],
            })
            .unwrap();
        }
        let meta = SnapshotMeta {
            index: 6,
            term: 1,
            voters: vec![1],
            learners: vec![],
        };
        let log = DurableLog::open(dir.path(), &[1], &[], Some(&meta)).unwrap();
        let mem = log.raft_storage().mem;
        assert_eq!(mem.first_index().unwrap(), 7);
        assert_eq!(mem.last_index().unwrap(), 10);
        assert_eq!(mem.rl().hard_state().commit, 10);
    }
}
