//! What a workload runs against: a server or ensemble that is already
//! running (`--target`), or one this tool starts for the run (`--start`),
//! which it can also kill, restart and weigh.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use launch::{Cluster, Flavor, Mode, Spec};

use crate::purge::Purger;

/// A server implementation this tool can start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum System {
    Paddock,
    Zookeeper,
}

impl System {
    pub fn name(self) -> &'static str {
        match self {
            System::Paddock => "paddock",
            System::Zookeeper => "zookeeper",
        }
    }
}

#[derive(clap::Args, Clone, Debug)]
pub struct TargetArgs {
    /// Connect string of a running server or ensemble (host:port,...).
    #[arg(long, conflicts_with = "start", required_unless_present = "start")]
    pub target: Option<String>,
    /// Start this system on loopback for the run instead, with every write
    /// fsynced before it is acknowledged.
    #[arg(long, value_enum)]
    pub start: Option<System>,
    /// Servers to start with --start: 1 (standalone), 3 or 5.
    #[arg(long, default_value_t = 1)]
    pub servers: usize,
    /// Where started servers keep their data (a fresh temporary directory
    /// when not given); both systems should use the same disk.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Apache ZooKeeper's JVM heap (-Xmx) with --start zookeeper.
    #[arg(long, default_value_t = 4096)]
    pub zk_heap_mb: u32,
    /// snapCount of started servers: transactions between snapshots.
    #[arg(long, default_value_t = 100_000)]
    pub snap_count: u64,
    /// The PID of the target's server, when not started here: memory and
    /// CPU figures need it.
    #[arg(long)]
    pub pid: Option<u32>,
}

impl TargetArgs {
    /// A target started by this tool.
    pub fn started(system: System, servers: usize, data_dir: PathBuf, zk_heap_mb: u32) -> Self {
        TargetArgs {
            target: None,
            start: Some(system),
            servers,
            data_dir: Some(data_dir),
            zk_heap_mb,
            snap_count: 100_000,
            pid: None,
        }
    }

    /// The flags that select this target, for the reproducing command.
    pub fn flags(&self) -> String {
        match (&self.target, self.start) {
            (_, Some(system)) => {
                let mut flags = format!("--start {} --servers {}", system.name(), self.servers);
                if system == System::Zookeeper {
                    flags += &format!(" --zk-heap-mb {}", self.zk_heap_mb);
                }
                if self.snap_count != 100_000 {
                    flags += &format!(" --snap-count {}", self.snap_count);
                }
                flags
            }
            (Some(target), None) => format!("--target {target}"),
            (None, None) => String::new(),
        }
    }
}

/// The servers of one run.
pub struct Deployment {
    label: String,
    connect: String,
    pid: Option<u32>,
    started: Option<Started>,
}

struct Started {
    /// ZooKeeper's old snapshots and logs, removed as autopurge would.
    _purger: Option<Purger>,
    cluster: Cluster,
    /// Removed when the run ends, if the tool made it.
    _temporary: Option<tempfile::TempDir>,
}

impl Deployment {
    pub fn open(args: &TargetArgs) -> anyhow::Result<Deployment> {
        match (&args.target, args.start) {
            (Some(target), _) => Ok(Deployment {
                label: target.clone(),
                connect: target.clone(),
                pid: args.pid,
                started: None,
            }),
            (None, Some(system)) => Self::start(args, system),
            (None, None) => bail!("say what to measure: --target HOST:PORT or --start SYSTEM"),
        }
    }

