//! From what the clients logged and the moves the rebalancers reported,
//! the figures of the run: how long each map change took to reach the
//! clients, how many requests were routed by a map already replaced, and
//! the latencies before and during the rebalance.

use std::time::Duration;

use super::routing::ClientLog;
use crate::measure::{Latencies, Row};

/// A move as its rebalancer reported it: the map version it made, and
/// when it was acknowledged (Unix µs).
#[derive(Clone, Copy, Debug)]
pub struct Committed {
    pub map_version: i32,
    pub at_micros: u64,
}

/// When the rebalance ran (Unix µs): from the plan being written to the
/// last move acknowledged.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub began: u64,
    pub ended: u64,
}

pub struct Tally {
    /// Per move: until the last client held it.
    pub to_every_client: Latencies,
    /// Per move and client: until that client held it.
    pub to_each_client: Latencies,
    /// Requests sent after a newer map than the one they were routed by
    /// was acknowledged.
    pub stale_routed: u64,
    pub misrouted_reads: u64,
    pub requests: u64,
    pub errors: u64,
    pub reads: [Latencies; 2],
    pub writes: [Latencies; 2],
}

const BEFORE: usize = 0;
const DURING: usize = 1;

/// `committed` must be in the order of the moves (their map versions
/// increase).
pub fn tally(logs: &[ClientLog], committed: &[Committed], window: Window) -> Tally {
    let mut tally = Tally {
        to_every_client: Latencies::default(),
        to_each_client: Latencies::default(),
        stale_routed: 0,
        misrouted_reads: 0,
        requests: 0,
        errors: 0,
        reads: Default::default(),
        writes: Default::default(),
    };
    for change in committed {
        let mut slowest = Duration::ZERO;
        for log in logs {
            let Some(delay) = delay_to(log, change) else {
                continue;
            };
            tally.to_each_client.record(delay);
            slowest = slowest.max(delay);
        }
        tally.to_every_client.record(slowest);
    }
    for log in logs {
        tally.misrouted_reads += log.misrouted_reads;
        for sent in &log.sent {
            tally.count_request(sent, committed, window);
        }
    }
    tally
}

impl Tally {
    fn count_request(&mut self, sent: &super::routing::Sent, committed: &[Committed], w: Window) {
        self.requests += 1;
        if !sent.ok {
            self.errors += 1;
            return;
        }
        if latest_at(committed, sent.at_micros) > sent.map_version {
            self.stale_routed += 1;
        }
        let when = if sent.at_micros < w.began {
            BEFORE
        } else if sent.at_micros <= w.ended {
            DURING
        } else {
            return;
        };
        let kind = if sent.write {
            &mut self.writes
        } else {
            &mut self.reads
        };
        kind[when].record(sent.latency);
    }

    pub fn rows(&self) -> Vec<Row> {
        vec![
            Row::new("map change to every client").latencies(&self.to_every_client),
            Row::new("map change to each client").latencies(&self.to_each_client),
            Row::new("routing")
                .metric("requests", self.requests as f64)
                .metric("stale_routed", self.stale_routed as f64)
                .metric("misrouted_reads", self.misrouted_reads as f64)
                .metric("errors", self.errors as f64),
            Row::new("read before rebalance").latencies(&self.reads[BEFORE]),
            Row::new("read during rebalance").latencies(&self.reads[DURING]),
            Row::new("write before rebalance").latencies(&self.writes[BEFORE]),
            Row::new("write during rebalance").latencies(&self.writes[DURING]),
        ]
    }
}

/// How long after `change` was acknowledged the client first held it (or
/// a later map, which includes it). A client may read the new map before
/// the rebalancer hears its move acknowledged: that counts as no delay.
fn delay_to(log: &ClientLog, change: &Committed) -> Option<Duration> {
    let (_, arrived) = log
        .arrivals
        .iter()
        .find(|(version, _)| *version >= change.map_version)?;
    Some(Duration::from_micros(
        arrived.saturating_sub(change.at_micros),
    ))
}

/// The newest map version acknowledged by `at_micros` (0 before any).
fn latest_at(committed: &[Committed], at_micros: u64) -> i32 {
    let done = committed.partition_point(|c| c.at_micros <= at_micros);
    done.checked_sub(1)
        .map_or(0, |last| committed[last].map_version)
}

#[cfg(test)]
mod tests {
    use super::super::routing::Sent;
    use super::*;

    fn sent(at_micros: u64, map_version: i32) -> Sent {
        Sent {
            at_micros,
            latency: Duration::from_micros(100),
            write: false,
            map_version,
            ok: true,
        }
    }

    #[test]
    fn counts_requests_routed_by_a_replaced_map_and_the_propagation() {
        let committed = [
            Committed {
                map_version: 1,
                at_micros: 1_000,
            },
            Committed {
                map_version: 2,
                at_micros: 2_000,
            },
        ];
        let log = ClientLog {
            arrivals: vec![(0, 0), (2, 2_500)],
            sent: vec![sent(500, 0), sent(1_500, 0), sent(2_600, 2)],
            misrouted_reads: 1,
        };
        let t = tally(
            &[log],
            &committed,
            Window {
                began: 900,
                ended: 2_000,
            },
        );
        assert_eq!(t.stale_routed, 1);
        assert_eq!(t.misrouted_reads, 1);
        assert_eq!(t.requests, 3);
        assert_eq!(t.reads[BEFORE].count(), 1);
        assert_eq!(t.reads[DURING].count(), 1);
        // Version 1 was skipped: the client got it with version 2.
        assert_eq!(t.to_each_client.count(), 2);
        assert_eq!(
            t.to_every_client.quantile(1.0),
            Duration::from_micros(1_500)
        );
    }
}
