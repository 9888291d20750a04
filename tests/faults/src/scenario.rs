//! The named fault scenarios: what the nemesis does to the ensemble while
//! the workers run, and how it puts everything right afterwards.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use launch::{Cluster, Mode};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::proxy::Links;
use crate::shim::Shim;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// SIGKILL the leader, restart it a little later.
    KillLeader,
    /// SIGKILL a follower, restart it a little later.
    KillFollower,
    /// SIGSTOP the leader for seconds (a GC-pause-like freeze), SIGCONT.
    PauseLeader,
    /// SIGSTOP a follower for seconds, SIGCONT.
    PauseFollower,
    /// Cut the leader off from every other server, heal.
    PartitionLeader,
    /// Cut a minority of followers off from the rest, heal.
    PartitionMinority,
    /// Kill a follower, wipe its data directory, restart it empty.
    WipeFollower,
    /// Kill any voter, the leader included, wipe it and restart it empty at
    /// once, so it is asked to vote in the election that follows; half of
    /// the time another server goes down meanwhile, which makes the wiped
    /// one the leader's last voter (it must still not vote in a term it
    /// may have voted in before).
    WipeVoter,
    /// Every fsync of one server takes 50-800 ms longer, then full speed.
    SlowDisk,
    /// One server's wall clock jumps (either way, a minute to a day) and
    /// its monotonic clock jumps 0.5-3 s forward; the wall clock comes back.
    ClockJump,
    /// A reconfig removes a voter (the leader too), and another adds it
    /// back; half of the time a server (perhaps the leader) is killed the
    /// moment the removal is sent, so the change meets a crash midway.
    Reconfig,
    /// A bit of everything, one fault at a time.
    Mixed,
}

impl Scenario {
    pub const ALL: [Scenario; 12] = [
        Scenario::Reconfig,
        Scenario::KillLeader,
        Scenario::KillFollower,
        Scenario::PauseLeader,
        Scenario::PauseFollower,
        Scenario::PartitionLeader,
        Scenario::PartitionMinority,
        Scenario::WipeFollower,
        Scenario::WipeVoter,
        Scenario::SlowDisk,
        Scenario::ClockJump,
        Scenario::Mixed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::KillLeader => "kill-leader",
            Scenario::KillFollower => "kill-follower",
            Scenario::PauseLeader => "pause-leader",
            Scenario::PauseFollower => "pause-follower",
            Scenario::PartitionLeader => "partition-leader",
            Scenario::PartitionMinority => "partition-minority",
            Scenario::WipeFollower => "wipe-follower",
            Scenario::WipeVoter => "wipe-voter",
            Scenario::SlowDisk => "slow-disk",
            Scenario::ClockJump => "clock-jump",
            Scenario::Reconfig => "reconfig",
            Scenario::Mixed => "mixed",
        }
    }
}

/// Faults the nemesis injected, for the summary.
#[derive(Debug, Default)]
pub struct Injected {
    pub faults: Vec<String>,
}

/// What the nemesis acts through.
pub struct Levers<'a> {
    pub cluster: &'a mut Cluster,
    pub links: &'a Links,
    pub shim: &'a Shim,
    /// Where its reconfig requests run.
    pub runtime: tokio::runtime::Handle,
}

/// The superuser's password on every server, for reconfig.
pub const SUPER_PASSWORD: &str = "faults";

/// A fault the `mixed` scenario may pick: all but reconfig, whose
/// ensembles have no proxied links to partition, and mixed itself.
fn mixable(scenario: Scenario) -> bool {
    !matches!(scenario, Scenario::Reconfig | Scenario::Mixed)
}

