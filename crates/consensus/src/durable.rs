//! The raft log made durable: every entry and hard state raft hands us is
//! appended to the write-ahead log, synced once per Ready or per several
//! (group commit; the sync may run on another thread, see `log_sync`), and
//! recorded in the `LogStore`, which serves raft's reads:
//! terms and record locations of the entries after the latest snapshot,
//! the newest entries themselves, the rest read back from the WAL. The WAL
//! holds at least those entries, and is trimmed by whole segments after
//! each snapshot.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use raft::prelude::{ConfState, Entry, HardState};
use storage::{
    PendingSync, RecordLocation, RecoveryMode, SegmentRemoval, StdFs, Wal, WalOptions, WalRecord,
};

use crate::log_index::{LogIndex, Slot};
use crate::log_store::{LogStore, ENTRY_CACHE_BYTES_MAX};
use crate::record::{self, LogRecord, Record};
use crate::snapshot::SnapshotMeta;
use crate::{DeltaMeta, Error};

/// What recovery keeps of the WAL's records, which it is handed one at a
/// time as the log is read: the last hard state, and each entry raft still
/// has, by term and location, with the entries themselves for the newest
/// `decoded_bytes_max` of them. So recovery holds neither the log's bytes
/// nor all its entries decoded. With a window of 0 no entry is decoded at
/// all: only its term is read (`record::entry_term`).
struct Recovery {
    dir: PathBuf,
    found: Recovered,
    decoded_bytes_max: u64,
    /// The first damage met; the records after it are passed over.
    error: Option<Error>,
}

/// What recovery found.
struct Recovered {
    hard_state: Option<HardState>,
    /// The newest snapshot's index, or a later snapshot mark's.
    snapshot_index: u64,
    /// Index `snapshot_index + 1 + i` is `entries.get(i)`.
    entries: LogIndex,
    /// The entries of the last `decoded.len()` survivors.
    decoded: VecDeque<Entry>,
    /// Their stored bytes.
    decoded_bytes: u64,
}

impl Recovered {
    fn last_index(&self) -> u64 {
        self.snapshot_index + self.entries.len() as u64
    }

    /// How many survivors come before those whose entries are decoded.
    fn undecoded(&self) -> usize {
        self.entries.len() - self.decoded.len()
    }

    fn truncate(&mut self, keep: usize) {
        let decoded_from = self.undecoded();
        while self.entries.len() > keep {
            let dropped = self.entries.pop_back().expect("more entries than kept");
            if self.decoded.len() > keep.saturating_sub(decoded_from) {
                self.decoded.pop_back();
                self.decoded_bytes -= dropped.location.stored_bytes();
            }
        }
    }

    /// Forgets the oldest decoded entries while they take more than `max`.
    fn forget_oldest_entries(&mut self, max: u64) {
        while self.decoded_bytes > max {
            let Some(oldest) = self.entries.get(self.undecoded()) else {
                return;
            };
            self.decoded_bytes -= oldest.location.stored_bytes();
            self.decoded.pop_front();
        }
    }

    /// The index of the entries not kept decoded, and the decoded ones
    /// with their locations.
    fn split(mut self) -> (LogIndex, Vec<Entry>, Vec<RecordLocation>) {
        let mut locations = Vec::with_capacity(self.decoded.len());
        for _ in 0..self.decoded.len() {
            let slot = self.entries.pop_back().expect("a decoded entry has a slot");
            locations.push(slot.location);
        }
        locations.reverse();
        (self.entries, self.decoded.into(), locations)
    }
}

impl Recovery {
    fn new(dir: &Path, snapshot_index: u64, decoded_bytes_max: u64) -> Self {
        Recovery {
            dir: dir.to_path_buf(),
            found: Recovered {
                hard_state: None,
                snapshot_index,
                entries: LogIndex::default(),
                decoded: VecDeque::new(),
                decoded_bytes: 0,
            },
            decoded_bytes_max,
            error: None,
        }
    }

