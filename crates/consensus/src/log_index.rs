//! Every log entry's term and the location of its record, in 8 bytes an
//! entry: its record's offset and length. The term and the segment change
//! once in many thousands of entries (an election, a new 64 MiB segment),
//! so they are kept once for each run of entries that share them, with
//! the offset the run's offsets count from.
//!
//! The log store kept a 32-byte slot an entry (term, segment, offset,
//! length), for every entry since the newest snapshot, which may be as
//! many as the tree has znodes: 320 MB at 10M znodes, before the deque's
//! own growth doubled it.

use std::collections::VecDeque;

use storage::RecordLocation;

/// Positions count from 0 at the front; a run's `first` is absolute (see
/// [`LogIndex::dropped`]), so dropping entries at the front moves no run.
#[derive(Debug, Default)]
pub(crate) struct LogIndex {
    /// Each entry's record: its offset from its run's base, and its length.
    records: VecDeque<(u32, u32)>,
    /// Runs of entries of one term in one segment, oldest first; never one
    /// with no entry.
    runs: VecDeque<Run>,
    /// Entries dropped from the front since the index was made: the
    /// absolute number of `records[0]`.
    dropped: u64,
}

#[derive(Debug, Clone, Copy)]
struct Run {
    /// The absolute number of its first entry.
    first: u64,
    term: u64,
    segment: u64,
    /// What its entries' offsets count from.
    base: u64,
}

/// One entry, as the index gives it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) term: u64,
    pub(crate) location: RecordLocation,
}

impl LogIndex {
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    pub(crate) fn push_back(&mut self, slot: Slot) {
        let (segment, offset) = (slot.location.segment(), slot.location.offset());
        let absolute = self.dropped + self.records.len() as u64;
        let from_base = self
            .runs
            .back()
            .filter(|run| run.term == slot.term && run.segment == segment)
            .and_then(|run| offset.checked_sub(run.base))
            .and_then(|delta| u32::try_from(delta).ok());
        let from_base = match from_base {
            Some(delta) => delta,
            None => {
                self.runs.push_back(Run {
                    first: absolute,
                    term: slot.term,
                    segment,
                    base: offset,
                });
                0
            }
        };
        self.records
            .push_back((from_base, slot.location.stored_len()));
    }

    pub(crate) fn get(&self, position: usize) -> Option<Slot> {
        let &(from_base, len) = self.records.get(position)?;
        let absolute = self.dropped + position as u64;
        let run = self.run_of(absolute);
        Some(Slot {
            term: run.term,
            location: RecordLocation::from_parts(run.segment, run.base + u64::from(from_base), len),
        })
    }

    /// The slots at `positions`, in order.
    pub(crate) fn range(
        &self,
        positions: std::ops::Range<usize>,
    ) -> impl Iterator<Item = Slot> + '_ {
        positions.map(|position| self.get(position).expect("a position in the index"))
    }

    pub(crate) fn pop_back(&mut self) -> Option<Slot> {
        let last = self.get(self.records.len().checked_sub(1)?)?;
        self.records.pop_back();
        let end = self.dropped + self.records.len() as u64;
        // The last run holds the entries from its first, or from the front.
        if (self.runs.back()).is_some_and(|run| run.first.max(self.dropped) >= end) {
            self.runs.pop_back();
        }
        Some(last)
    }

    /// Drops the first `count` entries.
    pub(crate) fn drop_front(&mut self, count: usize) {
        let count = count.min(self.records.len());
        self.records.drain(..count);
        self.dropped += count as u64;
        // A run whose successor starts at or before the new front is empty.
        while self.runs.len() > 1 && self.runs[1].first <= self.dropped {
            self.runs.pop_front();
        }
        if self.records.is_empty() {
            self.runs.clear();
        }
    }

    pub(crate) fn clear(&mut self) {
        let len = self.records.len();
        self.drop_front(len);
    }

    /// The run holding the entry numbered `absolute`, which the index
    /// holds.
    fn run_of(&self, absolute: u64) -> &Run {
        // Most lookups are of the newest entries.
        let last = self.runs.back().expect("an entry has a run");
        if last.first <= absolute {
            return last;
        }
        let after = self.runs.partition_point(|run| run.first <= absolute);
        &self.runs[after - 1]
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push {
            term: u64,
            segment: u64,
            offset: u64,
            len: u32,
        },
        Pop,
        DropFront(usize),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1u64..4, 1u64..4, 0u64..(1 << 34), 1u32..1000).prop_map(
                |(term, segment, offset, len)| Op::Push { term, segment, offset, len }
            ),
            2 => Just(Op::Pop),
            1 => (0usize..8).prop_map(Op::DropFront),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// The index gives back what a deque of whole slots would, offsets
        /// beyond 4 GiB from a run's base included.
        #[test]
        fn behaves_as_a_deque_of_slots(ops in proptest::collection::vec(op(), 1..200)) {
            let mut index = LogIndex::default();
            let mut model: VecDeque<Slot> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Push { term, segment, offset, len } => {
                        let slot = Slot {
                            term,
                            location: RecordLocation::from_parts(segment, offset, len),
                        };
                        index.push_back(slot);
                        model.push_back(slot);
                    }
                    Op::Pop => prop_assert_eq!(index.pop_back(), model.pop_back()),
                    Op::DropFront(count) => {
                        index.drop_front(count);
                        model.drain(..count.min(model.len()));
                    }
                    Op::Clear => {
                        index.clear();
                        model.clear();
                    }
                }
                prop_assert_eq!(index.len(), model.len());
                let end = index.dropped + index.len() as u64;
                for (i, run) in index.runs.iter().enumerate() {
                    let next = index.runs.get(i + 1).map_or(end, |next| next.first);
                    prop_assert!(run.first.max(index.dropped) < next, "run {} is empty", i);
                }
                let all: Vec<Slot> = index.range(0..index.len()).collect();
                prop_assert_eq!(all, model.iter().copied().collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn entries_of_one_term_in_one_segment_share_a_run() {
        let mut index = LogIndex::default();
        for i in 0..1000u64 {
            index.push_back(Slot {
                term: 3,
                location: RecordLocation::from_parts(7, 16 + i * 100, 100),
            });
        }
        assert_eq!(index.runs.len(), 1);
        index.drop_front(999);
        assert_eq!(index.get(0).unwrap().location.offset(), 16 + 999 * 100);
    }
}
