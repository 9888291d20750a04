//! `mix`: throughput and latency against the read ratio — the ZooKeeper
//! paper's throughput experiment. N sessions each keep K requests
//! outstanding on a pre-created set of znodes; each request reads
//! (getData) or overwrites (setData) a random one. The same load sent at
//! a fixed rate instead is the `rate` workload.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::deploy::Deployment;
use crate::load::{self, Drive, Offered};
use crate::measure::{Measurement, Row};

/// The load of `mix` and `rate`: sessions over a set of znodes, measured
/// at each read ratio in turn.
#[derive(clap::Args, Clone, Debug)]
pub struct MixShape {
    /// Sessions, each on its own connection.
    #[arg(long, default_value_t = 32)]
    pub sessions: usize,
    /// Znodes the requests spread over.
    #[arg(long, default_value_t = 1000)]
    pub znodes: usize,
    /// Bytes of data per znode and per write.
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
    /// Fractions of reads to measure, each in turn.
    #[arg(long, value_delimiter = ',', default_values_t = [0.0, 0.5, 0.9, 1.0])]
    pub read_ratios: Vec<f64>,
    /// Seconds measured at each read ratio.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Seconds of load before measuring at each read ratio.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
}

impl MixShape {
    pub fn flags(&self) -> String {
        let ratios: Vec<String> = self.read_ratios.iter().map(f64::to_string).collect();
        format!(
            "--sessions {} --znodes {} --value-size {} --read-ratios {} --seconds {} --warmup {}",
            self.sessions,
            self.znodes,
            self.value_size,
            ratios.join(","),
            self.seconds,
            self.warmup
        )
    }
}

#[derive(clap::Args, Clone, Debug)]
pub struct MixArgs {
    #[command(flatten)]
    pub shape: MixShape,
    /// Requests each session keeps outstanding.
    #[arg(long, default_value_t = 16)]
    pub outstanding: usize,
}

impl MixArgs {
    pub fn flags(&self) -> String {
        format!("{} --outstanding {}", self.shape.flags(), self.outstanding)
    }
}

/// How requests are sent: each session keeping some outstanding (a closed
/// loop), or a fixed rate over all sessions (an open loop).
#[derive(Clone, Copy, Debug)]
pub enum Pacing {
    Outstanding(usize),
    PerSecond(f64),
}

pub async fn run(args: &MixArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    let mut m = Measurement::new("mix", deployment.label(), String::new());
    m.setting("outstanding per session", args.outstanding);
    measure(
        &args.shape,
        Pacing::Outstanding(args.outstanding),
        deployment,
        &mut m,
    )
    .await?;
    Ok(m)
}

/// Runs the load at each read ratio, a row each, into `m`.
pub async fn measure(
    shape: &MixShape,
    pacing: Pacing,
    deployment: &mut Deployment,
    m: &mut Measurement,
) -> anyhow::Result<()> {
    if shape.read_ratios.iter().any(|r| !(0.0..=1.0).contains(r)) {
        anyhow::bail!("--read-ratios must be between 0 and 1");
    }
    if shape.sessions == 0 {
        anyhow::bail!("--sessions must be above 0");
    }
    m.setting("sessions", shape.sessions);
    m.setting("znodes", shape.znodes);
    m.setting("value bytes", shape.value_size);
    let (clients, keys, value) = prepare(deployment, shape).await?;
    let cpu = deployment.cpu_clock();
    let warmup = Duration::from_secs_f64(shape.warmup);
    let duration = Duration::from_secs_f64(shape.seconds);
    for &ratio in &shape.read_ratios {
        let (keys, value) = (keys.clone(), value.clone());
        let driven = match pacing {
            Pacing::Outstanding(outstanding) => {
                eprintln!(
                    "  read ratio {ratio}: {} s with {} sessions x {outstanding} outstanding",
                    shape.seconds, shape.sessions
                );
                let drive = Drive {
                    outstanding,
                    warmup,
                    duration,
                };
                load::drive(&clients, drive, ratio, keys, value, &cpu).await
            }
            Pacing::PerSecond(per_sec) => {
                eprintln!(
                    "  read ratio {ratio}: {} s at {per_sec} requests/s",
                    shape.seconds
                );
                let offered = Offered {
                    per_sec,
                    warmup,
                    duration,
                };
                load::drive_at_rate(&clients, offered, ratio, keys, value, &cpu).await
            }
        };
        let mut row = Row::new(format!("read ratio {ratio}"))
            .at(ratio)
            .throughput(&driven.latencies, driven.elapsed)
            .cpu_per_op(driven.cpu, driven.latencies.count())
            .cpu_by_role(driven.by_role, driven.latencies.count())
            .metric("errors", driven.errors as f64);
        if driven.sent_late.count() > 0 {
            let late_ms = driven.sent_late.quantile(0.99).as_secs_f64() * 1e3;
            row = row.metric("sent_late_p99_ms", late_ms);
        }
        m.rows.push(row);
    }
    load::close_all(clients).await;
    Ok(())
}

/// The sessions, and the znodes they read and write.
async fn prepare(
    deployment: &Deployment,
    shape: &MixShape,
) -> anyhow::Result<(Vec<client::Client>, Arc<Vec<String>>, Bytes)> {
    let clients = load::connect(deployment.connect_string(), shape.sessions).await?;
    let value = Bytes::from(vec![b'x'; shape.value_size]);
    let (parents, keys) = load::tree_paths("/bench/mix", shape.znodes);
    client::recipes::ensure_path(&clients[0], "/bench/mix").await?;
    load::create_all(&clients, parents, Bytes::new(), 8, "creating parents").await?;
    load::create_all(&clients, keys.clone(), value.clone(), 8, "creating znodes").await?;
    Ok((clients, Arc::new(keys), value))
}
