//! `children`: one znode with millions of children. They are created, the
//! parent's child count is read (its stat, and getAllChildrenNumber), the
//! children are listed page by page (Paddock's getChildrenPage; ZooKeeper
//! has no such request) and in the single getChildren reply ZooKeeper
//! gives (with the longest another session waited meanwhile), then
//! deleted. Creates and deletes keep `--outstanding` requests
//! in flight per session; their rate is reported for the first and the
//! last tenth of each phase, so a slowdown as the node grows shows.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use client::{Client, CreateMode, Error};

use crate::deploy::Deployment;
use crate::load;
use crate::measure::{Measurement, Row, MIB};

#[derive(clap::Args, Clone, Debug)]
pub struct ChildrenArgs {
    /// Children of the one parent znode.
    #[arg(long, default_value_t = 1_000_000)]
    pub children: usize,
    /// Sessions creating and deleting.
    #[arg(long, default_value_t = 16)]
    pub sessions: usize,
    /// Requests in flight per session.
    #[arg(long, default_value_t = 64)]
    pub outstanding: usize,
    /// Children asked for per page.
    #[arg(long, default_value_t = 10_000)]
    pub page: i32,
}

impl ChildrenArgs {
    pub fn flags(&self) -> String {
        format!(
            "--children {} --sessions {} --outstanding {} --page {}",
            self.children, self.sessions, self.outstanding, self.page
        )
    }
}

const PARENT: &str = "/bench/children";
/// The single getChildren reply of millions of names is far over a
/// client's usual frame limit; this client takes it whole, to time it.
const SINGLE_REPLY_FRAME_BYTES: usize = 1 << 30;

fn child(i: usize) -> String {
    format!("{PARENT}/c{i:010}")
}

pub async fn run(args: &ChildrenArgs, deployment: &mut Deployment) -> anyhow::Result<Measurement> {
    ensure!(args.children >= 10, "--children must be 10 or more");
    let mut m = Measurement::new("children", deployment.label(), String::new());
    m.setting("children", args.children);
    m.setting("sessions", args.sessions);
    m.setting("outstanding per session", args.outstanding);
    let clients = load::connect(deployment.connect_string(), args.sessions).await?;
    client::recipes::ensure_path(&clients[0], PARENT).await?;
    let cpu = deployment.cpu_clock();

    let spending = cpu.start();
    let created = each_child(&clients, args, "create", |zk, i| {
        Box::pin(async move {
            match zk.create(&child(i), b"", CreateMode::Persistent).await {
                Ok(_) | Err(Error::NodeExists { .. }) => Ok(()),
                Err(error) => Err(error).with_context(|| format!("creating {}", child(i))),
            }
        })
    })
    .await?;
    m.rows.push(
        created
            .rates(Row::new("create"))
            .cpu_per_op(spending.spent(), args.children as u64),
    );
    let rss = deployment.rss_bytes();
    m.rows.push(count(&clients[0], args.children, rss).await?);
    m.rows.push(list_paged(&clients[0], args).await?);
    m.rows
        .push(single_reply(deployment.connect_string(), args.children).await?);

    let spending = cpu.start();
    let deleted = each_child(&clients, args, "delete", |zk, i| {
        Box::pin(async move {
            match zk.delete(&child(i), None).await {
                Ok(()) | Err(Error::NoNode { .. }) => Ok(()),
                Err(error) => Err(error).with_context(|| format!("deleting {}", child(i))),
            }
        })
    })
    .await?;
    m.rows.push(
        deleted
            .rates(Row::new("delete"))
            .cpu_per_op(spending.spent(), args.children as u64),
    );
    let left = clients[0]
        .exists(PARENT)
        .await?
        .context("the parent is gone")?;
    ensure!(
        left.num_children == 0,
        "{} children are left after deleting them all",
        left.num_children
    );
    load::close_all(clients).await;
    Ok(m)
}

type Op = fn(Client, usize) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

/// Runs `op` on every child index, `outstanding` at a time per session.
async fn each_child(
    clients: &[Client],
    args: &ChildrenArgs,
    what: &str,
    op: Op,
) -> anyhow::Result<Arc<load::Tenths>> {
    let total = args.children;
    eprintln!("  {what} {total} children");
    let next = Arc::new(AtomicUsize::new(0));
    let tenths = load::Tenths::start(total);
    let progress = load::report_progress(what.to_string(), total, tenths.done.clone());
    let mut tasks = Vec::new();
    for zk in clients {
        for _ in 0..args.outstanding {
            let (zk, next, tenths) = (zk.clone(), next.clone(), tenths.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return Ok::<(), anyhow::Error>(());
                    }
                    op(zk.clone(), i).await?;
                    tenths.done_one();
                }
            }));
        }
    }
    let mut result = Ok(());
    for task in tasks {
        if let Err(error) = task.await? {
            result = Err(error);
        }
    }
    progress.abort();
    result?;
    Ok(tenths)
}

