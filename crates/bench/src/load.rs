//! The machinery shared by the workloads: sessions, creating many znodes
//! fast, and keeping requests outstanding on many sessions for a while.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use client::{Client, ConnectOptions, CreateMode, Error};
use rand::Rng as _;

use crate::deploy::{ByRole, CpuClock};
use crate::measure::{Latencies, Row, SharedLatencies};

/// Handshakes in flight at once while opening sessions: a thousand at
/// once would measure the server's accept backlog, not the workload.
const CONNECTING_AT_ONCE: usize = 32;

/// Opens `count` sessions, spread over the connect string's servers.
pub async fn connect(connect: &str, count: usize) -> anyhow::Result<Vec<Client>> {
    let options = ConnectOptions::new()
        .session_timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(10));
    connect_with(connect, count, options).await
}

/// Opens `count` sessions with `options`.
pub async fn connect_with(
    connect: &str,
    count: usize,
    options: ConnectOptions,
) -> anyhow::Result<Vec<Client>> {
    let connecting = Arc::new(tokio::sync::Semaphore::new(CONNECTING_AT_ONCE));
    let mut pending = Vec::with_capacity(count);
    for _ in 0..count {
        let connect = connect.to_string();
        let options = options.clone();
        let connecting = connecting.clone();
        pending.push(tokio::spawn(async move {
            let _turn = connecting.acquire_owned().await;
            Client::connect(&connect, options).await
        }));
    }
    let mut clients = Vec::with_capacity(count);
    for session in pending {
        clients.push(
            session
                .await?
                .with_context(|| format!("connecting to {connect}"))?,
        );
    }
    Ok(clients)
}

pub async fn close_all(clients: Vec<Client>) {
    for client in clients {
        client.close().await;
    }
}

/// Znode paths for `count` nodes under `root`, a thousand per parent as a
/// real tree spreads them: (parents, leaves).
pub fn tree_paths(root: &str, count: usize) -> (Vec<String>, Vec<String>) {
    const FANOUT: usize = 1000;
    let parents: Vec<String> = (0..count.div_ceil(FANOUT))
        .map(|p| format!("{root}/p{p:05}"))
        .collect();
    let leaves = (0..count)
        .map(|i| format!("{}/n{i:08}", parents[i / FANOUT]))
        .collect();
    (parents, leaves)
}

/// Creates every path (parents before children: callers pass them in that
/// order and each batch completes before the next), `outstanding` requests
/// at a time on each session, with progress on stderr for long runs.
pub async fn create_all(
    clients: &[Client],
    paths: Vec<String>,
    data: Bytes,
    outstanding: usize,
    what: &str,
) -> anyhow::Result<()> {
    let total = paths.len();
    let paths = Arc::new(paths);
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let progress = report_progress(what.to_string(), total, done.clone());
    let mut tasks = Vec::new();
    for client in clients {
        for _ in 0..outstanding {
            let (client, paths, next, done, data) = (
                client.clone(),
                paths.clone(),
                next.clone(),
                done.clone(),
                data.clone(),
            );
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = paths.get(i) else {
                        return Ok::<(), anyhow::Error>(());
                    };
                    create_retrying(&client, path, &data).await?;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
    }
    let mut result = Ok(());
    for task in tasks {
        if let Err(error) = task.await? {
            result = Err(error);
        }
    }
    progress.abort();
    result
}

async fn create_retrying(client: &Client, path: &str, data: &[u8]) -> anyhow::Result<()> {
    for _ in 0..5 {
        match client.create(path, data, CreateMode::Persistent).await {
            Ok(_) | Err(Error::NodeExists { .. }) => return Ok(()),
            Err(Error::ConnectionLoss { .. }) => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(error) => return Err(error).with_context(|| format!("creating {path}")),
        }
    }
    bail!("creating {path}: the connection kept breaking")
}

/// Prints `what: done/total` every few seconds until aborted.
pub fn report_progress(
    what: String,
    total: usize,
    done: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let done = done.load(Ordering::Relaxed);
            eprintln!(
                "  {what}: {done}/{total} ({:.0}%) after {:.0} s",
                100.0 * done as f64 / total.max(1) as f64,
                started.elapsed().as_secs_f64()
            );
        }
    })
}

/// Counts a phase's operations as they complete and notes when each tenth
/// of them was done, so that the rate at the phase's end can be set beside
/// the rate at its start: a server that slows as its state grows shows.
pub struct Tenths {
    began: Instant,
    total: usize,
    /// Operations completed; shared with [`report_progress`].
    pub done: Arc<AtomicUsize>,
    marks: std::sync::Mutex<Vec<Instant>>,
}

