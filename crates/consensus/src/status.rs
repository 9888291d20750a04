//! What the consensus thread last knew, published for four-letter words
//! and metrics without asking the thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::histogram::Histogram;
use crate::membership::Membership;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    Follower = 0,
    Candidate = 1,
    Leader = 2,
}

/// How many of the leaders this server came to know it remembers.
const LEADERS_REMEMBERED: usize = 100;

/// A leader this server came to know, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderSeen {
    pub leader_id: u64,
    pub term: u64,
    pub at: SystemTime,
}

#[derive(Debug, Default)]
pub struct Status {
    pub(crate) role: AtomicU8,
    pub(crate) term: AtomicU64,
    pub(crate) leader_id: AtomicU64,
    /// Log index space.
    pub(crate) commit_index: AtomicU64,
    /// Log index space.
    pub(crate) last_index: AtomicU64,
    /// The log could not be written for lack of disk space and waits for
    /// it: nothing new can be made durable here.
    pub(crate) disk_full: AtomicBool,
    /// Times this server lost the leader it knew, to a crash, an election
    /// or a hand-off.
    pub(crate) leader_changes: AtomicU64,
    /// The leaders this server has come to know, newest last.
    pub(crate) leaders: Mutex<VecDeque<LeaderSeen>>,
    /// How long each sync of the log took.
    pub(crate) log_syncs: Histogram,
    /// The group's voters and learners as raft applies them.
    pub(crate) membership: Mutex<Membership>,
    /// A change of membership is proposed and not yet applied, or is
    /// joint (half done): another must wait.
    pub(crate) membership_changing: AtomicBool,
}

impl Status {
    pub fn role(&self) -> Role {
        match self.role.load(Ordering::Relaxed) {
            2 => Role::Leader,
            1 => Role::Candidate,
            _ => Role::Follower,
        }
    }

    pub fn term(&self) -> u64 {
        self.term.load(Ordering::Relaxed)
    }

    pub fn leader_id(&self) -> u64 {
        self.leader_id.load(Ordering::Relaxed)
    }

    pub fn commit_index(&self) -> u64 {
        self.commit_index.load(Ordering::Relaxed)
    }

    pub fn last_index(&self) -> u64 {
        self.last_index.load(Ordering::Relaxed)
    }

    /// Times this server lost the leader it knew (ZooKeeper counts the
    /// same moments as `looking_count`, when a peer starts looking).
    pub fn leader_changes(&self) -> u64 {
        self.leader_changes.load(Ordering::Relaxed)
    }

    /// The last leaders this server came to know, oldest first: leader
    /// changes over time, as seen from here.
    pub fn leader_history(&self) -> Vec<LeaderSeen> {
        let leaders = self.leaders.lock().expect("leader history poisoned");
        leaders.iter().copied().collect()
    }

    pub(crate) fn record_leader(&self, leader_id: u64, term: u64) {
        let mut leaders = self.leaders.lock().expect("leader history poisoned");
        if leaders.len() == LEADERS_REMEMBERED {
            leaders.pop_front();
        }
        leaders.push_back(LeaderSeen {
            leader_id,
            term,
            at: SystemTime::now(),
        });
    }

    /// The group's voters and learners, as of the last change applied.
    pub fn membership(&self) -> Membership {
        self.membership.lock().expect("membership poisoned").clone()
    }

    pub(crate) fn set_membership(&self, membership: Membership) {
        *self.membership.lock().expect("membership poisoned") = membership;
    }

    /// Whether a change of membership is under way (known to the leader
    /// from its proposal, to others once it is applied and joint).
    pub fn membership_changing(&self) -> bool {
        self.membership_changing.load(Ordering::Relaxed)
    }

    /// For a replication run outside this crate (`Consensus::upstream`):
    /// this server follows `leader_id` in `term`, and `committed` is the
    /// last index (zxid) it was sent.
    pub fn follow_upstream(&self, leader_id: u64, term: u64, committed: u64) {
        self.role.store(Role::Follower as u8, Ordering::Relaxed);
        let previous = self.leader_id.swap(leader_id, Ordering::Relaxed);
        if previous != leader_id {
            if previous != 0 {
                self.leader_changes.fetch_add(1, Ordering::Relaxed);
            }
            if leader_id != 0 {
                self.record_leader(leader_id, term);
            }
        }
        self.term.store(term, Ordering::Relaxed);
        self.commit_index.store(committed, Ordering::Relaxed);
        self.last_index.store(committed, Ordering::Relaxed);
    }

    /// How long the log's syncs (one fdatasync per batch) have taken.
    pub fn log_syncs(&self) -> &Histogram {
        &self.log_syncs
    }

    /// Whether the log waits for disk space, so that writes made through
    /// this server cannot be accepted; reads can still be served.
    pub fn disk_full(&self) -> bool {
        self.disk_full.load(Ordering::Relaxed)
    }
}
