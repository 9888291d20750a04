use std::fs::File;
use std::path::{Path, PathBuf};

use crate::java_io::ReadError;

/// Why a migration stopped. Each names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is damaged: {source}; nothing was written (ZooKeeper itself would not start on it either)", file.display())]
    Damaged { file: PathBuf, source: ReadError },
    #[error("{} is damaged: {source}; nothing was written. ZooKeeper would start from an older snapshot instead: to import from that one, move this file aside and run the import again", file.display())]
    DamagedSnapshot { file: PathBuf, source: ReadError },
    #[error("no finished ZooKeeper snapshot (snapshot.<zxid>) in {}{}: give ZooKeeper's dataDir (or its version-2 directory)", dir.display(), passed_over(unfinished))]
    NoSnapshot {
        dir: PathBuf,
        unfinished: Vec<PathBuf>,
    },
    #[error("the ZooKeeper log jumps from zxid {before:#x} to {after:#x} ({}): a log file is missing; nothing was written", file.display())]
    LogGap {
        before: i64,
        after: i64,
        file: PathBuf,
    },
    #[error("the ZooKeeper data holds no transaction (zxid 0): start Paddock on an empty data directory instead")]
    NothingToImport,
    #[error("{} already holds data ({}); import into an empty directory", dir.display(), found.display())]
    NotEmpty { dir: PathBuf, found: PathBuf },
    #[error("Paddock's snapshot: {0}")]
    Consensus(#[from] consensus::Error),
    #[error("the Paddock snapshot in {} cannot be read: {source}", dir.display())]
    PaddockSnapshot {
        dir: PathBuf,
        source: tree::SnapshotError,
    },
    #[error("Paddock's log entry {index} is not a transaction this build can read: {source}")]
    PaddockEntry {
        index: u64,
        source: jute::DecodeError,
    },
    #[error("the tree read from {} is not whole: {source}", file.display())]
    Tree {
        file: PathBuf,
        source: tree::SnapshotError,
    },
}

/// Opens a file to read, or says which could not be.
pub(crate) fn open(path: &Path) -> Result<File, MigrateError> {
    File::open(path).map_err(|source| MigrateError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The unfinished snapshots an import passed over, named for the person
/// reading why it found none.
fn passed_over(unfinished: &[PathBuf]) -> String {
    match unfinished {
        [] => String::new(),
        files => format!(
            " ({} passed over: the server stopped while writing {})",
            files.len(),
            if files.len() == 1 { "it" } else { "them" }
        ),
    }
}
