//! `catchup`: a follower whose disk was replaced rejoins an ensemble that
//! holds gigabytes, while a client of the leader keeps writing and
//! reading. Being that far behind, it is sent the whole state: ZooKeeper's
//! leader sends a snapshot (SNAP), Paddock's streams its newest snapshot
//! file in pieces ahead of raft's snapshot message.
//!
//! Reported: the time from the wiped server's start until it has applied
//! everything the ensemble had applied when it was wiped; that state's
//! data over the time (MB/s), beside the disk's own rate of writing the
//! same amount sequentially; and the leader's client's latency before the
//! wipe and during the catch-up, which should not change.

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use client::{Client, CreateMode};

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Latencies, Measurement, Row, MIB};

#[derive(clap::Args, Clone, Debug)]
pub struct CatchupArgs {
    /// Data the ensemble holds when the follower is wiped, in MB.
    #[arg(long, default_value_t = 2048)]
    pub megabytes: usize,
    /// Bytes per loaded znode.
    #[arg(long, default_value_t = 10_240)]
    pub value_size: usize,
    /// Seconds the leader's client is timed before the wipe.
    #[arg(long, default_value_t = 5.0)]
    pub settle: f64,
}

impl CatchupArgs {
    pub fn flags(&self) -> String {
        format!(
            "--megabytes {} --value-size {} --settle {}",
            self.megabytes, self.value_size, self.settle
        )
    }
}

const ROOT: &str = "/bench/catchup";
const PROBE: &str = "/bench/catchup-probe";
/// How long the wiped server may take to catch up.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(600);
/// The most the disk's sequential write rate is timed over.
const DISK_SAMPLE_BYTES_MAX: usize = 256 << 20;

pub async fn run(args: &CatchupArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    deployment.check_quorum_survives_one("catchup", "wipes a server")?;
    let mut m = Measurement::new("catchup", deployment.label(), String::new());
    m.setting("loaded value bytes", args.value_size);
    // Before the load, while the page cache holds nothing of the run's.
    let disk_dir = deployment.data_dir().expect("checked above");
    let disk_bytes = (args.megabytes << 20).min(DISK_SAMPLE_BYTES_MAX);
    let disk = tokio::task::block_in_place(|| time_sequential_write(&disk_dir, disk_bytes))
        .with_context(|| format!("timing a sequential write in {}", disk_dir.display()))?;
    let data_bytes = load_data(args, deployment.connect_string()).await?;
    m.setting("data MB", format!("{:.0}", data_bytes as f64 / MIB));

    let (leader, follower) = tokio::task::block_in_place(|| roles(deployment))?;
    let cluster = deployment.cluster().expect("checked above");
    let probe = Probe::start(&cluster.servers()[leader].client_address()).await?;
    tokio::time::sleep(Duration::from_secs_f64(args.settle)).await;

    let wiped = Instant::now();
    let CatchUp {
        restarted,
        caught_up,
        leader_cpu,
        follower_cpu,
    } = tokio::task::block_in_place(|| wipe_and_catch_up(deployment, leader, follower))?;
    let took = caught_up.duration_since(restarted);
    let data_mb = data_bytes as f64 / MIB;
    let cpu_ms_per_mb = |cpu: Option<Duration>| cpu.map(|cpu| cpu.as_secs_f64() * 1e3 / data_mb);
    let samples = probe.stop().await?;

    let (before, during) = split(&samples, wiped, caught_up);
    m.rows.push(Row::new("before the wipe").latencies(&before));
    m.rows
        .push(Row::new("during the catch-up").latencies(&during));
    m.rows.push(
        Row::new("catch-up")
            .metric("seconds", took.as_secs_f64())
            .metric("mb_per_sec", data_mb / took.as_secs_f64())
            .metric(
                "disk_mb_per_sec",
                disk_bytes as f64 / MIB / disk.as_secs_f64(),
            )
            .metric_if_known("leader_cpu_ms_per_mb", cpu_ms_per_mb(leader_cpu))
            .metric_if_known("follower_cpu_ms_per_mb", cpu_ms_per_mb(follower_cpu)),
    );
    m.notes.push(
        "the leader's client alternates a setData and a getData of a small znode, timed before \
         the wipe and from the wipe until the catch-up; catch-up: from the wiped server's start \
         until it applied the zxid the leader had at the wipe; the wiped server's data is moved \
         aside and deleted after the catch-up, as a replaced disk would be elsewhere"
            .into(),
    );
    m.notes.push(
        "leader_cpu_ms_per_mb: the leader's CPU over the catch-up, its client's requests \
         included; follower_cpu_ms_per_mb: all the wiped server's CPU from its restart until \
         caught up; each per MB of data held"
            .into(),
    );
    m.notes.push(format!(
        "disk_mb_per_sec: {} MB written sequentially then fdatasync'ed in the first server's \
         directory, before the load",
        disk_bytes >> 20
    ));
    Ok(m)
}

