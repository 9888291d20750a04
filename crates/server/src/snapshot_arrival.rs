//! Snapshots from the leader decoded while they arrive.
//!
//! A follower sent the leader's snapshot used to read the file back once
//! it was durable, and only then start decoding it: catching up from 1 GB
//! of 10 KB values (`paddock bench catchup --start paddock --servers 3
//! --megabytes 1024`), the transfer took 2.6 s and the decoding after it
//! 1.1 s more. Each arriving snapshot is now decoded on a thread of its
//! own as its pieces are written, and the apply loop takes the tree when
//! raft hands it the snapshot, reading the file only if the decoding
//! failed.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use consensus::{ArrivingSnapshot, SnapshotMeta, Snapshots};
use tree::DataTree;

/// The snapshot arriving or arrived last, and the thread decoding it.
#[derive(Default)]
pub struct Arrivals {
    last: Mutex<Option<Decoding>>,
}

struct Decoding {
    index: u64,
    thread: JoinHandle<Result<(SnapshotMeta, DataTree), String>>,
}

impl Arrivals {
    /// Decodes every snapshot `snapshots` takes in from now on.
    pub fn decode_from(snapshots: &Snapshots) -> Arc<Self> {
        let arrivals = Arc::new(Arrivals::default());
        let decoding = arrivals.clone();
        snapshots.read_arrivals(move |arriving| decoding.start(arriving));
        arrivals
    }

    /// The tree of the snapshot at `index`, decoded as it arrived: `None`
    /// if the last snapshot to arrive was another, `Some(Err)` if its
    /// decoding failed. Waits for the decoding to end.
    pub fn take(&self, index: u64) -> Option<Result<(SnapshotMeta, DataTree), String>> {
        let decoding = {
            let mut last = self.last();
            if last.as_ref()?.index != index {
                return None;
            }
            last.take()?
        };
        Some(
            decoding
                .thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        )
    }

    /// Lets go of a snapshot at or before `applied`, which raft will not
    /// hand over any more (it declined it, or a newer one came): its tree
    /// may be as large as the server's own.
    pub fn forget_through(&self, applied: u64) {
        let stale = {
            let mut last = self.last();
            match &*last {
                Some(decoding) if decoding.index <= applied => last.take(),
                _ => None,
            }
        };
        drop(stale);
    }

    fn start(&self, arriving: ArrivingSnapshot) {
        let index = arriving.index();
        let spawned = std::thread::Builder::new()
            .name("snapshot-decode".into())
            .spawn(move || decode(arriving));
        match spawned {
            // A decoding replaced (its snapshot given up for a newer one)
            // fails on its own once its pieces stop coming.
            Ok(thread) => *self.last() = Some(Decoding { index, thread }),
            Err(error) => {
                tracing::warn!(index, %error, "could not start decoding an arriving snapshot; it will be read from disk once it is there");
            }
        }
    }

    fn last(&self) -> std::sync::MutexGuard<'_, Option<Decoding>> {
        self.last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn decode(mut arriving: ArrivingSnapshot) -> Result<(SnapshotMeta, DataTree), String> {
    let meta = arriving.read_meta().map_err(|e| e.to_string())?;
    let tree = DataTree::read_snapshot(&mut arriving).map_err(|e| e.to_string())?;
    arriving.finish().map_err(|e| e.to_string())?;
    Ok((meta, tree))
}

#[cfg(test)]
mod tests {
    use consensus::Membership;
    use tree::TxnOp;

    use super::*;

    /// A tree with something of its own in it, and its snapshot file at
    /// `index` as a leader sends it.
    fn leader_snapshot(index: u64) -> (DataTree, Vec<u8>) {
        let mut tree = DataTree::new();
        let session = crate::shared::stamped_txn(
            7,
            TxnOp::CreateSession {
                timeout_ms: 30_000,
                password: vec![1; 16].into(),
            },
        );
        tree.apply(1, &session);
        let dir = tempfile::tempdir().unwrap();
        let snapshots = Snapshots::open(dir.path()).unwrap();
        let meta = SnapshotMeta {
            index,
            term: 2,
            membership: Membership::new(vec![1, 2, 3], vec![]),
        };
        snapshots
            .save(&meta, 1, |out| tree.write_snapshot(out))
            .unwrap();
        let (_, mut raw) = snapshots.latest_raw().unwrap().expect("saved");
        let mut file = Vec::new();
        loop {
            let piece = raw.next_piece(64 << 10).unwrap();
            if piece.is_empty() {
                break (tree, file);
            }
            file.extend_from_slice(&piece);
        }
    }

    fn install(snapshots: &Snapshots, index: u64, file: &[u8]) {
        transfer(snapshots, index, file, true).unwrap();
    }

    /// Sends every piece of `file`, then its end if `ended`.
    fn transfer(
        snapshots: &Snapshots,
        index: u64,
        file: &[u8],
        ended: bool,
    ) -> Result<(), consensus::Error> {
        let (chunks_tx, chunks) = std::sync::mpsc::channel();
        for piece in file.chunks(100) {
            chunks_tx.send(Some(piece.to_vec())).unwrap();
        }
        if ended {
            chunks_tx.send(None).unwrap();
        }
        drop(chunks_tx);
        snapshots.install(index, 2, chunks)
    }

    /// A follower's snapshot directory, decoding what arrives there.
    fn follower() -> (Snapshots, Arc<Arrivals>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let snapshots = Snapshots::open(dir.path()).unwrap();
        let arrivals = Arrivals::decode_from(&snapshots);
        (snapshots, arrivals, dir)
    }

    fn snapshot_bytes(tree: &DataTree) -> Vec<u8> {
        let mut bytes = Vec::new();
        tree.write_snapshot(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn an_installed_snapshot_is_taken_decoded_once_and_only_at_its_index() {
        let (sent, file) = leader_snapshot(42);
        let (snapshots, arrivals, _dir) = follower();
        install(&snapshots, 42, &file);
        assert!(arrivals.take(41).is_none());
        let (meta, decoded) = arrivals.take(42).expect("decoded").unwrap();
        assert_eq!(meta.index, 42);
        assert_eq!(meta.membership.voters, vec![1, 2, 3]);
        assert!(snapshot_bytes(&decoded) == snapshot_bytes(&sent));
        assert!(arrivals.take(42).is_none(), "taken twice");
    }

    #[test]
    fn a_snapshot_raft_will_not_hand_over_is_let_go() {
        let (_, file) = leader_snapshot(42);
        let (snapshots, arrivals, _dir) = follower();
        install(&snapshots, 42, &file);
        arrivals.forget_through(41);
        arrivals.forget_through(42);
        assert!(arrivals.take(42).is_none());
    }

    #[test]
    fn a_transfer_given_up_after_its_last_byte_is_no_tree() {
        let (_, file) = leader_snapshot(42);
        let (snapshots, arrivals, _dir) = follower();
        assert!(transfer(&snapshots, 42, &file, false).is_err());
        assert!(arrivals.take(42).expect("decoding").is_err());
    }

    #[test]
    fn a_damaged_snapshot_is_a_decoding_error_not_a_tree() {
        let (_, mut file) = leader_snapshot(42);
        let last = file.len() - 1;
        file[last] ^= 1; // the tree's checksum
        let (snapshots, arrivals, _dir) = follower();
        install(&snapshots, 42, &file);
        assert!(arrivals.take(42).expect("decoding").is_err());
    }
}
