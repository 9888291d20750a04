//! A routing client: a session that caches the partition map through a
//! watch, and sends requests to partitions by that cached copy, as a
//! Voldemort client routes to storage nodes.
//!
//! Two tasks share the cache: the map keeper (read the map with a watch;
//! when it fires, read it again) and the requester (a request every so
//! often to a random partition). A read asks the partition's owner znode,
//! as the owner would check it before serving, so a read routed to a node
//! that no longer owns the partition is seen as misrouted.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use client::Client;
use rand::Rng as _;
use tokio::sync::watch;

use super::layout::{Layout, PartitionMap};
use super::unix_micros;

/// A client's cached copy of the map.
#[derive(Debug)]
pub struct Cached {
    pub map: PartitionMap,
    pub version: i32,
}

/// One request a client sent.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub at_micros: u64,
    pub latency: Duration,
    pub write: bool,
    /// The version of the map it was routed by.
    pub map_version: i32,
    pub ok: bool,
}

/// What one client saw and did.
#[derive(Debug, Default)]
pub struct ClientLog {
    /// Each map version the client came to hold, and when (Unix µs).
    pub arrivals: Vec<(i32, u64)>,
    pub sent: Vec<Sent>,
    /// Reads whose partition, by the owner znode, had another owner than
    /// the cached map said.
    pub misrouted_reads: u64,
}

/// How a client sends requests.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    pub every: Duration,
    pub write_ratio: f64,
}

/// A started client: its cache, for the workload to see how far it got,
/// and its tasks.
pub struct Router {
    pub cache: Arc<RwLock<Cached>>,
    keeper: tokio::task::JoinHandle<anyhow::Result<Vec<(i32, u64)>>>,
    requester: tokio::task::JoinHandle<(Vec<Sent>, u64)>,
}

impl Router {
    /// Reads the map, then keeps it fresh and routes by it until `stop`.
    pub async fn start(
        zk: Client,
        layout: Arc<Layout>,
        pace: Pace,
        stop: watch::Receiver<bool>,
    ) -> anyhow::Result<Router> {
        let (cached, watch) = read_map(&zk, &layout).await?;
        let arrived = vec![(cached.version, unix_micros())];
        let cache = Arc::new(RwLock::new(cached));
        let keeper = tokio::spawn(keep_map(
            zk.clone(),
            layout.clone(),
            cache.clone(),
            watch,
            arrived,
            stop.clone(),
        ));
        let requester = tokio::spawn(send_requests(zk, layout, cache.clone(), pace, stop));
        Ok(Router {
            cache,
            keeper,
            requester,
        })
    }

    pub fn version(&self) -> i32 {
        self.cache.read().expect("cache lock").version
    }

    /// Waits for both tasks (after `stop`) and returns the log.
    pub async fn finish(self) -> anyhow::Result<ClientLog> {
        let arrivals = self.keeper.await??;
        let (sent, misrouted_reads) = self.requester.await?;
        Ok(ClientLog {
            arrivals,
            sent,
            misrouted_reads,
        })
    }
}

async fn read_map(zk: &Client, layout: &Layout) -> anyhow::Result<(Cached, client::Watch)> {
    let (data, stat, watch) = zk
        .get_data_watched(&layout.map())
        .await
        .context("reading the partition map")?;
    let map = PartitionMap::decode(&data.unwrap_or_default())?;
    Ok((
        Cached {
            map,
            version: stat.version,
        },
        watch,
    ))
}

async fn keep_map(
    zk: Client,
    layout: Arc<Layout>,
    cache: Arc<RwLock<Cached>>,
    mut watch: client::Watch,
    mut arrivals: Vec<(i32, u64)>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<(i32, u64)>> {
    loop {
        tokio::select! {
            fired = &mut watch => {
                fired.context("watching the partition map")?;
            }
            _ = stop.changed() => return Ok(arrivals),
        }
        let (cached, next) = read_map(&zk, &layout).await?;
        arrivals.push((cached.version, unix_micros()));
        *cache.write().expect("cache lock") = cached;
        watch = next;
    }
}

async fn send_requests(
    zk: Client,
    layout: Arc<Layout>,
    cache: Arc<RwLock<Cached>>,
    pace: Pace,
    mut stop: watch::Receiver<bool>,
) -> (Vec<Sent>, u64) {
    let mut sent = Vec::new();
    let mut misrouted = 0;
    // Clients start at random points of the period, so the requests of a
    // thousand clients spread over it instead of arriving together.
    let offset = pace.every.mul_f64(rand::thread_rng().gen::<f64>());
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + offset, pace.every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => return (sent, misrouted),
        }
        let (partition, write) = {
            let mut rng = rand::thread_rng();
            (rng.gen::<usize>(), rng.gen_bool(pace.write_ratio))
        };
        let (partition, owner, map_version) = {
            let cached = cache.read().expect("cache lock");
            let partition = partition % cached.map.owners.len();
            (partition, cached.map.owners[partition], cached.version)
        };
        let at_micros = unix_micros();
        let began = Instant::now();
        let ok = if write {
            zk.set_data(&layout.data_of(partition), &b"value"[..], None)
                .await
                .is_ok()
        } else {
            match zk.get_data(&layout.partition(partition)).await {
                Ok((data, _)) => {
                    if data.as_deref() != Some(owner.to_string().as_bytes()) {
                        misrouted += 1;
                    }
                    true
                }
                Err(_) => false,
            }
        };
        sent.push(Sent {
            at_micros,
            latency: began.elapsed(),
            write,
            map_version,
            ok,
        });
    }
}
