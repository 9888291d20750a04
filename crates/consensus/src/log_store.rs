//! Raft's view of the durable log, without holding the log in memory.
//!
//! For every index since the newest snapshot the store keeps the entry's
//! term and where its record lies in the write-ahead log (8 bytes an
//! entry, see `log_index`); the entries themselves are kept only for the
//! newest `ENTRY_CACHE_BYTES_MAX` of them, which is what raft reads in the steady
//! state (committed entries to apply, appends to followers that keep up).
//! Older entries, for a follower catching up or an apply loop far behind,
//! are read back from the log's files. So memory no longer grows with the
//! log between snapshots, which with large values could reach the size of
//! the tree itself.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use raft::prelude::{ConfState, Entry, HardState};
use raft::{RaftState, StorageError as RaftStorageError};
use storage::{RecordLocation, WalReader};

use crate::log_index::{LogIndex, Slot};
use crate::record;

/// The newest entries kept in memory, in the bytes they take there (see
/// [`cached_bytes`]). Apply and replication read entries within moments
/// of their append, so a cache of a few group commits serves them (at 128
/// bytes a write, about 25,000 entries); this bounds what a burst of large
/// entries can hold. At 32 MiB counted by encoded size, the cache was 58
/// MB of a server's 481 MB resident among 1M znodes of 128 bytes (`paddock
/// bench treesize --sizes 1000000`); at 8 MiB in memory the server held
/// 432. A follower catching up reads more of the log back from disk on the
/// leader, but its client's p99 during `paddock bench catchup` stayed
/// within run-to-run noise: 11.1 ms at 8 MiB in `bench/compare` against
/// 16.9 at 32 MiB before, and 18.1 against 11.4-14.4 in shorter runs.
pub(crate) const ENTRY_CACHE_BYTES_MAX: u64 = 8 << 20;

#[derive(Debug)]
struct LogCore {
    hard_state: HardState,
    conf_state: ConfState,
    /// The log starts after this index and term (the newest snapshot; 0
    /// for a log that never had one).
    snapshot_index: u64,
    snapshot_term: u64,
    /// Index `snapshot_index + 1 + i` is `slots.get(i)`.
    slots: LogIndex,
    /// The newest `cache.len()` entries: those of the last slots.
    cache: VecDeque<Entry>,
    cache_bytes: u64,
    cache_bytes_max: u64,
}

/// The log as raft reads it and the durable log updates it; clones share
/// it.
#[derive(Clone)]
pub(crate) struct LogStore {
    core: Arc<Mutex<LogCore>>,
    reader: WalReader,
}

impl LogStore {
    /// An empty log; the newest entries are kept in memory up to
    /// `cache_bytes_max` of them.
    pub(crate) fn new(conf_state: ConfState, reader: WalReader, cache_bytes_max: u64) -> Self {
        LogStore {
            core: Arc::new(Mutex::new(LogCore {
                hard_state: HardState::default(),
                conf_state,
                snapshot_index: 0,
                snapshot_term: 0,
                slots: LogIndex::default(),
                cache: VecDeque::new(),
                cache_bytes: 0,
                cache_bytes_max,
            })),
            reader,
        }
    }

