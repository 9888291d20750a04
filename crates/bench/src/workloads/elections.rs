//! `elections`: how steady leadership stays under load. The `mix` load
//! runs for minutes, saturating an ensemble this tool started (snapshots
//! are taken as the log grows), while every server's `srvr` is polled;
//! each change of leader is counted and timed. No server fails, so every
//! change is a spurious election: a leader deposed by a pause it caused
//! itself (fsync stalls, snapshots, starved heartbeats).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use launch::Mode;

use crate::deploy::Deployment;
use crate::measure::{Measurement, Row};
use crate::workloads::mix::{self, MixShape, Pacing};

#[derive(clap::Args, Clone, Debug)]
pub struct ElectionsArgs {
    /// Minutes of load.
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Sessions, each on its own connection.
    #[arg(long, default_value_t = 32)]
    pub sessions: usize,
    /// Requests each session keeps outstanding.
    #[arg(long, default_value_t = 16)]
    pub outstanding: usize,
    /// Fraction of the requests that read.
    #[arg(long, default_value_t = 0.5)]
    pub read_ratio: f64,
    /// Bytes of data per znode and per write.
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
}

impl ElectionsArgs {
    pub fn flags(&self) -> String {
        format!(
            "--minutes {} --sessions {} --outstanding {} --read-ratio {} --value-size {}",
            self.minutes, self.sessions, self.outstanding, self.read_ratio, self.value_size
        )
    }
}

/// How often every server is asked who leads.
const POLL_EVERY: Duration = Duration::from_millis(100);

pub async fn run(args: &ElectionsArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    let Some(cluster) = deployment.cluster() else {
        bail!("elections watches the servers it started: use --start SYSTEM --servers 3 (or 5)");
    };
    if cluster.servers().len() < 3 {
        bail!("elections needs an ensemble: --servers 3 or more");
    }
    let addresses: Vec<SocketAddr> = cluster
        .servers()
        .iter()
        .map(|s| SocketAddr::from(([127, 0, 0, 1], s.client_port())))
        .collect();
    let mut m = Measurement::new("elections", deployment.label(), String::new());
    m.setting("minutes", args.minutes);
    m.setting("outstanding per session", args.outstanding);
    m.setting("srvr polled every ms", POLL_EVERY.as_millis());

    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || watch_leaders(&addresses, &stop))
    };
    let shape = MixShape {
        sessions: args.sessions,
        znodes: 1000,
        value_size: args.value_size,
        read_ratios: vec![args.read_ratio],
        seconds: args.minutes * 60.0,
        warmup: 0.0,
    };
    let measured = mix::measure(
        &shape,
        Pacing::Outstanding(args.outstanding),
        deployment,
        &mut m,
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let leadership = watcher
        .join()
        .map_err(|_| anyhow::anyhow!("the leader watcher panicked"))?;
    measured?;
    for (at, from, to) in &leadership.changes {
        eprintln!("  leader changed at {at:.1} s: server {from} -> server {to}");
    }
    m.rows.push(
        Row::new("leadership")
            .metric("leader_changes", leadership.changes.len() as f64)
            .metric("leaderless_stretches", leadership.leaderless as f64)
            .metric(
                "longest_leaderless_s",
                leadership.longest_leaderless.as_secs_f64(),
            )
            .metric("polls", leadership.polls as f64),
    );
    Ok(m)
}

/// What the watcher saw.
struct Leadership {
    /// Seconds from the start, the old leader's and the new one's index
    /// (from 1, in server order).
    changes: Vec<(f64, usize, usize)>,
    /// Stretches in which no server said it led, after one had: an
    /// election that kept its leader shows only as one of these.
    leaderless: u64,
    /// The longest of them.
    longest_leaderless: Duration,
    polls: u64,
}

/// Polls every server until `stop`, following who leads.
fn watch_leaders(addresses: &[SocketAddr], stop: &AtomicBool) -> Leadership {
    let began = Instant::now();
    let mut seen = Leadership {
        changes: Vec::new(),
        leaderless: 0,
        longest_leaderless: Duration::ZERO,
        polls: 0,
    };
    let mut leader: Option<usize> = None;
    let mut leaderless_since: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        let polled = Instant::now();
        let now_leading = addresses
            .iter()
            .position(|&addr| launch::mode(addr) == Some(Mode::Leader));
        seen.polls += 1;
        match (now_leading, leader) {
            (Some(now), Some(before)) if now != before => {
                let at = began.elapsed().as_secs_f64();
                seen.changes.push((at, before + 1, now + 1));
            }
            _ => {}
        }
        match now_leading {
            Some(now) => {
                if let Some(since) = leaderless_since.take() {
                    seen.longest_leaderless = seen.longest_leaderless.max(polled - since);
                }
                leader = Some(now);
            }
            None if leader.is_some() && leaderless_since.is_none() => {
                seen.leaderless += 1;
                leaderless_since = Some(polled);
            }
            None => {}
        }
        std::thread::sleep(POLL_EVERY.saturating_sub(polled.elapsed()));
    }
    seen
}
