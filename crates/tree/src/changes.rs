//! Which buckets of the nodes map changed since they were last taken: what
//! a delta snapshot (`delta`) writes.

use std::sync::{Arc, Mutex, PoisonError};

/// Hashes noted before the record is first tidied (sorted, each once): a
/// bucket written often is noted each time, and tidying bounds the record
/// to about twice the buckets changed, however many writes changed them.
const TIDY_FROM_HASHES: usize = 1 << 16;

/// The hashes of the buckets changed since the record was last taken, once
/// recording has started.
///
/// A tree and its clones share one record, so whatever any of them
/// changes is in it: a clone changed and swapped in for the original (as
/// the apply loop applies a long txn) leaves nothing out. A clone changed
/// and then dropped only adds buckets that a delta writes as they are,
/// which costs bytes, never correctness; a bucket left out would lose a
/// change.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChangeRecord(Option<Arc<Mutex<Vec<u64>>>>);

impl ChangeRecord {
    /// Records from now on, if it did not already.
    pub(crate) fn start(&mut self) {
        self.0.get_or_insert_with(Arc::default);
    }

    /// The bucket at `hash` changed.
    pub(crate) fn note(&self, hash: u64) {
        let Some(record) = &self.0 else {
            return;
        };
        let mut hashes = record.lock().unwrap_or_else(PoisonError::into_inner);
        if hashes.len() == hashes.capacity() && hashes.len() >= TIDY_FROM_HASHES {
            tidy(&mut hashes);
            // At least half the room free again, so that the next tidy is
            // as many notes away as this one's sort cost.
            let room = hashes.len();
            hashes.reserve(room);
        }
        hashes.push(hash);
    }

    /// The hashes noted since the last take, in no order and some maybe
    /// more than once (see [`tidy`]); `None` if the record has not
    /// started. Taken at once: the apply loop takes them, and sorting a
    /// snapshot's worth would hold up its next txn.
    pub(crate) fn take(&self) -> Option<Vec<u64>> {
        let record = self.0.as_ref()?;
        let mut hashes = record.lock().unwrap_or_else(PoisonError::into_inner);
        Some(std::mem::take(&mut *hashes))
    }
}

/// Sorts `hashes`, each once.
pub(crate) fn tidy(hashes: &mut Vec<u64>) {
    hashes.sort_unstable();
    hashes.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_noted_before_the_record_starts() {
        let mut record = ChangeRecord::default();
        record.note(7);
        assert_eq!(record.take(), None);
        record.start();
        assert_eq!(record.take(), Some(vec![]));
    }

    #[test]
    fn a_take_gives_every_hash_noted_and_empties_the_record() {
        let mut record = ChangeRecord::default();
        record.start();
        for hash in [9, 3, 9, 1, 3] {
            record.note(hash);
        }
        let mut taken = record.take().unwrap();
        tidy(&mut taken);
        assert_eq!(taken, [1, 3, 9]);
        assert_eq!(record.take(), Some(vec![]));
    }

    #[test]
    fn clones_share_the_record() {
        let mut record = ChangeRecord::default();
        record.start();
        let clone = record.clone();
        clone.note(5);
        record.note(4);
        assert_eq!(record.take(), Some(vec![5, 4]));
        assert_eq!(clone.take(), Some(vec![]));
    }

    /// A bucket written over and over keeps the record small.
    #[test]
    fn the_record_stays_within_twice_the_buckets_changed() {
        let mut record = ChangeRecord::default();
        record.start();
        let buckets = 1000;
        for write in 0..(TIDY_FROM_HASHES * 20) as u64 {
            record.note(write % buckets);
        }
        let held = record.0.as_ref().unwrap().lock().unwrap().capacity();
        assert!(held <= 4 * TIDY_FROM_HASHES, "{held} hashes held");
        let mut taken = record.take().unwrap();
        tidy(&mut taken);
        assert_eq!(taken.len(), buckets as usize);
    }
}
