//! `rolling-restart`: every server of an ensemble is stopped gracefully
//! (SIGTERM), restarted and left to catch up, one after the other, the
//! followers first and the leader last, as operators upgrade an ensemble,
//! while `--writers` sessions each write their own znode synchronously.
//!
//! What a client should see: no session expires, no acknowledged write is
//! lost, and the only errors are ConnectionLoss, which a client retries.
//! Reported per restart: the longest gap between two acknowledged writes of
//! any writer, and the errors by kind; then the whole run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use client::{Client, CreateMode, Error};

use crate::deploy::Deployment;
use crate::measure::{Latencies, Measurement, Row};

#[derive(clap::Args, Clone, Debug)]
pub struct RollingRestartArgs {
    /// Sessions, each writing its own znode one write at a time.
    #[arg(long, default_value_t = 8)]
    pub writers: usize,
    /// Seconds of writing before the first restart and after each one
    /// (once the restarted server serves again).
    #[arg(long, default_value_t = 2.0)]
    pub settle: f64,
}

impl RollingRestartArgs {
    pub fn flags(&self) -> String {
        format!("--writers {} --settle {}", self.writers, self.settle)
    }
}

/// The writers' session timeout: ZooKeeper's default range tops out at 20
/// ticks of 2 s; 10 s is what a client of a latency-minded service asks.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping server may take to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// How long a restarted server may take to serve again.
const START_LIMIT: Duration = Duration::from_secs(60);
const ROOT: &str = "/bench/rolling";

pub async fn run(
    args: &RollingRestartArgs,
    deployment: &mut Deployment,
) -> anyhow::Result<Measurement> {
    deployment.check_quorum_survives_one("rolling-restart", "restarts the servers")?;
    let mut m = Measurement::new("rolling-restart", deployment.label(), String::new());
    m.setting("writers", args.writers);
    m.setting("writer session timeout s", SESSION_TIMEOUT.as_secs());
    m.setting(
        "servers stopped by",
        "SIGTERM, followers first, leader last",
    );
    let cpu_before = deployment.servers_cpu_time();
    let writers = start_writers(deployment.connect_string(), args.writers).await?;
    let settle = Duration::from_secs_f64(args.settle);
    tokio::time::sleep(settle).await;

    let mut restarts = Vec::new();
    for index in restart_order(deployment)? {
        let began = Instant::now();
        let (name, was_leader) = tokio::task::block_in_place(|| restart(deployment, index))?;
        let served = began.elapsed();
        let role = if was_leader { "leader" } else { "follower" };
        eprintln!(
            "  {name} ({role}) restarted, serving after {:.2} s",
            served.as_secs_f64()
        );
        tokio::time::sleep(settle).await;
        restarts.push(Restart {
            was_leader,
            began,
            served,
            settled: Instant::now(),
        });
    }

    let reports = stop_writers(writers).await?;
    let cpu_spent = deployment.servers_cpu_since(cpu_before);
    check_acknowledged(deployment.connect_string(), &reports).await?;
    report(&mut m, &restarts, &reports, cpu_spent);
    Ok(m)
}

/// The followers in id order, then the leader: each leader change costs a
/// hand-off, so it happens once.
fn restart_order(deployment: &mut Deployment) -> anyhow::Result<Vec<usize>> {
    let cluster = deployment.cluster().expect("checked by run");
    let leader = cluster.wait_leader(None, START_LIMIT)?;
    let mut order: Vec<usize> = (0..cluster.servers().len())
        .filter(|&i| i != leader)
        .collect();
    order.push(leader);
    Ok(order)
}

/// Stops server `index` with SIGTERM, restarts it and waits until it
/// serves; returns its name and whether it led when stopped.
fn restart(deployment: &mut Deployment, index: usize) -> anyhow::Result<(String, bool)> {
    let cluster = deployment.cluster().expect("checked by run");
    let was_leader = cluster.leader() == Some(index);
    let server = cluster.server(index);
    let name = format!("server.{}", server.id());
    server.terminate();
    server.stop(STOP_GRACE);
    server.restart()?;
    server
        .wait_serving(START_LIMIT)
        .with_context(|| format!("{name} after its restart"))?;
    Ok((name, was_leader))
}

struct Restart {
    was_leader: bool,
    began: Instant,
    /// From the stop until the server served again.
    served: Duration,
    settled: Instant,
}

/// What one writer saw.
#[derive(Default)]
struct WriterReport {
    path: String,
    acks: Vec<Instant>,
    last_acked: Option<u64>,
    connection_losses: Vec<Instant>,
    expired: bool,
    /// Any other error, with when it happened.
    other_errors: Vec<(Instant, String)>,
}

struct Writers {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<WriterReport>>,
}

async fn start_writers(connect: &str, count: usize) -> anyhow::Result<Writers> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..count {
        let options = client::ConnectOptions::new().session_timeout(SESSION_TIMEOUT);
        let zk = Client::connect(connect, options)
            .await
            .with_context(|| format!("connecting writer {i}"))?;
        client::recipes::ensure_path(&zk, ROOT).await?;
        let path = format!("{ROOT}/w{i}");
        match zk.create(&path, b"0", CreateMode::Persistent).await {
            Ok(_) | Err(Error::NodeExists { .. }) => {}
            Err(error) => return Err(error).with_context(|| format!("creating {path}")),
        }
        tasks.push(tokio::spawn(write_until(zk, path, stop.clone())));
    }
    Ok(Writers { stop, tasks })
}

