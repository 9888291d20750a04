//! `paddock cluster`: a local ensemble on loopback ports for development
//! and tests — one `paddock serve` process per server, each with its own
//! zoo.cfg and myid, stopped together on Ctrl-C.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// How long a server may take to answer `srvr` as a member of the ensemble.
const START_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(clap::Args)]
pub struct ClusterArgs {
    /// Voting servers: 1, 3, 5 or 7.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Non-voting servers (ZooKeeper's observers).
    #[arg(long, default_value_t = 0)]
    observers: usize,
    /// Where each server keeps its data (`node1`, `node2`, ...).
    #[arg(long, default_value = "paddock-cluster")]
    data_dir: PathBuf,
    /// First client port; servers use consecutive ports. Free ports when
    /// not given.
    #[arg(long)]
    base_port: Option<u16>,
    /// tickTime of every server, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    tick_time: u32,
    /// snapCount of every server: transactions between snapshots.
    #[arg(long, default_value_t = 100_000)]
    snap_count: u64,
}

struct Node {
    id: usize,
    client_port: u16,
    peer_port: u16,
    election_port: u16,
    observer: bool,
}

pub fn run(args: ClusterArgs, shutdown: impl FnOnce()) -> anyhow::Result<()> {
    if ![1, 3, 5, 7].contains(&args.nodes) {
        bail!(
            "--nodes must be 1, 3, 5 or 7 (an odd number of voters), not {}",
            args.nodes
        );
    }
    let nodes = plan(&args)?;
    let servers = server_lines(&nodes);
    let exe = std::env::current_exe().context("finding the paddock binary")?;
    let mut children = Vec::with_capacity(nodes.len());
    for node in &nodes {
        let dir = args.data_dir.join(format!("node{}", node.id));
        let config = write_node(&dir, node, &servers, &args)?;
        let log = std::fs::File::create(dir.join("paddock.log"))
            .with_context(|| format!("creating {}", dir.join("paddock.log").display()))?;
        let child = Command::new(&exe)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting server {}", node.id))?;
        children.push(Stopper(child));
    }
    for node in &nodes {
        wait_serving(node, &args.data_dir)?;
    }
    let connect: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.client_port))
        .collect();
    println!("{}", connect.join(","));
    eprintln!(
        "paddock cluster: {} voters and {} observers serving; data and logs in {}; Ctrl-C stops them",
        args.nodes,
        args.observers,
        args.data_dir.display()
    );
    shutdown();
    eprintln!("paddock cluster: stopping");
    drop(children);
    Ok(())
}

/// Kills its server when dropped, however `run` ends.
struct Stopper(Child);

impl Drop for Stopper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn plan(args: &ClusterArgs) -> anyhow::Result<Vec<Node>> {
    let total = args.nodes + args.observers;
    let mut ports = match args.base_port {
        Some(base) => (0..3 * total as u16)
            .map(|i| {
                base.checked_add(i)
                    .context("--base-port too high for this many ports")
            })
            .collect::<anyhow::Result<Vec<u16>>>()?,
        None => (0..3 * total)
            .map(|_| free_port())
            .collect::<anyhow::Result<Vec<u16>>>()?,
    };
    let mut next = || ports.remove(0);
    Ok((1..=total)
        .map(|id| Node {
            id,
            client_port: next(),
            peer_port: next(),
            election_port: next(),
            observer: id > args.nodes,
        })
        .collect())
}

fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

fn server_lines(nodes: &[Node]) -> String {
    let mut lines = String::new();
    for n in nodes {
        let role = if n.observer { ":observer" } else { "" };
        let _ = writeln!(
            lines,
            "server.{}=127.0.0.1:{}:{}{role};{}",
            n.id, n.peer_port, n.election_port, n.client_port
        );
    }
    lines
}

fn write_node(
    dir: &Path,
    node: &Node,
    servers: &str,
    args: &ClusterArgs,
) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    std::fs::write(dir.join("myid"), format!("{}\n", node.id))?;
    let config = dir.join("zoo.cfg");
    let text = format!(
        "tickTime={}\ninitLimit=10\nsyncLimit=5\nsnapCount={}\ndataDir={}\n\
         clientPort={}\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\n{servers}",
        args.tick_time,
        args.snap_count,
        dir.display(),
        node.client_port
    );
    std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
    Ok(config)
}

fn wait_serving(node: &Node, data_dir: &Path) -> anyhow::Result<()> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, node.client_port));
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if srvr(addr).is_some_and(|out| out.contains("Mode: ")) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!(
        "server {} did not join the ensemble within {START_TIMEOUT:?}; see {}",
        node.id,
        data_dir
            .join(format!("node{}", node.id))
            .join("paddock.log")
            .display()
    )
}

fn srvr(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"srvr").ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}
