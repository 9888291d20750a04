//! A holder of sessions, and the workload's handle on the holders.
//!
//! A holder runs as its own process (`paddock bench storm-holder`, a
//! hidden command), so that the workload can lose all its sessions at
//! once the way a crashed fleet of clients does: SIGKILL, no closeSession,
//! every connection reset together. A process holds at most
//! [`SESSIONS_PER_HOLDER`] sessions, well below this machine's limit of
//! open files per process.
//!
//! It opens its sessions, creates one ephemeral znode each, says
//! `expired N` (sessions that expired before their create was made, each
//! replaced by a new one) and `ready`, then every 100 ms
//! `states CONNECTED DISCONNECTED ENDED` (ENDED: expired or closed) on
//! stdout; it closes its sessions and exits when its stdin closes.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use client::{Client, ConnectOptions, CreateMode, SessionState};

use crate::load;

/// Sessions one holder process opens at most.
pub const SESSIONS_PER_HOLDER: usize = 10_000;
/// The last octet of the loopback address the next holder connects from.
static NEXT_LOOPBACK_HOST: AtomicU8 = AtomicU8::new(1);
const STATES_EVERY: Duration = Duration::from_millis(100);
/// Times a create lost with its connection is tried again.
const CREATE_ATTEMPTS: usize = 50;

#[derive(clap::Args, Clone, Debug)]
pub struct HolderArgs {
    /// The connect string.
    #[arg(long)]
    pub connect: String,
    /// The znode under which each session makes its ephemeral.
    #[arg(long)]
    pub root: String,
    /// The number of the first session, which names its ephemeral.
    #[arg(long)]
    pub first: usize,
    #[arg(long)]
    pub count: usize,
    #[arg(long)]
    pub session_timeout_ms: u64,
    /// The address the sessions connect from.
    #[arg(long)]
    pub local_address: Option<IpAddr>,
}

/// `paddock bench storm-holder`.
pub fn main(args: HolderArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(hold(&args))
}

async fn hold(args: &HolderArgs) -> anyhow::Result<()> {
    let mut options = ConnectOptions::new()
        .session_timeout(Duration::from_millis(args.session_timeout_ms))
        .connect_timeout(Duration::from_secs(30));
    if let Some(local) = args.local_address {
        options = options.local_address(local);
    }
    let mut clients = load::connect_with(&args.connect, args.count, options.clone()).await?;
    let paths: Vec<String> = (0..clients.len())
        .map(|n| format!("{}/e{:06}", args.root, args.first + n))
        .collect();
    let creates: Vec<_> = clients
        .iter()
        .zip(&paths)
        .map(|(zk, path)| zk.create(path, b"", CreateMode::Ephemeral))
        .collect();
    let mut expired = 0;
    for ((create, zk), path) in creates.into_iter().zip(&mut clients).zip(&paths) {
        let Err(error) = create.await else { continue };
        if let Err(error) = create_again(zk, path, error).await {
            if !matches!(error, client::Error::SessionExpired { .. }) {
                return Err(error)
                    .with_context(|| format!("creating the session's ephemeral {path}"));
            }
            // The server let the session expire while it connected (a
            // ZooKeeper ensemble under a herd can): a new one takes its
            // place, and the workload reports how many did.
            expired += 1;
            *zk = Client::connect(&args.connect, options.clone()).await?;
            let error = zk.create(path, b"", CreateMode::Ephemeral).await.err();
            if let Some(error) = error {
                create_again(zk, path, error)
                    .await
                    .with_context(|| format!("creating the session's ephemeral {path}"))?;
            }
        }
    }
    say(&format!("expired {expired}"));
    say("ready");
    let (closed_tx, mut closed) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        let _ = closed_tx.send(());
    });
    loop {
        tokio::select! {
            _ = tokio::time::sleep(STATES_EVERY) => say(&states(&clients)),
            _ = &mut closed => break,
        }
    }
    for zk in &clients {
        zk.close().await;
    }
    Ok(())
}

/// A herd of handshakes can cost a session its connection (ZooKeeper's
/// ensembles drop some): a create lost with it is made again once the
/// session is back, and one that had been applied is found.
async fn create_again(
    zk: &Client,
    path: &str,
    mut error: client::Error,
) -> Result<(), client::Error> {
    for _ in 0..CREATE_ATTEMPTS {
        if !error.is_connection_loss() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        error = match zk.create(path, b"", CreateMode::Ephemeral).await {
            Ok(_) | Err(client::Error::NodeExists { .. }) => return Ok(()),
            Err(error) => error,
        };
    }
    Err(error)
}

fn states(clients: &[Client]) -> String {
    let (mut connected, mut disconnected, mut ended) = (0, 0, 0);
    for zk in clients {
        match zk.state() {
            SessionState::Connected => connected += 1,
            SessionState::Disconnected => disconnected += 1,
            _ => ended += 1,
        }
    }
    format!("states {connected} {disconnected} {ended}")
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// What the holders last said, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct States {
    pub ready: usize,
    /// Sessions that expired while they connected, each replaced.
    pub expired_connecting: usize,
    pub connected: usize,
    pub disconnected: usize,
    pub ended: usize,
}

/// The holder processes of one phase, killed when dropped.
pub struct Holders {
    children: Vec<(Child, Option<ChildStdin>)>,
    said: Arc<Mutex<Vec<States>>>,
}

