//! `statesize`: the latency one client sees while loaders grow the data to
//! gigabytes of 10 KB values — ConCoord's state-scalability experiment, and
//! the stalls a large ZooKeeper suffers while it snapshots (with the
//! default snapCount a snapshot is taken every 50k-100k writes, several
//! times on the way). Each probe client alternates a small setData and a
//! getData on a znode of its own; their latencies are grouped by how much
//! data the tree held. One probe answers about 330 times in a 128 MB step,
//! so that a step's p99.9 would be its single worst probe: four make it the
//! second worst of about 1300, and the max stays reported beside it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use client::{Client, CreateMode};

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
    /// Probe sessions, each with one setData and getData at a time.
    #[arg(long, default_value_t = 4)]
    pub probes: usize,
}

impl StateSizeArgs {
    pub fn flags(&self) -> String {
        format!(
            "--megabytes {} --value-size {} --loaders {} --step-megabytes {} --probes {}",
            self.megabytes, self.value_size, self.loaders, self.step_megabytes, self.probes
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
    let probes = load::connect(deployment.connect_string(), args.probes.max(1)).await?;
    m.setting("probe sessions", probes.len());
    client::recipes::ensure_path(&probes[0], "/bench/state").await?;
    load::create_all(&loaders, parents, Bytes::new(), 8, "parents").await?;
    for (i, probe) in probes.iter().enumerate() {
        probe
            .create(&probe_path(i), b"", CreateMode::Persistent)
            .await
            .with_context(|| format!("creating {}", probe_path(i)))?;
    }

    let total = leaves.len();
    let loaded = Arc::new(AtomicUsize::new(0));
    let loading_done = Arc::new(AtomicBool::new(false));
    let spending = deployment.cpu_clock().start();
    let loading = {
        let (loaders, loaded) = (loaders.clone(), loaded.clone());
        let done = loading_done.clone();
        let value = Bytes::from(vec![b'x'; args.value_size]);
        tokio::spawn(async move {
            let loaded_all = load_in_slices(&loaders, leaves, value, &loaded).await;
            done.store(true, Ordering::Relaxed);
            loaded_all
        })
    };

    let step = (args.step_megabytes * (1 << 20) / args.value_size.max(1)).max(1);
    let probing: Vec<_> = probes
        .iter()
        .enumerate()
        .map(|(i, probe)| {
            let (probe, loaded) = (probe.clone(), loaded.clone());
            let done = loading_done.clone();
            tokio::spawn(async move {
                probe_until(&probe, &probe_path(i), &done, &loaded, total, step).await
            })
        })
        .collect();
    let mut last_report = Instant::now();
    let mut stolen = StolenByStep::new();
    while !loading.is_finished() {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stolen.sample(step_of(loaded.load(Ordering::Relaxed), total, step));
        if last_report.elapsed().as_secs() >= 5 {
            let mb = loaded.load(Ordering::Relaxed) * args.value_size / (1 << 20);
            eprintln!("  {mb} of {} MB loaded", args.megabytes);
            last_report = Instant::now();
        }
    }
    loading.await??;
    let mut steps: Vec<Latencies> = Vec::new();
    for probed in probing {
        let probed = probed.await??;
        if steps.len() < probed.len() {
            steps.resize_with(probed.len(), Latencies::default);
        }
        for (merged, latencies) in steps.iter_mut().zip(&probed) {
            merged.merge(latencies);
        }
    }
    let mut overall = Latencies::default();
    for latencies in &steps {
        overall.merge(latencies);
    }
    let spent = spending.spent();
    let mb_per_step = (step * args.value_size) as f64 / MIB;
    for (i, latencies) in steps.iter().enumerate() {
        if latencies.count() > 0 {
            let from = i as f64 * mb_per_step;
            m.rows.push(
                Row::new(format!("{from:.0}-{:.0} MB", from + mb_per_step))
                    .at(from + mb_per_step / 2.0)
                    .latencies(latencies)
                    .metric_if_known("stolen_ms", stolen.in_step(i)),
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
    m.notes.push(format!(
        "a probe request is a setData then a getData of a small znode, by each of {} probe sessions",
        probes.len()
    ));
    m.notes.push(
        "whole run cpu_us_per_op: the servers' CPU over the load, per znode created or probe"
            .into(),
    );
    m.notes.push(
        "stolen_ms: CPU time the hypervisor took from this machine's CPUs while they were \
         ready to run (steal in /proc/stat), summed over the CPUs: a stall it lines up with \
         was not the server's doing"
            .into(),
    );
    load::close_all(loaders).await;
    load::close_all(probes).await;
    Ok(m)
}

/// Creates `leaves`, counting them in `loaded` a slice at a time so that
/// the probes can tell how much is loaded.
async fn load_in_slices(
    loaders: &[Client],
    leaves: Vec<String>,
    value: Bytes,
    loaded: &AtomicUsize,
) -> anyhow::Result<()> {
    let mut done = 0;
    for slice in leaves.chunks(1000) {
        load::create_all(loaders, slice.to_vec(), value.clone(), 8, "loading").await?;
        done += slice.len();
        loaded.store(done, Ordering::Relaxed);
    }
    Ok(())
}

fn probe_path(i: usize) -> String {
    format!("/bench/state-probe-{i}")
}

/// One probe session's latencies by step, until `done` is set.
async fn probe_until(
    probe: &Client,
    path: &str,
    done: &AtomicBool,
    loaded: &AtomicUsize,
    total: usize,
    step: usize,
) -> anyhow::Result<Vec<Latencies>> {
    let mut steps: Vec<Latencies> = Vec::new();
    while !done.load(Ordering::Relaxed) {
        let bucket = step_of(loaded.load(Ordering::Relaxed), total, step);
        let started = Instant::now();
        probe.set_data(path, b"probe", None).await?;
        probe.get_data(path).await?;
        if steps.len() <= bucket {
            steps.resize_with(bucket + 1, Latencies::default);
        }
        steps[bucket].record(started.elapsed());
    }
    Ok(steps)
}

/// The hypervisor's steal (`launch::stolen_time`) over each step, read
/// as the load goes: a virtual machine's host can stall every process in
/// it, and a probe's worst latency should say when it did.
struct StolenByStep {
    last: Option<Duration>,
    steps: Vec<Duration>,
}

impl StolenByStep {
    fn new() -> Self {
        StolenByStep {
            last: launch::stolen_time(),
            steps: Vec::new(),
        }
    }

    /// Counts the steal since the last sample in `step`.
    fn sample(&mut self, step: usize) {
        self.count(step, launch::stolen_time());
    }

    /// Counts in `step` the steal between the last reading and `now`.
    fn count(&mut self, step: usize, now: Option<Duration>) {
        let (Some(last), Some(now)) = (self.last, now) else {
            return;
        };
        if self.steps.len() <= step {
            self.steps.resize(step + 1, Duration::ZERO);
        }
        self.steps[step] += now.saturating_sub(last);
        self.last = Some(now);
    }

    fn in_step(&self, step: usize) -> Option<f64> {
        self.last?;
        Some(self.steps.get(step).map_or(0.0, |d| d.as_secs_f64() * 1e3))
    }
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
    fn steal_is_counted_in_the_step_it_was_sampled_in() {
        let ms = Duration::from_millis;
        let mut stolen = StolenByStep {
            last: Some(ms(1000)),
            steps: Vec::new(),
        };
        stolen.count(1, Some(ms(1030)));
        stolen.count(1, Some(ms(1040)));
        stolen.count(0, None);
        stolen.count(3, Some(ms(1045)));
        assert_eq!(stolen.in_step(0), Some(0.0));
        assert_eq!(stolen.in_step(1), Some(40.0));
        assert_eq!(stolen.in_step(3), Some(5.0));
        assert_eq!(stolen.in_step(9), Some(0.0));
        let unknown = StolenByStep {
            last: None,
            steps: Vec::new(),
        };
        assert_eq!(unknown.in_step(0), None);
    }

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
