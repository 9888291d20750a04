//! `session-storm`: thousands of sessions come and go at once, while a
//! separate client keeps writing and times each write.
//!
//! 1. *connect*: every session connects (a herd) and creates one
//!    ephemeral znode.
//! 2. *cleanup*: the processes holding them are killed together, so every
//!    session is lost at once without a closeSession; the ephemerals left
//!    are counted every 100 ms until none is, which should take no longer
//!    than the session timeout plus a second.
//! 3. *herd* (deployments this tool started): as many sessions again, with
//!    a long timeout; every server is killed and restarted, and all the
//!    sessions reconnect at once, as after a restart. Every session should
//!    live on with its ephemeral. The probe's row covers the restart and
//!    the reconnection, and at least [`HERD_WINDOW`] after the restart.
//!
//! Each phase reports the foreground writer's latency and errors during
//! it. The sessions are held by `holder` processes of their own.

mod holder;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use client::{Client, CreateMode};

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Latencies, Measurement, Row};
pub use holder::{main as holder_main, HolderArgs};
use holder::{Holders, States};

const LOST_ROOT: &str = "/bench/storm/lost";
const HERD_ROOT: &str = "/bench/storm/herd";
const PROBE_PATH: &str = "/bench/storm/probe";
/// The herd's sessions must outlive a restart of every server.
const HERD_SESSION_TIMEOUT_MS: u64 = 30_000;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(300);
const RECONNECT_TIMEOUT: Duration = Duration::from_secs(120);
/// The probe's herd row covers at least this long after the restart.
const HERD_WINDOW: Duration = Duration::from_secs(5);
/// How often the ephemerals left are counted while they are cleaned up.
const COUNT_EVERY: Duration = Duration::from_millis(100);
/// The pause between two of the foreground writer's writes.
const PROBE_PAUSE: Duration = Duration::from_millis(5);

#[derive(clap::Args, Clone, Debug)]
pub struct SessionStormArgs {
    /// Sessions that connect, are lost and reconnect together (each
    /// holder process holds at most 10,000, below this machine's limit of
    /// open files per process).
    #[arg(long, default_value_t = 20_000)]
    pub sessions: usize,
    /// The lost sessions' timeout, in milliseconds (4,000 is the least
    /// ZooKeeper grants with its default tickTime).
    #[arg(long, default_value_t = 4000)]
    pub session_timeout_ms: u64,
}

impl SessionStormArgs {
    pub fn flags(&self) -> String {
        format!(
            "--sessions {} --session-timeout-ms {}",
            self.sessions, self.session_timeout_ms
        )
    }
}

pub async fn run(
    args: &SessionStormArgs,
    deployment: &mut Deployment,
) -> anyhow::Result<Measurement> {
    let mut m = Measurement::new("session-storm", deployment.label(), String::new());
    m.setting("sessions", args.sessions);
    m.setting("session timeout (ms)", args.session_timeout_ms);
    let connect = deployment.connect_string().to_string();
    let admin = load::connect(&connect, 1).await?.remove(0);
    for root in [LOST_ROOT, HERD_ROOT] {
        client::recipes::ensure_path(&admin, root).await?;
    }
    let probe = Probe::start(load::connect(&connect, 1).await?.remove(0)).await?;

    eprintln!("  connecting {} sessions", args.sessions);
    let sessions = args.sessions as u64;
    let connecting = deployment.cpu_clock().start();
    let mut lost = Holders::start(&connect, LOST_ROOT, args.sessions, args.session_timeout_ms)?;
    let all_ready = |s: &States| s.ready == args.sessions;
    let connected_in = lost
        .wait_until("every session connected", CONNECT_TIMEOUT, all_ready)
        .await?;
    m.rows.push(
        probe
            .row("connect")
            .metric("seconds", connected_in.as_secs_f64())
            .metric(
                "sessions_per_sec",
                args.sessions as f64 / connected_in.as_secs_f64().max(1e-9),
            )
            .metric(
                "sessions_expired_connecting",
                lost.states().expired_connecting as f64,
            )
            .cpu_per_op(connecting.spent(), sessions),
    );

    eprintln!("  losing every session at once");
    probe.reset();
    let cleaning = deployment.cpu_clock().start();
    lost.kill_all();
    let curve = cleanup_curve(&admin, args).await?;
    let cleaned = cleaning.spent();
    m.rows
        .push(cleanup_row(probe.row("cleanup"), &curve, args).cpu_per_op(cleaned, sessions));
    m.notes.push(format!(
        "ephemerals left after the loss (seconds: count): {}",
        curve_note(&curve)
    ));

    if deployment.cluster().is_some() {
        m.rows
            .push(herd(args, deployment, &connect, &admin, &probe).await?);
    } else {
        m.notes.push(
            "herd: skipped, restarting every server needs a deployment started by this \
             tool (--start)"
                .into(),
        );
    }
    probe.stop().await;
    admin.close().await;
    m.notes.push(format!(
        "probe: one client's setData of {PROBE_PATH}, {PROBE_PAUSE:?} apart; errors are \
         its failed writes (ConnectionLoss while servers restart)"
    ));
    m.notes.push(
        "cpu_us_per_op: the servers' CPU per session, the probe's writes included: \
         connecting it and creating its ephemeral (connect); from the loss until every \
         ephemeral is gone (cleanup); from every restarted server serving to the row's end, \
         as the herd reconnects (herd)"
            .into(),
    );
    Ok(m)
}

