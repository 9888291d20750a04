//! `rebalance`: a Voldemort-style store's cluster metadata on the server.
//!
//! Storage nodes register ephemerally; the partition map, each partition's
//! owner and the rebalancing plan live in znodes (see `layout`); a
//! thousand clients route requests by a cached copy of the map that a
//! watch keeps fresh (`routing`). A new storage node joins, a plan gives it
//! its share, and the rebalancer elected among two moves the partitions
//! one multi at a time (`rebalancer`). Halfway through, the rebalancer is
//! killed: the other one is elected once the dead one's session expires
//! and finishes the plan, and the run checks that every move happened
//! exactly once.
//!
//! Measured (`tally`): how long a map change takes to reach every client,
//! how many requests were routed by a map already replaced, and the
//! latency of reads and writes before and during the rebalance.

mod layout;
mod rebalancer;
mod routing;
mod tally;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use client::{Client, CreateMode};
use tokio::sync::watch;

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Measurement, Row};
use layout::{Layout, PartitionMap, Plan};
pub use rebalancer::{main as rebalancer_main, RebalancerArgs};
use rebalancer::{Rebalancers, Report};
use routing::{Pace, Router};
use tally::{Committed, Window};

#[derive(clap::Args, Clone, Debug)]
pub struct RebalanceArgs {
    /// Client sessions, each caching the partition map through a watch and
    /// routing requests by it.
    #[arg(long, default_value_t = 1000)]
    pub clients: usize,
    /// Storage nodes once the new one has joined.
    #[arg(long, default_value_t = 4)]
    pub storage_nodes: usize,
    #[arg(long, default_value_t = 64)]
    pub partitions: usize,
    /// Requests per second each client sends.
    #[arg(long, default_value_t = 5.0)]
    pub rate: f64,
    /// The share of those requests that write.
    #[arg(long, default_value_t = 0.2)]
    pub write_ratio: f64,
    /// The rebalancer's pause after each move, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub step_interval_ms: u64,
    /// Seconds of routing before the new node joins.
    #[arg(long, default_value_t = 3.0)]
    pub warmup: f64,
    /// Kill the rebalancer (SIGKILL) once it has made this many moves
    /// (default: half the plan's); 0 never does.
    #[arg(long)]
    pub kill_after_moves: Option<usize>,
}

impl RebalanceArgs {
    pub fn flags(&self) -> String {
        let mut flags = format!(
            "--clients {} --storage-nodes {} --partitions {} --rate {} --write-ratio {} \
             --step-interval-ms {} --warmup {}",
            self.clients,
            self.storage_nodes,
            self.partitions,
            self.rate,
            self.write_ratio,
            self.step_interval_ms,
            self.warmup
        );
        if let Some(moves) = self.kill_after_moves {
            flags += &format!(" --kill-after-moves {moves}");
        }
        flags
    }
}

/// The rebalancers' session timeout: ZooKeeper's least at tickTime 2000,
/// so that a killed one is replaced as soon as either server allows.
const REBALANCER_SESSION_TIMEOUT: Duration = Duration::from_secs(4);
const REBALANCERS: usize = 2;
/// How long a move may wait on a new rebalancer before the run fails.
const MOVE_LIMIT: Duration = Duration::from_secs(60);

/// Microseconds since the Unix epoch: the clock the rebalancer processes
/// and the clients share.
fn unix_micros() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}