/// Starts a session that asks exists() over and over while `listing`
/// holds, and answers the longest it waited: whether the server keeps
/// serving others while it builds and sends a huge reply. It runs on a
/// thread and runtime of its own, so that decoding the huge reply here
/// does not hold it up; returns once it is connected.
async fn probe_while(
    connect: String,
    listing: Arc<AtomicBool>,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<Duration>>> {
    let (connected_tx, connected) = tokio::sync::oneshot::channel();
    let probe = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let zk = Client::connect(&connect, client::ConnectOptions::new()).await?;
            let _ = connected_tx.send(());
            let mut longest = Duration::ZERO;
            while listing.load(Ordering::Relaxed) {
                let asked = Instant::now();
                zk.exists(PARENT).await?;
                longest = longest.max(asked.elapsed());
            }
            zk.close().await;
            Ok(longest)
        })
    });
    if connected.await.is_err() {
        return Err(probe
            .join()
            .expect("the probe thread panicked")
            .unwrap_err());
    }
    Ok(probe)
}

/// The parent's child count, from its stat and from getAllChildrenNumber.
async fn count(zk: &Client, children: usize, rss: Option<u64>) -> anyhow::Result<Row> {
    let began = Instant::now();
    let stat = zk.exists(PARENT).await?.context("the parent is gone")?;
    let stat_took = began.elapsed();
    ensure!(
        stat.num_children as usize == children,
        "the parent's stat counts {} children, not {children}",
        stat.num_children
    );
    let began = Instant::now();
    let all = zk.get_all_children_number(PARENT).await?;
    let all_took = began.elapsed();
    ensure!(
        all as usize == children,
        "getAllChildrenNumber counts {all}, not {children}"
    );
    let mut row = Row::new("count")
        .metric("stat_ms", stat_took.as_secs_f64() * 1e3)
        .metric("all_children_number_ms", all_took.as_secs_f64() * 1e3);
    if let Some(rss) = rss {
        row = row.metric("servers_rss_mb", rss as f64 / MIB);
    }
    Ok(row)
}

/// Every child, page by page, each once and in order; ZooKeeper answers
/// the first page Unimplemented, reported as no pages.
async fn list_paged(zk: &Client, args: &ChildrenArgs) -> anyhow::Result<Row> {
    let began = Instant::now();
    let mut after = String::new();
    let (mut listed, mut pages) = (0usize, 0usize);
    let mut longest = Duration::ZERO;
    loop {
        let asked = Instant::now();
        let page = match zk.get_children_page(PARENT, &after, args.page).await {
            Err(Error::Unimplemented { .. }) => {
                return Ok(Row::new("list page by page").metric("pages", 0.0));
            }
            page => page?,
        };
        longest = longest.max(asked.elapsed());
        pages += 1;
        for name in &page.children {
            ensure!(*name > after, "{name} came after {after}");
            after.clone_from(name);
        }
        listed += page.children.len();
        if !page.more {
            break;
        }
    }
    ensure!(
        listed == args.children,
        "listed {listed} children, not {}",
        args.children
    );
    let elapsed = began.elapsed();
    Ok(Row::new("list page by page")
        .metric("pages", pages as f64)
        .metric("seconds", elapsed.as_secs_f64())
        .metric("longest_page_ms", longest.as_secs_f64() * 1e3))
}

/// The single getChildren reply, as ZooKeeper clients get it, and the
/// longest another session waited for an answer meanwhile.
async fn single_reply(connect: &str, children: usize) -> anyhow::Result<Row> {
    let options = client::ConnectOptions::new().max_frame_bytes(SINGLE_REPLY_FRAME_BYTES);
    let zk = Client::connect(connect, options).await?;
    let listing = Arc::new(AtomicBool::new(true));
    let probe = probe_while(connect.to_string(), listing.clone()).await?;
    let began = Instant::now();
    let names = zk.get_children(PARENT).await;
    let took = began.elapsed();
    listing.store(false, Ordering::Relaxed);
    let others_waited = probe.join().expect("the probe thread panicked")?;
    zk.close().await;
    let row = Row::new("getChildren, one reply")
        .metric("others_max_ms", others_waited.as_secs_f64() * 1e3);
    Ok(match names {
        Ok(names) => {
            ensure!(
                names.len() == children,
                "getChildren answered {} names, not {children}",
                names.len()
            );
            row.metric("seconds", took.as_secs_f64())
        }
        // The server refused or could not send it: no time to report.
        Err(error) => {
            eprintln!("  getChildren of {children} children failed: {error}");
            row.metric("errors", 1.0)
        }
    })
}
