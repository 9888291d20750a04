//! What to start, and the zoo.cfg each server of it gets.

use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

/// Which server implementation to run.
#[derive(Clone, Debug)]
pub enum Flavor {
    /// `paddock serve --config zoo.cfg`.
    Paddock { binary: PathBuf },
    /// Apache ZooKeeper's `QuorumPeerMain` from Debian's `zookeeper`
    /// package, on a JVM with this maximum heap.
    ZooKeeper { heap_mb: u32 },
}

impl Flavor {
    pub fn name(&self) -> &'static str {
        match self {
            Flavor::Paddock { .. } => "paddock",
            Flavor::ZooKeeper { .. } => "zookeeper",
        }
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where Debian's `zookeeper` package puts the server's jar; its manifest
/// names every other jar it needs.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// A logging backend for the server's slf4j, if installed.
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";

/// Keys Apache ZooKeeper reads only as JVM system properties, not from
/// zoo.cfg; Paddock reads them from zoo.cfg.
const JVM_PROPERTY_KEYS: &[&str] = &["jute.maxbuffer"];

/// One deployment: a standalone server (one voter, no observers) or an
/// ensemble.
#[derive(Clone, Debug)]
pub struct Spec {
    pub flavor: Flavor,
    pub voters: usize,
    pub observers: usize,
    /// Each server keeps its data, zoo.cfg and log in `DIR/nodeN`.
    pub dir: PathBuf,
    /// The first server's id (`myid`, `server.N`); the others follow. 1
    /// unless the servers join a deployment whose ids start there.
    pub first_id: usize,
    /// First client port; consecutive ports from there (client, peer,
    /// election per server). Free ports when not given.
    pub base_port: Option<u16>,
    pub tick_time_ms: u32,
    /// Transactions between snapshots.
    pub snap_count: u64,
    /// More zoo.cfg keys, the same for every server.
    pub extra: Vec<(String, String)>,
    /// Environment variables of every server process; `{id}` in a value
    /// stands for the server's id.
    pub env: Vec<(String, String)>,
    /// Each server's ports, in server order, instead of free ones; a
    /// harness that proxies peer links needs them before the start.
    pub ports: Option<Vec<Ports>>,
    /// `(from, to) -> (peer port, election port)`: in server `from`'s
    /// zoo.cfg, server `to` is reached at these ports (a proxy's) instead
    /// of its own. Server ids count from 1.
    pub links: BTreeMap<(usize, usize), (u16, u16)>,
}

/// The ports of one server.
#[derive(Clone, Copy, Debug)]
pub struct Ports {
    pub client: u16,
    pub peer: u16,
    pub election: u16,
}

impl Ports {
    /// Three free loopback ports.
    pub fn free() -> anyhow::Result<Ports> {
        Ok(Ports {
            client: crate::port::free()?,
            peer: crate::port::free()?,
            election: crate::port::free()?,
        })
    }
}

impl Spec {
    pub fn new(flavor: Flavor, voters: usize, dir: impl Into<PathBuf>) -> Spec {
        Spec {
            flavor,
            voters,
            observers: 0,
            dir: dir.into(),
            first_id: 1,
            base_port: None,
            tick_time_ms: 2000,
            snap_count: 100_000,
            extra: Vec::new(),
            env: Vec::new(),
            ports: None,
            links: BTreeMap::new(),
        }
    }

    pub fn is_standalone(&self) -> bool {
        self.voters + self.observers == 1
    }
}

/// One server's place in the deployment.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub id: usize,
    pub client_port: u16,
    pub peer_port: u16,
    pub election_port: u16,
    pub observer: bool,
    pub dir: PathBuf,
}

pub(crate) fn plan(spec: &Spec) -> anyhow::Result<Vec<Plan>> {
    if spec.voters == 0 || spec.voters.is_multiple_of(2) {
        bail!(
            "an ensemble needs an odd number of voters (1, 3, 5, 7), not {}",
            spec.voters
        );
    }
    let total = spec.voters + spec.observers;
    let ports = match (&spec.ports, spec.base_port) {
        (Some(ports), _) if ports.len() == total => ports.clone(),
        (Some(ports), _) => bail!("{} servers but ports for {}", total, ports.len()),
        (None, Some(base)) => (0..total as u16)
            .map(|i| {
                let port = |k: u16| {
                    base.checked_add(3 * i + k)
                        .context("the base port is too high")
                };
                Ok(Ports {
                    client: port(0)?,
                    peer: port(1)?,
                    election: port(2)?,
                })
            })
            .collect::<anyhow::Result<Vec<Ports>>>()?,
        (None, None) => (0..total)
            .map(|_| Ports::free())
            .collect::<anyhow::Result<Vec<Ports>>>()?,
    };
    Ok(ports
        .iter()
        .enumerate()
        .map(|(i, ports)| Plan {
            id: spec.first_id + i,
            client_port: ports.client,
            peer_port: ports.peer,
            election_port: ports.election,
            observer: i >= spec.voters,
            dir: spec.dir.join(format!("node{}", spec.first_id + i)),
        })
        .collect())
}

