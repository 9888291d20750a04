//! Snapshot store behaviour on real files.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use storage::{SnapshotPieces, SnapshotStore, StorageError};

fn payload(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize * 7 + i * 13) as u8)
        .collect()
}

/// Saves `data` in uneven chunks, as a serialiser would.
fn save(store: &SnapshotStore, index: u64, retain: usize, data: &[u8]) {
    store
        .save(index, retain, |out| {
            for chunk in data.chunks(12_345) {
                out.write_all(chunk)?;
            }
            Ok(())
        })
        .expect("save");
}

fn latest(store: &SnapshotStore) -> Option<(u64, Vec<u8>)> {
    store.latest().expect("latest").map(|(index, mut reader)| {
        let mut data = Vec::new();
        reader.read_to_end(&mut data).expect("read payload");
        (index, data)
    })
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    names.sort();
    names
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
    f.write_all(&[b[0] ^ 1]).expect("write");
}

#[test]
fn save_then_latest_round_trips_a_large_payload() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    assert!(latest(&store).is_none());
    let data = payload(1, 3 << 20);
    save(&store, 42, 2, &data);
    assert_eq!(names(tmp.path()), vec!["snap-000000000000002a.snap"]);
    let (index, read) = latest(&store).expect("a snapshot");
    assert_eq!(index, 42);
    assert!(read == data, "payload differs");

    // A fresh store (a restart) sees it too; an empty payload works.
    let store = SnapshotStore::open(tmp.path()).expect("reopen");
    save(&store, 43, 2, b"");
    assert_eq!(latest(&store), Some((43, Vec::new())));
}

#[test]
fn only_the_newest_retain_snapshots_are_kept() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    for index in [10, 20, 30, 40] {
        save(&store, index, 2, &payload(index, 100));
    }
    // The newest of those pruned is kept, to be written over by the next.
    assert_eq!(
        names(tmp.path()),
        vec![
            "snap-000000000000001e.snap",
            "snap-0000000000000028.snap",
            "snap.spare"
        ]
    );
    save(&store, 50, 0, b"retain 0 is taken as 1");
    assert_eq!(
        names(tmp.path()),
        vec!["snap-0000000000000032.snap", "snap.spare"]
    );
    assert_eq!(latest(&store).map(|(i, _)| i), Some(50));
}

fn inode(path: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&fs::metadata(path).expect("metadata"))
}

#[test]
fn the_next_snapshot_is_written_over_the_one_pruned_even_after_a_restart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let spare = tmp.path().join("snap.spare");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    save(&store, 1, 1, &payload(1, 3 << 20));
    let first = inode(&tmp.path().join("snap-0000000000000001.snap"));
    save(&store, 2, 1, &payload(2, 1000));
    assert_eq!(inode(&spare), first, "the pruned snapshot is the spare");

    // Shorter than the file it is written over, it ends where it ends.
    save(&store, 3, 1, &payload(3, 5000));
    assert_eq!(inode(&tmp.path().join("snap-0000000000000003.snap")), first);
    assert_eq!(latest(&store), Some((3, payload(3, 5000))));

    let store = SnapshotStore::open(tmp.path()).expect("reopen");
    let second = inode(&spare);
    save(&store, 4, 1, &payload(4, 4 << 20));
    assert_eq!(
        inode(&tmp.path().join("snap-0000000000000004.snap")),
        second
    );
    assert_eq!(latest(&store), Some((4, payload(4, 4 << 20))));
}

#[test]
fn a_snapshot_being_read_is_removed_when_pruned_never_written_over() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    save(&store, 1, 1, &payload(1, 3 << 20));
    let mut sending = store.at(1).expect("at").expect("snapshot 1");
    save(&store, 2, 1, &payload(2, 1000));
    save(&store, 3, 1, &payload(3, 1000));
    // Snapshot 1 was not kept as the spare, so 3 could not be written
    // over it: the reader sees it cut short, never another's bytes.
    let mut read = Vec::new();
    let _ = sending.read_to_end(&mut read);
    let whole = payload(1, 3 << 20);
    assert!(read.len() < whole.len(), "a removed snapshot read whole");
    assert!(
        whole.starts_with(&read),
        "a removed snapshot read other bytes"
    );
    drop(sending);
    assert_eq!(
        names(tmp.path()),
        vec!["snap-0000000000000003.snap", "snap.spare"]
    );
    assert_eq!(latest(&store), Some((3, payload(3, 1000))));
}

/// The pieces `latest_pieces` gives, `bytes` at a time, until the empty one.
fn pieces(pieces: &mut SnapshotPieces, bytes: usize) -> Vec<Vec<u8>> {
    let mut read = Vec::new();
    loop {
        let piece = pieces.next_piece(bytes).expect("a piece");
        if piece.is_empty() {
            return read;
        }
        read.push(piece);
    }
}