    fn start(args: &TargetArgs, system: System) -> anyhow::Result<Deployment> {
        let (dir, temporary) = match &args.data_dir {
            Some(dir) => {
                if dir.exists() {
                    std::fs::remove_dir_all(dir)
                        .with_context(|| format!("clearing {}", dir.display()))?;
                }
                (dir.clone(), None)
            }
            None => {
                let temporary = tempfile::Builder::new()
                    .prefix("paddock-bench-")
                    .tempdir()
                    .context("creating a data directory")?;
                (temporary.path().to_path_buf(), Some(temporary))
            }
        };
        let flavor = match system {
            System::Paddock => Flavor::Paddock {
                binary: std::env::current_exe().context("finding the paddock binary")?,
            },
            System::Zookeeper => Flavor::ZooKeeper {
                heap_mb: args.zk_heap_mb,
            },
        };
        let spec = Spec {
            snap_count: args.snap_count,
            ..Spec::new(flavor, args.servers, dir)
        };
        let topology = if args.servers == 1 {
            "standalone".to_string()
        } else {
            format!("{}-server ensemble", args.servers)
        };
        eprintln!("starting {} {topology}...", system.name());
        let cluster = Cluster::start(spec)?;
        let purger = (system == System::Zookeeper).then(|| {
            let dirs = cluster.servers().iter().map(|s| s.dir().join("version-2"));
            Purger::start(dirs.collect())
        });
        Ok(Deployment {
            label: format!("{} {topology}", system.name()),
            connect: cluster.connect_string(),
            pid: None,
            started: Some(Started {
                _purger: purger,
                cluster,
                _temporary: temporary,
            }),
        })
    }

    /// What is measured, as the report names it.
    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn connect_string(&self) -> &str {
        &self.connect
    }

    /// The servers, when this tool started them.
    pub fn cluster(&mut self) -> Option<&mut Cluster> {
        self.started.as_mut().map(|s| &mut s.cluster)
    }

    /// Checks that this tool started an ensemble that keeps a quorum while
    /// one of its servers is down, for a workload that takes one down
    /// (`does`: what it does to it, for the error).
    pub fn check_quorum_survives_one(&mut self, workload: &str, does: &str) -> anyhow::Result<()> {
        let Some(cluster) = self.cluster() else {
            bail!("{workload} {does} itself: use --start SYSTEM --servers 3 (or 5)");
        };
        ensure!(
            cluster.servers().len() >= 3,
            "{workload} needs an ensemble that keeps a quorum while one server is down: --servers 3 or more"
        );
        Ok(())
    }

    /// Resident memory of the server (the leader of a started ensemble).
    pub fn rss_bytes(&mut self) -> Option<u64> {
        launch::rss_bytes(self.weighed_pid()?)
    }

    /// The most resident memory the server (the leader of a started
    /// ensemble) has had since it started.
    pub fn peak_rss_bytes(&mut self) -> Option<u64> {
        launch::peak_rss_bytes(self.weighed_pid()?)
    }

    /// The server whose memory is reported: the one given, or the leader
    /// of a started ensemble.
    fn weighed_pid(&mut self) -> Option<u32> {
        if let Some(pid) = self.pid {
            return Some(pid);
        }
        let cluster = self.cluster()?;
        let leader = cluster.leader()?;
        cluster.servers()[leader].pid()
    }

    /// The first server's data directory, when this tool started them.
    pub fn data_dir(&mut self) -> Option<PathBuf> {
        Some(self.cluster()?.servers().first()?.dir().to_path_buf())
    }

    /// A clock of the CPU time the servers spend (all of them, for an
    /// ensemble): what the server itself costs, apart from the load
    /// generator on the same cores.
    pub fn cpu_clock(&mut self) -> CpuClock {
        let pids = match (self.pid, self.cluster()) {
            (Some(pid), _) => vec![pid],
            (None, Some(cluster)) => cluster.servers().iter().filter_map(|s| s.pid()).collect(),
            (None, None) => Vec::new(),
        };
        let roles = self.cluster().map_or_else(Vec::new, roles_of);
        CpuClock { pids, roles }
    }

    /// The CPU time the servers have spent since they were first started,
    /// that of processes killed or stopped since included: for workloads
    /// that stop servers, whose [`CpuClock`] would lose what the stopped
    /// ones spent. Unknown for a server this tool did not start, unless
    /// given its PID (and then only while that process runs).
    pub fn servers_cpu_time(&mut self) -> Option<Duration> {
        if let Some(pid) = self.pid {
            return launch::cpu_time(pid);
        }
        self.cluster()?
            .servers()
            .iter()
            .map(launch::Server::cpu_time)
            .sum()
    }

    /// What the servers spent since `before`, a reading of
    /// [`Self::servers_cpu_time`].
    pub fn servers_cpu_since(&mut self, before: Option<Duration>) -> Option<Duration> {
        Some(self.servers_cpu_time()?.saturating_sub(before?))
    }