/// The ephemerals left under the lost root, counted from the loss until
/// none is left or the deadline has long passed.
async fn cleanup_curve(
    admin: &Client,
    args: &SessionStormArgs,
) -> anyhow::Result<Vec<(Duration, i32)>> {
    let lost_at = Instant::now();
    let give_up = Duration::from_millis(args.session_timeout_ms) + Duration::from_secs(30);
    let mut curve = Vec::new();
    loop {
        let left = admin
            .get_all_children_number(LOST_ROOT)
            .await
            .context("counting the ephemerals left")?;
        curve.push((lost_at.elapsed(), left));
        if left == 0 || lost_at.elapsed() > give_up {
            return Ok(curve);
        }
        tokio::time::sleep(COUNT_EVERY).await;
    }
}

fn cleanup_row(row: Row, curve: &[(Duration, i32)], args: &SessionStormArgs) -> Row {
    let sessions = args.sessions as i32;
    let first_at_most = |left: i32| {
        curve
            .iter()
            .find(|(_, n)| *n <= left)
            .map_or(f64::NAN, |(at, _)| at.as_secs_f64())
    };
    let all_gone = first_at_most(0);
    let deadline = Duration::from_millis(args.session_timeout_ms).as_secs_f64() + 1.0;
    row.metric("half_gone_s", first_at_most(sessions / 2))
        .metric("all_gone_s", all_gone)
        .metric("deadline_s", deadline)
        .metric("deadline_met", f64::from(u8::from(all_gone <= deadline)))
}

/// The curve at half-second steps, for the report's notes.
fn curve_note(curve: &[(Duration, i32)]) -> String {
    let mut shown = Vec::new();
    let mut next = Duration::ZERO;
    for (at, left) in curve {
        if *at >= next || *left == 0 {
            shown.push(format!("{:.1}: {left}", at.as_secs_f64()));
            next = *at + Duration::from_millis(500);
        }
    }
    shown.join(", ")
}

/// Phase 3: a herd of sessions reconnecting after every server restarts.
async fn herd(
    args: &SessionStormArgs,
    deployment: &mut Deployment,
    connect: &str,
    admin: &Client,
    probe: &Probe,
) -> anyhow::Result<Row> {
    eprintln!(
        "  connecting {} sessions, then restarting every server",
        args.sessions
    );
    let mut herd = Holders::start(connect, HERD_ROOT, args.sessions, HERD_SESSION_TIMEOUT_MS)?;
    herd.wait_until("every session connected", CONNECT_TIMEOUT, |s| {
        s.ready == args.sessions
    })
    .await?;
    probe.reset();
    let restart = tokio::task::block_in_place(|| deployment.restart())?;
    let reconnecting = deployment.cpu_clock().start();
    let settled = |s: &States| s.disconnected == 0 && s.connected + s.ended == args.sessions;
    let reconnected_in = herd
        .wait_until("every session reconnected", RECONNECT_TIMEOUT, settled)
        .await?;
    // Both systems' rows cover the same stretch after the restart, however
    // soon their herds reconnect, so that their percentiles compare; the
    // row ends before the herd's sessions are closed, a storm of its own.
    tokio::time::sleep(HERD_WINDOW.saturating_sub(reconnected_in)).await;
    let row = probe
        .row("herd")
        .cpu_per_op(reconnecting.spent(), args.sessions as u64);
    let states = herd.states();
    let kept = retried(|| admin.get_all_children_number(HERD_ROOT)).await?;
    herd.close_all();
    Ok(row
        .metric("restart_s", restart.as_secs_f64())
        .metric("reconnected_s", reconnected_in.as_secs_f64())
        .metric("sessions_expired", states.ended as f64)
        .metric("ephemerals_kept", f64::from(kept)))
}

