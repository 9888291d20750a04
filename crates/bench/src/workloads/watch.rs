//! `watch`: C clients each watch their own znode; one writer then updates
//! every znode at once (pipelined) — the ZooKeeper paper's watch
//! notification experiment. Notifications per second and the latency from
//! the update being sent to its event reaching the watcher.

use std::time::Instant;

use anyhow::Context as _;
use client::EventType;

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Latencies, Measurement, Row};

#[derive(clap::Args, Clone, Debug)]
pub struct WatchArgs {
    /// Watching clients (sessions), one znode each.
    #[arg(long, default_value_t = 1000)]
    pub clients: usize,
    /// Times every znode is updated and its watch fires.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
}

impl WatchArgs {
    pub fn flags(&self) -> String {
        format!("--clients {} --rounds {}", self.clients, self.rounds)
    }
}

pub async fn run(args: &WatchArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    let mut m = Measurement::new("watch", deployment.label(), String::new());
    m.setting("watching clients", args.clients);
    m.setting("rounds", args.rounds);
    eprintln!("  connecting {} watchers", args.clients);
    let watchers = load::connect(deployment.connect_string(), args.clients).await?;
    let writer = load::connect(deployment.connect_string(), 1)
        .await?
        .remove(0);
    client::recipes::ensure_path(&writer, "/bench/watch").await?;
    let paths: Vec<String> = (0..args.clients)
        .map(|i| format!("/bench/watch/w{i:06}"))
        .collect();
    load::create_all(
        std::slice::from_ref(&writer),
        paths.clone(),
        bytes::Bytes::new(),
        64,
        "creating watched znodes",
    )
    .await?;
    let mut latencies = Latencies::default();
    let mut busy = std::time::Duration::ZERO;
    let spending = deployment.cpu_clock().start();
    for round in 0..args.rounds {
        eprintln!("  round {} of {}", round + 1, args.rounds);
        let mut watches = Vec::with_capacity(args.clients);
        for (zk, path) in watchers.iter().zip(&paths) {
            let (_, _, watch) = zk.get_data_watched(path).await?;
            watches.push(watch);
        }
        let began = Instant::now();
        let updates: Vec<_> = paths
            .iter()
            .map(|path| writer.set_data(path, b"changed", None))
            .collect();
        let waiting: Vec<_> = watches
            .into_iter()
            .map(|watch| {
                tokio::spawn(async move {
                    let event = watch.await.context("waiting for a notification")?;
                    anyhow::ensure!(
                        event.event_type == EventType::NodeDataChanged,
                        "expected a data change, got {:?}",
                        event.event_type
                    );
                    Ok(began.elapsed())
                })
            })
            .collect();
        for update in updates {
            update.await?;
        }
        let mut last = std::time::Duration::ZERO;
        for waited in waiting {
            let latency = waited.await??;
            latencies.record(latency);
            last = last.max(latency);
        }
        busy += last;
    }
    m.rows.push(
        Row::new("notification")
            .metric(
                "notifications_per_sec",
                latencies.count() as f64 / busy.as_secs_f64().max(1e-9),
            )
            .latencies(&latencies)
            .cpu_per_op(spending.spent(), latencies.count()),
    );
    m.notes.push(
        "latency: from the writer sending all updates of a round to each event arriving".into(),
    );
    m.notes.push(
        "cpu_us_per_op: per notification, with the getData that set its watch and the update \
         that fired it"
            .into(),
    );
    load::close_all(watchers).await;
    writer.close().await;
    Ok(m)
}