    fn core(&self) -> MutexGuard<'_, LogCore> {
        self.core.lock().expect("log store poisoned")
    }

    pub(crate) fn hard_state(&self) -> HardState {
        self.core().hard_state.clone()
    }

    pub(crate) fn set_hard_state(&self, hard_state: HardState) {
        self.core().hard_state = hard_state;
    }

    /// The log restarts after a snapshot (raft's `MemStorage` semantics:
    /// the snapshot's index is committed, its configuration current).
    pub(crate) fn apply_snapshot(&self, index: u64, term: u64, conf_state: ConfState) {
        let mut core = self.core();
        core.hard_state.term = core.hard_state.term.max(term);
        core.hard_state.commit = index;
        core.conf_state = conf_state;
        core.snapshot_index = index;
        core.snapshot_term = term;
        core.slots.clear();
        core.cache.clear();
        core.cache_bytes = 0;
    }

    /// Sets the membership raft starts with, when the state machine was
    /// restored past the snapshot to a point whose membership it knows.
    pub(crate) fn set_conf_state(&self, conf_state: ConfState) {
        self.core().conf_state = conf_state;
    }

    /// Takes `older`, entries known by term and location only, which
    /// raft's reads will fetch from the log: recovery's older entries,
    /// before it [`LogStore::append`]s the newest.
    ///
    /// # Panics
    /// If the log after the snapshot holds entries already.
    pub(crate) fn start_with_uncached(&self, older: LogIndex) {
        let mut core = self.core();
        assert_eq!(
            core.slots.len(),
            0,
            "entries known by location only come first"
        );
        core.slots = older;
    }

    /// Appends `entries`, written at `locations`, replacing any suffix of
    /// the log from the first of them.
    ///
    /// # Panics
    /// If the entries would leave a gap or rewrite what a snapshot holds:
    /// raft never asks for either.
    pub(crate) fn append(&self, entries: &[Entry], locations: &[RecordLocation]) {
        let Some(first) = entries.first() else {
            return;
        };
        let mut core = self.core();
        let keep = first
            .index
            .checked_sub(core.snapshot_index + 1)
            .expect("raft rewrites only entries after the snapshot") as usize;
        assert!(keep <= core.slots.len(), "raft appends without a gap");
        core.truncate(keep);
        for (entry, &location) in entries.iter().zip(locations) {
            core.slots.push_back(Slot {
                term: entry.term,
                location,
            });
            core.cache_bytes += cached_bytes(entry);
            core.cache.push_back(entry.clone());
        }
        core.evict();
    }

    /// Forgets the entries through `index`, which a snapshot of `term`
    /// now holds.
    pub(crate) fn compact(&self, index: u64, term: u64) {
        let mut core = self.core();
        let drop = index.saturating_sub(core.snapshot_index) as usize;
        let drop = drop.min(core.slots.len());
        let uncached = core.slots.len() - core.cache.len();
        for _ in 0..drop.saturating_sub(uncached) {
            core.pop_cached();
        }
        core.slots.drop_front(drop);
        core.snapshot_index = index;
        core.snapshot_term = term;
    }

    pub(crate) fn first_index(&self) -> u64 {
        self.core().snapshot_index + 1
    }

    pub(crate) fn last_index(&self) -> u64 {
        let core = self.core();
        core.snapshot_index + core.slots.len() as u64
    }

    /// The entries `low..high`, no more than `max_size` bytes of them but
    /// at least one; those no longer cached are read back from disk.
    pub(crate) fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: Option<u64>,
    ) -> raft::Result<Vec<Entry>> {
        let core = self.core();
        if low <= core.snapshot_index {
            return Err(raft::Error::Store(RaftStorageError::Compacted));
        }
        let last = core.snapshot_index + core.slots.len() as u64;
        if high > last + 1 {
            return Err(raft::Error::Store(RaftStorageError::Unavailable));
        }
        let from = (low - core.snapshot_index - 1) as usize;
        let wanted = core.within_size(from, (high - low) as usize, max_size);
        let cached_from = core.slots.len() - core.cache.len();
        let mut entries = Vec::with_capacity(wanted);
        if from < cached_from {
            let on_disk: Vec<RecordLocation> = core
                .slots
                .range(from..cached_from.min(from + wanted))
                .map(|slot| slot.location)
                .collect();
            drop(core);
            entries = self.read_back(low, &on_disk)?;
            let core = self.core();
            let cached_from = cached_from.max(from);
            core.extend_from_cache(cached_from, from + wanted, &mut entries);
        } else {
            core.extend_from_cache(from, from + wanted, &mut entries);
        }
        Ok(entries)
    }

    /// Reads the entries from `low` on at `locations` back from the log.
    fn read_back(&self, low: u64, locations: &[RecordLocation]) -> raft::Result<Vec<Entry>> {
        let mut index = low;
        let decoded = self
            .reader
            .read_each(locations, |payload| {
                let entry = record::decode_entry(payload, index).map_err(|reason| {
                    other(format!(
                        "the log record of entry {index}, read back: {reason}"
                    ))
                });
                index += 1;
                entry
            })
            .map_err(other)?;
        decoded.into_iter().collect()
    }
}

impl LogCore {
    /// Keeps the first `keep` slots.
    fn truncate(&mut self, keep: usize) {
        while self.slots.len() > keep {
            self.slots.pop_back();
            if let Some(entry) = self.cache.pop_back() {
                self.cache_bytes -= cached_bytes(&entry);
            }
        }
    }

