use std::path::PathBuf;

/// Why the replicated log cannot go on. Every variant stops the server:
/// raft's contract is that a storage error makes the node inoperable.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
    #[error("log record {index} in {dir} cannot be decoded ({reason}); the log is damaged: restore the data directory from a replica or a backup")]
    BadRecord {
        dir: PathBuf,
        index: u64,
        reason: String,
    },
    #[error("the log in {dir} has a gap: entry {found} follows {expected_after}; restore the data directory from a replica or a backup")]
    LogGap {
        dir: PathBuf,
        expected_after: u64,
        found: u64,
    },
    #[error("the vote fence marker in {dir} cannot be written or removed: {source}; check the directory's permissions and free space")]
    Fence {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("snapshot header is damaged: {0}")]
    BadSnapshotHeader(String),
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error("a thread panicked half way through a turn of the replicated log, whose state is now unknown (see the panic above)")]
    Panicked,
    #[error("the consensus thread has stopped")]
    Stopped,
}