    /// Takes the next record in append order: the last hard state wins, a
    /// snapshot mark supersedes the entries before it, and a record for an
    /// index already seen is raft overwriting a conflicting suffix, which
    /// drops the old tail.
    fn visit(&mut self, rec: WalRecord) {
        if self.error.is_none() {
            if let Err(error) = self.take(&rec) {
                self.error = Some(error);
            }
        }
    }

    fn take(&mut self, rec: &WalRecord) -> Result<(), Error> {
        let kind = record::decode(&rec.payload).map_err(|reason| self.bad(rec.index, reason))?;
        match kind {
            LogRecord::Entry => self.keep_entry(rec)?,
            LogRecord::HardState(hs) => self.found.hard_state = Some(hs),
            LogRecord::SnapshotMark { index } => {
                self.found.truncate(0);
                self.found.snapshot_index = self.found.snapshot_index.max(index);
            }
        }
        Ok(())
    }

    fn bad(&self, index: u64, reason: String) -> Error {
        Error::BadRecord {
            dir: self.dir.clone(),
            index,
            reason,
        }
    }

    /// Keeps the entry `rec` holds, dropping any it overwrites; entries the
    /// snapshot holds are passed over.
    fn keep_entry(&mut self, rec: &WalRecord) -> Result<(), Error> {
        let index = rec.index;
        let found = &mut self.found;
        if index <= found.snapshot_index {
            return Ok(());
        }
        let expected_next = found.last_index() + 1;
        if index > expected_next {
            return Err(Error::LogGap {
                dir: self.dir.clone(),
                expected_after: expected_next - 1,
                found: index,
            });
        }
        found.truncate((index - (found.snapshot_index + 1)) as usize);
        if self.decoded_bytes_max == 0 {
            let term = record::entry_term(&rec.payload, index)
                .map_err(|reason| self.bad(index, reason))?;
            self.found.entries.push_back(Slot {
                term,
                location: rec.location,
            });
            return Ok(());
        }
        let entry =
            record::decode_entry(&rec.payload, index).map_err(|reason| self.bad(index, reason))?;
        let found = &mut self.found;
        found.entries.push_back(Slot {
            term: entry.term,
            location: rec.location,
        });
        found.decoded.push_back(entry);
        found.decoded_bytes += rec.location.stored_bytes();
        found.forget_oldest_entries(self.decoded_bytes_max);
        Ok(())
    }

    /// The recovered log, or the first damage found in it.
    fn finish(self) -> Result<Recovered, Error> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(self.found),
        }
    }
}

/// Reads the log in `dir` over a snapshot at `snapshot_index`, keeping
/// the newest `decoded_bytes_max` of its entries decoded.
fn recover(
    dir: &Path,
    snapshot_index: u64,
    decoded_bytes_max: u64,
) -> Result<(Wal, Recovered), Error> {
    let mut recovery = Recovery::new(dir, snapshot_index, decoded_bytes_max);
    let wal = Wal::open_visiting(
        dir,
        WalOptions::default(),
        RecoveryMode::TolerateTailCorruption,
        Arc::new(StdFs),
        &mut |rec| recovery.visit(rec),
    )?;
    Ok((wal, recovery.finish()?))
}

/// A server's log as read from disk over its newest snapshot, before
/// raft starts on it: reading it needs only the snapshot's index, so a
/// server reads it while it loads the snapshot's tree
/// ([`Consensus::start`](crate::Consensus::start)).
pub struct RecoveredLog {
    dir: PathBuf,
    /// The index of the snapshot it was read after.
    read_after: u64,
    wal: Wal,
    recovered: Recovered,
}

impl RecoveredLog {
    /// Reads the log in `dir` after a snapshot at `snapshot_index`. It
    /// keeps no entry decoded: a restart applies them all, reading each
    /// back from the files as it goes, so decoding them here as well only
    /// doubled the work: reading 1.3 GB of log (4.3M entries) beside a
    /// 6M-znode snapshot's load took 1.27-1.36 s instead of 1.62-2.53.
    pub fn read(dir: &Path, snapshot_index: u64) -> Result<Self, Error> {
        let started = std::time::Instant::now();
        let (wal, recovered) = recover(dir, snapshot_index, 0)?;
        tracing::info!(
            last_index = recovered.last_index(),
            after_snapshot = recovered.last_index() - snapshot_index,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "recovered the raft log"
        );
        Ok(RecoveredLog {
            dir: dir.to_path_buf(),
            read_after: snapshot_index,
            wal,
            recovered,
        })
    }
}

