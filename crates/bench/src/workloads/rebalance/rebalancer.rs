//! The rebalancer, and the workload's handle on it.
//!
//! It runs as its own process (`paddock bench rebalancer`, a hidden
//! command), so that the workload can kill it the way a crash does:
//! SIGKILL, no closeSession, its session left to expire on the server.
//! Several run at once; a leader election picks the one that works, and
//! the others wait their turn.
//!
//! The leader carries out the plan one move at a time. Each move is one
//! multi: the check that its candidate node still stands (so a rebalancer
//! that lost its session cannot move anything), then the plan, the map and
//! the partition's owner, each set at the version it was read at. A move
//! therefore happens once or not at all, whoever tries it and however
//! often, and a new leader resumes at the first move not done.
//!
//! It reports on stdout, one line each, for the workload to read:
//! `leading`, `moved STEP MAP_VERSION UNIX_MICROS` once a move is
//! acknowledged, and `finished`.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};
use client::recipes::{LeaderElection, Leadership};
use client::{Client, ConnectOptions, ErrorCode, Op, OpResult};
use tokio::sync::mpsc;

use super::layout::{Layout, PartitionMap, Plan};
use super::unix_micros;

#[derive(clap::Args, Clone, Debug)]
pub struct RebalancerArgs {
    /// The ensemble's connect string.
    #[arg(long)]
    pub connect: String,
    /// The run's root znode (see the workload's layout).
    #[arg(long)]
    pub root: String,
    /// Pause after each move, in milliseconds.
    #[arg(long)]
    pub step_interval_ms: u64,
    /// The rebalancer's session timeout, in milliseconds.
    #[arg(long)]
    pub session_timeout_ms: u64,
}

/// `paddock bench rebalancer`: campaign, then carry out the plan.
pub fn main(args: RebalancerArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(rebalance(&args))
}

async fn rebalance(args: &RebalancerArgs) -> anyhow::Result<()> {
    let layout = Layout {
        root: args.root.clone(),
    };
    let options =
        ConnectOptions::new().session_timeout(Duration::from_millis(args.session_timeout_ms));
    let zk = Client::connect(&args.connect, options)
        .await
        .with_context(|| format!("connecting to {}", args.connect))?;
    let leadership = LeaderElection::new(&zk, &layout.election())
        .campaign(b"rebalancer")
        .await
        .context("campaigning")?;
    say("leading");
    wait_for_plan(&zk, &layout).await?;
    loop {
        match move_once(&zk, &layout, &leadership).await? {
            Attempt::Finished => break,
            Attempt::Again => {}
            Attempt::Moved { step, map_version } => {
                say(&format!("moved {step} {map_version} {}", unix_micros()));
                tokio::time::sleep(Duration::from_millis(args.step_interval_ms)).await;
            }
        }
    }
    say("finished");
    leadership.resign().await?;
    zk.close().await;
    Ok(())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // The workload reads these as they come: a line stuck in a buffer
    // would be a move reported late.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn wait_for_plan(zk: &Client, layout: &Layout) -> anyhow::Result<()> {
    loop {
        let (stat, watch) = zk.exists_watched(&layout.plan()).await?;
        if stat.is_some() {
            return Ok(());
        }
        watch.await?;
    }
}

/// What one try at the plan's next move came to.
enum Attempt {
    /// Every move is done.
    Finished,
    /// The move did not happen (a version moved on, or the connection
    /// broke and it may or may not have): read the plan again.
    Again,
    /// Move `step` (counted from 1) is acknowledged; the map is now at
    /// `map_version`.
    Moved { step: usize, map_version: i32 },
}

