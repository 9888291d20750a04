//! `failover`: a writer records every acknowledged write while the leader
//! is killed (SIGKILL) or, with `--stop term`, stopped gracefully
//! (SIGTERM: a Paddock leader hands leadership over first); the
//! unavailability gap is the longest time between two acknowledged writes
//! from the last one before each stop until one is acknowledged after the
//! stopped server has exited — ConCoord's leader-failure experiment.
//! Afterwards every acknowledged write must still be there.
//!
//! Writes then run `settle` seconds more, and the longest gap there is
//! reported apart, beside the longest in the `settle` seconds before the
//! stop, when no server was stopping: on a disk shared by the servers an
//! fdatasync stalls now and then whatever they do (10-100 ms about once a
//! second on the machine these were written on, a bare fdatasync loop
//! included). Counted into the stop's gap, those stalls made a 10 ms
//! hand-over of leadership read as 50-250 ms.
//!
//! With `--start` the tool stops the leader it finds, restarts it once a
//! new leader serves, and repeats; with `--target` it is given the
//! leader's PID and stops it once.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use client::{Client, CreateMode, Error};

use crate::deploy::Deployment;
use crate::measure::{Latencies, Measurement, Row};

#[derive(clap::Args, Clone, Debug)]
pub struct FailoverArgs {
    /// Leaders to stop, one after the other (with --start).
    #[arg(long, default_value_t = 5)]
    pub kills: usize,
    /// Seconds of writing before each kill and after the writes resume.
    #[arg(long, default_value_t = 3.0)]
    pub settle: f64,
    /// With --target: the PID of the leader's process to kill.
    #[arg(long)]
    pub leader_pid: Option<u32>,
    /// How the leader is stopped.
    #[arg(long, value_enum, default_value_t = Stop::Kill)]
    pub stop: Stop,
}

impl FailoverArgs {
    /// The workload's name: a graceful stop is reported apart from a
    /// crash.
    pub fn name(&self) -> &'static str {
        match self.stop {
            Stop::Kill => "failover",
            Stop::Term => "failover-sigterm",
        }
    }
}

/// How the leader is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Stop {
    /// SIGKILL: a crash; the others must notice the silence and elect.
    Kill,
    /// SIGTERM: a graceful stop, as for an upgrade or a restart.
    Term,
}

impl Stop {
    fn name(self) -> &'static str {
        match self {
            Stop::Kill => "kill",
            Stop::Term => "term",
        }
    }
}

impl FailoverArgs {
    pub fn flags(&self) -> String {
        let mut flags = format!("--kills {} --settle {}", self.kills, self.settle);
        if let Some(pid) = self.leader_pid {
            flags += &format!(" --leader-pid {pid}");
        }
        if self.stop != Stop::Kill {
            flags += &format!(" --stop {}", self.stop.name());
        }
        flags
    }
}

/// Session timeout of the writer: long enough that its session outlives
/// an election on either system.
const SESSION_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest a failover may take before the run is declared failed.
const RECOVERY_LIMIT: Duration = Duration::from_secs(60);
/// How long a leader stopped with SIGTERM may take to exit before it is
/// killed, when it is restarted.
const STOP_GRACE: Duration = Duration::from_secs(30);
const KEY: &str = "/bench/failover";

