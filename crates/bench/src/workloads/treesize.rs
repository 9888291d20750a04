//! `treesize`: read, write and mixed throughput with the tree preloaded
//! to growing sizes, and at each size the server's resident memory and
//! (when this tool started the server) its restart time — the ZooKeeper
//! paper's data-tree-size experiment, plus what a big tree costs.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::seq::SliceRandom as _;

use crate::deploy::Deployment;
use crate::load::{self, Drive};
use crate::measure::{Measurement, Row, MIB};

#[derive(clap::Args, Clone, Debug)]
pub struct TreeSizeArgs {
    /// Tree sizes (znodes) to measure at, ascending.
    #[arg(long, value_delimiter = ',', default_values_t = [0, 100_000, 1_000_000])]
    pub sizes: Vec<usize>,
    /// Bytes of data per znode.
    #[arg(long, default_value_t = 128)]
    pub value_size: usize,
    /// Sessions driving the load.
    #[arg(long, default_value_t = 32)]
    pub sessions: usize,
    /// Requests each session keeps outstanding.
    #[arg(long, default_value_t = 16)]
    pub outstanding: usize,
    /// Seconds measured for each of reads, writes and mixed at each size.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
}

impl TreeSizeArgs {
    pub fn flags(&self) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(usize::to_string).collect();
        format!(
            "--sizes {} --value-size {} --sessions {} --outstanding {} --seconds {}",
            sizes.join(","),
            self.value_size,
            self.sessions,
            self.outstanding,
            self.seconds
        )
    }
}

/// Znodes always present that the load touches besides a sample of the
/// preloaded tree: the empty tree needs something to read.
const HOT_ZNODES: usize = 1000;
/// Preloaded znodes the load touches, at most.
const SAMPLED_ZNODES: usize = 100_000;
const KINDS: [(&str, f64); 3] = [("reads", 1.0), ("writes", 0.0), ("mixed 50%", 0.5)];

pub async fn run(args: &TreeSizeArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    if !args.sizes.is_sorted() {
        anyhow::bail!("--sizes must be ascending");
    }
    let mut m = Measurement::new("treesize", deployment.label(), String::new());
    m.setting("sessions", args.sessions);
    m.setting("outstanding per session", args.outstanding);
    m.setting("value bytes", args.value_size);
    let value = Bytes::from(vec![b'x'; args.value_size]);
    let largest = args.sizes.last().copied().unwrap_or(0);
    let (parents, leaves) = load::tree_paths("/bench/tree", largest);
    let (_, hot) = load::tree_paths("/bench/hot", HOT_ZNODES);

    let mut clients = load::connect(deployment.connect_string(), args.sessions).await?;
    client::recipes::ensure_path(&clients[0], "/bench/tree").await?;
    client::recipes::ensure_path(&clients[0], "/bench/hot").await?;
    load::create_all(
        &clients,
        vec!["/bench/hot/p00000".into()],
        Bytes::new(),
        1,
        "hot",
    )
    .await?;
    load::create_all(&clients, hot.clone(), value.clone(), 8, "hot znodes").await?;

    let mut loaded = 0;
    for &size in &args.sizes {
        if size > loaded {
            let needed_parents = size.div_ceil(1000);
            let have_parents = loaded.div_ceil(1000);
            let what = format!("preloading to {size} znodes");
            eprintln!("  {what}");
            load::create_all(
                &clients,
                parents[have_parents..needed_parents].to_vec(),
                Bytes::new(),
                8,
                &what,
            )
            .await?;
            load::create_all(
                &clients,
                leaves[loaded..size].to_vec(),
                value.clone(),
                32,
                &what,
            )
            .await?;
            loaded = size;
        }
        let mut keys = hot.clone();
        keys.extend(
            leaves[..size]
                .choose_multiple(&mut rand::thread_rng(), SAMPLED_ZNODES)
                .cloned(),
        );
        let keys = Arc::new(keys);
        // Taken at each size: the servers are restarted between sizes.
        let cpu = deployment.cpu_clock();
        for (kind, ratio) in KINDS {
            eprintln!("  {kind} at {size} znodes: {} s", args.seconds);
            let drive = Drive {
                outstanding: args.outstanding,
                warmup: Duration::from_secs(1),
                duration: Duration::from_secs_f64(args.seconds),
            };
            let driven =
                load::drive(&clients, drive, ratio, keys.clone(), value.clone(), &cpu).await;
            m.rows.push(
                Row::new(format!("{kind} @ {size} znodes"))
                    .at(size as f64)
                    .throughput(&driven.latencies, driven.elapsed)
                    .cpu_per_op(driven.cpu, driven.latencies.count()),
            );
        }
        let mut row = Row::new(format!("server @ {size} znodes")).at(size as f64);
        if let Some(rss) = deployment.rss_bytes() {
            row = row.metric("rss_mb", rss as f64 / MIB);
        }
        if deployment.cluster().is_some() {
            load::close_all(std::mem::take(&mut clients)).await;
            eprintln!("  restarting the server at {size} znodes");
            let took = tokio::task::block_in_place(|| deployment.restart())?;
            row = row.metric("restart_s", took.as_secs_f64());
            if let Some(rss) = deployment.rss_bytes() {
                row = row.metric("rss_after_restart_mb", rss as f64 / MIB);
            }
            clients = load::connect(deployment.connect_string(), args.sessions).await?;
        }
        m.rows.push(row);
    }
    if deployment.cluster().is_none() && deployment.rss_bytes().is_none() {
        m.notes.push(
            "memory and restart time not measured: they need --start, or --pid for memory".into(),
        );
    }
    load::close_all(clients).await;
    Ok(m)
}