#[test]
fn a_payload_read_in_pieces_is_the_payload_cut_at_each_piece_size() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    for (index, len) in [(1, 3 << 20), (2, (5 << 19) + 1), (3, 0)] {
        let data = payload(index, len);
        save(&store, index, 1, &data);
        let (latest, mut sending) = store.latest_pieces().expect("latest").expect("a snapshot");
        assert_eq!(latest, index);
        let read = pieces(&mut sending, 1 << 20);
        let sizes: Vec<usize> = read.iter().map(Vec::len).collect();
        let whole = data.chunks(1 << 20).map(<[u8]>::len).collect::<Vec<_>>();
        assert_eq!(sizes, whole, "pieces of a {len}-byte payload");
        assert!(read.concat() == data, "the pieces of {index} differ");
    }
}

/// The pieces up to the first error, and that error (`None` if they all
/// came, to the empty one).
fn pieces_until_error(
    pieces: &mut SnapshotPieces,
    bytes: usize,
) -> (Vec<u8>, Option<StorageError>) {
    let mut read = Vec::new();
    loop {
        match pieces.next_piece(bytes) {
            Ok(piece) if piece.is_empty() => return (read, None),
            Ok(piece) => read.extend_from_slice(&piece),
            Err(error) => return (read, Some(error)),
        }
    }
}

#[test]
fn a_snapshot_pruned_while_sent_in_pieces_ends_in_an_error_never_in_other_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    let whole = payload(1, 3 << 20);
    save(&store, 1, 1, &whole);
    let (_, mut sending) = store.latest_pieces().expect("latest").expect("snapshot 1");
    let mut read = sending.next_piece(1 << 20).expect("the first piece");
    save(&store, 2, 1, &payload(2, 3 << 20));
    save(&store, 3, 1, &payload(3, 3 << 20));
    // Snapshot 1 was removed under its reader, not written over (it was
    // not kept as the spare while read): it is cut short, which the
    // pieces report rather than end as if it were whole.
    let (rest, error) = pieces_until_error(&mut sending, 1 << 20);
    read.extend_from_slice(&rest);
    assert!(
        whole.starts_with(&read),
        "a pruned snapshot sent other bytes"
    );
    assert!(read.len() < whole.len(), "a removed snapshot read whole");
    assert!(
        matches!(&error, Some(StorageError::Io { source, .. }) if source.kind() == io::ErrorKind::UnexpectedEof),
        "{error:?}"
    );
    drop(sending);
    assert_eq!(latest(&store), Some((3, payload(3, 3 << 20))));
}

#[test]
fn pieces_of_a_damaged_snapshot_end_in_an_error_before_the_last_piece() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    for len in [3 << 20, (5 << 19) + 1] {
        save(&store, 1, 1, &payload(1, len));
        let path = tmp.path().join("snap-0000000000000001.snap");
        flip_byte(&path, 16 + (len as u64) / 2);
        let (_, mut sending) = store.latest_pieces().expect("latest").expect("snapshot 1");
        let (read, error) = pieces_until_error(&mut sending, 1 << 20);
        assert_eq!(
            read.len(),
            2 << 20,
            "every piece but the one ending the payload"
        );
        assert!(
            matches!(error, Some(StorageError::Corrupt { .. })),
            "{error:?}"
        );
        fs::remove_file(&path).expect("remove");
    }
    // A damaged header is found before any piece.
    save(&store, 2, 1, &payload(2, 100));
    flip_byte(&tmp.path().join("snap-0000000000000002.snap"), 0);
    assert!(matches!(
        store.latest_pieces(),
        Err(StorageError::Corrupt { offset: 0, .. })
    ));
}

/// What a restore reads of the snapshot at `index` as one stream, in
/// reads of `bytes` (as the tree's decoder reads, into a buffer of its
/// own), and the error that ended it, if one did.
fn streamed(store: &SnapshotStore, index: u64, bytes: usize) -> (Vec<u8>, Option<io::Error>) {
    let mut stream = store.pieces(index).expect("the header checks");
    let mut read = Vec::new();
    let mut buf = vec![0; bytes];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (read, None),
            Ok(n) => read.extend_from_slice(&buf[..n]),
            Err(error) => return (read, Some(error)),
        }
    }
}

#[test]
fn a_payload_read_as_one_stream_is_the_payload_newest_first() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    let sizes = [(1, 3 << 20), (2, (5 << 19) + 1), (3, 0)];
    for (index, len) in sizes {
        save(&store, index, 3, &payload(index, len));
    }
    assert_eq!(store.newest_first().expect("list"), [3, 2, 1]);
    for (index, len) in sizes {
        let (read, error) = streamed(&store, index, 2 << 20);
        assert!(error.is_none(), "{error:?}");
        assert!(read == payload(index, len), "the stream of {index} differs");
    }
}