/// `call` again until it succeeds (the client reconnects after a restart).
async fn retried<T, F, C>(call: F) -> anyhow::Result<T>
where
    F: Fn() -> C,
    C: std::future::Future<Output = Result<T, client::Error>>,
{
    let began = Instant::now();
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(error) if began.elapsed() > RECONNECT_TIMEOUT => {
                return Err(error).context("the admin client did not reconnect")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// What the probe measured since the current phase began.
struct ProbeLog {
    began: Instant,
    latencies: Latencies,
    /// The slowest write and when, after `began`, it was sent: a stall is
    /// told apart by whether it came with the loss or with the expiries.
    slowest: Option<(Duration, Duration)>,
}

impl ProbeLog {
    fn new() -> Self {
        Self {
            began: Instant::now(),
            latencies: Latencies::default(),
            slowest: None,
        }
    }

    fn record(&mut self, sent: Instant, took: Duration) {
        self.latencies.record(took);
        if self.slowest.is_none_or(|(slowest, _)| took > slowest) {
            self.slowest = Some((took, sent.duration_since(self.began)));
        }
    }
}

/// The foreground client: one setData at a time, each timed.
struct Probe {
    log: Arc<Mutex<ProbeLog>>,
    errors: Arc<AtomicU64>,
    stopping: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Client>,
}

impl Probe {
    async fn start(zk: Client) -> anyhow::Result<Probe> {
        zk.create(PROBE_PATH, b"", CreateMode::Persistent)
            .await
            .context("creating the probe's znode")?;
        let log = Arc::new(Mutex::new(ProbeLog::new()));
        let errors = Arc::new(AtomicU64::new(0));
        let stopping = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (log, errors, stopping) = (log.clone(), errors.clone(), stopping.clone());
            async move {
                while !stopping.load(Ordering::Relaxed) {
                    let began = Instant::now();
                    match zk.set_data(PROBE_PATH, b"probe", None).await {
                        Ok(_) => log
                            .lock()
                            .expect("probe poisoned")
                            .record(began, began.elapsed()),
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    tokio::time::sleep(PROBE_PAUSE).await;
                }
                zk
            }
        });
        Ok(Probe {
            log,
            errors,
            stopping,
            task,
        })
    }

    /// Begins a phase: what the probe measured so far is forgotten.
    fn reset(&self) {
        let _forgotten = self.take();
    }

    /// What the probe measured since the phase began, and its errors.
    fn take(&self) -> (ProbeLog, u64) {
        let log = std::mem::replace(
            &mut *self.log.lock().expect("probe poisoned"),
            ProbeLog::new(),
        );
        (log, self.errors.swap(0, Ordering::Relaxed))
    }

    /// A row with the probe's latencies and errors since the last row,
    /// and when in that phase its slowest write was sent.
    fn row(&self, label: &str) -> Row {
        let (log, errors) = self.take();
        let slowest_at = log.slowest.map_or(f64::NAN, |(_, at)| at.as_secs_f64());
        Row::new(label)
            .latencies(&log.latencies)
            .metric("probe_errors", errors as f64)
            .metric("slowest_sent_s", slowest_at)
    }

    async fn stop(self) {
        self.stopping.store(true, Ordering::Relaxed);
        if let Ok(zk) = self.task.await {
            zk.close().await;
        }
    }
}