    fn pop_cached(&mut self) {
        if let Some(entry) = self.cache.pop_front() {
            self.cache_bytes -= cached_bytes(&entry);
        }
    }

    fn evict(&mut self) {
        while self.cache_bytes > self.cache_bytes_max && !self.cache.is_empty() {
            self.pop_cached();
        }
    }

    /// How many of the `count` entries from slot `from` fit in `max_size`
    /// bytes (at least one), counting their stored size.
    fn within_size(&self, from: usize, count: usize, max_size: Option<u64>) -> usize {
        let Some(max) = max_size.filter(|&m| m != raft::NO_LIMIT) else {
            return count;
        };
        let mut total = 0;
        let fitting = self
            .slots
            .range(from..from + count)
            .take_while(|slot| {
                total += slot.location.stored_bytes();
                total <= max
            })
            .count();
        fitting.max(1).min(count)
    }

    /// Clones the cached entries of slots `from..to` onto `out`.
    fn extend_from_cache(&self, from: usize, to: usize, out: &mut Vec<Entry>) {
        let cached_from = self.slots.len() - self.cache.len();
        if from >= to {
            return;
        }
        out.extend(
            self.cache
                .range(from - cached_from..to - cached_from)
                .cloned(),
        );
    }
}

/// What a cached entry takes in memory: the entry and the bytes it holds.
fn cached_bytes(entry: &Entry) -> u64 {
    (std::mem::size_of::<Entry>() + entry.data.len() + entry.context.len()) as u64
}

fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> raft::Error {
    raft::Error::Store(RaftStorageError::Other(error.into()))
}

/// What raft calls.
impl LogStore {
    pub(crate) fn raft_state(&self) -> RaftState {
        let core = self.core();
        RaftState {
            hard_state: core.hard_state.clone(),
            conf_state: core.conf_state.clone(),
        }
    }

    pub(crate) fn term(&self, index: u64) -> raft::Result<u64> {
        let core = self.core();
        if index == core.snapshot_index {
            return Ok(core.snapshot_term);
        }
        if index < core.snapshot_index {
            return Err(raft::Error::Store(RaftStorageError::Compacted));
        }
        core.slots
            .get((index - core.snapshot_index - 1) as usize)
            .map(|slot| slot.term)
            .ok_or(raft::Error::Store(RaftStorageError::Unavailable))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use raft::storage::MemStorage;
    use raft::{GetEntriesContext, Storage as _};
    use storage::{Wal, WalOptions};

    use super::*;
    use crate::snapshot::SnapshotMeta;

    /// What raft does to its log, in the shapes the test draws.
    #[derive(Debug, Clone)]
    enum Step {
        /// Appends `sizes.len()` entries of a new term, `back` entries
        /// before the end (rewriting them).
        Append { back: usize, sizes: Vec<usize> },
        /// A snapshot at `at` (a fraction of the log) lets the log go.
        Compact { at: f64 },
        /// Reads `low..high` (fractions of the log), within `max_size`.
        Read {
            low: f64,
            len: usize,
            max_size: Option<u64>,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0usize..4, prop::collection::vec(0usize..300, 1..6))
                .prop_map(|(back, sizes)| Step::Append { back, sizes }),
            1 => (0.0f64..1.0).prop_map(|at| Step::Compact { at }),
            4 => (0.0f64..1.0, 1usize..12, prop::option::of(1u64..2000))
                .prop_map(|(low, len, max_size)| Step::Read { low, len, max_size }),
        ]
    }

    /// The same log in `MemStorage`, raft's own in-memory reference, and
    /// in a `LogStore` over a real WAL whose cache holds a few hundred
    /// bytes, so most reads go to disk.
    struct Pair {
        wal: Wal,
        ours: LogStore,
        reference: MemStorage,
        term: u64,
    }

    impl Pair {
        fn new(dir: &std::path::Path) -> Self {
            let (wal, _) = Wal::open(dir, WalOptions::default()).expect("wal");
            let ours = LogStore::new(ConfState::from((vec![1], vec![])), wal.reader(), 600);
            let reference = MemStorage::new_with_conf_state(ConfState::from((vec![1], vec![])));
            Pair {
                wal,
                ours,
                reference,
                term: 1,
            }
        }