impl Holders {
    /// Starts holders for `sessions` sessions with ephemerals under `root`.
    pub fn start(
        connect: &str,
        root: &str,
        sessions: usize,
        session_timeout_ms: u64,
    ) -> anyhow::Result<Holders> {
        let exe = std::env::current_exe().context("finding this executable")?;
        let count = sessions.div_ceil(SESSIONS_PER_HOLDER);
        let on_loopback = connects_to_loopback(connect);
        let said = Arc::new(Mutex::new(vec![States::default(); count]));
        let mut children = Vec::with_capacity(count);
        for who in 0..count {
            let first = who * SESSIONS_PER_HOLDER;
            let held = SESSIONS_PER_HOLDER.min(sessions - first);
            let mut child = Command::new(&exe)
                .args([
                    "bench",
                    "storm-holder",
                    "--connect",
                    connect,
                    "--root",
                    root,
                ])
                .args(["--first", &first.to_string(), "--count", &held.to_string()])
                .args(["--session-timeout-ms", &session_timeout_ms.to_string()])
                .args(match on_loopback {
                    true => vec![
                        "--local-address".to_owned(),
                        loopback_of_its_own().to_string(),
                    ],
                    false => vec![],
                })
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .with_context(|| format!("starting {} bench storm-holder", exe.display()))?;
            let stdout = child.stdout.take().expect("stdout is piped");
            let stdin = child.stdin.take();
            let said = said.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let mut said = said.lock().expect("holder states poisoned");
                    read_line(&mut said[who], held, &line);
                }
            });
            children.push((child, stdin));
        }
        Ok(Holders { children, said })
    }

    /// The holders' last words, summed.
    pub fn states(&self) -> States {
        let said = self.said.lock().expect("holder states poisoned");
        said.iter().fold(States::default(), |sum, s| States {
            ready: sum.ready + s.ready,
            expired_connecting: sum.expired_connecting + s.expired_connecting,
            connected: sum.connected + s.connected,
            disconnected: sum.disconnected + s.disconnected,
            ended: sum.ended + s.ended,
        })
    }

    /// Waits until `done` holds of the summed states, or fails after
    /// `timeout` (or when a holder exits first).
    pub async fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&States) -> bool,
    ) -> anyhow::Result<Duration> {
        let began = Instant::now();
        loop {
            if done(&self.states()) {
                return Ok(began.elapsed());
            }
            for (child, _) in &mut self.children {
                if let Ok(Some(status)) = child.try_wait() {
                    bail!("a session holder exited ({status}) while waiting until {what}");
                }
            }
            if began.elapsed() > timeout {
                bail!(
                    "not {what} after {timeout:?}: holders say {:?}",
                    self.states()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILLs every holder at once: their sessions are lost, not closed.
    pub fn kill_all(&mut self) {
        for (child, _) in &mut self.children {
            let _ = child.kill();
        }
        for (child, _) in &mut self.children {
            let _ = child.wait();
        }
    }

    /// Lets every holder close its sessions and exit.
    pub fn close_all(&mut self) {
        for (_, stdin) in &mut self.children {
            drop(stdin.take());
        }
        for (child, _) in &mut self.children {
            let _ = child.wait();
        }
    }
}

impl Drop for Holders {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Whether every server of `connect` is on this host's IPv4 loopback.
fn connects_to_loopback(connect: &str) -> bool {
    connect.split(',').all(|server| {
        let host = server.rsplit_once(':').map_or(server, |(host, _)| host);
        host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
    })
}

/// A loopback address no earlier holder used (127.0.1.1, 127.0.1.2, ...).
/// The connections of a holder then have a port range of their own: from
/// one address to one server, tens of thousands of connections, and those
/// a server restart left in TIME_WAIT, crowd the kernel's ephemeral ports,
/// and it spends most of a holder's CPU searching them on each connect.
fn loopback_of_its_own() -> Ipv4Addr {
    Ipv4Addr::new(
        127,
        0,
        1,
        NEXT_LOOPBACK_HOST.fetch_add(1, Ordering::Relaxed),
    )
}

fn read_line(states: &mut States, held: usize, line: &str) {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words[..] {
        ["expired", count] => states.expired_connecting = count.parse().unwrap_or(0),
        ["ready"] => {
            states.ready = held;
            states.connected = held;
        }
        ["states", connected, disconnected, ended] => {
            let count = |word: &str| word.parse().unwrap_or(0);
            states.connected = count(connected);
            states.disconnected = count(disconnected);
            states.ended = count(ended);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_connect_from_addresses_of_their_own_on_loopback_only() {
        assert!(connects_to_loopback("127.0.0.1:2181,127.0.0.1:2182"));
        assert!(!connects_to_loopback("[::1]:2181"));
        assert!(!connects_to_loopback("127.0.0.1:2181,10.0.0.2:2181"));
        assert!(!connects_to_loopback("zk1:2181"));
        assert_ne!(loopback_of_its_own(), loopback_of_its_own());
    }

    #[test]
    fn a_holders_lines_are_read() {
        let mut states = States::default();
        read_line(&mut states, 10, "expired 2");
        read_line(&mut states, 10, "ready");
        assert_eq!((states.ready, states.connected), (10, 10));
        assert_eq!(states.expired_connecting, 2);
        read_line(&mut states, 10, "states 7 2 1");
        assert_eq!(
            states,
            States {
                ready: 10,
                expired_connecting: 2,
                connected: 7,
                disconnected: 2,
                ended: 1
            }
        );
        read_line(&mut states, 10, "nonsense 1");
        assert_eq!(states.connected, 7);
    }
}