/// What a stopped server's log holds after its newest snapshot, read
/// without starting raft (see [`read_stopped_log`]).
#[derive(Debug, Default)]
pub struct StoppedLog {
    /// The entries after the snapshot, in index order: each index, term
    /// and the state machine's bytes (empty for raft's own entries, a new
    /// leader's no-op or a membership change).
    pub entries: Vec<(u64, u64, bytes::Bytes)>,
    /// The commit index the server last wrote down. Raft does not write
    /// every advance of it, so entries past it may be committed too.
    pub recorded_commit: u64,
}

/// Reads the log in `dir` after a snapshot at `snapshot_index`, for tools
/// that work on a stopped server's data (`paddock export`). Opening the
/// log repairs a torn tail exactly as the server would on its next start;
/// never call this while a server runs on `dir`.
pub fn read_stopped_log(dir: &Path, snapshot_index: u64) -> Result<StoppedLog, Error> {
    let (_wal, recovered) = recover(dir, snapshot_index, u64::MAX)?;
    let mut entries = Vec::with_capacity(recovered.decoded.len());
    for entry in recovered.decoded {
        let data = match entry.get_entry_type() {
            raft::prelude::EntryType::EntryNormal => entry.data,
            _ => bytes::Bytes::new(),
        };
        entries.push((entry.index, entry.term, data));
    }
    Ok(StoppedLog {
        entries,
        recorded_commit: recovered.hard_state.map_or(0, |hs| hs.commit),
    })
}

/// What a state machine was restored from as raft starts on its log: the
/// snapshot the log was read after, and the last of the deltas loaded
/// over it, if any.
#[derive(Debug, Clone, Copy, Default)]
pub struct Restored<'a> {
    pub snapshot: Option<&'a SnapshotMeta>,
    pub last_delta: Option<&'a DeltaMeta>,
}

impl Restored<'_> {
    /// Where the state machine stands: at its last delta, else at its
    /// snapshot; `None` when it was restored from neither.
    pub fn state_at(&self) -> Option<SnapshotMeta> {
        (self.last_delta.map(DeltaMeta::as_whole)).or_else(|| self.snapshot.cloned())
    }
}

pub(crate) struct DurableLog {
    dir: PathBuf,
    wal: Wal,
    log: LogStore,
    /// The newest durable snapshot, which raft may send to a follower.
    latest_snapshot: Arc<Mutex<Option<SnapshotMeta>>>,
    /// Whether recovery found a hard state: without one, the votes this
    /// server cast before (if any) are lost.
    found_hard_state: bool,
    /// What the state machine holds every entry up to as raft starts.
    applied_at_start: u64,
}

impl DurableLog {
    /// Recovers the log in `dir` on top of `snapshot` (the newest snapshot
    /// the state machine was restored from), or starts a new group of
    /// `voters` when there is neither snapshot nor log.
    #[cfg(test)]
    pub(crate) fn open(
        dir: &Path,
        voters: &[u64],
        learners: &[u64],
        snapshot: Option<&SnapshotMeta>,
    ) -> Result<Self, Error> {
        let read = RecoveredLog::read(dir, snapshot.map_or(0, |s| s.index))?;
        let restored = Restored {
            snapshot,
            last_delta: None,
        };
        Self::over(read, voters, learners, restored)
    }

