//! One module per workload: its arguments and its run against a
//! deployment, returning what it measured.

pub mod barrier;
pub mod catchup;
pub mod children;
pub mod crud;
pub mod elections;
pub mod failover;
pub mod latency;
pub mod mix;
pub mod rate;
pub mod rebalance;
pub mod rolling_restart;
pub mod session_storm;
pub mod statesize;
pub mod treesize;
pub mod watch;

use crate::deploy::Deployment;
use crate::measure::Measurement;

/// What `cpu_us_per_op` means in the workloads that stop servers.
const STOPPING_CPU_NOTE: &str = "cpu_us_per_op: the servers' CPU time from the first write to the last, per acknowledged write, including what the stopped processes spent before they ended and what their successors spent recovering and rejoining";

/// A workload with its arguments.
#[derive(Clone, Debug)]
pub enum Job {
    Mix(mix::MixArgs),
    Latency(latency::LatencyArgs),
    Crud(crud::CrudArgs),
    Barrier(barrier::BarrierArgs),
    Watch(watch::WatchArgs),
    TreeSize(treesize::TreeSizeArgs),
    StateSize(statesize::StateSizeArgs),
    Failover(failover::FailoverArgs),
    Elections(elections::ElectionsArgs),
    Children(children::ChildrenArgs),
    RollingRestart(rolling_restart::RollingRestartArgs),
    Rebalance(rebalance::RebalanceArgs),
    Rate(rate::RateArgs),
    SessionStorm(session_storm::SessionStormArgs),
    Catchup(catchup::CatchupArgs),
}

impl Job {
    pub fn name(&self) -> &'static str {
        match self {
            Job::Mix(_) => "mix",
            Job::Latency(_) => "latency",
            Job::Crud(a) => a.name(),
            Job::Barrier(_) => "barrier",
            Job::Watch(_) => "watch",
            Job::TreeSize(_) => "treesize",
            Job::StateSize(_) => "statesize",
            Job::Failover(a) => a.name(),
            Job::Elections(_) => "elections",
            Job::Children(_) => "children",
            Job::RollingRestart(_) => "rolling-restart",
            Job::Rebalance(_) => "rebalance",
            Job::Rate(_) => "rate",
            Job::SessionStorm(_) => "session-storm",
            Job::Catchup(_) => "catchup",
        }
    }

    /// The `paddock bench` subcommand that runs it: a preset is reported
    /// under a name of its own but run by its workload's subcommand.
    pub fn subcommand(&self) -> &'static str {
        match self {
            Job::Crud(_) => "crud",
            Job::Failover(_) => "failover",
            job => job.name(),
        }
    }

    /// The workload's own flags, as `paddock bench NAME` takes them.
    pub fn flags(&self) -> String {
        match self {
            Job::Mix(a) => a.flags(),
            Job::Latency(a) => a.flags(),
            Job::Crud(a) => a.flags(),
            Job::Barrier(a) => a.flags(),
            Job::Watch(a) => a.flags(),
            Job::TreeSize(a) => a.flags(),
            Job::StateSize(a) => a.flags(),
            Job::Failover(a) => a.flags(),
            Job::Elections(a) => a.flags(),
            Job::Children(a) => a.flags(),
            Job::RollingRestart(a) => a.flags(),
            Job::Rebalance(a) => a.flags(),
            Job::Rate(a) => a.flags(),
            Job::SessionStorm(a) => a.flags(),
            Job::Catchup(a) => a.flags(),
        }
    }

    pub async fn run(&self, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
        match self {
            Job::Mix(a) => mix::run(a, deployment).await,
            Job::Latency(a) => latency::run(a, deployment).await,
            Job::Crud(a) => crud::run(a, deployment).await,
            Job::Barrier(a) => barrier::run(a, deployment).await,
            Job::Watch(a) => watch::run(a, deployment).await,
            Job::TreeSize(a) => treesize::run(a, deployment).await,
            Job::StateSize(a) => statesize::run(a, deployment).await,
            Job::Failover(a) => failover::run(a, deployment).await,
            Job::Elections(a) => elections::run(a, deployment).await,
            Job::Children(a) => children::run(a, deployment).await,
            Job::RollingRestart(a) => rolling_restart::run(a, deployment).await,
            Job::Rebalance(a) => rebalance::run(a, deployment).await,
            Job::Rate(a) => rate::run(a, deployment).await,
            Job::SessionStorm(a) => session_storm::run(a, deployment).await,
            Job::Catchup(a) => catchup::run(a, deployment).await,
        }
    }
}
