//! Local servers on loopback, as separate processes, for `paddock cluster`,
//! `paddock bench` and the fault harness: Paddock or Apache ZooKeeper (from
//! Debian's `zookeeper` package), standalone or as an ensemble, each with
//! its own data directory, zoo.cfg and log file.
//!
//! Both systems are configured the same way on purpose — the same zoo.cfg
//! keys, both fsyncing every write before acknowledging it — so that a
//! comparison between them measures the servers, not their settings.
//!
//! Layout:
//! - `spec`: what to start ([`Flavor`], [`Spec`]) and the zoo.cfg each
//!   server gets.
//! - `process`: one server process ([`Server`]): start, kill, stop
//!   gracefully, pause, resume, restart, wipe, its memory.
//! - `port`: free loopback ports, below the kernel's ephemeral range and
//!   never handed out twice.
//! - `probe`: four-letter words over a socket (`srvr`), how a server says it
//!   serves and in which mode.
//! - [`Cluster`] (here): the servers of one deployment together.

pub mod port;
mod probe;
mod process;
mod spec;

use std::time::{Duration, Instant};

use anyhow::bail;

pub use probe::{four_letter_word, mode, Mode};
pub use process::{
    cpu_time, has_exited, kill, log_tail, peak_rss_bytes, remove_data_under, rss_bytes,
    stolen_time, terminate, Server, SetAside,
};
pub use spec::{Flavor, Ports, Spec};

/// How long a server may take to start serving as a member of its
/// deployment (a JVM starting and electing a leader on a busy machine).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The servers of one deployment; every process is killed when dropped
/// (use [`Cluster::stop`] for a graceful stop).
pub struct Cluster {
    spec: Spec,
    servers: Vec<Server>,
}

impl Cluster {
    /// Writes each server's configuration, starts them all and waits until
    /// every one serves.
    pub fn start(spec: Spec) -> anyhow::Result<Cluster> {
        let plans = spec::plan(&spec)?;
        let mut cluster = Cluster {
            spec,
            servers: Vec::with_capacity(plans.len()),
        };
        for plan in &plans {
            let server = Server::start(&cluster.spec, plan.clone(), &plans)?;
            cluster.servers.push(server);
        }
        for index in 0..cluster.servers.len() {
            if let Err(error) = cluster.servers[index].wait_serving(START_TIMEOUT) {
                bail!("{error:#}\n{}", cluster.other_logs(index));
            }
        }
        Ok(cluster)
    }

    /// The end of every server's log but the one at `index`: a server that
    /// does not start serving in an ensemble often waits on its peers.
    fn other_logs(&self, index: usize) -> String {
        let mut logs = String::new();
        for (other, server) in self.servers.iter().enumerate() {
            if other != index {
                let path = server.log_path();
                let tail = log_tail(&path, process::LOG_LINES_ON_FAILURE);
                logs.push_str(&format!("the end of {}:\n{tail}\n", path.display()));
            }
        }
        logs
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    pub fn servers_mut(&mut self) -> &mut [Server] {
        &mut self.servers
    }

    pub fn server(&mut self, index: usize) -> &mut Server {
        &mut self.servers[index]
    }

    /// Stops every server gracefully, all at once: SIGTERM to each, then
    /// SIGKILL to any still running `grace` later.
    pub fn stop(&mut self, grace: Duration) {
        for server in &mut self.servers {
            server.terminate();
        }
        let deadline = Instant::now() + grace;
        for server in &mut self.servers {
            server.stop(deadline.saturating_duration_since(Instant::now()));
        }
    }

    /// `host:port,host:port,...` of every server, as clients take it.
    pub fn connect_string(&self) -> String {
        let hosts: Vec<String> = self.servers.iter().map(Server::client_address).collect();
        hosts.join(",")
    }

    /// The index of the server that leads now (the only server when
    /// standalone), if one says so.
    pub fn leader(&self) -> Option<usize> {
        self.servers
            .iter()
            .position(|server| matches!(server.mode(), Some(Mode::Leader) | Some(Mode::Standalone)))
    }

    /// Waits until a running server other than `except` leads.
    pub fn wait_leader(&self, except: Option<usize>, timeout: Duration) -> anyhow::Result<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(leader) = self.leader().filter(|&l| Some(l) != except) {
                return Ok(leader);
            }
            if Instant::now() >= deadline {
                bail!("no server of {} leads after {timeout:?}", self.spec.flavor);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
