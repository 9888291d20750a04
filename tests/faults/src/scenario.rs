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
    /// A bit of everything, one fault at a time.
    Mixed,
}

impl Scenario {
    pub const ALL: [Scenario; 11] = [
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
    } = levers;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut injected = Injected::default();
    while !stop.load(Ordering::Relaxed) {
        sleep_unless_stopped(stop, rng.gen_range(1000..2500));
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let fault = match scenario {
            Scenario::Mixed => *Scenario::ALL[..Scenario::ALL.len() - 1]
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
            Scenario::SlowDisk | Scenario::ClockJump | Scenario::WipeVoter => {
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
            Scenario::Mixed => unreachable!("mixed picks a concrete fault"),
        }
        injected.faults.push(format!("{what} for {hold} ms"));
    }
    heal(cluster, links, shim)?;
    Ok(injected)
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