/// Writes 1, 2, 3, ... into `path` until told to stop or the session
/// expires.
async fn write_until(zk: Client, path: String, stop: Arc<AtomicBool>) -> WriterReport {
    let mut report = WriterReport {
        path: path.clone(),
        ..WriterReport::default()
    };
    let mut next: u64 = 1;
    while !stop.load(Ordering::Relaxed) {
        let value = next.to_string();
        next += 1;
        match zk.set_data(&path, value.as_bytes(), None).await {
            Ok(_) => {
                report.acks.push(Instant::now());
                report.last_acked = Some(next - 1);
            }
            Err(Error::ConnectionLoss { .. }) => {
                report.connection_losses.push(Instant::now());
                // ConnectionLoss comes at once while the client reconnects.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(Error::SessionExpired { .. }) => {
                report.expired = true;
                break;
            }
            Err(error) => {
                report
                    .other_errors
                    .push((Instant::now(), error.to_string()));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    zk.close().await;
    report
}

async fn stop_writers(writers: Writers) -> anyhow::Result<Vec<WriterReport>> {
    writers.stop.store(true, Ordering::Relaxed);
    let mut reports = Vec::new();
    for task in writers.tasks {
        reports.push(task.await.context("a writer task failed")?);
    }
    Ok(reports)
}

/// Every writer's last acknowledged value (or a later one, from a write
/// whose answer was lost) is what its znode holds.
async fn check_acknowledged(connect: &str, reports: &[WriterReport]) -> anyhow::Result<()> {
    let zk = Client::connect(connect, client::ConnectOptions::new()).await?;
    for report in reports {
        let Some(last) = report.last_acked else {
            bail!("{} had no write acknowledged", report.path);
        };
        zk.sync(&report.path).await?;
        let (data, _) = zk.get_data(&report.path).await?;
        let stored: u64 = std::str::from_utf8(&data.unwrap_or_default())?.parse()?;
        ensure!(
            stored >= last,
            "acknowledged write {last} to {} was lost: the znode holds {stored}",
            report.path
        );
    }
    zk.close().await;
    Ok(())
}

fn report(
    m: &mut Measurement,
    restarts: &[Restart],
    reports: &[WriterReport],
    cpu_spent: Option<Duration>,
) {
    let mut gaps = Latencies::default();
    for (i, restart) in restarts.iter().enumerate() {
        // From the last write acknowledged before the stop.
        let since = reports
            .iter()
            .filter_map(|r| r.acks.iter().rfind(|&&t| t <= restart.began))
            .min()
            .copied()
            .unwrap_or(restart.began);
        let gap = reports
            .iter()
            .map(|r| longest_gap(&r.acks, since, restart.settled))
            .max()
            .unwrap_or_default();
        gaps.record(gap);
        let in_step = |t: &Instant| *t >= restart.began && *t < restart.settled;
        let losses: usize = reports
            .iter()
            .map(|r| r.connection_losses.iter().filter(|t| in_step(t)).count())
            .sum();
        let others: usize = reports
            .iter()
            .map(|r| r.other_errors.iter().filter(|(t, _)| in_step(t)).count())
            .sum();
        let role = if restart.was_leader {
            "leader"
        } else {
            "follower"
        };
        m.rows.push(
            Row::new(format!("restart {} ({role})", i + 1))
                .metric("gap_s", gap.as_secs_f64())
                .metric("serving_again_s", restart.served.as_secs_f64())
                .metric("connection_losses", losses as f64)
                .metric("other_errors", others as f64),
        );
    }
    let count = |f: fn(&WriterReport) -> usize| reports.iter().map(f).sum::<usize>() as f64;
    m.rows.push(
        Row::new("all restarts")
            .metric("max_gap_s", gaps.quantile(1.0).as_secs_f64())
            .metric("median_gap_s", gaps.quantile(0.5).as_secs_f64())
            .metric("acknowledged_writes", count(|r| r.acks.len()))
            .metric("connection_losses", count(|r| r.connection_losses.len()))
            .metric("other_errors", count(|r| r.other_errors.len()))
            .metric("sessions_expired", count(|r| usize::from(r.expired)))
            .cpu_per_op(cpu_spent, count(|r| r.acks.len()) as u64),
    );
    m.notes.push(
        "gap: the longest time between two acknowledged writes of any one writer, from the last write acknowledged before the stop until the settle after the restart; every acknowledged write was read back afterwards".into(),
    );
    m.notes.push(super::STOPPING_CPU_NOTE.into());
    if let Some((_, error)) = reports.iter().flat_map(|r| &r.other_errors).next() {
        m.notes
            .push(format!("first error other than ConnectionLoss: {error}"));
    }
}

fn longest_gap(acks: &[Instant], since: Instant, until: Instant) -> Duration {
    let window: Vec<Instant> = acks
        .iter()
        .copied()
        .filter(|&t| t >= since && t <= until)
        .collect();
    window
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or(until - since)
}
