//! Durable state for Paddock: a segmented write-ahead log with group commit,
//! and snapshot files. This crate knows nothing of ZooKeeper or Raft: it
//! stores opaque records tagged with a caller-chosen `u64` index, and opaque
//! snapshot payloads tagged the same way.
//!
//! Layout:
//! - `wal`: [`Wal`], the log — segment files, append / [`Wal::sync`] (one
//!   `fdatasync` per batch), [`Wal::release_through`], and recovery under a
//!   named [`RecoveryMode`].
//! - `record`: the segment and record format and the recovery scan over one
//!   segment's bytes; pure code, no I/O.
//! - `snapshot`: [`SnapshotStore`] — streamed, checksummed snapshot files,
//!   written to a temp file, fsynced and renamed; verified before use.
//! - `fs`: the file seam. All I/O goes through [`FileSystem`] ([`StdFs`] is
//!   the real one), so tests can fail an fsync or cut a write short.
//! - `error`: [`StorageError`].
//!
//! # What the caller must know
//!
//! - Nothing appended is durable until [`Wal::sync`] returns `Ok`; acknowledge
//!   only after it. Dropping a `Wal` does not sync.
//! - Any error from a `Wal` or `SnapshotStore` but [`StorageError::NoSpace`]
//!   means storage cannot be trusted to make progress: stop the server. After
//!   a failed write or fsync the `Wal` refuses further calls
//!   ([`StorageError::Poisoned`]). `NoSpace` (a full disk) loses nothing:
//!   repeat the same append once space is freed.
//! - [`Wal::open`] returns records in append order and may return an index
//!   more than once (a suffix rewritten after a conflict): a record with index
//!   `i` supersedes every earlier-returned record with index `>= i`.
//! - Recovery is the newest verified snapshot ([`SnapshotStore::latest`]) plus
//!   the log records after its index. If the newest snapshot is damaged an
//!   older one is returned, and the caller must check that the log still
//!   reaches back to it.
//! - `Wal` is used by one owner (`&mut self`); `SnapshotStore` may be shared
//!   between threads, so snapshots can be saved in the background.
//!
//! # Throughput
//!
//! Measured with `examples/wal_throughput.rs` (release build, ext4 on this
//! project's 2-core VM, others building meanwhile): batches of 100 records of
//! 100 bytes, one `fdatasync` each, run at ~0.4–0.5 M records/s (~4 000–5 000
//! fsyncs/s); one record per fsync ~9 000 records/s; 1 000 per fsync
//! ~3 M records/s. The fsync dominates: batch in the caller.
//!
//! # Example
//!
//! ```
//! use storage::{SnapshotStore, Wal, WalOptions};
//! # fn main() -> Result<(), storage::StorageError> {
//! # let tmp = std::env::temp_dir().join(format!("storage-doc-{}", std::process::id()));
//! let (mut wal, recovered) = Wal::open(&tmp.join("log"), WalOptions::default())?;
//! assert!(recovered.is_empty());
//! wal.append(&[(1, b"first".as_slice()), (2, b"second".as_slice())])?;
//! wal.sync()?; // one fdatasync for the batch; acknowledge after this
//!
//! let snapshots = SnapshotStore::open(&tmp.join("snap"))?;
//! snapshots.save(2, 2, |out| out.write_all(b"state at index 2"))?;
//! wal.release_through(2)?; // deletes sealed segments wholly at or below 2
//!
//! let (index, mut payload) = snapshots.latest()?.expect("just saved");
//! let mut state = String::new();
//! std::io::Read::read_to_string(&mut payload, &mut state).expect("read");
//! assert_eq!((index, state.as_str()), (2, "state at index 2"));
//! # drop(wal);
//! # std::fs::remove_dir_all(&tmp).ok();
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod error;
mod fs;
mod record;
mod removal;
mod snapshot;
mod snapshot_read;
mod snapshot_spare;
mod snapshot_write;
mod wal;
mod wal_read;

pub use error::StorageError;
pub use fs::{FileSystem, ReadableFile, StdFs, WritableFile, DIRECT_ALIGN_BYTES};
pub use record::{Payload, RECORD_PAYLOAD_BYTES_MAX};
pub use removal::RemovalPace;
pub use snapshot::{newest_snapshot_in, SnapshotReader, SnapshotStore};
pub use snapshot_read::SnapshotPieces;
pub use wal::{PendingSync, RecoveryMode, SegmentRemoval, Wal, WalOptions, WalRecord};
pub use wal_read::{RecordLocation, WalReader};
