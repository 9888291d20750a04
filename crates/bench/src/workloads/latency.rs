//! `latency`: one synchronous client creates, reads, overwrites and
//! deletes N znodes, one request at a time — the latency of a single
//! request with nothing queued before it (the ZooKeeper paper's latency
//! table, and the latency CDF of the ConCoord comparison). Beside them,
//! the data disk's own fdatasync time, the floor under a durable write.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use client::CreateMode;

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Latencies, Measurement, Row};

#[derive(clap::Args, Clone, Debug)]
pub struct LatencyArgs {
    /// Requests of each kind.
    #[arg(long, default_value_t = 10_000)]
    pub ops: usize,
    /// Bytes of data per create and set.
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
}

impl LatencyArgs {
    pub fn flags(&self) -> String {
        format!("--ops {} --value-size {}", self.ops, self.value_size)
    }
}

const KINDS: [&str; 4] = ["create", "get", "set", "delete"];

pub async fn run(args: &LatencyArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    let mut m = Measurement::new("latency", deployment.label(), String::new());
    m.setting("requests of each kind", args.ops);
    m.setting("value bytes", args.value_size);
    let clients = load::connect(deployment.connect_string(), 1).await?;
    let zk = &clients[0];
    client::recipes::ensure_path(zk, "/bench/latency").await?;
    let value = vec![b'x'; args.value_size];
    let paths: Vec<String> = (0..args.ops)
        .map(|i| format!("/bench/latency/n{i:08}"))
        .collect();
    let cpu = deployment.cpu_clock();
    for kind in KINDS {
        eprintln!("  {kind} x {}", args.ops);
        let mut latencies = Latencies::default();
        let began = Instant::now();
        let spending = cpu.start();
        for path in &paths {
            let started = Instant::now();
            match kind {
                "create" => zk
                    .create(path, &value, CreateMode::Persistent)
                    .await
                    .map(drop),
                "get" => zk.get_data(path).await.map(drop),
                "set" => zk.set_data(path, &value, None).await.map(drop),
                _ => zk.delete(path, None).await,
            }
            .with_context(|| format!("{kind} {path}"))?;
            latencies.record(started.elapsed());
        }
        m.rows.push(
            Row::new(kind)
                .throughput(&latencies, began.elapsed())
                .cpu_per_op(spending.spent(), latencies.count())
                .with_cdf(&latencies),
        );
    }
    load::close_all(clients).await;
    if let Some(dir) = deployment.data_dir() {
        let syncs = tokio::task::block_in_place(|| time_fdatasync(&dir, args.ops.min(1000)))
            .with_context(|| format!("timing fdatasync in {}", dir.display()))?;
        m.rows.push(Row::new("fdatasync").latencies(&syncs));
        m.notes.push(format!(
            "fdatasync: {} bytes appended then fdatasync'ed, one at a time, in the servers' data \
             directory: what every durable write waits for at least",
            SYNC_BYTES
        ));
    }
    Ok(m)
}

/// The bytes appended before each timed fdatasync: a small log record.
const SYNC_BYTES: usize = 1024;

fn time_fdatasync(dir: &Path, count: usize) -> std::io::Result<Latencies> {
    let mut file = tempfile::tempfile_in(dir)?;
    let record = vec![b'x'; SYNC_BYTES];
    let mut latencies = Latencies::default();
    for _ in 0..count {
        let started = Instant::now();
        file.write_all(&record)?;
        file.sync_data()?;
        latencies.record(started.elapsed());
    }
    Ok(latencies)
}

#[cfg(test)]
mod tests {
    #[test]
    fn fdatasync_is_timed_once_per_record() {
        let dir = tempfile::tempdir().unwrap();
        let syncs = super::time_fdatasync(dir.path(), 3).unwrap();
        assert_eq!(syncs.count(), 3);
        // the file was temporary: nothing is left behind
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
