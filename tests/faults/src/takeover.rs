//! The `takeover` scenario: the live move from Apache ZooKeeper, checked as
//! any fault is. A three-server ZooKeeper ensemble (Debian's) and two
//! Paddock servers that observe it (`observeZooKeeper`); half of the
//! workers start on ZooKeeper, half on Paddock. Then every worker is moved
//! to the Paddock servers, one at a time, keeping its session; once no
//! session is left on ZooKeeper, `paddock takeover` makes the Paddock
//! servers an ensemble of their own and the ZooKeeper servers stop; the
//! workers go on. The history of the whole move must be linearizable and
//! keep ZooKeeper's session guarantees, and both Paddock servers must hold
//! the same znodes and configuration.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use history::Recorder;
use launch::{Cluster, Flavor, Spec};
use tokio::sync::watch;

use crate::scenario::Scenario;
use crate::workload::Worker;
use crate::{verify, Args, Run};

/// The Paddock servers' ids: none of ZooKeeper's (1 to 3).
const FIRST_PADDOCK_ID: usize = 101;
const PADDOCK_SERVERS: usize = 2;
const TICK_MS: u32 = 500;
/// Between two workers' moves.
const MOVE_GAP: Duration = Duration::from_millis(300);
/// How long ZooKeeper's leader may take to say it leads.
const LEADER_WAIT: Duration = Duration::from_secs(30);
/// How long the moved sessions may take to leave ZooKeeper.
const MOVED_WAIT: Duration = Duration::from_secs(30);

pub async fn run(args: &Args, seed: u64) -> anyhow::Result<Run> {
    let dir = args.dir.join(format!("takeover-{seed}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    let (mut zookeeper, mut paddock) = start_servers(args, &dir).await?;
    verify::create_root(&zookeeper.connect_string()).await?;

    let zookeeper_followers = followers(&zookeeper)?;
    let recorder = Arc::new(Recorder::new());
    let stop = Arc::new(AtomicBool::new(false));
    let mut moves = Vec::new();
    let mut workers = Vec::new();
    for i in 0..args.workers {
        let start_on = match i % 2 {
            0 => zookeeper_followers[(i / 2) % zookeeper_followers.len()].clone(),
            _ => paddock[(i / 2) % PADDOCK_SERVERS].servers()[0].client_address(),
        };
        let (move_to, servers) = watch::channel(start_on);
        moves.push(move_to);
        let worker = Worker {
            index: i,
            servers,
            keys: args.keys,
            seed: seed.wrapping_mul(31).wrapping_add(i as u64),
        };
        workers.push(tokio::spawn(worker.run(recorder.clone(), stop.clone())));
    }
    let started = Instant::now();
    let paddock_servers = paddock
        .iter()
        .map(Cluster::connect_string)
        .collect::<Vec<_>>()
        .join(",");

    let mut faults = Vec::new();
    tokio::time::sleep(Duration::from_secs(args.seconds) / 4).await;
    for (i, move_to) in moves.iter().enumerate() {
        move_to.send_replace(paddock_servers.clone());
        faults.push(format!("worker {i} moved to Paddock"));
        tokio::time::sleep(MOVE_GAP).await;
    }
    let zookeeper_sessions = sessions_left(&zookeeper, MOVED_WAIT).await?;
    if zookeeper_sessions > 0 {
        bail!("{zookeeper_sessions} sessions still on ZooKeeper {MOVED_WAIT:?} after the moves");
    }
    let zxid = take_over(args, &dir, &paddock).await?;
    faults.push(format!("paddock takeover at zxid {zxid}"));
    let mut stopping = zookeeper;
    zookeeper = tokio::task::spawn_blocking(move || {
        stopping.stop(Duration::from_secs(5));
        stopping
    })
    .await?;
    faults.push("the ZooKeeper servers stopped".into());
    let rest = Duration::from_secs(args.seconds).saturating_sub(started.elapsed());
    tokio::time::sleep(rest.max(Duration::from_secs(2))).await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await?;
    }
    drop(zookeeper);

    let mut problems = verify::final_reads(&paddock_servers, &recorder, args.keys).await;
    let history = recorder.finish();
    problems.extend(verify::check_history(&history));
    let servers: Vec<&launch::Server> = paddock.iter().flat_map(Cluster::servers).collect();
    problems.extend(verify::compare_servers(&servers, args.keys, true).await);
    problems.extend(verify::dead_servers(
        paddock.iter_mut().flat_map(Cluster::servers_mut),
    ));
    drop(paddock);
    crate::finish(Scenario::Takeover, seed, &dir, history, faults, problems)
}

/// The ZooKeeper ensemble, then the Paddock servers observing it.
async fn start_servers(
    args: &Args,
    dir: &std::path::Path,
) -> anyhow::Result<(Cluster, Vec<Cluster>)> {
    let spec = Spec {
        tick_time_ms: TICK_MS,
        ..Spec::new(Flavor::ZooKeeper { heap_mb: 256 }, 3, dir.join("zookeeper"))
    };
    let zookeeper = tokio::task::spawn_blocking(move || Cluster::start(spec)).await??;
    let quorum: Vec<String> = zookeeper
        .servers()
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.peer_port()))
        .collect();
    let binary = args.paddock.canonicalize()?;
    let mut paddock = Vec::new();
    for i in 0..PADDOCK_SERVERS {
        let spec = Spec {
            first_id: FIRST_PADDOCK_ID + i,
            tick_time_ms: TICK_MS,
            extra: vec![("observeZooKeeper".into(), quorum.join(","))],
            ..Spec::new(
                Flavor::Paddock {
                    binary: binary.clone(),
                },
                1,
                dir.join("paddock"),
            )
        };
        paddock.push(tokio::task::spawn_blocking(move || Cluster::start(spec)).await??);
    }
    Ok((zookeeper, paddock))
}

