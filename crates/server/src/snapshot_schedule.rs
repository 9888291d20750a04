//! When the next snapshot is due: after `snapCount` txns or
//! `snapSizeLimitInKb` of log since the last one, whichever comes first,
//! each limit jittered to between half and all of it, as ZooKeeper does,
//! so that replicas do not snapshot in step.
//!
//! The size limit bounds the log a restart replays (and reads into memory
//! once): a client writing large multis would otherwise grow it by up to
//! `snapCount` times their size. It never falls below the tree's own data
//! size, though: a snapshot rewrites the whole tree, and doing that for
//! every small fraction of it written would multiply the disk's work. So
//! the log stays within the larger of the limit and the tree.
//!
//! For the same reason the count never falls below the tree's node count.
//! A snapshot writes every node, so with a fixed `snapCount` each write
//! pays for `nodes / snapCount` nodes written out, a cost that grows with
//! the tree (at 1M znodes and ZooKeeper's 100,000, a fifth of the server's
//! CPU under writes, a snapshot every two seconds). Raised, each write
//! pays for at most two (the jitter halves the count), whatever the size.
//! The price is in the restart: at most as many txns to replay as the
//! snapshot holds nodes, and no more bytes than it holds data.
//!
//! While a server replays its log at start-up, a due snapshot waits until
//! it serves clients, unless the log has grown far past the limit: a
//! snapshot then would compete with the replay for the cores, and make
//! every txn replayed copy the parts of the tree it changes from the clone
//! being written. Among 10M znodes, with 4.3M txns to replay, a restart
//! took 17.8-19.9 s with the snapshot and 15.7-16.9 s without (the
//! snapshot is then written while serving).
//!
//! Between whole snapshots of a tree that large, a delta (`tree::delta`:
//! what changed since the last snapshot of either kind) is due every
//! `snapCount` txns or `snapSizeLimitInKb` of log, jittered the same way,
//! so that a restart loads the whole snapshot and its deltas and replays
//! at most that much log. A delta writes only what changed, so it costs
//! a write about what the txn itself wrote.
//!
//! A snapshot written in the background (`snapshot_job`) that is still
//! being written when twice the unjittered limit has been logged since it
//! began is far overdue: it is given up and written again at normal
//! priority.

use rand::Rng as _;

/// What a snapshot writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotKind {
    /// The whole tree.
    Whole,
    /// What changed since the last snapshot (`tree::Changes`).
    Delta,
}

/// What a snapshot of the tree writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct TreeSize {
    pub nodes: u64,
    /// The tree's approximate data size (paths and data).
    pub bytes: u64,
}

impl TreeSize {
    pub fn of(tree: &tree::DataTree) -> Self {
        TreeSize {
            nodes: tree.node_count() as u64,
            bytes: tree.approximate_data_bytes(),
        }
    }
}

pub struct SnapshotSchedule {
    snap_count: u64,
    /// `None`: no size limit (`snapSizeLimitInKb` <= 0).
    size_limit_bytes: Option<u64>,
    /// The log since the last whole snapshot.
    whole: LogSince,
    /// The log since the last snapshot of either kind, while the tree is
    /// large enough for deltas: at least twice `snapCount` nodes, or
    /// twice the size limit.
    delta: Option<LogSince>,
}

/// The log written since a snapshot, and how much of it makes the next
/// one due.
struct LogSince {
    txns: u64,
    bytes: u64,
    txns_due: u64,
    bytes_due: Option<u64>,
    /// The limits before jitter, for `is_far_overdue`.
    txns_limit: u64,
    bytes_limit: Option<u64>,
}

impl LogSince {
    fn new(txns_limit: u64, bytes_limit: Option<u64>) -> Self {
        LogSince {
            txns: 0,
            bytes: 0,
            txns_due: jittered(txns_limit),
            bytes_due: bytes_limit.map(jittered),
            txns_limit,
            bytes_limit,
        }
    }

    fn count(&mut self, bytes: u64) {
        self.txns += 1;
        self.bytes += bytes;
    }