/// Injects the scenario's faults until `stop`, then heals everything and
/// waits until every server serves again. Runs on a blocking thread.
pub fn nemesis(
    scenario: Scenario,
    levers: Levers<'_>,
    stop: &AtomicBool,
    seed: u64,
) -> anyhow::Result<Injected> {
    let Levers {
        cluster,
        links,
        shim,
        runtime,
    } = levers;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut injected = Injected::default();
    while !stop.load(Ordering::Relaxed) {
        sleep_unless_stopped(stop, rng.gen_range(1000..2500));
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let fault = match scenario {
            Scenario::Mixed => *Scenario::ALL
                .iter()
                .copied()
                .filter(|s| mixable(*s))
                .collect::<Vec<_>>()
                .choose(&mut rng)
                .expect("scenarios"),
            other => other,
        };
        let Some(leader) = cluster.leader() else {
            continue;
        };
        let followers: Vec<usize> = (0..cluster.servers().len())
            .filter(|&i| i != leader && cluster.servers()[i].mode() == Some(Mode::Follower))
            .collect();
        let victim = match fault {
            Scenario::KillLeader | Scenario::PauseLeader | Scenario::PartitionLeader => leader,
            Scenario::SlowDisk | Scenario::ClockJump | Scenario::WipeVoter | Scenario::Reconfig => {
                rng.gen_range(0..cluster.servers().len())
            }
            _ => match followers.choose(&mut rng) {
                Some(&f) => f,
                None => continue,
            },
        };
        let id = cluster.servers()[victim].id();
        let hold = rng.gen_range(500..4000);
        let mut what = format!("{} server.{id}", fault.name());
        match fault {
            Scenario::KillLeader | Scenario::KillFollower | Scenario::WipeFollower => {
                cluster.server(victim).kill();
                if fault == Scenario::WipeFollower {
                    cluster.server(victim).wipe()?;
                }
                sleep_unless_stopped(stop, hold);
                cluster.server(victim).restart()?;
            }
            Scenario::WipeVoter => {
                cluster.server(victim).kill();
                cluster.server(victim).wipe()?;
                cluster.server(victim).restart()?;
                let others: Vec<usize> = (0..cluster.servers().len())
                    .filter(|&i| {
                        i != victim
                            && matches!(
                                cluster.servers()[i].mode(),
                                Some(Mode::Leader | Mode::Follower)
                            )
                    })
                    .collect();
                let second = others
                    .choose(&mut rng)
                    .copied()
                    .filter(|_| rng.gen_bool(0.5));
                if let Some(second) = second {
                    what += &format!(" with server.{} down", cluster.servers()[second].id());
                    cluster.server(second).kill();
                }
                sleep_unless_stopped(stop, hold);
                if let Some(second) = second {
                    cluster.server(second).restart()?;
                }
            }
            Scenario::PauseLeader | Scenario::PauseFollower => {
                cluster.server(victim).pause();
                sleep_unless_stopped(stop, hold);
                cluster.server(victim).resume();
            }
            Scenario::PartitionLeader => {
                links.isolate(&[id]);
                sleep_unless_stopped(stop, hold);
                links.heal();
            }
            Scenario::PartitionMinority => {
                let minority = (cluster.servers().len() - 1) / 2;
                let mut side: Vec<usize> = followers
                    .iter()
                    .map(|&f| cluster.servers()[f].id())
                    .collect();
                side.shuffle(&mut rng);
                side.truncate(minority.max(1));
                links.isolate(&side);
                sleep_unless_stopped(stop, hold);
                links.heal();
            }
            Scenario::SlowDisk => {
                let delay = Duration::from_millis(rng.gen_range(50..800));
                what += &format!(" (fsync +{} ms)", delay.as_millis());
                shim.slow_disk(id, delay)?;
                sleep_unless_stopped(stop, hold);
                shim.slow_disk(id, Duration::ZERO)?;
            }
            Scenario::ClockJump => {
                let wall_s = rng.gen_range(60..86_400) * if rng.gen_bool(0.5) { 1 } else { -1 };
                let monotonic = Duration::from_millis(rng.gen_range(500..3000));
                what += &format!(
                    " (wall clock {wall_s:+} s, monotonic +{} ms)",
                    monotonic.as_millis()
                );
                shim.shift_realtime(id, wall_s * 1_000_000_000)?;
                shim.jump_monotonic(id, monotonic)?;
                sleep_unless_stopped(stop, hold);
                shim.shift_realtime(id, 0)?;
            }
            Scenario::Reconfig => {
                let crash = rng
                    .gen_bool(0.5)
                    .then(|| rng.gen_range(0..cluster.servers().len()));
                let removal = runtime.spawn(reconfig(
                    cluster.connect_string(),
                    None,
                    Some(id.to_string()),
                ));
                if let Some(crashed) = crash {
                    what += &format!(
                        " with server.{} killed midway",
                        cluster.servers()[crashed].id()
                    );
                    cluster.server(crashed).kill();
                }
                let removed = runtime.block_on(removal)?;
                what += if removed.is_ok() {
                    ", removed"
                } else {
                    ", removal lost"
                };
                sleep_unless_stopped(stop, hold);
                if let Some(crashed) = crash {
                    cluster.server(crashed).restart()?;
                }
                runtime.block_on(ensure_members(cluster))?;
            }
            Scenario::Mixed => unreachable!("mixed picks a concrete fault"),
        }
        injected.faults.push(format!("{what} for {hold} ms"));
    }
    heal(cluster, links, shim)?;
    if scenario == Scenario::Reconfig {
        runtime.block_on(ensure_members(cluster))?;
    }
    Ok(injected)
}