pub async fn run(args: &RebalanceArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    ensure!(
        args.storage_nodes >= 2 && args.partitions >= args.storage_nodes,
        "rebalance needs at least 2 storage nodes and a partition for each"
    );
    ensure!(args.rate > 0.0, "--rate must be above 0");
    let connect = deployment.connect_string().to_string();
    let admin = load::connect(&connect, 1).await?.remove(0);
    let layout = Arc::new(Layout {
        root: format!("/bench/rebalance/run-{}", unix_micros()),
    });
    let initial = PartitionMap::round_robin(args.partitions, args.storage_nodes - 1);
    set_up(&admin, &layout, &initial).await?;
    let storage = load::connect(&connect, args.storage_nodes).await?;
    for (n, node) in storage.iter().enumerate().take(args.storage_nodes - 1) {
        node.create(&layout.node(n), b"up", CreateMode::Ephemeral)
            .await?;
    }
    let mut rebalancers = Rebalancers::start(
        REBALANCERS,
        &RebalancerArgs {
            connect: connect.clone(),
            root: layout.root.clone(),
            step_interval_ms: args.step_interval_ms,
            session_timeout_ms: REBALANCER_SESSION_TIMEOUT.as_millis() as u64,
        },
    )?;
    let (stop, stopped) = watch::channel(false);
    let spending = deployment.cpu_clock().start();
    eprintln!("  connecting {} routing clients", args.clients);
    let routers = start_routers(&connect, args, &layout, stopped).await?;
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;

    let joining = args.storage_nodes - 1;
    storage[joining]
        .create(&layout.node(joining), b"up", CreateMode::Ephemeral)
        .await?;
    let plan = Plan::for_joining(&initial, args.storage_nodes, joining);
    let kill_after = args.kill_after_moves.unwrap_or(plan.moves.len() / 2);
    ensure!(
        kill_after < plan.moves.len(),
        "--kill-after-moves {kill_after} leaves nothing for the next rebalancer: the plan has {} moves",
        plan.moves.len()
    );
    let began = unix_micros();
    admin
        .create(&layout.plan(), plan.encode(), CreateMode::Persistent)
        .await?;
    eprintln!(
        "  node {joining} joined: {} moves planned",
        plan.moves.len()
    );
    let carried = follow_plan(&mut rebalancers, plan.moves.len(), kill_after).await?;
    wait_for_clients(&routers, plan.moves.len() as i32).await;
    let _ = stop.send(true);
    let spent = spending.spent();
    let mut logs = Vec::with_capacity(routers.len());
    for router in routers {
        logs.push(router.finish().await?);
    }
    check_exactly_once(&admin, &layout, &initial, &plan).await?;
    drop(rebalancers);
    load::close_all(storage).await;
    admin.close().await;
    let window = Window {
        began,
        ended: carried.committed.last().map_or(began, |c| c.at_micros),
    };
    Ok(measurement(
        args,
        deployment.label(),
        &logs,
        &carried,
        window,
        spent,
    ))
}

fn measurement(
    args: &RebalanceArgs,
    target: &str,
    logs: &[routing::ClientLog],
    carried: &Carried,
    window: Window,
    cpu_spent: Option<Duration>,
) -> Measurement {
    let mut m = Measurement::new("rebalance", target, String::new());
    m.setting("clients", args.clients);
    m.setting("storage nodes", args.storage_nodes);
    m.setting("partitions", args.partitions);
    m.setting("requests per client per s", args.rate);
    m.setting(
        "rebalancer session timeout s",
        REBALANCER_SESSION_TIMEOUT.as_secs(),
    );
    m.rows
        .extend(tally::tally(logs, &carried.committed, window).rows());
    let mut rebalancer = Row::new("rebalancer").metric("moves", carried.moves as f64);
    if let Some(gap) = carried.takeover {
        rebalancer = rebalancer.metric("takeover_ms", gap.as_secs_f64() * 1000.0);
    }
    m.rows.push(rebalancer);
    let requests = logs.iter().map(|log| log.sent.len() as u64).sum();
    m.rows
        .push(Row::new("servers").cpu_per_op(cpu_spent, requests));
    m.notes.push(
        "a map change counts from its rebalancer hearing the multi acknowledged to a client \
         holding that map (read after its watch fired); stale_routed: requests sent after a \
         newer map was acknowledged than the one they were routed by"
            .into(),
    );
    m.notes.push(format!(
        "takeover: from SIGKILLing the rebalancer to the next move, bounded below by its \
         session timeout ({} s); then every move is checked to have happened exactly once",
        REBALANCER_SESSION_TIMEOUT.as_secs()
    ));
    m.notes.push(
        "servers cpu_us_per_op: the servers' CPU from the clients' start to their stop, the \
         map reads after each change included, per routed request"
            .into(),
    );
    m
}

/// The metadata znodes, with partitions dealt over every node but the one
/// that joins later.
async fn set_up(admin: &Client, layout: &Layout, map: &PartitionMap) -> anyhow::Result<()> {
    client::recipes::ensure_path(admin, &layout.root).await?;
    for dir in [layout.nodes(), layout.partitions(), layout.data()] {
        admin.create(&dir, None, CreateMode::Persistent).await?;
    }
    let mut creating = Vec::new();
    for (j, owner) in map.owners.iter().enumerate() {
        let owner = owner.to_string();
        creating.push(admin.create(
            &layout.partition(j),
            owner.as_bytes(),
            CreateMode::Persistent,
        ));
        creating.push(admin.create(&layout.data_of(j), None, CreateMode::Persistent));
    }
    creating.push(admin.create(&layout.map(), map.encode(), CreateMode::Persistent));
    for create in creating {
        create.await.context("creating the cluster metadata")?;
    }
    Ok(())
}