    fn is_due(&self) -> bool {
        self.txns >= self.txns_due || self.bytes_due.is_some_and(|due| self.bytes >= due)
    }

    /// Twice the unjittered limit.
    fn is_far_overdue(&self) -> bool {
        self.txns >= self.txns_limit.saturating_mul(2)
            || self
                .bytes_limit
                .is_some_and(|limit| self.bytes >= limit.saturating_mul(2))
    }
}

impl SnapshotSchedule {
    /// `tree`: the size of the tree now.
    pub fn new(snap_count: u64, size_limit_kb: i64, tree: TreeSize) -> Self {
        let size_limit_bytes = u64::try_from(size_limit_kb)
            .ok()
            .filter(|&kb| kb > 0)
            .map(|kb| kb.saturating_mul(1024));
        let mut schedule = SnapshotSchedule {
            snap_count,
            size_limit_bytes,
            whole: LogSince::new(snap_count, size_limit_bytes),
            delta: None,
        };
        schedule.restart(tree);
        schedule
    }

    /// One more txn of `bytes` in the log.
    pub fn count(&mut self, bytes: usize) {
        self.whole.count(bytes as u64);
        if let Some(delta) = &mut self.delta {
            delta.count(bytes as u64);
        }
    }

    /// The snapshot due, if one is: a whole one before a delta.
    pub fn due(&self) -> Option<SnapshotKind> {
        if self.whole.is_due() {
            Some(SnapshotKind::Whole)
        } else if self.delta.as_ref().is_some_and(LogSince::is_due) {
            Some(SnapshotKind::Delta)
        } else {
            None
        }
    }

    pub fn is_due(&self) -> bool {
        self.due().is_some()
    }

    /// The snapshot due that may start now: once the server is serving
    /// clients, or before if the log is far overdue.
    pub fn may_start(&self, serving: bool) -> Option<SnapshotKind> {
        self.due().filter(|_| serving || self.is_far_overdue())
    }

    /// Twice the unjittered limit of a whole snapshot logged since the
    /// last one started.
    pub fn is_far_overdue(&self) -> bool {
        self.whole.is_far_overdue()
    }

    /// A whole snapshot of a tree of this size started (or the tree was
    /// replaced by one): count afresh.
    pub fn restart(&mut self, tree: TreeSize) {
        let txns_limit = self.snap_count.max(tree.nodes);
        let bytes_limit = self.size_limit_bytes.map(|limit| limit.max(tree.bytes));
        self.whole = LogSince::new(txns_limit, bytes_limit);
        let raised = |whole: u64, limit: u64| whole >= limit.saturating_mul(2);
        let deltas_pay = raised(txns_limit, self.snap_count)
            || bytes_limit
                .zip(self.size_limit_bytes)
                .is_some_and(|(whole, limit)| raised(whole, limit));
        self.delta = deltas_pay.then(|| LogSince::new(self.snap_count, self.size_limit_bytes));
    }

    /// A delta started: count afresh towards the next.
    pub fn delta_started(&mut self) {
        if self.delta.is_some() {
            self.delta = Some(LogSince::new(self.snap_count, self.size_limit_bytes));
        }
    }
}

