//! Properties of the log over random batches, segment sizes and crash points.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use storage::{Wal, WalOptions};

const SEGMENT_HEADER_BYTES: u64 = 8;
const RECORD_HEADER_BYTES: u64 = 20;

/// Batches of (index, payload); indices may repeat or go backwards.
fn batches() -> impl Strategy<Value = Vec<Vec<(u64, Vec<u8>)>>> {
    let record = (0u64..50, proptest::collection::vec(any::<u8>(), 0..200));
    proptest::collection::vec(proptest::collection::vec(record, 1..8), 1..12)
}

fn write_all(dir: &Path, opts: WalOptions, batches: &[Vec<(u64, Vec<u8>)>]) {
    let (mut wal, _) = Wal::open(dir, opts).expect("open");
    for batch in batches {
        let refs: Vec<(u64, &[u8])> = batch.iter().map(|(i, p)| (*i, p.as_slice())).collect();
        wal.append(&refs).expect("append");
        wal.sync().expect("sync");
    }
}

fn last_segment(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files.pop().expect("a segment")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn reopen_returns_exactly_what_was_appended(
        batches in batches(),
        segment_bytes in 64u64..2048,
        preallocate in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let opts = WalOptions { segment_bytes, preallocate };
        write_all(tmp.path(), opts, &batches);
        let (wal, records) = Wal::open(tmp.path(), opts).expect("reopen");
        let expected: Vec<(u64, Vec<u8>)> = batches.concat();
        let got: Vec<(u64, Vec<u8>)> = records.iter().map(|r| (r.index, r.payload.to_vec())).collect();
        prop_assert_eq!(got, expected.clone());
        prop_assert_eq!(wal.last_index(), expected.last().map(|r| r.0));
    }

    /// Cutting the last segment anywhere (a crash mid-write) loses exactly the
    /// records not wholly before the cut, and the log stays appendable.
    #[test]
    fn a_cut_anywhere_in_the_last_segment_keeps_the_records_before_it(
        batch in proptest::collection::vec((0u64..1000, proptest::collection::vec(any::<u8>(), 0..100)), 1..30),
        cut_fraction in 0.0f64..1.0,
        preallocate in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let opts = WalOptions { segment_bytes: 1 << 20, preallocate };
        write_all(tmp.path(), opts, std::slice::from_ref(&batch));
        let data_end = SEGMENT_HEADER_BYTES
            + batch.iter().map(|(_, p)| RECORD_HEADER_BYTES + p.len() as u64).sum::<u64>();
        let cut = SEGMENT_HEADER_BYTES + ((data_end - SEGMENT_HEADER_BYTES) as f64 * cut_fraction) as u64;
        let file = last_segment(tmp.path());
        OpenOptions::new().write(true).open(&file).expect("open").set_len(cut).expect("cut");

        let mut end = SEGMENT_HEADER_BYTES;
        let mut expected = Vec::new();
        for (i, p) in &batch {
            end += RECORD_HEADER_BYTES + p.len() as u64;
            if end > cut { break; }
            expected.push((*i, p.clone()));
        }
        let (mut wal, records) = Wal::open(tmp.path(), opts).expect("reopen after cut");
        let got: Vec<(u64, Vec<u8>)> = records.iter().map(|r| (r.index, r.payload.to_vec())).collect();
        prop_assert_eq!(&got, &expected);

        wal.append(&[(5000, b"after".as_slice())]).expect("append");
        wal.sync().expect("sync");
        drop(wal);
        expected.push((5000, b"after".to_vec()));
        let (_, records) = Wal::open(tmp.path(), opts).expect("reopen");
        let got: Vec<(u64, Vec<u8>)> = records.iter().map(|r| (r.index, r.payload.to_vec())).collect();
        prop_assert_eq!(got, expected);
    }
}
