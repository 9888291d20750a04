//! `crud`: C clients in parallel each create N znodes with V bytes, then
//! set, get and delete them, one request at a time per client — the
//! public Rust-client ZooKeeper benchmark. Time per phase, latency per
//! request, and the rate over each phase's first and last tenth, so that
//! a server slowing down as its data grows shows. `--preset 10gb` is that
//! benchmark at full size, where ZooKeeper slowed down as the data grew.

use std::time::Instant;

use anyhow::Context as _;
use client::{Client, CreateMode};

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Latencies, Measurement, Row, MIB};

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
    /// Run a preset instead of the flags above.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// The public benchmark at full size: 100 clients each create 10,000
    /// empty znodes, set them to 10 KB (about 10 GB in all), then to 1 KB,
    /// get and delete them.
    #[value(name = "10gb")]
    TenGb,
}

/// One phase over every znode, writing values of `value_size` bytes (or
/// reading or deleting values of that size).
#[derive(Clone, Copy)]
struct Step {
    phase: Phase,
    value_size: usize,
}

impl Step {
    /// The bytes of data `znodes` znodes hold once the phase is over.
    fn data_held(self, znodes: usize) -> usize {
        match self.phase {
            Phase::Delete => 0,
            Phase::Create | Phase::Set | Phase::Get => self.value_size * znodes,
        }
    }
}

impl CrudArgs {
    /// The workload's name: a preset is reported apart.
    pub fn name(&self) -> &'static str {
        match self.preset {
            Some(Preset::TenGb) => "crud-10gb",
            None => "crud",
        }
    }

    pub fn flags(&self) -> String {
        if self.preset == Some(Preset::TenGb) {
            return "--preset 10gb".into();
        }
        let sizes: Vec<String> = self.value_sizes.iter().map(usize::to_string).collect();
        format!(
            "--clients {} --znodes {} --value-sizes {}",
            self.clients,
            self.znodes,
            sizes.join(",")
        )
    }

    /// Clients, znodes per client, and the phases in order.
    fn plan(&self) -> (usize, usize, Vec<Step>) {
        let step = |phase, value_size| Step { phase, value_size };
        match self.preset {
            Some(Preset::TenGb) => (
                100,
                10_000,
                vec![
                    step(Phase::Create, 0),
                    step(Phase::Set, 10_240),
                    step(Phase::Set, 1024),
                    step(Phase::Get, 1024),
                    step(Phase::Delete, 1024),
                ],
            ),
            None => {
                let steps = self
                    .value_sizes
                    .iter()
                    .flat_map(|&size| Phase::ALL.map(|phase| step(phase, size)))
                    .collect();
                (self.clients, self.znodes, steps)
            }
        }
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
    let (client_count, znodes, steps) = args.plan();
    let mut m = Measurement::new(args.name(), deployment.label(), String::new());
    m.setting("clients", client_count);
    m.setting("znodes per client", znodes);
    let clients = load::connect(deployment.connect_string(), client_count).await?;
    for (c, zk) in clients.iter().enumerate() {
        client::recipes::ensure_path(zk, &format!("/bench/crud/c{c:04}")).await?;
    }
    let cpu = deployment.cpu_clock();
    for step in steps {
        let label = format!("{} {}", step.phase.name(), size_label(step.value_size));
        eprintln!("  {label}: {client_count} clients x {znodes} znodes");
        let spending = cpu.start();
        let tenths = load::Tenths::start(client_count * znodes);
        let progress =
            load::report_progress(label.clone(), client_count * znodes, tenths.done.clone());
        let value = vec![b'x'; step.value_size];
        let mut tasks = Vec::new();
        for (c, zk) in clients.iter().enumerate() {
            let (zk, value, tenths) = (zk.clone(), value.clone(), tenths.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Latencies::default();
                for i in 0..znodes {
                    let path = format!("/bench/crud/c{c:04}/n{i:08}");
                    let started = Instant::now();
                    step.phase
                        .apply(&zk, &path, &value)
                        .await
                        .with_context(|| format!("{} {path}", step.phase.name()))?;
                    latencies.record(started.elapsed());
                    tenths.done_one();
                }
                Ok::<_, anyhow::Error>(latencies)
            }));
        }
        let latencies = load::gather(tasks).await;
        progress.abort();
        let latencies = latencies?;
        let mut row = tenths
            .rates(Row::new(label).latencies(&latencies))
            .cpu_per_op(spending.spent(), latencies.count());
        if let Some(peak) = deployment.peak_rss_bytes() {
            let data = step.data_held(client_count * znodes);
            row = row
                .metric("peak_rss_mb", peak as f64 / MIB)
                .metric("data_mb", data as f64 / MIB);
        }
        m.rows.push(row);
    }
    m.notes.push(
        "peak_rss_mb: the server's most resident memory since it started (VmHWM), as of the \
         phase's end; data_mb: the znodes' data the tree holds then"
            .into(),
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(preset: Option<Preset>) -> CrudArgs {
        CrudArgs {
            clients: 3,
            znodes: 10,
            value_sizes: vec![100, 1000],
            preset,
        }
    }

    fn phases(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|s| format!("{} {}", s.phase.name(), size_label(s.value_size)))
            .collect()
    }

    #[test]
    fn the_10gb_preset_is_the_public_benchmark_at_full_size() {
        let (clients, znodes, steps) = args(Some(Preset::TenGb)).plan();
        assert_eq!((clients, znodes), (100, 10_000));
        assert_eq!(
            phases(&steps),
            [
                "create 0 B",
                "set 10 KB",
                "set 1 KB",
                "get 1 KB",
                "delete 1 KB"
            ]
        );
        assert_eq!(args(Some(Preset::TenGb)).name(), "crud-10gb");
        assert_eq!(args(Some(Preset::TenGb)).flags(), "--preset 10gb");
    }

    #[test]
    fn the_10gb_preset_holds_most_data_after_setting_10_kb_values() {
        let (clients, znodes, steps) = args(Some(Preset::TenGb)).plan();
        let held: Vec<usize> = steps
            .iter()
            .map(|s| s.data_held(clients * znodes))
            .collect();
        assert_eq!(held, [0, 10_240_000_000, 1_024_000_000, 1_024_000_000, 0]);
    }

    #[test]
    fn without_a_preset_every_value_size_runs_the_four_phases() {
        let (clients, znodes, steps) = args(None).plan();
        assert_eq!((clients, znodes), (3, 10));
        assert_eq!(
            phases(&steps),
            [
                "create 100 B",
                "set 100 B",
                "get 100 B",
                "delete 100 B",
                "create 1000 B",
                "set 1000 B",
                "get 1000 B",
                "delete 1000 B"
            ]
        );
        assert_eq!(args(None).name(), "crud");
    }
}