pub async fn run(args: &FailoverArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    let local = deployment.cluster().is_some();
    if !local && args.leader_pid.is_none() {
        bail!("failover kills the leader: use --start SYSTEM --servers 3, or --target with --leader-pid");
    }
    let mut m = Measurement::new("failover", deployment.label(), String::new());
    m.setting("writer session timeout s", SESSION_TIMEOUT.as_secs());
    m.setting("leader stopped by", args.stop.name());
    let options = client::ConnectOptions::new().session_timeout(SESSION_TIMEOUT);
    let zk = Client::connect(deployment.connect_string(), options)
        .await
        .context("connecting the writer")?;
    client::recipes::ensure_path(&zk, "/bench").await?;
    match zk.create(KEY, b"0", CreateMode::Persistent).await {
        Ok(_) | Err(Error::NodeExists { .. }) => {}
        Err(error) => return Err(error).context("creating /bench/failover"),
    }
    let cpu_before = deployment.servers_cpu_time();
    let mut writer = Writer::new(zk.clone());
    let settle = Duration::from_secs_f64(args.settle);
    let kills = if local { args.kills } else { 1 };
    let mut gaps = Latencies::default();
    let mut settle_gaps = Latencies::default();
    let mut quiet_gaps = Latencies::default();
    for kill in 0..kills {
        let quiet_from = Instant::now();
        writer.write_for(settle).await;
        let quiet_gap = writer.longest_gap_since(quiet_from);
        let killed_at = Instant::now();
        // The gap counts from the last write acknowledged before the stop:
        // a stall before it (a slow fsync) is not the failover's.
        let last_ack_before = writer.acks.last().copied().unwrap_or(killed_at);
        let (killed, index) =
            tokio::task::block_in_place(|| stop_leader(deployment, args.leader_pid, args.stop))?;
        eprintln!("  {} {} of {kills}: {killed}", args.stop.name(), kill + 1);
        // Keep writing until a write is acknowledged after the stopped
        // server has exited, then a while more.
        loop {
            if killed_at.elapsed() > RECOVERY_LIMIT {
                bail!("no write was acknowledged within {RECOVERY_LIMIT:?} of stopping {killed} and its exit");
            }
            let exited = has_exited(deployment, index, args.leader_pid);
            let acked_before = writer.acks.len();
            writer.write_once().await;
            if exited && writer.acks.len() > acked_before {
                break;
            }
        }
        let gap = writer.longest_gap_since(last_ack_before);
        let resumed = Instant::now();
        writer.write_for(settle).await;
        let settle_gap = writer.longest_gap_since(resumed);
        eprintln!(
            "    gap {:.3} s (longest after it {:.3} s, before the stop {:.3} s)",
            gap.as_secs_f64(),
            settle_gap.as_secs_f64(),
            quiet_gap.as_secs_f64()
        );
        gaps.record(gap);
        settle_gaps.record(settle_gap);
        quiet_gaps.record(quiet_gap);
        m.rows.push(
            Row::new(format!("{} {}", args.stop.name(), kill + 1))
                .metric("gap_s", gap.as_secs_f64())
                .metric("settle_max_gap_s", settle_gap.as_secs_f64())
                .metric("quiet_max_gap_s", quiet_gap.as_secs_f64()),
        );
        if let Some(index) = index {
            tokio::task::block_in_place(|| restart_stopped(deployment, index))?;
        }
    }
    let cpu_spent = deployment.servers_cpu_since(cpu_before);
    let last = writer.last_acked.context("no write was acknowledged")?;
    zk.sync(KEY).await?;
    let (data, _) = zk.get_data(KEY).await?;
    let stored: u64 = std::str::from_utf8(&data.unwrap_or_default())?.parse()?;
    ensure!(
        stored >= last,
        "acknowledged write {last} was lost: the znode holds {stored}"
    );
    m.rows.push(
        Row::new("all kills")
            .metric("median_gap_s", gaps.quantile(0.5).as_secs_f64())
            .metric("max_gap_s", gaps.quantile(1.0).as_secs_f64())
            .metric("settle_max_gap_s", settle_gaps.quantile(1.0).as_secs_f64())
            .metric("quiet_max_gap_s", quiet_gaps.quantile(1.0).as_secs_f64())
            .metric("acknowledged_writes", writer.acks.len() as f64)
            .metric("failed_writes", writer.failures as f64)
            .cpu_per_op(cpu_spent, writer.acks.len() as u64),
    );
    m.notes.push(
        "gap: the longest time between two acknowledged writes from the last one before the stop until one acknowledged after the stopped server exited; settle_max_gap_s: the longest in the settle after that; quiet_max_gap_s: the longest in the settle before the stop, with no server stopping (the disk's own fdatasync stalls)".into(),
    );
    m.notes.push(super::STOPPING_CPU_NOTE.into());
    m.notes.push(format!(
        "every acknowledged write survived: the last, #{last}, reads back as {stored}"
    ));
    zk.close().await;
    Ok(m)
}

/// One synchronous writer: each write stores the next number in KEY.
struct Writer {
    zk: Client,
    next: u64,
    last_acked: Option<u64>,
    acks: Vec<Instant>,
    failures: u64,
}

impl Writer {
    fn new(zk: Client) -> Writer {
        Writer {
            zk,
            next: 1,
            last_acked: None,
            acks: Vec::new(),
            failures: 0,
        }
    }

    async fn write_once(&mut self) {
        let value = self.next.to_string();
        self.next += 1;
        let call = self.zk.set_data(KEY, value.as_bytes(), None);
        match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(Ok(_)) => {
                self.last_acked = Some(self.next - 1);
                self.acks.push(Instant::now());
            }
            Ok(Err(_)) | Err(_) => {
                self.failures += 1;
                // ConnectionLoss comes at once while the client reconnects.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }

    async fn write_for(&mut self, duration: Duration) {
        let end = Instant::now() + duration;
        while Instant::now() < end {
            self.write_once().await;
        }
    }

    fn longest_gap_since(&self, since: Instant) -> Duration {
        self.acks
            .iter()
            .filter(|&&t| t >= since)
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| *w[1] - *w[0])
            .max()
            .unwrap_or_default()
    }
}

/// Whether the stopped server's process has exited: the one this tool
/// started (`index`), or the one at `pid`.
fn has_exited(deployment: &mut Deployment, index: Option<usize>, pid: Option<u32>) -> bool {
    match (index, pid) {
        (Some(index), _) => {
            let cluster = deployment.cluster().expect("started deployment");
            !cluster.server(index).is_running()
        }
        (None, Some(pid)) => launch::has_exited(pid),
        (None, None) => true,
    }
}

/// Stops the leader as `stop` says, without waiting for a graceful stop to
/// end (the writer must go on meanwhile). Returns what was stopped and,
/// when this tool started it, the server's index in the cluster.
fn stop_leader(
    deployment: &mut Deployment,
    pid: Option<u32>,
    stop: Stop,
) -> anyhow::Result<(String, Option<usize>)> {
    if let Some(pid) = pid {
        match stop {
            Stop::Kill => launch::kill(pid),
            Stop::Term => launch::terminate(pid),
        }
        return Ok((format!("PID {pid}"), None));
    }
    let cluster = deployment.cluster().expect("started deployment");
    let leader = cluster.wait_leader(None, RECOVERY_LIMIT)?;
    let server = cluster.server(leader);
    match stop {
        Stop::Kill => server.kill(),
        Stop::Term => server.terminate(),
    }
    Ok((format!("leader server.{}", server.id()), Some(leader)))
}

/// Restarts the stopped server once it has exited and waits for it to
/// serve.
fn restart_stopped(deployment: &mut Deployment, index: usize) -> anyhow::Result<()> {
    let server = deployment
        .cluster()
        .expect("started deployment")
        .server(index);
    server.stop(STOP_GRACE);
    server.restart()?;
    server.wait_serving(RECOVERY_LIMIT)?;
    Ok(())
}
