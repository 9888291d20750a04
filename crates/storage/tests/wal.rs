//! Write-ahead log behaviour on real files: round trips, segment rolling and
//! release, and recovery from torn tails and corruption (simulated by
//! truncating files and flipping bytes between runs).

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use storage::{RecoveryMode, StdFs, StorageError, Wal, WalOptions, WalRecord};

/// Mirrors the on-disk format (see `src/record.rs`).
const SEGMENT_HEADER_BYTES: u64 = 8;
const RECORD_HEADER_BYTES: u64 = 20;

fn payload(index: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (index as usize * 31 + i) as u8).collect()
}

/// Appends `indices` with payloads of `len` bytes, one batch, then syncs.
fn append_all(wal: &mut Wal, indices: impl IntoIterator<Item = u64>, len: usize) {
    let payloads: Vec<(u64, Vec<u8>)> = indices.into_iter().map(|i| (i, payload(i, len))).collect();
    let batch: Vec<(u64, &[u8])> = payloads.iter().map(|(i, p)| (*i, p.as_slice())).collect();
    wal.append(&batch).expect("append");
    wal.sync().expect("sync");
}

fn indices(records: &[WalRecord]) -> Vec<u64> {
    records.iter().map(|r| r.index).collect()
}

fn check_payloads(records: &[WalRecord], len: usize) {
    for r in records {
        assert_eq!(
            r.payload.as_ref(),
            payload(r.index, len).as_slice(),
            "payload of {}",
            r.index
        );
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

/// Byte offset in its segment of the `n`th record (0-based), all payloads `len` bytes.
fn record_offset(n: u64, len: usize) -> u64 {
    SEGMENT_HEADER_BYTES + n * (RECORD_HEADER_BYTES + len as u64)
}

fn flip_byte(path: &Path, offset: u64) {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open");
    f.seek(SeekFrom::Start(offset)).expect("seek");
    let mut b = [0u8];
    f.read_exact(&mut b).expect("read");
    f.seek(SeekFrom::Start(offset)).expect("seek");
    f.write_all(&[b[0] ^ 0x5a]).expect("write");
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    let mut f = OpenOptions::new().write(true).open(path).expect("open");
    f.seek(SeekFrom::Start(offset)).expect("seek");
    f.write_all(bytes).expect("write");
}

fn small(segment_bytes: u64) -> WalOptions {
    WalOptions {
        segment_bytes,
        preallocate: true,
    }
}

#[test]
fn append_sync_reopen_returns_the_same_records() {
    for preallocate in [true, false] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let opts = WalOptions {
            preallocate,
            ..WalOptions::default()
        };
        let (mut wal, recovered) = Wal::open(tmp.path(), opts).expect("open");
        assert!(recovered.is_empty());
        assert_eq!(wal.last_index(), None);
        append_all(&mut wal, 1..=50, 100);
        wal.append(&[(51, b"".as_slice()), (52, b"x".as_slice())])
            .expect("append");
        wal.sync().expect("sync");
        assert_eq!(wal.last_index(), Some(52));
        drop(wal);

        let (mut wal, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
        assert_eq!(indices(&recovered), (1..=52).collect::<Vec<_>>());
        check_payloads(&recovered[..50], 100);
        assert_eq!(recovered[50].payload.as_ref(), b"");
        assert_eq!(recovered[51].payload.as_ref(), b"x");
        assert_eq!(wal.last_index(), Some(52));

        // Appending continues in the same segment after the last record.
        append_all(&mut wal, 53..=60, 7);
        drop(wal);
        let (wal, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
        assert_eq!(indices(&recovered), (1..=60).collect::<Vec<_>>());
        assert_eq!(wal.segment_count(), 1);
        assert_eq!(segments(tmp.path()).len(), 1);
    }
}

#[test]
fn opening_an_empty_directory_creates_no_segment_until_the_first_append() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("new").join("log");
    let (mut wal, recovered) = Wal::open(&dir, WalOptions::default()).expect("open");
    assert!(recovered.is_empty());
    assert!(segments(&dir).is_empty());
    wal.sync().expect("sync of nothing");
    append_all(&mut wal, [7], 3);
    let names = segments(&dir);
    assert_eq!(names.len(), 1);
    assert!(
        names[0].ends_with("wal-0000000000000001-0000000000000007.log"),
        "{names:?}"
    );
    assert_eq!(
        fs::metadata(&names[0]).expect("metadata").len(),
        64 << 20,
        "preallocated"
    );
}

#[test]
fn segments_roll_and_release_through_deletes_whole_older_segments() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Records of 20 + 40 bytes; (256 - 8) / 60 -> 4 records per segment.
    let opts = small(256);
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    for batch in (1..=100u64).collect::<Vec<_>>().chunks(7) {
        append_all(&mut wal, batch.iter().copied(), 40);
    }
    assert_eq!(wal.segment_count(), 25);
    assert_eq!(segments(tmp.path()).len(), 25);

    // Segments hold 1-4, 5-8, ..., 49-52: releasing through 50 deletes 12 of them.
    wal.release_through(50).expect("release");
    assert_eq!(wal.segment_count(), 13);
    let files = segments(tmp.path());
    assert_eq!(files.len(), 13);
    assert!(
        files[0].ends_with("wal-000000000000000d-0000000000000031.log"),
        "{files:?}"
    );
    // Nothing to release below the first remaining segment.
    wal.release_through(51).expect("release");
    assert_eq!(wal.segment_count(), 13);
    drop(wal);

    let (mut wal, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
    assert_eq!(indices(&recovered), (49..=100).collect::<Vec<_>>());
    check_payloads(&recovered, 40);

    // The active segment is never deleted.
    wal.release_through(u64::MAX).expect("release");
    assert_eq!(wal.segment_count(), 1);
    append_all(&mut wal, [101], 40);
    drop(wal);
    let (_, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
    assert_eq!(indices(&recovered), vec![97, 98, 99, 100, 101]);
}

#[test]
fn detached_segments_stay_on_disk_until_removed_and_recovery_reads_them_meanwhile() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = small(256);
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    append_all(&mut wal, 1..=20, 40);
    assert_eq!(segments(tmp.path()).len(), 5);

    let removal = wal.detach_through(8).expect("detach");
    assert_eq!(wal.segment_count(), 3, "the log forgets them at once");
    assert_eq!(
        segments(tmp.path()).len(),
        5,
        "the files wait for the removal"
    );
    // A crash now: recovery finds every record, the detached ones too.
    let (_, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
    assert_eq!(indices(&recovered), (1..=20).collect::<Vec<_>>());

    std::thread::spawn(move || removal.finish(&storage::RemovalPace::default()))
        .join()
        .expect("the removing thread")
        .expect("remove");
    assert_eq!(segments(tmp.path()).len(), 3);
    drop(wal);
    let (_, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
    assert_eq!(indices(&recovered), (9..=20).collect::<Vec<_>>());
}

#[test]
fn a_record_larger_than_a_segment_gets_its_own() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = small(256);
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    append_all(&mut wal, [1], 10);
    append_all(&mut wal, [2], 1000);
    append_all(&mut wal, [3], 10);
    assert_eq!(wal.segment_count(), 3);
    drop(wal);
    let (_, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
    assert_eq!(indices(&recovered), vec![1, 2, 3]);
    assert_eq!(recovered[1].payload.len(), 1000);
}

#[test]
fn repeated_indices_come_back_in_append_order_and_release_keeps_a_prefix() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = small(256);
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    append_all(&mut wal, 1..=8, 40); // segments [1-4] [5-8]
    append_all(&mut wal, 3..=6, 40); // a rewrite from 3: segment [3-6]
    append_all(&mut wal, 7..=9, 40); // segment [7-9], active
    assert_eq!(wal.segment_count(), 4);
    // [1-4] goes; [5-8] holds 8 > 6 and stops the release, so [3-6], which
    // supersedes part of it, stays too.
    wal.release_through(6).expect("release");
    assert_eq!(wal.segment_count(), 3);
    drop(wal);
    let (_, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
    assert_eq!(indices(&recovered), vec![5, 6, 7, 8, 3, 4, 5, 6, 7, 8, 9]);
}

#[test]
fn a_record_cut_short_at_the_end_is_truncated_and_appending_continues() {
    for preallocate in [true, false] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let opts = WalOptions {
            preallocate,
            ..WalOptions::default()
        };
        let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
        append_all(&mut wal, 1..=10, 50);
        drop(wal);
        let file = segments(tmp.path()).remove(0);
        // Keep 9 records and 7 bytes of the 10th's header, as a crash might.
        let cut = record_offset(9, 50) + 7;
        OpenOptions::new()
            .write(true)
            .open(&file)
            .expect("open")
            .set_len(cut)
            .expect("truncate");

        let (mut wal, recovered) = Wal::open(tmp.path(), opts).expect("reopen after torn write");
        assert_eq!(indices(&recovered), (1..=9).collect::<Vec<_>>());
        assert_eq!(wal.last_index(), Some(9));
        append_all(&mut wal, [10, 11], 50);
        drop(wal);
        let (_, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
        assert_eq!(indices(&recovered), (1..=11).collect::<Vec<_>>());
        check_payloads(&recovered, 50);
    }
}

#[test]
fn garbage_after_the_last_record_is_truncated() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = WalOptions::default();
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    append_all(&mut wal, 1..=5, 30);
    drop(wal);
    let file = segments(tmp.path()).remove(0);
    let end = record_offset(5, 30);
    write_at(&file, end, &[0xA7; 33]);

    let (mut wal, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
    assert_eq!(indices(&recovered), (1..=5).collect::<Vec<_>>());
    // The garbage is gone: the bytes after the last record are zeros again,
    // and the file keeps its preallocated size.
    let bytes = fs::read(&file).expect("read");
    assert_eq!(bytes.len() as u64, opts.segment_bytes);
    assert!(bytes[end as usize..end as usize + 33]
        .iter()
        .all(|&b| b == 0));
    append_all(&mut wal, [6], 30);
    drop(wal);
    let (_, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
    assert_eq!(indices(&recovered), (1..=6).collect::<Vec<_>>());
}

#[test]
fn a_last_record_with_a_bad_checksum_and_zeros_after_it_is_a_torn_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = Wal::open(tmp.path(), WalOptions::default()).expect("open");
    append_all(&mut wal, 1..=4, 64);
    drop(wal);
    let file = segments(tmp.path()).remove(0);
    // The 4th record's payload only half reached the disk.
    write_at(
        &file,
        record_offset(3, 64) + RECORD_HEADER_BYTES + 32,
        &[0; 32],
    );
    let (_, recovered) = Wal::open(tmp.path(), WalOptions::default()).expect("reopen");
    assert_eq!(indices(&recovered), vec![1, 2, 3]);
}

#[test]
fn a_flipped_byte_in_a_middle_record_is_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = Wal::open(tmp.path(), WalOptions::default()).expect("open");
    append_all(&mut wal, 1..=10, 50);
    drop(wal);
    let file = segments(tmp.path()).remove(0);
    let before = fs::read(&file).expect("read");

    for at in [
        record_offset(4, 50) + RECORD_HEADER_BYTES + 10, // payload of index 5
        record_offset(4, 50) + 5,                        // length field of index 5
        record_offset(4, 50) + 9,                        // index field of index 5
    ] {
        flip_byte(&file, at);
        let err = Wal::open(tmp.path(), WalOptions::default()).expect_err("must refuse");
        match &err {
            StorageError::Corrupt {
                file: f,
                offset,
                reason,
            } => {
                assert_eq!(f, &file);
                assert_eq!(*offset, record_offset(4, 50));
                assert!(reason.contains("valid record follows"), "{reason}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        let message = err.to_string();
        assert!(message.contains(&file.display().to_string()), "{message}");
        assert!(
            message.contains(&format!("offset {}", record_offset(4, 50))),
            "{message}"
        );
        assert!(message.contains("backup"), "{message}");
        // Nothing was modified.
        flip_byte(&file, at);
        assert_eq!(fs::read(&file).expect("read"), before);
    }
}

#[test]
fn a_flipped_byte_in_a_non_last_segment_is_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = small(256);
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    append_all(&mut wal, 1..=12, 40); // three segments of four
    drop(wal);
    let first = segments(tmp.path()).remove(0);
    // The last record of the first segment: nothing valid follows it in that
    // file, yet it is corruption because the segment was sealed.
    let at = record_offset(3, 40);
    flip_byte(&first, at + RECORD_HEADER_BYTES + 1);
    match Wal::open(tmp.path(), opts) {
        Err(StorageError::Corrupt { file, offset, .. }) => {
            assert_eq!(file, first);
            assert_eq!(offset, at);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Strict mode says the same.
    let strict = Wal::open_with(
        tmp.path(),
        opts,
        RecoveryMode::AbsoluteConsistency,
        Arc::new(StdFs),
    );
    assert!(matches!(strict, Err(StorageError::Corrupt { .. })));
}

#[test]
fn garbage_after_the_end_marker_of_a_sealed_segment_is_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = small(256);
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    append_all(&mut wal, 1..=8, 40);
    drop(wal);
    let first = segments(tmp.path()).remove(0);
    write_at(&first, 250, &[1]);
    assert!(
        matches!(Wal::open(tmp.path(), opts), Err(StorageError::Corrupt { offset, .. }) if offset == record_offset(4, 40))
    );
}

#[test]
fn a_missing_middle_segment_is_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = small(256);
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    append_all(&mut wal, 1..=12, 40);
    drop(wal);
    let files = segments(tmp.path());
    fs::remove_file(&files[1]).expect("remove");
    match Wal::open(tmp.path(), opts) {
        Err(StorageError::Corrupt { file, reason, .. }) => {
            assert_eq!(file, files[2]);
            assert!(reason.contains("missing"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn absolute_consistency_refuses_a_torn_tail_and_modifies_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = Wal::open(tmp.path(), WalOptions::default()).expect("open");
    append_all(&mut wal, 1..=3, 10);
    drop(wal);
    let file = segments(tmp.path()).remove(0);
    write_at(&file, record_offset(3, 10), &[0xEE; 5]);
    let before = fs::read(&file).expect("read");
    let strict = Wal::open_with(
        tmp.path(),
        WalOptions::default(),
        RecoveryMode::AbsoluteConsistency,
        Arc::new(StdFs),
    );
    assert!(
        matches!(strict, Err(StorageError::Corrupt { offset, .. }) if offset == record_offset(3, 10))
    );
    assert_eq!(fs::read(&file).expect("read"), before);
    // The default policy repairs it.
    let (_, recovered) = Wal::open(tmp.path(), WalOptions::default()).expect("open");
    assert_eq!(indices(&recovered), vec![1, 2, 3]);
}

#[test]
fn an_empty_last_segment_from_a_crash_during_creation_is_removed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = small(256);
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    append_all(&mut wal, 1..=4, 40);
    drop(wal);
    // A crash after creating segment 2 but before anything reached it.
    let blank = tmp.path().join("wal-0000000000000002-0000000000000005.log");
    fs::write(&blank, vec![0u8; 256]).expect("write");

    let (mut wal, recovered) = Wal::open(tmp.path(), opts).expect("open");
    assert_eq!(indices(&recovered), vec![1, 2, 3, 4]);
    assert!(!blank.exists());
    // The next segment reuses sequence number 2, named for its real first index.
    append_all(&mut wal, [9], 40);
    assert!(tmp
        .path()
        .join("wal-0000000000000002-0000000000000009.log")
        .exists());
    drop(wal);
    let (_, recovered) = Wal::open(tmp.path(), opts).expect("open");
    assert_eq!(indices(&recovered), vec![1, 2, 3, 4, 9]);
}

#[test]
fn unrelated_files_are_ignored() {
    let tmp = tempfile::tempdir().expect("tempdir");
    fs::write(tmp.path().join("README"), b"hello").expect("write");
    fs::write(tmp.path().join("wal-1-2.log"), b"not ours").expect("write");
    let (mut wal, recovered) = Wal::open(tmp.path(), WalOptions::default()).expect("open");
    assert!(recovered.is_empty());
    append_all(&mut wal, [1], 1);
    drop(wal);
    let (_, recovered) = Wal::open(tmp.path(), WalOptions::default()).expect("open");
    assert_eq!(indices(&recovered), vec![1]);
}

#[test]
fn records_are_read_back_where_append_and_open_say_they_are() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // 4 records per segment (see above), so reads cross segments.
    let opts = small(256);
    let (mut wal, _) = Wal::open(tmp.path(), opts).expect("open");
    let payloads: Vec<Vec<u8>> = (1..=30u64).map(|i| payload(i, 40)).collect();
    let mut appended = Vec::new();
    for (n, chunk) in payloads.chunks(7).enumerate() {
        let batch: Vec<(u64, &[u8])> = chunk
            .iter()
            .enumerate()
            .map(|(i, p)| ((n * 7 + i + 1) as u64, p.as_slice()))
            .collect();
        appended.extend(wal.append(&batch).expect("append"));
    }
    // Read back before the sync too: the reader sees what was written.
    let reader = wal.reader();
    let back = reader
        .read_each(&appended, |p| p.to_vec())
        .expect("read back");
    assert_eq!(back.len(), 30);
    for (i, bytes) in back.iter().enumerate() {
        assert_eq!(bytes, &payloads[i], "record {}", i + 1);
    }
    // Any subset, in any order.
    let picked = [appended[17], appended[3], appended[4], appended[29]];
    let back = reader
        .read_each(&picked, |p| p.to_vec())
        .expect("read subset");
    assert_eq!(back[0], payloads[17]);
    assert_eq!(back[3], payloads[29]);
    wal.sync().expect("sync");
    drop(wal);

    let (mut wal, recovered) = Wal::open(tmp.path(), opts).expect("reopen");
    let located: Vec<_> = recovered.iter().map(|r| r.location).collect();
    assert_eq!(located, appended, "open reports the places append did");
    // Released segments cannot be read: the location is stale, not reused.
    wal.release_through(8).expect("release");
    assert!(wal.reader().read_each(&appended[..1], |_| ()).is_err());
    assert_eq!(
        wal.reader()
            .read_each(&appended[8..9], |p| p.to_vec())
            .expect("read")[0]
            .as_slice(),
        payloads[8].as_slice()
    );
}

#[test]
fn a_record_overwritten_on_disk_does_not_read_back_as_valid() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = Wal::open(tmp.path(), WalOptions::default()).expect("open");
    let located = wal.append(&[(1, b"first".as_slice())]).expect("append");
    wal.sync().expect("sync");
    let file = segments(tmp.path()).remove(0);
    flip_byte(&file, located[0].stored_bytes() + SEGMENT_HEADER_BYTES - 1);
    match wal.reader().read_each(&located, |_| ()) {
        Err(StorageError::Corrupt { .. }) => {}
        other => panic!("a damaged record must read back as corrupt, got {other:?}"),
    }
}
