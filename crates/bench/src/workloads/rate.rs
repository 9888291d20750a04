//! `rate`: latency at a fixed offered load — the `mix` requests sent on a
//! schedule (an open loop) rather than as fast as answers come back, so
//! that two systems are compared at the same load rather than each at its
//! own saturation, and a server falling behind shows in the latencies.

use std::time::Duration;

use crate::deploy::Deployment;
use crate::load::{self, Offered};
use crate::measure::{Measurement, Row};
use crate::workloads::mix;

#[derive(clap::Args, Clone, Debug)]
pub struct RateArgs {
    /// Requests per second offered, over all sessions.
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
    /// Sessions, each on its own connection, sharing the rate.
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

impl RateArgs {
    pub fn flags(&self) -> String {
        let ratios: Vec<String> = self.read_ratios.iter().map(f64::to_string).collect();
        format!(
            "--rate {} --sessions {} --znodes {} --value-size {} --read-ratios {} --seconds {} --warmup {}",
            self.rate,
            self.sessions,
            self.znodes,
            self.value_size,
            ratios.join(","),
            self.seconds,
            self.warmup
        )
    }
}

pub async fn run(args: &RateArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    if args.read_ratios.iter().any(|r| !(0.0..=1.0).contains(r)) {
        anyhow::bail!("--read-ratios must be between 0 and 1");
    }
    if args.rate <= 0.0 || args.sessions == 0 {
        anyhow::bail!("--rate and --sessions must be above 0");
    }
    let mut m = Measurement::new("rate", deployment.label(), String::new());
    m.setting("offered requests per s", args.rate);
    m.setting("sessions", args.sessions);
    m.setting("znodes", args.znodes);
    m.setting("value bytes", args.value_size);
    let (clients, keys, value) =
        mix::prepare(deployment, args.sessions, args.znodes, args.value_size).await?;
    let cpu = deployment.cpu_clock();
    for &ratio in &args.read_ratios {
        eprintln!(
            "  read ratio {ratio}: {} s at {} requests/s",
            args.seconds, args.rate
        );
        let offered = Offered {
            per_sec: args.rate,
            warmup: Duration::from_secs_f64(args.warmup),
            duration: Duration::from_secs_f64(args.seconds),
        };
        let driven =
            load::drive_at_rate(&clients, offered, ratio, keys.clone(), value.clone(), &cpu).await;
        m.rows.push(
            Row::new(format!("read ratio {ratio}"))
                .at(ratio)
                .throughput(&driven.latencies, driven.elapsed)
                .cpu_per_op(driven.cpu, driven.latencies.count())
                .metric("errors", driven.errors as f64),
        );
    }
    m.notes.push(
        "latency counts from when a request was due on its schedule, so time spent queued \
         behind a slow server is counted; ops_per_sec is the rate answered"
            .into(),
    );
    load::close_all(clients).await;
    Ok(m)
}