/// Between half of `limit` and all of it.
fn jittered(limit: u64) -> u64 {
    let half = (limit / 2).max(1);
    half + rand::thread_rng().gen_range(0..half)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_small_txns_are_due_by_count() {
        let mut schedule = SnapshotSchedule::new(100, 1024, TreeSize::default());
        let mut txns = 0;
        while !schedule.is_due() {
            schedule.count(10);
            txns += 1;
        }
        assert!((50..=100).contains(&txns), "{txns}");
    }

    #[test]
    fn a_few_large_txns_are_due_by_size() {
        let mut schedule = SnapshotSchedule::new(100_000, 1024, TreeSize::default());
        let mut txns = 0;
        while !schedule.is_due() {
            schedule.count(100 << 10);
            txns += 1;
        }
        assert!((5..=11).contains(&txns), "{txns}");
        schedule.restart(TreeSize::default());
        assert!(!schedule.is_due());
    }

    #[test]
    fn a_tree_larger_than_the_limit_raises_it() {
        let tree = TreeSize {
            nodes: 0,
            bytes: 10 << 20,
        };
        let mut schedule = SnapshotSchedule::new(100_000, 1024, tree);
        let txns = txns_until_whole(&mut schedule, 100 << 10);
        assert!((51..=103).contains(&txns), "{txns}");
    }

    #[test]
    fn far_overdue_at_twice_the_limit_by_count_or_by_size() {
        let mut schedule = SnapshotSchedule::new(100, 1, TreeSize::default());
        for _ in 0..199 {
            schedule.count(1);
        }
        assert!(schedule.is_due() && !schedule.is_far_overdue());
        schedule.count(1);
        assert!(schedule.is_far_overdue());

        schedule.restart(TreeSize::default());
        schedule.count(2047);
        assert!(!schedule.is_far_overdue());
        schedule.count(1);
        assert!(schedule.is_far_overdue());
    }

    #[test]
    fn a_due_snapshot_waits_for_serving_until_far_overdue() {
        let mut schedule = SnapshotSchedule::new(100, 1 << 20, TreeSize::default());
        assert_eq!(schedule.may_start(true), None);
        for _ in 0..100 {
            schedule.count(1);
        }
        assert_eq!(schedule.may_start(true), Some(SnapshotKind::Whole));
        assert_eq!(schedule.may_start(false), None);
        for _ in 0..100 {
            schedule.count(1);
        }
        assert_eq!(schedule.may_start(false), Some(SnapshotKind::Whole));
    }

    #[test]
    fn no_size_limit_when_it_is_not_positive() {
        for limit in [0, -1] {
            let mut schedule = SnapshotSchedule::new(10, limit, TreeSize::default());
            schedule.count(usize::MAX >> 1);
            assert!(!schedule.is_due());
        }
    }

    /// Txns counted until a snapshot is due, and which.
    fn txns_until_due(schedule: &mut SnapshotSchedule) -> (u64, SnapshotKind) {
        let mut txns = 0;
        loop {
            if let Some(kind) = schedule.due() {
                return (txns, kind);
            }
            schedule.count(10);
            txns += 1;
        }
    }

    #[test]
    fn deltas_come_every_snap_count_between_whole_snapshots_of_a_large_tree() {
        let tree = TreeSize {
            nodes: 1000,
            bytes: 0,
        };
        let mut schedule = SnapshotSchedule::new(100, 1 << 20, tree);
        let mut since_whole = 0;
        loop {
            let (txns, kind) = txns_until_due(&mut schedule);
            since_whole += txns;
            if kind == SnapshotKind::Whole {
                break;
            }
            assert!((50..=100).contains(&txns), "a delta after {txns}");
            schedule.delta_started();
        }
        assert!((500..=1000).contains(&since_whole), "{since_whole}");
    }

    #[test]
    fn a_tree_under_twice_snap_count_takes_no_delta() {
        let tree = TreeSize {
            nodes: 150,
            bytes: 0,
        };
        let mut schedule = SnapshotSchedule::new(100, 1 << 20, tree);
        let (txns, kind) = txns_until_due(&mut schedule);
        assert_eq!(kind, SnapshotKind::Whole);
        assert!((75..=150).contains(&txns), "{txns}");
    }

    #[test]
    fn a_tree_of_more_nodes_than_snap_count_raises_it() {
        let tree = TreeSize {
            nodes: 1000,
            bytes: 0,
        };
        let mut schedule = SnapshotSchedule::new(100, 1 << 20, tree);
        let txns = txns_until_whole(&mut schedule, 10);
        assert!((500..=1000).contains(&txns), "{txns}");
    }

    /// Txns of `bytes` counted until a whole snapshot is due, every delta
    /// due on the way started.
    fn txns_until_whole(schedule: &mut SnapshotSchedule, bytes: usize) -> u64 {
        let mut txns = 0;
        loop {
            match schedule.due() {
                Some(SnapshotKind::Whole) => return txns,
                Some(SnapshotKind::Delta) => schedule.delta_started(),
                None => {
                    schedule.count(bytes);
                    txns += 1;
                }
            }
        }
    }
}