    /// The log `read` found, over what the state machine was `restored`
    /// from (the snapshot the log was read after, and its last delta);
    /// when there is neither snapshot nor log, a new group of `voters`.
    pub(crate) fn over(
        read: RecoveredLog,
        voters: &[u64],
        learners: &[u64],
        restored: Restored<'_>,
    ) -> Result<Self, Error> {
        let snapshot = restored.snapshot;
        let RecoveredLog {
            dir,
            read_after,
            wal,
            recovered,
        } = read;
        assert_eq!(
            read_after,
            snapshot.map_or(0, |s| s.index),
            "the log was read after another snapshot than the one the state machine holds"
        );
        let log = LogStore::new(
            ConfState::from((voters.to_vec(), learners.to_vec())),
            wal.reader(),
            ENTRY_CACHE_BYTES_MAX,
        );
        if let Some(meta) = snapshot {
            log.apply_snapshot(meta.index, meta.term, meta.conf_state());
        }
        let snapshot_term = snapshot.map_or(0, |s| s.term);
        let found_hard_state = recovered.hard_state.is_some();
        let mut hard_state = recovered.hard_state.clone().unwrap_or_default();
        hard_state.term = hard_state.term.max(snapshot_term);
        hard_state.commit = hard_state
            .commit
            .clamp(recovered.snapshot_index, recovered.last_index());
        let applied_at_start = match restored.last_delta {
            Some(delta)
                if delta.index > recovered.snapshot_index && delta.index <= hard_state.commit =>
            {
                log.set_conf_state(delta.membership.to_raft());
                delta.index
            }
            _ => snapshot.map_or(0, |s| s.index),
        };
        let (older, entries, locations) = recovered.split();
        log.start_with_uncached(older);
        log.append(&entries, &locations);
        log.set_hard_state(hard_state);
        Ok(Self {
            dir,
            wal,
            log,
            latest_snapshot: Arc::new(Mutex::new(snapshot.cloned())),
            found_hard_state,
            applied_at_start,
        })
    }

    /// What the state machine holds every entry up to as raft starts,
    /// which raft does not hand out again: its last delta's index when the
    /// log knows that entry committed (else the state machine passes over
    /// the entries the delta holds itself), or its snapshot's.
    pub(crate) fn applied_at_start(&self) -> u64 {
        self.applied_at_start
    }

    /// Whether the log held a hard state (term and vote) when opened.
    pub(crate) fn found_hard_state(&self) -> bool {
        self.found_hard_state
    }

    /// The term of the hard state written last (synced or not).
    pub(crate) fn hard_state_term(&self) -> u64 {
        self.log.hard_state().term
    }

    /// The index of the entry written last (synced or not).
    pub(crate) fn last_index(&self) -> u64 {
        self.log.last_index()
    }

    /// Installs a snapshot received from the leader (already durable in the
    /// snapshot directory): the log restarts after it.
    pub(crate) fn install_snapshot(&mut self, meta: &SnapshotMeta) -> Result<(), Error> {
        self.wal
            .append(&[(meta.index, Record::SnapshotMark(meta.index))])?;
        self.wal.sync()?;
        self.log
            .apply_snapshot(meta.index, meta.term, meta.conf_state());
        *self.latest_snapshot.lock().expect("snapshot meta poisoned") = Some(meta.clone());
        Ok(())
    }

    /// What raft reads from; cheap to clone (it shares the core).
    pub(crate) fn raft_storage(&self) -> RaftStore {
        RaftStore {
            log: self.log.clone(),
            latest_snapshot: self.latest_snapshot.clone(),
        }
    }

    /// [`DurableLog::write`] and [`DurableLog::sync`] at once.
    #[cfg(test)]
    pub(crate) fn persist(
        &mut self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), Error> {
        self.write(entries, hard_state)?;
        self.sync()
    }

    /// Makes everything written so far durable, on this thread.
    pub(crate) fn sync(&mut self) -> Result<(), Error> {
        Ok(self.wal.sync()?)
    }

    /// The sync of everything written so far, to run on another thread;
    /// `None` if a sync of all of it has already started.
    pub(crate) fn start_sync(&mut self) -> Result<Option<PendingSync>, Error> {
        Ok(self.wal.start_sync()?)
    }

