//! `crud`: C clients in parallel each create N znodes with V bytes, then
//! set, get and delete them, one request at a time per client — the
//! public Rust-client ZooKeeper benchmark. Time per phase and latency per
//! request.

use std::time::Instant;

use anyhow::Context as _;
use client::{Client, CreateMode};

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Latencies, Measurement, Row};

#[derive(clap::Args, Clone, Debug)]
pub struct CrudArgs {
    /// Clients (sessions) working in parallel.
    #[arg(long, default_value_t = 100)]
    pub clients: usize,
    /// Znodes each client creates, sets, gets and deletes.
    #[arg(long, default_value_t = 10_000)]
    pub znodes: usize,
    /// Value sizes in bytes; the four phases run once for each.
    #[arg(long, value_delimiter = ',', default_values_t = [1024, 10240])]
    pub value_sizes: Vec<usize>,
}

impl CrudArgs {
    pub fn flags(&self) -> String {
        let sizes: Vec<String> = self.value_sizes.iter().map(usize::to_string).collect();
        format!(
            "--clients {} --znodes {} --value-sizes {}",
            self.clients,
            self.znodes,
            sizes.join(",")
        )
    }
}

#[derive(Clone, Copy)]
enum Phase {
    Create,
    Set,
    Get,
    Delete,
}

impl Phase {
    const ALL: [Phase; 4] = [Phase::Create, Phase::Set, Phase::Get, Phase::Delete];

    fn name(self) -> &'static str {
        match self {
            Phase::Create => "create",
            Phase::Set => "set",
            Phase::Get => "get",
            Phase::Delete => "delete",
        }
    }

    async fn apply(self, zk: &Client, path: &str, value: &[u8]) -> Result<(), client::Error> {
        match self {
            Phase::Create => zk
                .create(path, value, CreateMode::Persistent)
                .await
                .map(drop),
            Phase::Set => zk.set_data(path, value, None).await.map(drop),
            Phase::Get => zk.get_data(path).await.map(drop),
            Phase::Delete => zk.delete(path, None).await,
        }
    }
}

pub async fn run(args: &CrudArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    let mut m = Measurement::new("crud", deployment.label(), String::new());
    m.setting("clients", args.clients);
    m.setting("znodes per client", args.znodes);
    let clients = load::connect(deployment.connect_string(), args.clients).await?;
    for (c, zk) in clients.iter().enumerate() {
        client::recipes::ensure_path(zk, &format!("/bench/crud/c{c:04}")).await?;
    }
    let cpu = deployment.cpu_clock();
    for &size in &args.value_sizes {
        let value = vec![b'x'; size];
        for phase in Phase::ALL {
            eprintln!(
                "  {} {} bytes: {} clients x {} znodes",
                phase.name(),
                size,
                args.clients,
                args.znodes
            );
            let began = Instant::now();
            let spending = cpu.start();
            let mut tasks = Vec::new();
            for (c, zk) in clients.iter().enumerate() {
                let (zk, value, count) = (zk.clone(), value.clone(), args.znodes);
                tasks.push(tokio::spawn(async move {
                    let mut latencies = Latencies::default();
                    for i in 0..count {
                        let path = format!("/bench/crud/c{c:04}/n{i:08}");
                        let started = Instant::now();
                        phase
                            .apply(&zk, &path, &value)
                            .await
                            .with_context(|| format!("{} {path}", phase.name()))?;
                        latencies.record(started.elapsed());
                    }
                    Ok::<_, anyhow::Error>(latencies)
                }));
            }
            let latencies = load::gather(tasks).await?;
            let elapsed = began.elapsed();
            m.rows.push(
                Row::new(format!("{} {}", phase.name(), size_label(size)))
                    .throughput(&latencies, elapsed)
                    .cpu_per_op(spending.spent(), latencies.count())
                    .metric("seconds", elapsed.as_secs_f64()),
            );
        }
    }
    load::close_all(clients).await;
    Ok(m)
}

fn size_label(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}
