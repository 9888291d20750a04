//! The one error type of this crate.
//!
//! Every variant but one means "the caller cannot trust this storage to make
//! progress": the server stops and an operator reads the message. The
//! exception is [`StorageError::NoSpace`]: the disk is full, nothing is lost,
//! and the same call succeeds once space is freed.

use std::io;
use std::path::PathBuf;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An operating-system call failed. `context` names the operation and the
    /// file. A failed `fsync`/`fdatasync` is reported here too: after it the
    /// kernel may have dropped the dirty pages, so the caller must stop.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and to which file.
        context: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// The disk (or the user's quota) is full. Nothing is lost and the log is
    /// still usable: the call may be repeated, with the same records, once
    /// space is freed. (A failed fsync is never this: see `Io`.)
    #[error("{context}: the disk is full ({source}); free space on it, and writing resumes")]
    NoSpace {
        /// What was being done, and to which file.
        context: String,
        /// The operating system's error (ENOSPC or EDQUOT).
        #[source]
        source: io::Error,
    },

    /// Data on disk failed verification somewhere recovery may not repair it
    /// (see [`crate::RecoveryMode`]). Nothing was skipped or modified.
    #[error(
        "{}: corrupt data at byte offset {offset}: {reason}. Paddock refuses to start on damaged \
         durable state and has not modified the file. Keep a copy of it for diagnosis; then restore \
         this server's data directory from a backup, or, if the other servers of the ensemble form \
         a healthy quorum, move this server's data directory aside and restart it so that it \
         copies the state from the leader",
        file.display()
    )]
    Corrupt {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset within `file` where the first bad record (or header) starts.
        offset: u64,
        /// What exactly failed to verify.
        reason: String,
    },

    /// A record handed to [`crate::Wal::append`] is larger than
    /// [`crate::RECORD_PAYLOAD_BYTES_MAX`]. Nothing of that call was written.
    #[error("record at index {index} has {len} payload bytes, more than the limit of {max}")]
    RecordTooLarge {
        /// The caller's index of the record.
        index: u64,
        /// Its payload length in bytes.
        len: usize,
        /// [`crate::RECORD_PAYLOAD_BYTES_MAX`].
        max: usize,
    },

    /// An earlier write or fsync of this log failed, so what the file holds is
    /// unknown; the [`crate::Wal`] refuses every further call. Restart: recovery
    /// reads what actually reached the disk.
    #[error(
        "the write-ahead log in {} failed earlier and refuses further use; restart the server so \
         that recovery reads what actually reached the disk",
        dir.display()
    )]
    Poisoned {
        /// The log's directory.
        dir: PathBuf,
    },
}

/// Like [`io_context`] for a write that may be repeated: a full disk becomes
/// [`StorageError::NoSpace`].
pub(crate) fn write_context(
    context: impl FnOnce() -> String,
) -> impl FnOnce(io::Error) -> StorageError {
    move |source| match source.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => StorageError::NoSpace {
            context: context(),
            source,
        },
        _ => StorageError::Io {
            context: context(),
            source,
        },
    }
}

/// Builds a `map_err` closure that wraps an `io::Error` with its context.
pub(crate) fn io_context(
    context: impl FnOnce() -> String,
) -> impl FnOnce(io::Error) -> StorageError {
    move |source| StorageError::Io {
        context: context(),
        source,
    }
}