    /// Writes `entries` and `hard_state` to the WAL, not yet durable, and
    /// exposes them to raft (which tells them apart from durable ones until
    /// it hears of their sync). Entries may overwrite a suffix of the log.
    pub(crate) fn write(
        &mut self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), Error> {
        if entries.is_empty() && hard_state.is_none() {
            return Ok(());
        }
        let mut records: Vec<(u64, Record)> = entries
            .iter()
            .map(|entry| (entry.index, Record::Entry(entry)))
            .collect();
        if let Some(hs) = hard_state {
            let last_index = entries
                .last()
                .map_or_else(|| self.log.last_index(), |e| e.index);
            records.push((last_index, Record::HardState(hs)));
        }
        let locations = self.wal.append(&records)?;

        self.log.append(entries, &locations[..entries.len()]);
        if let Some(hs) = hard_state {
            self.log.set_hard_state(hs.clone());
        }
        Ok(())
    }

    /// Forgets what a durable snapshot covers: entries before it in memory
    /// at once, and raft may now send it to followers behind it. Returns the
    /// whole WAL segments up to it, to remove from disk once what was
    /// written so far is synced: the current hard state is written again
    /// here, so that trimming never loses the vote.
    ///
    /// Entries from `needed` on (a follower catching up needs them) are
    /// kept, back to the snapshot before this one at most: a follower that
    /// stays behind holds back one snapshot's worth of log, never more.
    pub(crate) fn compact(
        &mut self,
        snapshot: SnapshotMeta,
        needed: Option<u64>,
    ) -> Result<Option<SegmentRemoval>, Error> {
        let first = self.log.first_index();
        let last = self.log.last_index();
        if snapshot.index < first || snapshot.index > last {
            return Ok(None);
        }
        let previous = (self.latest_snapshot.lock().expect("snapshot meta poisoned"))
            .as_ref()
            .map_or(0, |meta| meta.index);
        let through = needed.map_or(snapshot.index, |needed| {
            needed.saturating_sub(1).max(previous).min(snapshot.index)
        });
        let Some(term) = (through >= first)
            .then(|| self.log.term(through).ok())
            .flatten()
        else {
            *self.latest_snapshot.lock().expect("snapshot meta poisoned") = Some(snapshot);
            return Ok(None);
        };
        // First, so that a full disk fails the call before it changes
        // anything, for the caller to repeat.
        let hard_state = self.log.hard_state();
        self.write(&[], Some(&hard_state))?;
        self.log.compact(through, term);
        *self.latest_snapshot.lock().expect("snapshot meta poisoned") = Some(snapshot);
        let removal = self.wal.detach_through(through.saturating_sub(1))?;
        Ok((!removal.is_empty()).then_some(removal))
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Raft's view of the log: the `LogStore`, and for snapshots the newest
/// one on disk, whose bytes the server streams to the follower before
/// raft's message announcing it.
#[derive(Clone)]
pub(crate) struct RaftStore {
    log: LogStore,
    latest_snapshot: Arc<Mutex<Option<SnapshotMeta>>>,
}

impl raft::Storage for RaftStore {
    fn initial_state(&self) -> raft::Result<raft::RaftState> {
        Ok(self.log.raft_state())
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: raft::GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.log.entries(low, high, max_size.into())
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        self.log.term(index)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.log.first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.log.last_index())
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
    use raft::Storage as _;

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
        let store = log.raft_storage();
        assert_eq!(store.last_index().unwrap(), 2);
        assert_eq!(
            store.initial_state().unwrap().hard_state,
            hard_state(1, 1, 2)
        );
        let entries = store
            .entries(1, 3, None, raft::GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(entries[1].data.as_ref(), b"b");
    }

    #[test]
    fn a_stopped_log_reads_back_after_its_snapshot_with_overwrites_resolved() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut log = DurableLog::open(dir.path(), &[1], &[], None).unwrap();
            log.persist(
                &[entry(1, 1, b"a"), entry(2, 1, b"b"), entry(3, 1, b"c")],
                Some(&hard_state(1, 1, 1)),
            )
            .unwrap();
            // A new leader overwrites index 3.
            log.persist(&[entry(3, 2, b"C"), entry(4, 2, b"")], None)
                .unwrap();
        }
        let stopped = read_stopped_log(dir.path(), 1).unwrap();
        let read: Vec<_> = stopped
            .entries
            .iter()
            .map(|(index, term, data)| (*index, *term, &data[..]))
            .collect();
        assert_eq!(
            read,
            [(2, 1, &b"b"[..]), (3, 2, &b"C"[..]), (4, 2, &b""[..])]
        );
        assert_eq!(stopped.recorded_commit, 1);
    }