    /// Kills and restarts every server of a started deployment; returns
    /// how long until every one served again (recovery: reading its
    /// snapshot and log, rejoining).
    pub fn restart(&mut self) -> anyhow::Result<Duration> {
        let Some(cluster) = self.cluster() else {
            bail!("restart time needs a deployment started by this tool (--start)");
        };
        let count = cluster.servers().len();
        for i in 0..count {
            cluster.server(i).kill();
        }
        let began = Instant::now();
        for i in 0..count {
            cluster.server(i).restart()?;
        }
        for i in 0..count {
            cluster.server(i).wait_serving(Duration::from_secs(600))?;
        }
        Ok(began.elapsed())
    }
}

/// The CPU time (user + system) of the servers' processes, read from
/// /proc. Unknown without their PIDs (a `--target` without `--pid`), or
/// once one of them is gone.
#[derive(Clone, Debug, Default)]
pub struct CpuClock {
    pids: Vec<u32>,
    /// An ensemble's servers by role, as they were when the clock was
    /// made; empty for a single server.
    roles: Vec<Role>,
}

#[derive(Clone, Debug)]
struct Role {
    pid: u32,
    leads: bool,
    address: SocketAddr,
}

/// The servers of an ensemble this tool started, by role.
fn roles_of(cluster: &mut Cluster) -> Vec<Role> {
    if cluster.servers().len() < 2 {
        return Vec::new();
    }
    cluster
        .servers()
        .iter()
        .filter_map(|server| {
            Some(Role {
                pid: server.pid()?,
                leads: server.mode()? == Mode::Leader,
                address: server.client_address().parse().ok()?,
            })
        })
        .collect()
}

/// What an ensemble's servers spent, by role, over a span.
#[derive(Clone, Copy, Debug)]
pub struct ByRole {
    pub leader_cpu: Duration,
    pub followers_cpu: Duration,
    /// The requests the followers received (`mntr`'s
    /// zk_packets_received), pings included.
    pub followers_requests: u64,
}

impl CpuClock {
    pub fn now(&self) -> Option<Duration> {
        if self.pids.is_empty() {
            return None;
        }
        self.pids.iter().map(|&pid| launch::cpu_time(pid)).sum()
    }

    /// Each server's CPU time and requests received, by role.
    fn roles_now(&self) -> Option<Vec<(bool, Duration, u64)>> {
        if self.roles.is_empty() {
            return None;
        }
        self.roles
            .iter()
            .map(|role| {
                let received = if role.leads {
                    0
                } else {
                    packets_received(role.address)?
                };
                Some((role.leads, launch::cpu_time(role.pid)?, received))
            })
            .collect()
    }

    /// Starts measuring: [`CpuSpan::spent`] is the CPU time since.
    pub fn start(&self) -> CpuSpan {
        CpuSpan {
            clock: self.clone(),
            began: self.now(),
            began_roles: self.roles_now(),
        }
    }
}

/// The requests a server has received, from `mntr`.
fn packets_received(address: SocketAddr) -> Option<u64> {
    let mntr = launch::four_letter_word(address, "mntr", Duration::from_secs(2))?;
    mntr.lines()
        .find_map(|line| line.strip_prefix("zk_packets_received"))?
        .trim()
        .parse()
        .ok()
}

pub struct CpuSpan {
    clock: CpuClock,
    began: Option<Duration>,
    began_roles: Option<Vec<(bool, Duration, u64)>>,
}

impl CpuSpan {
    pub fn spent(&self) -> Option<Duration> {
        Some(self.clock.now()?.saturating_sub(self.began?))
    }

    /// What the leader and the followers spent since the start, for an
    /// ensemble whose leader has not changed.
    pub fn by_role(&self) -> Option<ByRole> {
        let began = self.began_roles.as_ref()?;
        let now = self.clock.roles_now()?;
        let mut spent = ByRole {
            leader_cpu: Duration::ZERO,
            followers_cpu: Duration::ZERO,
            followers_requests: 0,
        };
        for (&(leads, cpu_then, received_then), &(_, cpu, received)) in began.iter().zip(&now) {
            let cpu = cpu.saturating_sub(cpu_then);
            if leads {
                spent.leader_cpu += cpu;
            } else {
                spent.followers_cpu += cpu;
                spent.followers_requests += received.saturating_sub(received_then);
            }
        }
        Some(spent)
    }
}