#[test]
fn a_damaged_snapshot_read_as_one_stream_ends_in_an_error_before_its_last_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    let path = tmp.path().join("snap-0000000000000001.snap");
    for (len, damage_at) in [(3 << 20, 1 << 20), ((5 << 19) + 1, 16 + (5 << 19))] {
        save(&store, 1, 1, &payload(1, len));
        flip_byte(&path, damage_at);
        let (read, error) = streamed(&store, 1, 1 << 20);
        assert!(
            read.len() < len && len - read.len() <= 1 << 20,
            "{} of {len} bytes came before the error",
            read.len()
        );
        let error = error.expect("the damage is an error");
        let storage = error
            .get_ref()
            .and_then(|e| e.downcast_ref::<StorageError>());
        assert!(
            matches!(storage, Some(StorageError::Corrupt { .. })),
            "{error:?}"
        );
        fs::remove_file(&path).expect("remove");
    }
}

#[test]
fn a_snapshot_is_found_by_its_index_until_pruned() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    let at = |index| {
        store.at(index).expect("at").map(|mut reader| {
            let mut data = Vec::new();
            reader.read_to_end(&mut data).expect("read payload");
            data
        })
    };
    save(&store, 5, 2, &payload(5, 300));
    save(&store, 6, 2, &payload(6, 200));
    // An older snapshot than the newest, as raft installs one the leader
    // has already followed with a newer one.
    assert_eq!(at(5), Some(payload(5, 300)));
    assert_eq!(at(6), Some(payload(6, 200)));
    assert_eq!(at(7), None);
    save(&store, 7, 2, &payload(7, 100));
    assert_eq!(at(5), None, "pruned");
}

#[test]
fn a_corrupt_newest_snapshot_falls_back_to_the_older_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    save(&store, 1, 3, &payload(1, 5000));
    save(&store, 2, 3, &payload(2, 5000));
    let newest = tmp.path().join("snap-0000000000000002.snap");
    flip_byte(&newest, 16 + 2500);
    assert_eq!(latest(&store), Some((1, payload(1, 5000))));

    // A newest snapshot cut short (no trailer) also falls back.
    save(&store, 3, 3, &payload(3, 5000));
    let f = OpenOptions::new()
        .write(true)
        .open(tmp.path().join("snap-0000000000000003.snap"))
        .expect("open");
    f.set_len(16 + 4000).expect("truncate");
    assert_eq!(latest(&store), Some((1, payload(1, 5000))));
}

#[test]
fn when_no_snapshot_verifies_latest_is_an_error_not_none() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    save(&store, 7, 1, &payload(7, 100));
    let file = tmp.path().join("snap-0000000000000007.snap");
    flip_byte(&file, 20);
    match store.latest() {
        Err(StorageError::Corrupt { file: f, .. }) => assert_eq!(f, file),
        Err(other) => panic!("expected Corrupt, got {other:?}"),
        Ok(_) => panic!("expected Corrupt, got a snapshot"),
    }
}

#[test]
fn a_snapshot_renamed_to_another_index_is_rejected() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    save(&store, 5, 1, b"five");
    fs::rename(
        tmp.path().join("snap-0000000000000005.snap"),
        tmp.path().join("snap-0000000000000006.snap"),
    )
    .expect("rename");
    assert!(matches!(
        store.latest(),
        Err(StorageError::Corrupt { offset: 8, .. })
    ));
}

#[test]
fn leftover_temp_files_are_ignored_and_removed_on_open() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    save(&store, 1, 2, b"one");
    // A save of index 2 that a crash interrupted.
    fs::write(tmp.path().join("snap-0000000000000002.0.tmp"), b"partial").expect("write");
    assert_eq!(latest(&store), Some((1, b"one".to_vec())));
    drop(store);
    let store = SnapshotStore::open(tmp.path()).expect("reopen");
    assert_eq!(names(tmp.path()), vec!["snap-0000000000000001.snap"]);
    assert_eq!(latest(&store), Some((1, b"one".to_vec())));
}

#[test]
fn a_failing_writer_leaves_no_snapshot_and_no_temp_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    save(&store, 1, 2, b"one");
    let err = store
        .save(2, 2, |out| {
            out.write_all(b"half of the state")?;
            Err(io::Error::other("serialiser failed"))
        })
        .expect_err("must fail");
    assert!(matches!(err, StorageError::Io { .. }));
    assert!(err.to_string().contains("serialiser failed"), "{err}");
    assert_eq!(names(tmp.path()), vec!["snap-0000000000000001.snap"]);
    assert_eq!(latest(&store), Some((1, b"one".to_vec())));
}

#[test]
fn a_reader_stays_valid_while_a_concurrent_save_prunes_its_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = SnapshotStore::open(tmp.path()).expect("open");
    save(&store, 1, 1, &payload(1, 10_000));
    let (index, mut reader) = store.latest().expect("latest").expect("some");
    assert_eq!(index, 1);
    std::thread::scope(|s| {
        s.spawn(|| save(&store, 2, 1, b"two"));
    });
    assert_eq!(names(tmp.path()), vec!["snap-0000000000000002.snap"]);
    let mut data = Vec::new();
    reader.read_to_end(&mut data).expect("read");
    assert!(data == payload(1, 10_000));
}