/// One reconfig as the superuser, through any server.
async fn reconfig(
    connect: String,
    joining: Option<String>,
    leaving: Option<String>,
) -> Result<(), client::Error> {
    let options = client::ConnectOptions::new()
        .session_timeout(Duration::from_secs(10))
        .auth("digest", format!("super:{SUPER_PASSWORD}").as_bytes());
    let zk = client::Client::connect(&connect, options).await?;
    let result = zk
        .reconfig(joining.as_deref(), leaving.as_deref(), None, None)
        .await;
    zk.close().await;
    result.map(drop)
}

/// Joins back every server the configuration lacks, retrying while the
/// ensemble recovers (a reconfig meeting a leader change is lost).
async fn ensure_members(cluster: &Cluster) -> anyhow::Result<()> {
    let deadline = Instant::now() + launch::START_TIMEOUT;
    loop {
        let missing: Vec<String> = match members(&cluster.connect_string()).await {
            Ok(ids) => cluster
                .servers()
                .iter()
                .filter(|s| !ids.contains(&s.id()))
                .map(|s| s.joining_line())
                .collect(),
            Err(_) => vec![String::new()],
        };
        if missing.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the ensemble's configuration still lacks servers: {missing:?}"
        );
        let joining = missing
            .into_iter()
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>();
        if !joining.is_empty() {
            let _ = reconfig(cluster.connect_string(), Some(joining.join(",")), None).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The server ids of the ensemble's configuration, read after a sync.
async fn members(connect: &str) -> Result<Vec<usize>, client::Error> {
    let zk = client::Client::connect(connect, client::ConnectOptions::new()).await?;
    let read = async {
        zk.sync("/zookeeper/config").await?;
        zk.get_config().await
    };
    let result = read.await;
    zk.close().await;
    let (data, _) = result?;
    let text = String::from_utf8_lossy(data.as_deref().unwrap_or_default()).into_owned();
    Ok(text
        .lines()
        .filter_map(|line| line.strip_prefix("server."))
        .filter_map(|rest| rest.split_once('=')?.0.parse().ok())
        .collect())
}

/// Every link up, disks at full speed, clocks true, every process running
/// and serving.
pub fn heal(cluster: &mut Cluster, links: &Links, shim: &Shim) -> anyhow::Result<()> {
    links.heal();
    shim.heal(cluster.servers().len())?;
    for i in 0..cluster.servers().len() {
        let server = cluster.server(i);
        server.resume();
        if !server.is_running() {
            server.restart()?;
        }
    }
    for i in 0..cluster.servers().len() {
        cluster.server(i).wait_serving(launch::START_TIMEOUT)?;
    }
    Ok(())
}

fn sleep_unless_stopped(stop: &AtomicBool, millis: u64) {
    let end = Instant::now() + Duration::from_millis(millis);
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
}
