//! `rate`: latency at a fixed offered load — the `mix` requests sent on a
//! schedule (an open loop) rather than as fast as answers come back, so
//! that two systems are compared at the same load rather than each at its
//! own saturation, and a server falling behind shows in the latencies.

use crate::deploy::Deployment;
use crate::measure::Measurement;
use crate::workloads::mix::{self, MixShape, Pacing};

#[derive(clap::Args, Clone, Debug)]
pub struct RateArgs {
    #[command(flatten)]
    pub shape: MixShape,
    /// Requests per second offered, over all sessions.
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
}

impl RateArgs {
    pub fn flags(&self) -> String {
        format!("{} --rate {}", self.shape.flags(), self.rate)
    }
}

pub async fn run(args: &RateArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    if args.rate <= 0.0 {
        anyhow::bail!("--rate must be above 0");
    }
    let mut m = Measurement::new("rate", deployment.label(), String::new());
    m.setting("offered requests per s", args.rate);
    mix::measure(
        &args.shape,
        Pacing::PerSecond(args.rate),
        deployment,
        &mut m,
    )
    .await?;
    m.notes.push(
        "latency counts from when a request was sent on its schedule, which never waits for \
         answers, so time spent queued behind a slow server is counted; sent_late_p99_ms is how \
         late the load generator sent them after they were due (its timer wakes on whole \
         milliseconds); ops_per_sec is the rate answered"
            .into(),
    );
    Ok(m)
}
