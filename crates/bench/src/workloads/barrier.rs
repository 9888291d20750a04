//! `barrier`: C clients go together through B double barriers (enter,
//! then leave, ZooKeeper's recipe) — the ZooKeeper paper's barrier
//! experiment. Barriers per second, and how long each client spends in a
//! barrier (enter plus leave).

use std::time::Instant;

use anyhow::Context as _;
use client::recipes::DoubleBarrier;

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Latencies, Measurement, Row};

#[derive(clap::Args, Clone, Debug)]
pub struct BarrierArgs {
    /// Clients (sessions), each a participant of every barrier.
    #[arg(long, default_value_t = 50)]
    pub clients: usize,
    /// Barriers the clients go through, one after the other.
    #[arg(long, default_value_t = 200)]
    pub barriers: usize,
}

impl BarrierArgs {
    pub fn flags(&self) -> String {
        format!("--clients {} --barriers {}", self.clients, self.barriers)
    }
}

pub async fn run(args: &BarrierArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    let mut m = Measurement::new("barrier", deployment.label(), String::new());
    m.setting("clients (barrier size)", args.clients);
    m.setting("barriers", args.barriers);
    let clients = load::connect(deployment.connect_string(), args.clients).await?;
    client::recipes::ensure_path(&clients[0], "/bench/barrier").await?;
    eprintln!(
        "  {} clients through {} double barriers",
        args.clients, args.barriers
    );
    let began = Instant::now();
    let spending = deployment.cpu_clock().start();
    let mut tasks = Vec::new();
    for zk in &clients {
        let (zk, barriers, size) = (zk.clone(), args.barriers, args.clients);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Latencies::default();
            for b in 0..barriers {
                // Each barrier its own directory: a round never meets the
                // previous one's `ready` node.
                let barrier = DoubleBarrier::new(&zk, &format!("/bench/barrier/b{b:06}"), size);
                let started = Instant::now();
                barrier.enter().await.context("entering a barrier")?;
                barrier.leave().await.context("leaving a barrier")?;
                latencies.record(started.elapsed());
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let latencies = load::gather(tasks).await?;
    let elapsed = began.elapsed();
    m.rows.push(
        Row::new("double barrier")
            .metric(
                "barriers_per_sec",
                args.barriers as f64 / elapsed.as_secs_f64(),
            )
            .latencies(&latencies)
            .cpu_per_op(spending.spent(), latencies.count())
            .metric("seconds", elapsed.as_secs_f64()),
    );
    m.notes
        .push("an op is one client entering and leaving one barrier".into());
    load::close_all(clients).await;
    Ok(m)
}