async fn move_once(
    zk: &Client,
    layout: &Layout,
    leadership: &Leadership,
) -> anyhow::Result<Attempt> {
    let (plan_data, plan_stat) = zk.get_data(&layout.plan()).await?;
    let plan = Plan::decode(&plan_data.unwrap_or_default())?;
    if plan.is_finished() {
        return Ok(Attempt::Finished);
    }
    let step = plan.moves[plan.done];
    let (map_data, map_stat) = zk.get_data(&layout.map()).await?;
    let mut map = PartitionMap::decode(&map_data.unwrap_or_default())?;
    map.owners[step.partition] = step.to;
    let owner = layout.partition(step.partition);
    let Some(owner_stat) = zk.exists(&owner).await? else {
        bail!("{owner} is missing");
    };
    let ops = [
        Op::check(leadership.path(), 0),
        Op::set_data(
            &layout.plan(),
            plan.advanced().encode(),
            Some(plan_stat.version),
        ),
        Op::set_data(&layout.map(), map.encode(), Some(map_stat.version)),
        Op::set_data(
            &owner,
            step.to.to_string().into_bytes(),
            Some(owner_stat.version),
        ),
    ];
    match zk.multi(ops).await {
        Ok(results) => match results.get(2) {
            Some(OpResult::SetData { stat }) => Ok(Attempt::Moved {
                step: plan.done + 1,
                map_version: stat.version,
            }),
            other => bail!("the move's multi answered {other:?} for the map"),
        },
        Err(e) if e.is_connection_loss() || e.code() == Some(ErrorCode::BadVersion) => {
            Ok(Attempt::Again)
        }
        Err(e) => Err(e).context("moving a partition"),
    }
}

/// What a rebalancer process reported, tagged with which one.
#[derive(Clone, Copy, Debug)]
pub enum Report {
    Leading {
        who: usize,
    },
    Moved {
        who: usize,
        step: usize,
        map_version: i32,
        at_micros: u64,
    },
    Finished {
        who: usize,
    },
    /// Its stdout closed: it exited or was killed.
    Gone {
        who: usize,
    },
}

/// The rebalancer processes of one run, killed when dropped.
pub struct Rebalancers {
    children: Vec<Child>,
    pub reports: mpsc::UnboundedReceiver<Report>,
}

impl Rebalancers {
    /// Starts `count` rebalancers (this same executable).
    pub fn start(count: usize, args: &RebalancerArgs) -> anyhow::Result<Rebalancers> {
        let exe = std::env::current_exe().context("finding this executable")?;
        let (tx, reports) = mpsc::unbounded_channel();
        let mut children = Vec::with_capacity(count);
        for who in 0..count {
            let mut child = Command::new(&exe)
                .args(["bench", "rebalancer", "--connect", &args.connect])
                .args(["--root", &args.root])
                .args(["--step-interval-ms", &args.step_interval_ms.to_string()])
                .args(["--session-timeout-ms", &args.session_timeout_ms.to_string()])
                .stdout(Stdio::piped())
                .stdin(Stdio::null())
                .spawn()
                .with_context(|| format!("starting {} bench rebalancer", exe.display()))?;
            let stdout = child.stdout.take().expect("stdout is piped");
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some(report) = parse_report(who, &line) {
                        let _ = tx.send(report);
                    }
                }
                let _ = tx.send(Report::Gone { who });
            });
            children.push(child);
        }
        Ok(Rebalancers { children, reports })
    }

    /// SIGKILLs rebalancer `who`.
    pub fn kill(&mut self, who: usize) -> anyhow::Result<()> {
        self.children[who]
            .kill()
            .with_context(|| format!("killing rebalancer {who}"))?;
        let _ = self.children[who].wait();
        Ok(())
    }
}

impl Drop for Rebalancers {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn parse_report(who: usize, line: &str) -> Option<Report> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words[..] {
        ["leading"] => Some(Report::Leading { who }),
        ["finished"] => Some(Report::Finished { who }),
        ["moved", step, map_version, at_micros] => Some(Report::Moved {
            who,
            step: step.parse().ok()?,
            map_version: map_version.parse().ok()?,
            at_micros: at_micros.parse().ok()?,
        }),
        _ => None,
    }
}
