//! Measures WAL group-commit throughput: batches of records, one `fdatasync`
//! per batch, on the file system holding the directory given (default: a new
//! directory under the system temp dir, removed afterwards).
//!
//! ```text
//! cargo test -p storage --release --no-run
//! target/release/examples/wal_throughput [DIR] [BATCHES] [RECORDS_PER_BATCH] [PAYLOAD_BYTES]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use storage::{StorageError, Wal, WalOptions};

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), StorageError> {
    let (dir, remove) = match std::env::args().nth(1).filter(|d| d != "-") {
        Some(d) => (PathBuf::from(d), false),
        None => (
            std::env::temp_dir().join(format!("wal-throughput-{}", std::process::id())),
            true,
        ),
    };
    let batches = arg(2, 5_000);
    let per_batch = arg(3, 100);
    let payload_bytes = arg(4, 100);

    let (mut wal, recovered) = Wal::open(&dir, WalOptions::default())?;
    let mut index = recovered.last().map_or(0, |r| r.index);
    let payload = vec![0x5au8; payload_bytes];
    let mut batch: Vec<(u64, &[u8])> = Vec::with_capacity(per_batch);

    let start = Instant::now();
    for _ in 0..batches {
        batch.clear();
        for _ in 0..per_batch {
            index += 1;
            batch.push((index, &payload));
        }
        wal.append(&batch)?;
        wal.sync()?;
    }
    let secs = start.elapsed().as_secs_f64();
    let records = (batches * per_batch) as f64;
    println!(
        "{batches} batches x {per_batch} records x {payload_bytes} B in {secs:.2} s: \
         {:.0} records/s, {:.0} fdatasync/s, {:.1} MiB/s ({} segments) in {}",
        records / secs,
        batches as f64 / secs,
        records * (payload_bytes + 20) as f64 / secs / (1 << 20) as f64,
        wal.segment_count(),
        dir.display(),
    );
    drop(wal);
    if remove {
        std::fs::remove_dir_all(&dir).map_err(|source| StorageError::Io {
            context: format!("removing {}", dir.display()),
            source,
        })?;
    }
    Ok(())
}
