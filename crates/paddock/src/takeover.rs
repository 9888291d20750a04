//! `paddock takeover`: the last step of the live move from Apache
//! ZooKeeper. The Paddock servers observe a running ZooKeeper ensemble
//! (`observeZooKeeper`) and serve its clients; this creates the takeover
//! znode through one of them, and so through ZooKeeper's leader. Every
//! observer applies that create at the same zxid and follows no further:
//! they hold the same tree there, and go on from it as the ensemble its
//! data lists, sessions and all. Then it waits until that ensemble serves.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use client::{Client, CreateMode, Error as ClientError};
use server::ServerSpec;

#[derive(clap::Args)]
pub struct TakeoverArgs {
    /// A Paddock server that observes the ZooKeeper ensemble, as
    /// host:port of its client port.
    #[arg(long)]
    server: String,
    /// The Paddock ensemble to go on as: `server.N=host:peerPort:electionPort[:observer];clientPort`
    /// lines (as in zoo.cfg or a dynamic configuration file), one for
    /// each observing Paddock server, with its myid as N.
    #[arg(long, value_name = "FILE")]
    members: PathBuf,
    /// Credentials to add first, as `scheme:credentials`, when the root's
    /// ACL does not let anyone create; repeatable.
    #[arg(long, value_name = "SCHEME:AUTH")]
    auth: Vec<String>,
    /// How long the new ensemble may take to serve, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    wait: u64,
}

pub fn run(args: TakeoverArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.members)
        .with_context(|| format!("reading {}", args.members.display()))?;
    let (members, _) = server::parse_config_text(&text)
        .map_err(|reason| anyhow::anyhow!("{}: {reason}", args.members.display()))?;
    let clients = client_addresses(&members)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let zxid = runtime.block_on(mark(&args, &server::config_text(&members, 0)))?;
    println!(
        "ZooKeeper's history ends for Paddock at zxid {zxid:#x}: the ZooKeeper servers can be stopped"
    );
    await_ensemble(&clients, zxid, Duration::from_secs(args.wait))?;
    println!(
        "the Paddock ensemble serves: {}",
        clients
            .iter()
            .map(|(id, addr)| format!("server.{id} at {addr}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// Each member's client address, which the wait asks for its role.
fn client_addresses(members: &[ServerSpec]) -> anyhow::Result<Vec<(u64, SocketAddr)>> {
    if !members.iter().any(|m| !m.observer) {
        bail!("the members name no voter: at least one server.N line must not say observer");
    }
    members
        .iter()
        .map(|m| {
            let port = m.client_port.with_context(|| {
                format!(
                    "server.{} has no client port: end its line with ;host:port",
                    m.id
                )
            })?;
            let host = m.client_host.as_deref().unwrap_or(&m.host);
            let host = if host == "0.0.0.0" { &m.host } else { host };
            let addr = (host, port)
                .to_socket_addrs()
                .with_context(|| format!("server.{}: resolving {host}", m.id))?
                .next()
                .with_context(|| format!("server.{}: {host} has no address", m.id))?;
            Ok((m.id, addr))
        })
        .collect()
}

/// Creates the takeover znode and returns the zxid of its creation. The
/// observer that applies it starts again, which may cost the answer: the
/// znode, read once a server answers again, says whether it was made.
async fn mark(args: &TakeoverArgs, members: &str) -> anyhow::Result<i64> {
    let path = migrate::TAKEOVER_PATH;
    let options = crate::digest::with_auth(&args.auth)?;
    let zk = Client::connect(&args.server, options)
        .await
        .with_context(|| format!("connecting to {}", args.server))?;
    match zk
        .create(path, members.as_bytes(), CreateMode::Persistent)
        .await
    {
        Ok((_, stat)) => return Ok(stat.czxid),
        Err(ClientError::NodeExists { .. } | ClientError::ConnectionLoss { .. }) => {}
        Err(error) => bail!("creating {path} through {}: {error}", args.server),
    }
    let deadline = Instant::now() + Duration::from_secs(args.wait);
    loop {
        match zk.get_data(path).await {
            Ok((data, stat)) if data.as_deref() == Some(members.as_bytes()) => {
                return Ok(stat.czxid)
            }
            Ok((data, _)) => bail!(
                "{path} exists already and names other members: a takeover to\n{}\nwas asked before",
                String::from_utf8_lossy(data.as_deref().unwrap_or_default())
            ),
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(error) => bail!("reading {path} back through {}: {error}", args.server),
        }
    }
}

/// Waits until every member serves past `zxid` and one of them leads.
fn await_ensemble(members: &[(u64, SocketAddr)], zxid: i64, wait: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        let modes: Vec<Option<String>> = members
            .iter()
            .map(|(_, addr)| serving(*addr, zxid))
            .collect();
        let leaders = modes
            .iter()
            .filter(|m| m.as_deref() == Some("leader"))
            .count();
        if leaders == 1 && modes.iter().all(Option::is_some) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let states: Vec<String> = members
                .iter()
                .zip(&modes)
                .map(|((id, addr), mode)| {
                    format!(
                        "server.{id} at {addr}: {}",
                        mode.as_deref().unwrap_or("not serving yet")
                    )
                })
                .collect();
            bail!(
                "the Paddock ensemble did not serve within {wait:?} ({}); see the servers' logs",
                states.join("; ")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A server's mode, once it serves a Paddock ensemble that has applied
/// `zxid`.
fn serving(addr: SocketAddr, zxid: i64) -> Option<String> {
    let srvr = launch::four_letter_word(addr, "srvr", Duration::from_secs(2))?;
    let field = |name: &str| {
        srvr.lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
    };
    let at = i64::from_str_radix(field("Zxid: ")?.trim_start_matches("0x"), 16).ok()?;
    let mode = field("Mode: ")?;
    (at >= zxid && matches!(mode, "leader" | "follower" | "observer")).then(|| mode.to_owned())
}
