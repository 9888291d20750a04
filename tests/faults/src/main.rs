//! `faults`: Paddock under faults, proven by its clients' histories.
//!
//! For each named scenario: a fresh 3-server Paddock ensemble (five for
//! `membership`) whose peer links run through fault-injecting proxies
//! (none when the scenario reconfigures); workers on every server
//! perform reads, writes, compare-and-sets, creates and deletes on a few
//! znodes while the nemesis kills, pauses, partitions or wipes servers;
//! then everything is healed, every key read once more, and the history
//! checked for linearizability (Wing-Gong/Lowe search, `history` crate)
//! and ZooKeeper's session guarantees, and every server's copy of the
//! znodes compared. A failing history is saved as JSON lines. See
//! tests/faults/README.md.
//!
//! Layout: `proxy` (the peer-link proxies), `shim` (the control files of
//! the preloaded library that slows fsyncs and shifts clocks), `workload`
//! (the recorded clients), `scenario` (the nemesis), `takeover` (the live
//! move from Apache ZooKeeper, a run of its own), `verify` (the checks),
//! here the command line and one scenario's run.

mod proxy;
mod scenario;
mod shim;
mod takeover;
mod verify;
mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Parser;
use history::Recorder;
use launch::{Cluster, Flavor, Ports, Spec};

use crate::proxy::Links;
use crate::scenario::{Levers, Scenario};
use crate::shim::Shim;
use crate::workload::Worker;

#[derive(Parser)]
#[command(
    name = "faults",
    about = "Paddock under faults, with every client history checked"
)]
struct Args {
    /// Scenarios to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    scenario: Vec<Scenario>,
    /// Seconds of faults per scenario.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The long run: every scenario over and over for this many minutes.
    #[arg(long)]
    long: Option<u64>,
    /// Seed of the workers' and nemesis' choices (printed; default random).
    #[arg(long)]
    seed: Option<u64>,
    /// Workers (sessions), spread over the servers.
    #[arg(long, default_value_t = 6)]
    workers: usize,
    /// Znodes the workers share.
    #[arg(long, default_value_t = 4)]
    keys: usize,
    /// The paddock binary.
    #[arg(long, default_value = "target/debug/paddock")]
    paddock: PathBuf,
    /// Where servers keep their data and failing histories are saved.
    #[arg(long, default_value = "target/faults")]
    dir: PathBuf,
}

/// What one scenario run found.
struct Run {
    scenario: Scenario,
    seed: u64,
    ops: usize,
    unknown: usize,
    /// What the nemesis did, in order.
    faults: Vec<String>,
    problems: Vec<String>,
}