/// Creates `megabytes` of data; returns its bytes.
async fn load_data(args: &CatchupArgs, connect: &str) -> anyhow::Result<usize> {
    let count = args.megabytes * (1 << 20) / args.value_size.max(1);
    let (parents, leaves) = load::tree_paths(ROOT, count);
    let loaders = load::connect(connect, 4).await?;
    client::recipes::ensure_path(&loaders[0], ROOT).await?;
    load::create_all(&loaders, parents, Bytes::new(), 8, "parents").await?;
    let value = Bytes::from(vec![b'x'; args.value_size]);
    load::create_all(&loaders, leaves, value, 8, "loading").await?;
    loaders[0]
        .create(PROBE, b"", CreateMode::Persistent)
        .await
        .with_context(|| format!("creating {PROBE}"))?;
    load::close_all(loaders).await;
    Ok(count * args.value_size)
}

/// The leader and the follower to wipe (the first that is not the leader).
fn roles(deployment: &mut Deployment) -> anyhow::Result<(usize, usize)> {
    let cluster = deployment.cluster().expect("checked by run");
    let leader = cluster.wait_leader(None, Duration::from_secs(60))?;
    let follower = (0..cluster.servers().len())
        .find(|&i| i != leader)
        .expect("an ensemble has a follower");
    Ok((leader, follower))
}

/// A wiped follower's catch-up: when it was restarted and when it had
/// caught up, and the CPU time it took, the leader's and its own.
struct CatchUp {
    restarted: Instant,
    caught_up: Instant,
    leader_cpu: Option<Duration>,
    follower_cpu: Option<Duration>,
}

/// Kills the follower, wipes its data, restarts it and waits until it has
/// applied what the leader had applied at the wipe.
fn wipe_and_catch_up(
    deployment: &mut Deployment,
    leader: usize,
    follower: usize,
) -> anyhow::Result<CatchUp> {
    let cluster = deployment.cluster().expect("checked by run");
    let server = cluster.server(follower);
    server.kill();
    // Removed once caught up: deleting the gigabytes a follower held, on
    // the disk this machine's servers share, is not catching up (while a
    // delete took 0.7-1.7 s, the leader's client's p99 was 22-50 ms).
    let old_data = server.set_data_aside()?;
    let target = cluster.servers()[leader]
        .zxid()
        .context("the leader did not answer srvr")?;
    let leader_pid = cluster.servers()[leader].pid();
    let leader_cpu_before = leader_pid.and_then(launch::cpu_time);
    let server = cluster.server(follower);
    let started = Instant::now();
    server.restart()?;
    server.wait_applied(target, CATCH_UP_LIMIT)?;
    let caught_up = Instant::now();
    let follower_cpu = server.pid().and_then(launch::cpu_time);
    let leader_cpu = leader_pid
        .and_then(launch::cpu_time)
        .zip(leader_cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    old_data.remove()?;
    eprintln!(
        "  server.{} wiped, caught up in {:.2} s",
        server.id(),
        caught_up.duration_since(started).as_secs_f64()
    );
    Ok(CatchUp {
        restarted: started,
        caught_up,
        leader_cpu,
        follower_cpu,
    })
}

/// A client of one server timing a setData then a getData, over and over.
struct Probe {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<anyhow::Result<Vec<(Instant, Duration)>>>,
}

impl Probe {
    async fn start(address: &str) -> anyhow::Result<Probe> {
        let zk = load::connect(address, 1).await?.remove(0);
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(probe_until(zk, stop.clone()));
        Ok(Probe { stop, task })
    }

    /// Each request pair's start and latency.
    async fn stop(self) -> anyhow::Result<Vec<(Instant, Duration)>> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await?
    }
}

async fn probe_until(
    zk: Client,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Vec<(Instant, Duration)>> {
    let mut samples = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        zk.set_data(PROBE, b"probe", None).await?;
        zk.get_data(PROBE).await?;
        samples.push((started, started.elapsed()));
    }
    zk.close().await;
    Ok(samples)
}

/// The latencies of the probes sent before `wiped`, and of those sent from
/// then until `caught_up`.
fn split(
    samples: &[(Instant, Duration)],
    wiped: Instant,
    caught_up: Instant,
) -> (Latencies, Latencies) {
    let (mut before, mut during) = (Latencies::default(), Latencies::default());
    for &(sent, latency) in samples {
        if sent < wiped {
            before.record(latency);
        } else if sent < caught_up {
            during.record(latency);
        }
    }
    (before, during)
}

/// The time to write `bytes` sequentially into a new file in `dir` and
/// fdatasync it.
fn time_sequential_write(dir: &Path, bytes: usize) -> std::io::Result<Duration> {
    const CHUNK_BYTES: usize = 1 << 20;
    let mut file = tempfile::tempfile_in(dir)?;
    let chunk = vec![b'x'; CHUNK_BYTES];
    let started = Instant::now();
    for _ in 0..bytes.div_ceil(CHUNK_BYTES) {
        file.write_all(&chunk)?;
    }
    file.sync_data()?;
    Ok(started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_are_split_by_when_they_were_sent() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let latency = |ms| Duration::from_millis(ms);
        let samples = [
            (at(0), latency(1)),
            (at(10), latency(2)),
            (at(20), latency(30)),
            (at(60), latency(4)),
            (at(100), latency(5)),
        ];
        let (before, during) = split(&samples, at(20), at(100));
        assert_eq!(before.count(), 2);
        assert_eq!(during.count(), 2);
        assert!(during.quantile(1.0) >= Duration::from_millis(30));
    }
}