impl Tenths {
    pub fn start(total: usize) -> Arc<Tenths> {
        Arc::new(Tenths {
            began: Instant::now(),
            total,
            done: Arc::default(),
            marks: std::sync::Mutex::default(),
        })
    }

    /// One more operation completed.
    pub fn done_one(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let tenth = (self.total / 10).max(1);
        if done.is_multiple_of(tenth) && done / tenth <= 10 {
            self.marks
                .lock()
                .expect("tenths poisoned")
                .push(Instant::now());
        }
    }

    /// The phase's rates: over all of it (`ops_per_sec`, `seconds`), its
    /// first tenth and its last tenth.
    pub fn rates(&self, row: Row) -> Row {
        let mut marks = self.marks.lock().expect("tenths poisoned").clone();
        marks.sort();
        marks.resize(10, Instant::now());
        let elapsed = marks[9] - self.began;
        let tenth = (self.total / 10) as f64;
        let rate = |from: Instant, to: Instant| tenth / (to - from).as_secs_f64().max(1e-9);
        row.metric(
            "ops_per_sec",
            self.total as f64 / elapsed.as_secs_f64().max(1e-9),
        )
        .metric("first_tenth_ops_per_sec", rate(self.began, marks[0]))
        .metric("last_tenth_ops_per_sec", rate(marks[8], marks[9]))
        .metric("seconds", elapsed.as_secs_f64())
    }
}

/// Waits for every client task and merges the latencies they recorded.
pub async fn gather(
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<Latencies>>>,
) -> anyhow::Result<Latencies> {
    let mut latencies = Latencies::default();
    for task in tasks {
        latencies.merge(&task.await??);
    }
    Ok(latencies)
}

/// How long to keep the load up, and how many requests each session keeps
/// outstanding.
#[derive(Clone, Copy, Debug)]
pub struct Drive {
    pub outstanding: usize,
    /// Requests in this first stretch are not counted: connections and the
    /// JIT warm up.
    pub warmup: Duration,
    pub duration: Duration,
}

/// What a drive measured: the requests that started after the warm-up and
/// completed before the end.
pub struct Driven {
    pub latencies: Latencies,
    pub elapsed: Duration,
    pub errors: u64,
    /// The servers' CPU time over the measured stretch.
    pub cpu: Option<Duration>,
    /// An ensemble's, by role.
    pub by_role: Option<ByRole>,
    /// In an open loop, how late each measured request went out after it
    /// was due: the load generator's own lag, which its latencies leave
    /// out. Empty in a closed loop.
    pub sent_late: Latencies,
}

/// Reads (getData) with probability `read_ratio`, else writes (setData of
/// `value`), on keys drawn uniformly from `keys`.
pub async fn drive(
    clients: &[Client],
    drive: Drive,
    read_ratio: f64,
    keys: Arc<Vec<String>>,
    value: Bytes,
    cpu: &CpuClock,
) -> Driven {
    let began = Instant::now();
    let measure_from = began + drive.warmup;
    let end = measure_from + drive.duration;
    let cpu_sampler = sample_cpu(cpu, measure_from, end);
    let errors = Arc::new(AtomicU64::new(0));
    let recorded = Recorded::default();
    let mut tasks = Vec::new();
    for client in clients {
        for _ in 0..drive.outstanding {
            let (client, keys, value, errors, latencies) = (
                client.clone(),
                keys.clone(),
                value.clone(),
                errors.clone(),
                recorded.latencies.clone(),
            );
            tasks.push(tokio::spawn(async move {
                loop {
                    let started = Instant::now();
                    if started >= end {
                        return;
                    }
                    let (key, read) = {
                        let mut rng = rand::thread_rng();
                        (
                            &keys[rng.gen_range(0..keys.len())],
                            rng.gen_bool(read_ratio),
                        )
                    };
                    let ok = if read {
                        client.get_data(key).await.is_ok()
                    } else {
                        client.set_data(key, &value, None).await.is_ok()
                    };
                    let finished = Instant::now();
                    if !ok {
                        errors.fetch_add(1, Ordering::Relaxed);
                    } else if started >= measure_from && finished <= end {
                        latencies.record(finished - started);
                    }
                }
            }));
        }
    }
    finish(tasks, recorded, drive.duration, &errors, cpu_sampler).await
}

/// Requests sent at a fixed rate, whatever the answers (an open loop).
#[derive(Clone, Copy, Debug)]
pub struct Offered {
    /// Requests per second, over all sessions.
    pub per_sec: f64,
    /// Requests due in this first stretch are not counted.
    pub warmup: Duration,
    pub duration: Duration,
}

