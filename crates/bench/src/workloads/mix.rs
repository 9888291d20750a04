//! `mix`: throughput and latency against the read ratio — the ZooKeeper
//! paper's throughput experiment. N sessions each keep K requests
//! outstanding on a pre-created set of znodes; each request reads
//! (getData) or overwrites (setData) a random one.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::deploy::Deployment;
use crate::load::{self, Drive};
use crate::measure::{Measurement, Row};

#[derive(clap::Args, Clone, Debug)]
pub struct MixArgs {
    /// Sessions, each on its own connection.
    #[arg(long, default_value_t = 32)]
    pub sessions: usize,
    /// Requests each session keeps outstanding.
    #[arg(long, default_value_t = 16)]
    pub outstanding: usize,
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

impl MixArgs {
    pub fn flags(&self) -> String {
        let ratios: Vec<String> = self.read_ratios.iter().map(f64::to_string).collect();
        format!(
            "--sessions {} --outstanding {} --znodes {} --value-size {} --read-ratios {} --seconds {} --warmup {}",
            self.sessions,
            self.outstanding,
            self.znodes,
            self.value_size,
            ratios.join(","),
            self.seconds,
            self.warmup
        )
    }
}

pub async fn run(args: &MixArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    if args.read_ratios.iter().any(|r| !(0.0..=1.0).contains(r)) {
        anyhow::bail!("--read-ratios must be between 0 and 1");
    }
    let mut m = Measurement::new("mix", deployment.label(), String::new());
    m.setting("sessions", args.sessions);
    m.setting("outstanding per session", args.outstanding);
    m.setting("znodes", args.znodes);
    m.setting("value bytes", args.value_size);
    let (clients, keys, value) =
        prepare(deployment, args.sessions, args.znodes, args.value_size).await?;
    let cpu = deployment.cpu_clock();
    for &ratio in &args.read_ratios {
        eprintln!(
            "  read ratio {ratio}: {} s with {} sessions x {} outstanding",
            args.seconds, args.sessions, args.outstanding
        );
        let drive = Drive {
            outstanding: args.outstanding,
            warmup: Duration::from_secs_f64(args.warmup),
            duration: Duration::from_secs_f64(args.seconds),
        };
        let driven = load::drive(&clients, drive, ratio, keys.clone(), value.clone(), &cpu).await;
        m.rows.push(
            Row::new(format!("read ratio {ratio}"))
                .at(ratio)
                .throughput(&driven.latencies, driven.elapsed)
                .cpu_per_op(driven.cpu, driven.latencies.count())
                .metric("errors", driven.errors as f64),
        );
    }
    load::close_all(clients).await;
    Ok(m)
}

/// The sessions, and the znodes they read and write, created with
/// `value_size` bytes each.
pub async fn prepare(
    deployment: &Deployment,
    sessions: usize,
    znodes: usize,
    value_size: usize,
) -> anyhow::Result<(Vec<client::Client>, Arc<Vec<String>>, Bytes)> {
    let clients = load::connect(deployment.connect_string(), sessions).await?;
    let value = Bytes::from(vec![b'x'; value_size]);
    let (parents, keys) = load::tree_paths("/bench/mix", znodes);
    client::recipes::ensure_path(&clients[0], "/bench/mix").await?;
    load::create_all(&clients, parents, Bytes::new(), 8, "creating parents").await?;
    load::create_all(&clients, keys.clone(), value.clone(), 8, "creating znodes").await?;
    Ok((clients, Arc::new(keys), value))
}