/// The client addresses of ZooKeeper's followers, where the workers that
/// start on ZooKeeper connect. Not its leader: there a client's `sync` is
/// answered at once, in the session's order, as a read is
/// (`CommitProcessor` on the leader does not wait for commits), and the
/// leader applies a commit only after it has sent the COMMIT and INFORM
/// that let a follower or observer apply it and answer the writer. So a
/// `sync` then `getData` on ZooKeeper's leader may miss a write another
/// server has already acknowledged, which the linearizability check
/// rightly flags, though it is ZooKeeper's own behaviour, not the move's.
/// Called before any worker starts, so its blocking wait holds up none.
fn followers(zookeeper: &Cluster) -> anyhow::Result<Vec<String>> {
    let leader = zookeeper.wait_leader(None, LEADER_WAIT)?;
    Ok(zookeeper
        .servers()
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != leader)
        .map(|(_, server)| server.client_address())
        .collect())
}

/// Waits until no ZooKeeper server holds a client session (`cons` lists
/// one line per connection, `sid=0x0` for its own); returns how many are
/// left when `wait` runs out.
async fn sessions_left(zookeeper: &Cluster, wait: Duration) -> anyhow::Result<usize> {
    let addresses: Vec<String> = zookeeper
        .servers()
        .iter()
        .map(launch::Server::client_address)
        .collect();
    let deadline = Instant::now() + wait;
    loop {
        let mut left = 0;
        for address in &addresses {
            let address = address.parse().context("a server's client address")?;
            let cons = launch::four_letter_word(address, "cons", Duration::from_secs(2))
                .unwrap_or_default();
            left += cons
                .lines()
                .filter(|line| line.contains("sid=0x") && !line.contains("sid=0x0,"))
                .count();
        }
        if left == 0 || Instant::now() >= deadline {
            return Ok(left);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs `paddock takeover` with the Paddock servers as the members;
/// returns the zxid it printed.
async fn take_over(
    args: &Args,
    dir: &std::path::Path,
    paddock: &[Cluster],
) -> anyhow::Result<String> {
    let members = dir.join("members.cfg");
    let lines: String = paddock
        .iter()
        .flat_map(Cluster::servers)
        .map(|s| s.joining_line() + "\n")
        .collect();
    std::fs::write(&members, lines).with_context(|| format!("writing {}", members.display()))?;
    let out = tokio::process::Command::new(&args.paddock)
        .arg("takeover")
        .arg("--server")
        .arg(paddock[0].servers()[0].client_address())
        .arg("--members")
        .arg(&members)
        .output()
        .await
        .context("running paddock takeover")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "paddock takeover failed ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let zxid = stdout
        .split_whitespace()
        .find(|word| word.starts_with("0x"))
        .map(|word| word.trim_end_matches(':').to_owned());
    zxid.with_context(|| format!("paddock takeover printed no zxid: {stdout}"))
}
