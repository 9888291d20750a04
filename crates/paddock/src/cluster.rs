//! `paddock cluster`: a local ensemble on loopback ports for development
//! and tests — one `paddock serve` process per server, each with its own
//! zoo.cfg and myid, stopped together on Ctrl-C.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use launch::{Cluster, Flavor, Spec};

/// How long the servers get to stop gracefully before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(clap::Args)]
pub struct ClusterArgs {
    /// Voting servers: 1, 3, 5 or 7.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Non-voting servers (ZooKeeper's observers).
    #[arg(long, default_value_t = 0)]
    observers: usize,
    /// Where each server keeps its data and log (`node1`, `node2`, ...).
    #[arg(long, default_value = "paddock-cluster")]
    data_dir: PathBuf,
    /// First client port; servers use consecutive ports. Free ports when
    /// not given.
    #[arg(long)]
    base_port: Option<u16>,
    /// tickTime of every server, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    tick_time: u32,
    /// snapCount of every server: transactions between snapshots.
    #[arg(long, default_value_t = 100_000)]
    snap_count: u64,
}

pub fn run(args: ClusterArgs, shutdown: impl FnOnce()) -> anyhow::Result<()> {
    if ![1, 3, 5, 7].contains(&args.nodes) {
        bail!(
            "--nodes must be 1, 3, 5 or 7 (an odd number of voters), not {}",
            args.nodes
        );
    }
    let binary = std::env::current_exe().context("finding the paddock binary")?;
    let spec = Spec {
        observers: args.observers,
        base_port: args.base_port,
        tick_time_ms: args.tick_time,
        snap_count: args.snap_count,
        ..Spec::new(Flavor::Paddock { binary }, args.nodes, &args.data_dir)
    };
    let mut cluster = Cluster::start(spec)?;
    println!("{}", cluster.connect_string());
    eprintln!(
        "paddock cluster: {} voters and {} observers serving; data and logs in {}; Ctrl-C stops them",
        args.nodes,
        args.observers,
        args.data_dir.display()
    );
    shutdown();
    eprintln!("paddock cluster: stopping");
    // Dropping the cluster would SIGKILL its servers: stop them as an
    // operator would, so that each closes its log and its leader hands over.
    cluster.stop(STOP_GRACE);
    Ok(())
}