/// Writes `myid` and `zoo.cfg` into the server's directory; returns the
/// command line that runs it.
pub(crate) fn prepare(spec: &Spec, plan: &Plan, all: &[Plan]) -> anyhow::Result<Vec<String>> {
    let dir = &plan.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    std::fs::write(dir.join("myid"), format!("{}\n", plan.id))
        .with_context(|| format!("writing {}", dir.join("myid").display()))?;
    let mut keys = vec![
        ("tickTime".to_string(), spec.tick_time_ms.to_string()),
        ("initLimit".into(), "10".into()),
        ("syncLimit".into(), "5".into()),
        ("snapCount".into(), spec.snap_count.to_string()),
        ("dataDir".into(), dir.display().to_string()),
        ("clientPort".into(), plan.client_port.to_string()),
        ("clientPortAddress".into(), "127.0.0.1".into()),
        ("4lw.commands.whitelist".into(), "*".into()),
        // Benchmarks open many sessions from the one loopback address.
        ("maxClientCnxns".into(), "0".into()),
        // The HTTP AdminServer (ZooKeeper's and Paddock's) would take port
        // 8080 in every server.
        ("admin.enableServer".into(), "false".into()),
    ];
    if !spec.is_standalone() {
        if plan.observer {
            keys.push(("peerType".into(), "observer".into()));
        }
        for p in all {
            let role = if p.observer { ":observer" } else { "" };
            let (peer, election) = spec
                .links
                .get(&(plan.id, p.id))
                .copied()
                .unwrap_or((p.peer_port, p.election_port));
            keys.push((
                format!("server.{}", p.id),
                format!(
                    "127.0.0.1:{peer}:{election}{role};127.0.0.1:{}",
                    p.client_port
                ),
            ));
        }
    }
    keys.extend(spec.extra.iter().cloned());
    let (keys, jvm_properties): (Vec<_>, Vec<_>) = match spec.flavor {
        Flavor::Paddock { .. } => (keys, Vec::new()),
        Flavor::ZooKeeper { .. } => keys
            .into_iter()
            .partition(|(key, _)| !JVM_PROPERTY_KEYS.contains(&key.as_str())),
    };
    let config = dir.join("zoo.cfg");
    let mut text = String::new();
    for (key, value) in &keys {
        let _ = writeln!(text, "{key}={value}");
    }
    std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
    Ok(command_line(&spec.flavor, &config, &jvm_properties))
}

fn command_line(
    flavor: &Flavor,
    config: &Path,
    jvm_properties: &[(String, String)],
) -> Vec<String> {
    let config = config.display().to_string();
    match flavor {
        Flavor::Paddock { binary } => vec![
            binary.display().to_string(),
            "serve".into(),
            "--config".into(),
            config,
        ],
        Flavor::ZooKeeper { heap_mb } => {
            let mut classpath = ZOOKEEPER_JAR.to_string();
            if Path::new(SLF4J_SIMPLE_JAR).exists() {
                classpath.push(':');
                classpath.push_str(SLF4J_SIMPLE_JAR);
            }
            let mut argv = vec![
                "java".to_string(),
                format!("-Xmx{heap_mb}m"),
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info".into(),
                "-Dzookeeper.admin.enableServer=false".into(),
            ];
            argv.extend(jvm_properties.iter().map(|(k, v)| format!("-D{k}={v}")));
            argv.extend([
                "-cp".into(),
                classpath,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain".into(),
                config,
            ]);
            argv
        }
    }
}

/// The cargo command that builds `binary`: a release build unless it is
/// a debug build's (`target/debug/paddock`).
fn build_command(binary: &Path) -> &'static str {
    let profile = binary.parent().and_then(Path::file_name);
    if profile.is_some_and(|dir| dir == "debug") {
        "cargo build -p paddock"
    } else {
        "cargo build --release -p paddock"
    }
}

/// Fails with what to do when the flavor's server is not installed.
pub(crate) fn check_installed(flavor: &Flavor) -> anyhow::Result<()> {
    match flavor {
        Flavor::Paddock { binary } if !binary.exists() => {
            bail!(
                "{} does not exist: build it with `{}`",
                binary.display(),
                build_command(binary)
            )
        }
        Flavor::ZooKeeper { .. } if !Path::new(ZOOKEEPER_JAR).exists() => bail!(
            "Apache ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): \
             apt-get install zookeeper"
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_is_named_with_the_build_that_makes_it() {
        for (binary, build) in [
            ("/nowhere/target/debug/paddock", "cargo build -p paddock"),
            (
                "/nowhere/target/release/paddock",
                "cargo build --release -p paddock",
            ),
        ] {
            let flavor = Flavor::Paddock {
                binary: PathBuf::from(binary),
            };
            let error = check_installed(&flavor).unwrap_err().to_string();
            assert!(error.starts_with(binary), "{error}");
            assert!(error.ends_with(&format!("`{build}`")), "{error}");
        }
    }
}
