//! `statesize`: the latency one client sees while loaders grow the data to
//! gigabytes of 10 KB values — ConCoord's state-scalability experiment, and
//! the stalls a large ZooKeeper suffers while it snapshots (with the
//! default snapCount a snapshot is taken every 50k-100k writes, several
//! times on the way). The probe client alternates a small setData and a
//! getData; its latencies are grouped by how much data the tree held.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use bytes::Bytes;
use client::CreateMode;

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Latencies, Measurement, Row, MIB};

#[derive(clap::Args, Clone, Debug)]
pub struct StateSizeArgs {
    /// Data to grow the tree to, in MB.
    #[arg(long, default_value_t = 2048)]
    pub megabytes: usize,
    /// Bytes per loaded znode.
    #[arg(long, default_value_t = 10_240)]
    pub value_size: usize,
    /// Loader sessions, each with 8 creates outstanding.
    #[arg(long, default_value_t = 4)]
    pub loaders: usize,
    /// Latency is reported for each step of this many MB.
    #[arg(long, default_value_t = 128)]
    pub step_megabytes: usize,
}

impl StateSizeArgs {
    pub fn flags(&self) -> String {
        format!(
            "--megabytes {} --value-size {} --loaders {} --step-megabytes {}",
            self.megabytes, self.value_size, self.loaders, self.step_megabytes
        )
    }
}

pub async fn run(args: &StateSizeArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    let mut m = Measurement::new("statesize", deployment.label(), String::new());
    m.setting("loaded value bytes", args.value_size);
    m.setting("loader sessions", args.loaders);
    m.setting("target MB", args.megabytes);
    let count = args.megabytes * (1 << 20) / args.value_size.max(1);
    let (parents, leaves) = load::tree_paths("/bench/state", count);
    let loaders = load::connect(deployment.connect_string(), args.loaders).await?;
    let probe = load::connect(deployment.connect_string(), 1)
        .await?
        .remove(0);
    client::recipes::ensure_path(&probe, "/bench/state").await?;
    load::create_all(&loaders, parents, Bytes::new(), 8, "parents").await?;
    probe
        .create("/bench/state-probe", b"", CreateMode::Persistent)
        .await
        .context("creating /bench/state-probe")?;

    let total = leaves.len();
    let loaded = Arc::new(AtomicUsize::new(0));
    let spending = deployment.cpu_clock().start();
    let loading = {
        let (loaders, loaded) = (loaders.clone(), loaded.clone());
        let value = Bytes::from(vec![b'x'; args.value_size]);
        tokio::spawn(async move {
            let mut done = 0;
            // In slices so the probe can tell how much is loaded.
            for slice in leaves.chunks(1000) {
                load::create_all(&loaders, slice.to_vec(), value.clone(), 8, "loading").await?;
                done += slice.len();
                loaded.store(done, Ordering::Relaxed);
            }
            Ok::<(), anyhow::Error>(())
        })
    };

    let step = (args.step_megabytes * (1 << 20) / args.value_size.max(1)).max(1);
    let mut steps: Vec<Latencies> = Vec::new();
    let mut overall = Latencies::default();
    let mut last_report = Instant::now();
    while !loading.is_finished() {
        let bucket = step_of(loaded.load(Ordering::Relaxed), total, step);
        let started = Instant::now();
        probe.set_data("/bench/state-probe", b"probe", None).await?;
        probe.get_data("/bench/state-probe").await?;
        let latency = started.elapsed();
        if steps.len() <= bucket {
            steps.resize_with(bucket + 1, Latencies::default);
        }
        steps[bucket].record(latency);
        overall.record(latency);
        if last_report.elapsed().as_secs() >= 5 {
            let mb = loaded.load(Ordering::Relaxed) * args.value_size / (1 << 20);
            eprintln!("  {mb} of {} MB loaded", args.megabytes);
            last_report = Instant::now();
        }
    }
    loading.await??;
    let spent = spending.spent();
    let mb_per_step = (step * args.value_size) as f64 / MIB;
    for (i, latencies) in steps.iter().enumerate() {
        if latencies.count() > 0 {
            let from = i as f64 * mb_per_step;
            m.rows.push(
                Row::new(format!("{from:.0}-{:.0} MB", from + mb_per_step))
                    .at(from + mb_per_step / 2.0)
                    .latencies(latencies),
            );
        }
    }
    m.rows.push(
        Row::new("whole run")
            .latencies(&overall)
            .cpu_per_op(
                spent,
                (loaded.load(Ordering::Relaxed) as u64) + overall.count(),
            )
            .with_cdf(&overall),
    );
    if let Some(rss) = deployment.rss_bytes() {
        m.rows
            .push(Row::new("server at the end").metric("rss_mb", rss as f64 / MIB));
    }
    m.notes
        .push("a probe request is a setData then a getData of a small znode".into());
    m.notes.push(
        "whole run cpu_us_per_op: the servers' CPU over the load, per znode created or probe"
            .into(),
    );
    load::close_all(loaders).await;
    probe.close().await;
    Ok(m)
}

/// The step a probe belongs to, with `loaded` of `total` znodes created,
/// `step` znodes a step. The znodes past the last whole step, and probes
/// sent after the last create, belong to the last step, not to one past
/// the target.
fn step_of(loaded: usize, total: usize, step: usize) -> usize {
    let last = (total / step).max(1) - 1;
    (loaded / step).min(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_after_the_last_create_count_in_the_last_step() {
        assert_eq!(step_of(0, 1000, 100), 0);
        assert_eq!(step_of(999, 1000, 100), 9);
        assert_eq!(step_of(1000, 1000, 100), 9);
        assert_eq!(step_of(0, 0, 100), 0);
        // 64 MB of 10 KB values in 16 MB steps: 6553 znodes, 1638 a step.
        assert_eq!(step_of(6553, 6553, 1638), 3);
        assert_eq!(step_of(50, 60, 100), 0);
    }
}
