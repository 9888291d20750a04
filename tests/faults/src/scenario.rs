//! The named fault scenarios: what the nemesis does to the ensemble while
//! the workers run, and how it puts everything right afterwards.

use std::collections::BTreeMap;
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
    /// Five servers whose membership changes under load: shrink to three
    /// voters, grow back, replace a voter by a server outside, move a
    /// voter to observer and back; half of the time a server (perhaps the
    /// leader) is killed the moment the change is sent.
    Membership,
    /// Every server in turn, the leader when its turn comes, stopped as an
    /// operator stops it (SIGTERM: a leader hands leadership over first),
    /// down for the hold, restarted and waited for until it serves again:
    /// a rolling restart, over and over.
    RollingRestart,
    /// A bit of everything, one fault at a time.
    Mixed,
    /// The live move from Apache ZooKeeper (`crate::takeover`): workers on
    /// a ZooKeeper ensemble and on two Paddock servers observing it move to
    /// Paddock one at a time, `paddock takeover`, ZooKeeper stops.
    Takeover,
}

impl Scenario {
    pub const ALL: [Scenario; 15] = [
        Scenario::Reconfig,
        Scenario::Membership,
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
        Scenario::RollingRestart,
        Scenario::Mixed,
        Scenario::Takeover,
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
            Scenario::Membership => "membership",
            Scenario::RollingRestart => "rolling-restart",
            Scenario::Mixed => "mixed",
            Scenario::Takeover => "takeover",
        }
    }

    /// How many servers its ensemble has.
    pub fn servers(self) -> usize {
        match self {
            Scenario::Membership => 5,
            _ => 3,
        }
    }

    /// Whether it changes the membership, which gives every server one
    /// address for each: the peer-link proxies cannot be kept.
    pub fn reconfigures(self) -> bool {
        matches!(self, Scenario::Reconfig | Scenario::Membership)
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

/// How long a server stopped with SIGTERM may take to hand over and exit
/// before it is killed: a few election timeouts.
const GRACEFUL_STOP_MAX: Duration = Duration::from_secs(10);

/// The superuser's password on every server, for reconfig.
pub const SUPER_PASSWORD: &str = "faults";

/// A fault the `mixed` scenario may pick: all but the membership changes,
/// whose ensembles have no proxied links to partition, and mixed itself.
fn mixable(scenario: Scenario) -> bool {
    !scenario.reconfigures() && !matches!(scenario, Scenario::Mixed | Scenario::Takeover)
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
            Scenario::SlowDisk
            | Scenario::ClockJump
            | Scenario::WipeVoter
            | Scenario::Reconfig
            | Scenario::Membership => rng.gen_range(0..cluster.servers().len()),
            // The next in turn, whatever its role.
            Scenario::RollingRestart => injected.faults.len() % cluster.servers().len(),
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
                what += &wipe_voter(cluster, victim, &mut rng, stop, hold)?;
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
                let leaving = Some(id.to_string());
                let sent = (None, leaving);
                what += &reconfig_meeting_a_crash(cluster, &runtime, &mut rng, stop, hold, sent)?;
                runtime.block_on(ensure_members(cluster))?;
            }
            Scenario::Membership => {
                let config = runtime.block_on(members(&cluster.connect_string()));
                let change = config
                    .ok()
                    .and_then(|config| Change::pick(cluster, &config, &mut rng));
                let Some(change) = change else {
                    continue;
                };
                what = change.describe(cluster);
                let sent = (change.joining(cluster), change.leaving(cluster));
                what += &reconfig_meeting_a_crash(cluster, &runtime, &mut rng, stop, hold, sent)?;
            }
            Scenario::RollingRestart => {
                if victim == leader {
                    what += " (the leader)";
                }
                cluster.server(victim).stop(GRACEFUL_STOP_MAX);
                sleep_unless_stopped(stop, hold);
                cluster.server(victim).restart()?;
                cluster.server(victim).wait_serving(launch::START_TIMEOUT)?;
            }
            Scenario::Mixed => unreachable!("mixed picks a concrete fault"),
            Scenario::Takeover => unreachable!("the takeover has a run of its own"),
        }
        injected.faults.push(format!("{what} for {hold} ms"));
    }
    heal(cluster, links, shim)?;
    // A server a reconfig left out serves once it is joined again.
    if scenario.reconfigures() {
        runtime.block_on(ensure_members(cluster))?;
    }
    for i in 0..cluster.servers().len() {
        cluster.server(i).wait_serving(launch::START_TIMEOUT)?;
    }
    Ok(injected)
}