async fn start_routers(
    connect: &str,
    args: &RebalanceArgs,
    layout: &Arc<Layout>,
    stopped: watch::Receiver<bool>,
) -> anyhow::Result<Vec<Router>> {
    let pace = Pace {
        every: Duration::from_secs_f64(1.0 / args.rate),
        write_ratio: args.write_ratio,
    };
    let mut routers = Vec::with_capacity(args.clients);
    for zk in load::connect(connect, args.clients).await? {
        routers.push(Router::start(zk, layout.clone(), pace, stopped.clone()).await?);
    }
    Ok(routers)
}

/// The moves as the rebalancers carried them out.
struct Carried {
    /// The moves reported, in order; a move made just before its
    /// rebalancer was killed may be missing.
    committed: Vec<Committed>,
    /// Moves in the plan.
    moves: usize,
    /// From the kill to the next move.
    takeover: Option<Duration>,
}

/// Reads the rebalancers' reports until the plan is finished, killing the
/// working one once it has made `kill_after` moves.
async fn follow_plan(
    rebalancers: &mut Rebalancers,
    moves: usize,
    kill_after: usize,
) -> anyhow::Result<Carried> {
    let mut committed: Vec<Committed> = Vec::new();
    let mut steps_seen = std::collections::BTreeSet::new();
    let mut killed: Option<(usize, Instant)> = None;
    let mut takeover = None;
    loop {
        let report = tokio::time::timeout(MOVE_LIMIT, rebalancers.reports.recv())
            .await
            .context("no move for a minute")?
            .context("every rebalancer is gone")?;
        match report {
            Report::Leading { who } => eprintln!("  rebalancer {who} leads"),
            Report::Moved {
                who,
                step,
                map_version,
                at_micros,
            } => {
                ensure!(
                    steps_seen.insert(step),
                    "move {step} was reported twice (the second time by rebalancer {who})"
                );
                if let Some((_, at)) = killed.filter(|_| takeover.is_none()) {
                    takeover = Some(at.elapsed());
                }
                committed.push(Committed {
                    map_version,
                    at_micros,
                });
                if step == kill_after && killed.is_none() {
                    eprintln!("  killing rebalancer {who} after move {step}");
                    rebalancers.kill(who)?;
                    killed = Some((who, Instant::now()));
                }
            }
            Report::Finished { who } => {
                eprintln!("  rebalancer {who} finished the plan");
                break;
            }
            Report::Gone { who } if killed.map(|(k, _)| k) != Some(who) => {
                bail!("rebalancer {who} exited before the plan was finished (its error is above)")
            }
            Report::Gone { .. } => {}
        }
    }
    committed.sort_by_key(|c| c.map_version);
    Ok(Carried {
        committed,
        moves,
        takeover,
    })
}

/// Waits (a while at most) until every client holds the final map.
async fn wait_for_clients(routers: &[Router], final_version: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && routers.iter().any(|r| r.version() < final_version) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every move happened once: the plan is done, the map is the planned one
/// at one version per move, and each owner znode changed once if its
/// partition moved and never otherwise.
async fn check_exactly_once(
    admin: &Client,
    layout: &Layout,
    initial: &PartitionMap,
    plan: &Plan,
) -> anyhow::Result<()> {
    let (data, _) = admin.get_data(&layout.plan()).await?;
    let done = Plan::decode(&data.unwrap_or_default())?;
    ensure!(done.is_finished(), "the plan stopped at move {}", done.done);
    let (data, stat) = admin.get_data(&layout.map()).await?;
    let map = PartitionMap::decode(&data.unwrap_or_default())?;
    ensure!(
        map == plan.apply_all(initial),
        "the final map is not the planned one"
    );
    ensure!(
        stat.version as usize == plan.moves.len(),
        "the map changed {} times for {} moves",
        stat.version,
        plan.moves.len()
    );
    for (j, owner) in map.owners.iter().enumerate() {
        let (data, stat) = admin.get_data(&layout.partition(j)).await?;
        let moves = plan.moves.iter().filter(|m| m.partition == j).count();
        ensure!(
            data.as_deref() == Some(owner.to_string().as_bytes()) && stat.version as usize == moves,
            "partition {j}: owner {:?} after {} changes, planned {owner} after {moves}",
            data,
            stat.version
        );
    }
    Ok(())
}