fn main() -> std::process::ExitCode {
    match run(Args::parse()) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(error) => {
            eprintln!("faults: error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<bool> {
    if !args.paddock.exists() {
        bail!(
            "{} does not exist: run `cargo build` first, or pass --paddock",
            args.paddock.display()
        );
    }
    let scenarios = if args.scenario.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        args.scenario.clone()
    };
    let seed = args.seed.unwrap_or_else(rand::random);
    eprintln!("faults: seed {seed} (replay with --seed {seed})");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let deadline = args
        .long
        .map(|m| Instant::now() + Duration::from_secs(60 * m));
    let mut runs = Vec::new();
    let mut round = 0u64;
    loop {
        for &scenario in &scenarios {
            let seed = seed.wrapping_add(round * 100 + runs.len() as u64);
            eprintln!("\n== {} (seed {seed})", scenario.name());
            let run = runtime.block_on(run_scenario(&args, scenario, seed))?;
            eprintln!(
                "   {} operations ({} of unknown outcome), {} faults: {}",
                run.ops,
                run.unknown,
                run.faults.len(),
                if run.problems.is_empty() {
                    "ok"
                } else {
                    "FAILED"
                }
            );
            for fault in &run.faults {
                eprintln!("   - {fault}");
            }
            for problem in &run.problems {
                eprintln!("   {problem}");
            }
            runs.push(run);
        }
        round += 1;
        if deadline.is_none_or(|d| Instant::now() >= d) {
            break;
        }
    }
    let failed = runs.iter().filter(|r| !r.problems.is_empty()).count();
    let ops: usize = runs.iter().map(|r| r.ops).sum();
    let faults: usize = runs.iter().map(|r| r.faults.len()).sum();
    println!(
        "faults: {} scenario runs, {ops} operations checked, {faults} faults injected",
        runs.len()
    );
    for run in runs.iter().filter(|r| !r.problems.is_empty()) {
        println!("failed: {} with --seed {}", run.scenario.name(), run.seed);
    }
    println!("{} passed, {failed} failed", runs.len() - failed);
    Ok(failed == 0)
}

async fn run_scenario(args: &Args, scenario: Scenario, seed: u64) -> anyhow::Result<Run> {
    if scenario == Scenario::Takeover {
        return takeover::run(args, seed).await;
    }
    let servers = scenario.servers();
    let links = Links::bind(&(1..=servers).collect::<Vec<_>>()).await?;
    let ports: Vec<Ports> = (0..servers)
        .map(|_| Ports::free())
        .collect::<anyhow::Result<_>>()?;
    let real: BTreeMap<usize, (u16, u16)> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| (i + 1, (p.peer, p.election)))
        .collect();
    links.forward(&real);
    let dir = args.dir.join(format!("{}-{seed}", scenario.name()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    let shim = Shim::new(&dir.join("shim"), servers)?;
    let proxied = if scenario.reconfigures() {
        BTreeMap::new()
    } else {
        links.ports().clone()
    };
    let spec = Spec {
        env: shim.env(),
        ports: Some(ports),
        links: proxied,
        extra: vec![
            ("reconfigEnabled".into(), "true".into()),
            (
                "DigestAuthenticationProvider.superDigest".into(),
                super_digest(scenario::SUPER_PASSWORD),
            ),
        ],
        tick_time_ms: 500,
        // Snapshots (and catching up by snapshot) happen within a run.
        snap_count: 500,
        ..Spec::new(
            Flavor::Paddock {
                binary: args.paddock.canonicalize()?,
            },
            servers,
            &dir,
        )
    };
    let mut cluster = tokio::task::spawn_blocking(move || Cluster::start(spec)).await??;
    verify::create_root(&cluster.connect_string()).await?;
    for server in cluster.servers() {
        let pid = server
            .pid()
            .context("a server that just started has a pid")?;
        shim.check_loaded(server.id(), pid)?;
    }

    let recorder = Arc::new(Recorder::new());
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..args.workers)
        .map(|i| {
            let server = cluster.servers()[i % servers].client_address();
            let worker = Worker {
                index: i,
                servers: tokio::sync::watch::channel(server).1,
                keys: args.keys,
                seed: seed.wrapping_mul(31).wrapping_add(i as u64),
            };
            tokio::spawn(worker.run(recorder.clone(), stop.clone()))
        })
        .collect();
    let nemesis = {
        let stop = stop.clone();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let levers = Levers {
                cluster: &mut cluster,
                links: &links,
                shim: &shim,
                runtime,
            };
            let injected = scenario::nemesis(scenario, levers, &stop, seed);
            (cluster, links, injected)
        })
    };
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await?;
    }
    let (mut cluster, _links, injected) = nemesis.await?;
    let injected = injected?;

    let mut problems = verify::final_reads(&cluster.connect_string(), &recorder, args.keys).await;
    let history = recorder.finish();
    problems.extend(verify::check_history(&history));
    let servers: Vec<&launch::Server> = cluster.servers().iter().collect();
    problems.extend(verify::compare_servers(&servers, args.keys, scenario.reconfigures()).await);
    problems.extend(verify::dead_servers(cluster.servers_mut()));
    drop(cluster);
    finish(scenario, seed, &dir, history, injected.faults, problems)
}

/// A run's record, once its servers are stopped: a failing one's history
/// is saved beside the servers' logs, a passing one's directory removed.
fn finish(
    scenario: Scenario,
    seed: u64,
    dir: &std::path::Path,
    history: history::History,
    faults: Vec<String>,
    mut problems: Vec<String>,
) -> anyhow::Result<Run> {
    let unknown = history
        .ops()
        .iter()
        .filter(|op| op.returned_at().is_none())
        .count();
    if problems.is_empty() {
        let _ = std::fs::remove_dir_all(dir);
    } else {
        let saved = dir.join("history.jsonl");
        let file = std::fs::File::create(&saved)?;
        history.write_jsonl(std::io::BufWriter::new(file))?;
        problems.push(format!(
            "history saved to {}; server logs in {}",
            saved.display(),
            dir.display()
        ));
    }
    Ok(Run {
        scenario,
        seed,
        ops: history.ops().len(),
        unknown,
        faults,
        problems,
    })
}

/// ZooKeeper's `DigestAuthenticationProvider.generateDigest` of the
/// superuser: `super:` and the base64 of SHA-1 of `super:password`.
fn super_digest(password: &str) -> String {
    use base64::Engine as _;
    use sha1::Digest as _;
    let hash = sha1::Sha1::digest(format!("super:{password}"));
    format!(
        "super:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}