/// Like [`drive`], but open-loop: each session sends its share of
/// `offered.per_sec` on a fixed schedule, not waiting for answers. A
/// server that falls behind therefore shows it in the latencies, where a
/// closed loop would only slow the senders down (coordinated omission).
/// A request's latency counts from when it was sent, not from when it was
/// due: the runtime's timer wakes on whole milliseconds, which would add
/// up to a millisecond of the generator's own lag to every request. That
/// lag is kept apart, in `sent_late`.
pub async fn drive_at_rate(
    clients: &[Client],
    offered: Offered,
    read_ratio: f64,
    keys: Arc<Vec<String>>,
    value: Bytes,
    cpu: &CpuClock,
) -> Driven {
    let began = Instant::now();
    let measure_from = began + offered.warmup;
    let end = measure_from + offered.duration;
    let cpu_sampler = sample_cpu(cpu, measure_from, end);
    let every = Duration::from_secs_f64(clients.len() as f64 / offered.per_sec);
    let errors = Arc::new(AtomicU64::new(0));
    let recorded = Recorded::default();
    let mut sessions = Vec::new();
    for client in clients {
        let (client, keys, value, errors, recorded) = (
            client.clone(),
            keys.clone(),
            value.clone(),
            errors.clone(),
            recorded.clone(),
        );
        let first = began + every.mul_f64(rand::thread_rng().gen::<f64>());
        sessions.push(tokio::spawn(async move {
            let mut requests = tokio::task::JoinSet::new();
            let mut due = first;
            while due < end {
                tokio::time::sleep_until(due.into()).await;
                let sent = Instant::now();
                let (key, read) = {
                    let mut rng = rand::thread_rng();
                    (
                        keys[rng.gen_range(0..keys.len())].clone(),
                        rng.gen_bool(read_ratio),
                    )
                };
                // Sent now (the call is made), awaited in its own task.
                if read {
                    let call = client.get_data(&key);
                    requests.spawn(async move { (due, sent, call.await.is_ok(), Instant::now()) });
                } else {
                    let call = client.set_data(&key, &value, None);
                    requests.spawn(async move { (due, sent, call.await.is_ok(), Instant::now()) });
                }
                due += every;
            }
            while let Some(Ok((due, sent, ok, finished))) = requests.join_next().await {
                if !ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                } else if due >= measure_from && finished <= end {
                    recorded.latencies.record(finished - sent);
                    recorded.sent_late.record(sent - due);
                }
            }
        }));
    }
    finish(sessions, recorded, offered.duration, &errors, cpu_sampler).await
}

/// The servers' CPU time from `from` to `to`, read then.
fn sample_cpu(
    cpu: &CpuClock,
    from: Instant,
    to: Instant,
) -> tokio::task::JoinHandle<(Option<Duration>, Option<ByRole>)> {
    let cpu = cpu.clone();
    tokio::spawn(async move {
        tokio::time::sleep_until(from.into()).await;
        let spending = tokio::task::block_in_place(|| cpu.start());
        tokio::time::sleep_until(to.into()).await;
        tokio::task::block_in_place(|| (spending.spent(), spending.by_role()))
    })
}

/// What a drive's tasks record.
#[derive(Clone, Default)]
struct Recorded {
    latencies: SharedLatencies,
    sent_late: SharedLatencies,
}

/// Waits for the load's tasks and gathers what they measured.
async fn finish(
    tasks: Vec<tokio::task::JoinHandle<()>>,
    recorded: Recorded,
    elapsed: Duration,
    errors: &AtomicU64,
    cpu_sampler: tokio::task::JoinHandle<(Option<Duration>, Option<ByRole>)>,
) -> Driven {
    for task in tasks {
        let _ = task.await;
    }
    let (cpu, by_role) = cpu_sampler.await.unwrap_or((None, None));
    Driven {
        latencies: recorded.latencies.take(),
        elapsed,
        errors: errors.load(Ordering::Relaxed),
        cpu,
        by_role,
        sent_late: recorded.sent_late.take(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_paths_put_a_thousand_leaves_under_each_parent() {
        let (parents, leaves) = tree_paths("/t", 2500);
        assert_eq!(parents, ["/t/p00000", "/t/p00001", "/t/p00002"]);
        assert_eq!(leaves.len(), 2500);
        assert_eq!(leaves[999], "/t/p00000/n00000999");
        assert_eq!(leaves[1000], "/t/p00001/n00001000");
        assert!(tree_paths("/t", 0).0.is_empty());
    }
}