    /// Recovery takes an entry's index from its record; a record whose
    /// entry says otherwise is damage, named, not a silent reorder.
    #[test]
    fn an_entry_under_another_index_than_its_record_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut wal, _) = Wal::open(dir.path(), WalOptions::default()).unwrap();
            wal.append(&[(1, Record::Entry(&entry(2, 1, b"b")))])
                .unwrap();
            wal.sync().unwrap();
        }
        match DurableLog::open(dir.path(), &[1], &[], None) {
            Err(Error::BadRecord { index, reason, .. }) => {
                assert_eq!(index, 1);
                assert_eq!(reason, "it holds entry 2");
            }
            Err(other) => panic!("refused otherwise: {other}"),
            Ok(_) => panic!("opened a log whose entry 2 lies under index 1"),
        }
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
        let store = log.raft_storage();
        assert_eq!(store.last_index().unwrap(), 2);
        assert_eq!(store.term(2).unwrap(), 2);
    }

    #[test]
    fn recovery_starts_after_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut log = DurableLog::open(dir.path(), &[1], &[], None).unwrap();
            let batch: Vec<Entry> = (1..=10).map(|i| entry(i, 1, b"x")).collect();
            log.persist(&batch, Some(&hard_state(1, 1, 10))).unwrap();
            let removal = log
                .compact(
                    SnapshotMeta {
                        index: 6,
                        term: 1,
                        membership: crate::Membership::new(vec![1], vec![]),
                    },
                    None,
                )
                .unwrap();
            log.sync().unwrap();
            if let Some(removal) = removal {
                removal.finish(&storage::RemovalPace::default()).unwrap();
            }
        }
        let meta = SnapshotMeta {
            index: 6,
            term: 1,
            membership: crate::Membership::new(vec![1], vec![]),
        };
        let log = DurableLog::open(dir.path(), &[1], &[], Some(&meta)).unwrap();
        let store = log.raft_storage();
        assert_eq!(store.first_index().unwrap(), 7);
        assert_eq!(store.last_index().unwrap(), 10);
        assert_eq!(store.initial_state().unwrap().hard_state.commit, 10);
        assert_eq!(store.term(6).unwrap(), 1);
    }

    #[test]
    fn compaction_keeps_what_a_follower_needs_back_to_the_snapshot_before() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = DurableLog::open(dir.path(), &[1], &[], None).unwrap();
        let batch: Vec<Entry> = (1..=30).map(|i| entry(i, 1, b"x")).collect();
        log.persist(&batch, Some(&hard_state(1, 1, 30))).unwrap();
        let snapshot = |index| SnapshotMeta {
            index,
            term: 1,
            membership: crate::Membership::new(vec![1], vec![]),
        };
        let store = log.raft_storage();
        let latest = |store: &RaftStore| store.snapshot(0, 2).unwrap().get_metadata().index;

        // A follower needing entry 4 on: kept, and the new snapshot is the
        // one raft sends.
        log.compact(snapshot(10), Some(4)).unwrap();
        assert_eq!(store.first_index().unwrap(), 4);
        assert_eq!(latest(&store), 10);
        // Nobody behind: compacted through the snapshot.
        log.compact(snapshot(12), None).unwrap();
        assert_eq!(store.first_index().unwrap(), 13);
        // A follower still behind holds back no further than the snapshot
        // before this one.
        log.compact(snapshot(20), Some(5)).unwrap();
        assert_eq!(store.first_index().unwrap(), 13);
        log.compact(snapshot(25), Some(5)).unwrap();
        assert_eq!(store.first_index().unwrap(), 21);
        assert_eq!(latest(&store), 25);
        // A follower past the snapshot changes nothing.
        log.compact(snapshot(28), Some(29)).unwrap();
        assert_eq!(store.first_index().unwrap(), 29);
    }

    /// Writes `count` entries of term 1, then raft's overwrite of the
    /// suffix from `overwritten_from` with term 2; each entry's data is
    /// `data_bytes` long and names its index and term.
    fn write_overwritten_log(dir: &Path, count: u64, overwritten_from: u64, data_bytes: usize) {
        let mut log = DurableLog::open(dir, &[1], &[], None).unwrap();
        let batch: Vec<Entry> = (1..=count)
            .map(|i| entry(i, 1, &sized_data(i, 1, data_bytes)))
            .collect();
        log.persist(&batch, None).unwrap();
        let rewrite: Vec<Entry> = (overwritten_from..=count)
            .map(|i| entry(i, 2, &sized_data(i, 2, data_bytes)))
            .collect();
        log.persist(&rewrite, Some(&hard_state(2, 1, count)))
            .unwrap();
    }

    fn sized_data(index: u64, term: u64, len: usize) -> Vec<u8> {
        let mut data = format!("{index}@{term}").into_bytes();
        data.resize(len.max(data.len()), b'.');
        data
    }

    /// Recovery keeps only the newest entries decoded, as many as fit the
    /// bytes it is given; an overwrite across that window's edge leaves
    /// every index with its right term, and the newest decoded.
    #[test]
    fn recovery_keeps_only_the_newest_entries_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let (count, overwritten_from, data_bytes) = (1000, 950, 100);
        write_overwritten_log(dir.path(), count, overwritten_from, data_bytes);
        let window = 100 * 130;
        let (_wal, recovered) = recover(dir.path(), 0, window).unwrap();
        assert_eq!(recovered.last_index(), count);
        let term = |index: u64| if index < overwritten_from { 1 } else { 2 };
        for (survivor, index) in recovered.entries.range(0..count as usize).zip(1..) {
            assert_eq!(survivor.term, term(index), "index {index}");
        }
        let first_decoded = count + 1 - recovered.decoded.len() as u64;
        for (entry, index) in recovered.decoded.iter().zip(first_decoded..) {
            assert_eq!((entry.index, entry.term), (index, term(index)));
            assert_eq!(
                entry.data.as_ref(),
                sized_data(index, term(index), data_bytes)
            );
        }
        let newest = recovered.undecoded()..count as usize;
        let decoded_bytes: u64 = (recovered.entries.range(newest.clone()))
            .map(|s| s.location.stored_bytes())
            .sum();
        assert_eq!(decoded_bytes, recovered.decoded_bytes);
        assert!(decoded_bytes <= window, "{decoded_bytes}");
        assert!(newest.len() >= 50, "{}", newest.len());
    }

    /// A log larger than the log store's cache reads back whole and in
    /// order: its older entries from the files, the newest from memory.
    #[test]
    fn a_log_larger_than_the_entry_cache_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let data_bytes = 100 << 10;
        let count = ENTRY_CACHE_BYTES_MAX / data_bytes as u64 + 80;
        let overwritten_from = count - 40;
        write_overwritten_log(dir.path(), count, overwritten_from, data_bytes);
        let log = DurableLog::open(dir.path(), &[1], &[], None).unwrap();
        let store = log.raft_storage();
        assert_eq!(store.last_index().unwrap(), count);
        let entries = store
            .entries(1, count + 1, None, raft::GetEntriesContext::empty(false))
            .unwrap();
        for (entry, index) in entries.iter().zip(1..) {
            let term = if index < overwritten_from { 1 } else { 2 };
            assert_eq!((entry.index, entry.term), (index, term));
            assert_eq!(
                entry.data.as_ref(),
                sized_data(index, term, data_bytes).as_slice()
            );
        }
        assert_eq!(entries.len() as u64, count);
    }
}
