//! `paddock bench`: the experiments published for ZooKeeper and its
//! alternatives, against any ZooKeeper-protocol server, and `compare`,
//! which runs them against Apache ZooKeeper and Paddock on the same
//! machine in the same run and writes a report of both with their ratios.
//!
//! Layout:
//! - `workloads`: one module per experiment (mix, latency, crud, barrier,
//!   watch, treesize, statesize, failover, elections, rebalance, rate,
//!   session-storm, catchup) and
//!   [`workloads::Job`], a
//!   workload with its arguments.
//! - `deploy`: what a workload runs against — a running target, or servers
//!   this tool starts (through the `launch` crate) and can kill and weigh;
//!   `purge` removes a started ZooKeeper's old snapshots as autopurge would.
//! - `load`: sessions, bulk creation, and the outstanding-requests driver.
//! - `measure`: HDR latency histograms, result rows, table and JSON.
//! - `compare`: the side-by-side run; `report`: its REPORT.md; `plot`: SVG
//!   charts; `machine`: the machine and versions every figure names.

mod compare;
mod deploy;
mod load;
mod machine;
mod measure;
mod plot;
mod purge;
mod report;
pub mod workloads;

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;

use deploy::{Deployment, TargetArgs};
use workloads::{
    barrier, catchup, children, crud, elections, failover, latency, mix, rate, rebalance,
    rolling_restart, session_storm, statesize, treesize, watch, Job,
};

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

/// Where a single workload runs and where its JSON goes.
#[derive(clap::Args, Clone, Debug)]
struct Common {
    #[command(flatten)]
    target: TargetArgs,
    /// Where to write the results as JSON (default: bench-WORKLOAD.json).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Throughput and latency vs read ratio: N sessions x K outstanding.
    Mix {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: mix::MixArgs,
    },
    /// Latency vs read ratio at a fixed offered rate (an open loop).
    Rate {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: rate::RateArgs,
    },
    /// One synchronous client: create, get, set, delete; latency CDFs.
    Latency {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: latency::LatencyArgs,
    },
    /// C clients each create, set, get and delete N znodes; time per phase.
    Crud {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: crud::CrudArgs,
    },
    /// C clients through B double barriers; barriers per second.
    Barrier {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: barrier::BarrierArgs,
    },
    /// C clients each watch a znode, all updated at once; notifications/s.
    Watch {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: watch::WatchArgs,
    },
    /// Throughput, memory and restart time as the tree grows.
    Treesize {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: treesize::TreeSizeArgs,
    },
    /// One client's latency while the data grows to gigabytes.
    Statesize {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: statesize::StateSizeArgs,
    },
    /// The unavailability gap when the leader is killed or stopped.
    Failover {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: failover::FailoverArgs,
    },
    /// Minutes of saturating load on an ensemble while every server is
    /// polled: leader changes (spurious elections) counted and timed.
    Elections {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: elections::ElectionsArgs,
    },
    /// One znode with millions of children: created, counted, listed page
    /// by page and in one reply, deleted.
    Children {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: children::ChildrenArgs,
    },
    /// Every server of an ensemble restarted in turn under writes: gaps,
    /// errors, sessions kept, nothing acknowledged lost.
    RollingRestart {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: rolling_restart::RollingRestartArgs,
    },
    /// A Voldemort-style store's metadata: clients routing by a watched
    /// partition map while an elected rebalancer moves partitions.
    Rebalance {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: rebalance::RebalanceArgs,
    },
    /// Thousands of sessions connect, are lost at once and reconnect at
    /// once, while one client's writes are timed.
    SessionStorm {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: session_storm::SessionStormArgs,
    },
    /// A follower wiped and caught up from an ensemble holding gigabytes,
    /// while a client of the leader is timed.
    Catchup {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: catchup::CatchupArgs,
    },
    /// A holder of the `session-storm` workload's sessions, which starts it.
    #[command(hide = true)]
    StormHolder(session_storm::HolderArgs),
    /// One rebalancer of the `rebalance` workload, which starts it.
    #[command(hide = true)]
    Rebalancer(rebalance::RebalancerArgs),
    /// Every workload against Apache ZooKeeper and Paddock, standalone and
    /// as 3-server ensembles, on this machine; writes REPORT.md.
    Compare(compare::CompareArgs),
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let (common, job) = match args.command {
        BenchCommand::Compare(args) => return compare::run(args),
        BenchCommand::Rebalancer(args) => return rebalance::rebalancer_main(args),
        BenchCommand::StormHolder(args) => return session_storm::holder_main(args),
        BenchCommand::Mix { common, args } => (common, Job::Mix(args)),
        BenchCommand::Rate { common, args } => (common, Job::Rate(args)),
        BenchCommand::Latency { common, args } => (common, Job::Latency(args)),
        BenchCommand::Crud { common, args } => (common, Job::Crud(args)),
        BenchCommand::Barrier { common, args } => (common, Job::Barrier(args)),
        BenchCommand::Watch { common, args } => (common, Job::Watch(args)),
        BenchCommand::Treesize { common, args } => (common, Job::TreeSize(args)),
        BenchCommand::Statesize { common, args } => (common, Job::StateSize(args)),
        BenchCommand::Failover { common, args } => (common, Job::Failover(args)),
        BenchCommand::Elections { common, args } => (common, Job::Elections(args)),
        BenchCommand::Children { common, args } => (common, Job::Children(args)),
        BenchCommand::RollingRestart { common, args } => (common, Job::RollingRestart(args)),
        BenchCommand::Rebalance { common, args } => (common, Job::Rebalance(args)),
        BenchCommand::SessionStorm { common, args } => (common, Job::SessionStorm(args)),
        BenchCommand::Catchup { common, args } => (common, Job::Catchup(args)),
    };
    let measurement = measure_one(&job, &common.target)?;
    print!("{}", measurement.table());
    let json = common
        .json
        .unwrap_or_else(|| PathBuf::from(format!("bench-{}.json", job.name())));
    measurement.write_json(&json)?;
    eprintln!("results written to {}", json.display());
    Ok(())
}

/// Runs one workload against one target, start to finish.
fn measure_one(job: &Job, target: &TargetArgs) -> anyhow::Result<measure::Measurement> {
    let mut deployment = Deployment::open(target)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    eprintln!("{} against {}", job.name(), deployment.label());
    let stolen_before = launch::stolen_time();
    let mut measurement = runtime
        .block_on(job.run(&mut deployment))
        .with_context(|| format!("{} against {}", job.name(), deployment.label()))?;
    if let (Some(before), Some(after)) = (stolen_before, launch::stolen_time()) {
        measurement.stolen_ms = Some(after.saturating_sub(before).as_secs_f64() * 1e3);
    }
    measurement.command = format!(
        "paddock bench {} {} {}",
        job.subcommand(),
        target.flags(),
        job.flags()
    );
    // The runtime's tasks (sessions) end before the servers are stopped.
    drop(runtime);
    drop(deployment);
    Ok(measurement)
}