        fn append(&mut self, back: usize, sizes: &[usize]) {
            let last = self.ours.last_index();
            let first = self.ours.first_index();
            let start = (last + 1).saturating_sub(back as u64).max(first);
            self.term += 1;
            let entries: Vec<Entry> = sizes
                .iter()
                .zip(start..)
                .map(|(&size, index)| Entry {
                    index,
                    term: self.term,
                    data: vec![index as u8; size].into(),
                    ..Default::default()
                })
                .collect();
            let records: Vec<(u64, record::Record)> = entries
                .iter()
                .map(|e| (e.index, record::Record::Entry(e)))
                .collect();
            let locations = self.wal.append(&records).expect("append");
            self.ours.append(&entries, &locations);
            self.reference
                .wl()
                .append(&entries)
                .expect("reference append");
        }

        fn compact(&mut self, at: f64) {
            let (first, last) = (self.ours.first_index(), self.ours.last_index());
            // MemStorage cannot compact its last entry away (it forgets
            // where its log was): `all_compacted_then_appended` covers that.
            if last <= first {
                return;
            }
            let index = first + ((last - first) as f64 * at) as u64;
            let term = self.ours.term(index).expect("term of a live index");
            self.ours.compact(index, term);
            // MemStorage keeps the compacted-to index itself.
            self.reference
                .wl()
                .compact(index + 1)
                .expect("reference compact");
        }

        fn check_read(&self, low: f64, len: usize, max_size: Option<u64>) {
            let (first, last) = (self.ours.first_index(), self.ours.last_index());
            assert_eq!(first, self.reference.first_index().expect("first"));
            assert_eq!(last, self.reference.last_index().expect("last"));
            if last < first {
                return;
            }
            let low = first + ((last - first) as f64 * low) as u64;
            let high = (low + len as u64).min(last + 1);
            for index in first..=last {
                assert_eq!(
                    self.ours.term(index).expect("our term"),
                    self.reference.term(index).expect("reference term"),
                    "term of {index}"
                );
            }
            let context = || GetEntriesContext::empty(false);
            let all = self
                .reference
                .entries(low, high, None, context())
                .expect("reference entries");
            assert_eq!(self.ours.entries(low, high, None).expect("ours"), all);
            let limited = self.ours.entries(low, high, max_size).expect("ours");
            assert!(!limited.is_empty(), "at least one entry");
            assert_eq!(limited[..], all[..limited.len()], "a prefix");
            assert_eq!(
                self.ours
                    .entries(first.saturating_sub(1).max(1), high, None)
                    .is_err(),
                first > 1,
                "compacted entries are refused"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn answers_as_raft_s_memory_storage(steps in prop::collection::vec(step(), 1..60)) {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut pair = Pair::new(dir.path());
            for step in &steps {
                match step {
                    Step::Append { back, sizes } => pair.append(*back, sizes),
                    Step::Compact { at } => pair.compact(*at),
                    Step::Read { low, len, max_size } => pair.check_read(*low, *len, *max_size),
                }
            }
            pair.check_read(0.0, usize::MAX / 2, None);
        }
    }

    #[test]
    fn all_compacted_then_appended() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut pair = Pair::new(dir.path());
        pair.append(0, &[10, 20, 30]);
        pair.ours.compact(3, pair.term);
        assert_eq!((pair.ours.first_index(), pair.ours.last_index()), (4, 3));
        assert_eq!(pair.ours.term(3).expect("snapshot term"), pair.term);
        assert!(pair.ours.entries(3, 4, None).is_err());
        // The reference takes the same entries after its own snapshot.
        let snapshot = SnapshotMeta {
            index: 3,
            term: pair.term,
            membership: crate::Membership::new(vec![1], vec![]),
        };
        pair.reference
            .wl()
            .apply_snapshot(snapshot.to_raft())
            .expect("reference snapshot");
        pair.append(0, &[40, 50]);
        pair.check_read(0.0, 10, None);
    }

    #[test]
    fn the_cache_keeps_only_the_newest_entries_within_its_budget() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut pair = Pair::new(dir.path());
        for _ in 0..20 {
            pair.append(0, &[100, 100]);
        }
        let core = pair.ours.core();
        assert!(core.cache_bytes <= 600, "{} bytes cached", core.cache_bytes);
        assert!(!core.cache.is_empty());
        let newest = core.cache.back().expect("newest").index;
        assert_eq!(newest, 40);
    }
}