/// Kills `victim`, wipes it and restarts it at once; half of the time
/// another voter is down for the hold. Says which.
fn wipe_voter(
    cluster: &mut Cluster,
    victim: usize,
    rng: &mut StdRng,
    stop: &AtomicBool,
    hold: u64,
) -> anyhow::Result<String> {
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
    let second = others.choose(rng).copied().filter(|_| rng.gen_bool(0.5));
    let mut what = String::new();
    if let Some(second) = second {
        what = format!(" with server.{} down", cluster.servers()[second].id());
        cluster.server(second).kill();
    }
    sleep_unless_stopped(stop, hold);
    if let Some(second) = second {
        cluster.server(second).restart()?;
    }
    Ok(what)
}

/// Sends one reconfig (`joining`, `leaving`) through any server; half of
/// the time a server (perhaps the leader) is killed the moment it is sent,
/// and restarted after the hold. Says what happened.
fn reconfig_meeting_a_crash(
    cluster: &mut Cluster,
    runtime: &tokio::runtime::Handle,
    rng: &mut StdRng,
    stop: &AtomicBool,
    hold: u64,
    (joining, leaving): (Option<String>, Option<String>),
) -> anyhow::Result<String> {
    let crash = rng
        .gen_bool(0.5)
        .then(|| rng.gen_range(0..cluster.servers().len()));
    let sent = runtime.spawn(reconfig(cluster.connect_string(), joining, leaving));
    let mut what = String::new();
    if let Some(crashed) = crash {
        what = format!(
            " with server.{} killed midway",
            cluster.servers()[crashed].id()
        );
        cluster.server(crashed).kill();
    }
    what += match runtime.block_on(sent)? {
        Ok(()) => ", done",
        Err(_) => ", lost",
    };
    sleep_unless_stopped(stop, hold);
    if let Some(crashed) = crash {
        cluster.server(crashed).restart()?;
    }
    Ok(what)
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

/// Joins back every server the configuration lacks and makes every
/// observer a participant again, retrying while the ensemble recovers (a
/// reconfig meeting a leader change is lost).
async fn ensure_members(cluster: &Cluster) -> anyhow::Result<()> {
    let deadline = Instant::now() + launch::START_TIMEOUT;
    loop {
        let joining: Option<Vec<String>> =
            members(&cluster.connect_string()).await.ok().map(|config| {
                cluster
                    .servers()
                    .iter()
                    .filter(|s| config.get(&s.id()) != Some(&Role::Participant))
                    .map(|s| s.joining_line())
                    .collect()
            });
        if joining.as_ref().is_some_and(Vec::is_empty) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the ensemble's configuration still lacks participants: {joining:?}"
        );
        if let Some(joining) = joining {
            let _ = reconfig(cluster.connect_string(), Some(joining.join(",")), None).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A server's part in the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Participant,
    Observer,
}

/// The ensemble's configuration, read after a sync: each member's id
/// and role.
async fn members(connect: &str) -> Result<BTreeMap<usize, Role>, client::Error> {
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
        .filter_map(|rest| {
            let (id, value) = rest.split_once('=')?;
            let quorum = value.split(';').next()?;
            let role = if quorum.ends_with(":observer") {
                Role::Observer
            } else {
                Role::Participant
            };
            Some((id.parse().ok()?, role))
        })
        .collect())
}

/// One change of the `membership` scenario, as server indexes.
enum Change {
    /// Voters leave until three are left.
    Shrink(Vec<usize>),
    /// Every server outside the configuration joins as a participant.
    Grow(Vec<usize>),
    /// A voter leaves and a server outside joins, in one request.
    Replace { leaving: usize, joining: usize },
    /// A voter becomes an observer.
    ToObserver(usize),
    /// An observer becomes a voter.
    ToParticipant(usize),
}

/// The smallest number of voters a change leaves.
const FEWEST_VOTERS: usize = 3;

impl Change {
    /// A change the configuration allows, at random: the servers of
    /// `cluster` each a voter, an observer or outside.
    fn pick(cluster: &Cluster, config: &BTreeMap<usize, Role>, rng: &mut StdRng) -> Option<Change> {
        let of_role = |role: Option<Role>| -> Vec<usize> {
            (0..cluster.servers().len())
                .filter(|&i| config.get(&cluster.servers()[i].id()).copied() == role)
                .collect()
        };
        let mut voters = of_role(Some(Role::Participant));
        let observers = of_role(Some(Role::Observer));
        let outside = of_role(None);
        voters.shuffle(rng);
        let mut options = Vec::new();
        if voters.len() > FEWEST_VOTERS {
            options.push(Change::Shrink(voters[FEWEST_VOTERS..].to_vec()));
            options.push(Change::ToObserver(voters[0]));
        }
        if !outside.is_empty() {
            options.push(Change::Grow(outside.clone()));
        }
        if let (Some(&leaving), Some(&joining)) = (voters.first(), outside.choose(rng)) {
            options.push(Change::Replace { leaving, joining });
        }
        if let Some(&observer) = observers.choose(rng) {
            options.push(Change::ToParticipant(observer));
        }
        let chosen = rng.gen_range(0..options.len().max(1));
        options.into_iter().nth(chosen)
    }

    /// The `server.N` lines it joins, as one argument.
    fn joining(&self, cluster: &Cluster) -> Option<String> {
        let servers = cluster.servers();
        let lines: Vec<String> = match self {
            Change::Shrink(_) => return None,
            Change::Grow(joining) => joining.iter().map(|&i| servers[i].joining_line()).collect(),
            Change::Replace { joining, .. } | Change::ToParticipant(joining) => {
                vec![servers[*joining].joining_line()]
            }
            Change::ToObserver(moving) => vec![servers[*moving].observing_line()],
        };
        Some(lines.join(","))
    }

    /// The server ids it removes, as one argument.
    fn leaving(&self, cluster: &Cluster) -> Option<String> {
        let leaving: &[usize] = match self {
            Change::Shrink(leaving) => leaving,
            Change::Replace { leaving, .. } => std::slice::from_ref(leaving),
            _ => return None,
        };
        let ids: Vec<String> = leaving
            .iter()
            .map(|&i| cluster.servers()[i].id().to_string())
            .collect();
        Some(ids.join(","))
    }

    fn describe(&self, cluster: &Cluster) -> String {
        let id = |i: &usize| cluster.servers()[*i].id();
        let ids = |is: &[usize]| is.iter().map(id).collect::<Vec<_>>();
        match self {
            Change::Shrink(leaving) => format!("membership: {:?} leave", ids(leaving)),
            Change::Grow(joining) => format!("membership: {:?} join", ids(joining)),
            Change::Replace { leaving, joining } => {
                format!(
                    "membership: server.{} replaces server.{}",
                    id(joining),
                    id(leaving)
                )
            }
            Change::ToObserver(i) => format!("membership: server.{} observes", id(i)),
            Change::ToParticipant(i) => format!("membership: server.{} votes again", id(i)),
        }
    }
}

/// Every link up, disks at full speed, clocks true, every process running.
fn heal(cluster: &mut Cluster, links: &Links, shim: &Shim) -> anyhow::Result<()> {
    links.heal();
    shim.heal(cluster.servers().len())?;
    for i in 0..cluster.servers().len() {
        let server = cluster.server(i);
        server.resume();
        if !server.is_running() {
            server.restart()?;
        }
    }
    Ok(())
}

fn sleep_unless_stopped(stop: &AtomicBool, millis: u64) {
    let end = Instant::now() + Duration::from_millis(millis);
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
}
