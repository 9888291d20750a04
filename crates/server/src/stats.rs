//! Counters for four-letter words and metrics, server-wide and per
//! connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Request latency in milliseconds: min, max, average, last.
#[derive(Debug, Default, Clone, Copy)]
pub struct Latency {
    count: u64,
    total_ms: u64,
    min_ms: u64,
    max_ms: u64,
    last_ms: u64,
}

impl Latency {
    pub fn record(&mut self, ms: u64) {
        self.min_ms = if self.count == 0 {
            ms
        } else {
            self.min_ms.min(ms)
        };
        self.max_ms = self.max_ms.max(ms);
        self.total_ms += ms;
        self.count += 1;
        self.last_ms = ms;
    }

    pub fn min(&self) -> u64 {
        self.min_ms
    }

    pub fn max(&self) -> u64 {
        self.max_ms
    }

    pub fn last(&self) -> u64 {
        self.last_ms
    }

    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ms as f64 / self.count as f64
        }
    }
}

pub struct Stats {
    started: std::time::Instant,
    /// Reads from arrival to answer (ZooKeeper's `readlatency`).
    pub read_latency: consensus::Histogram,
    /// Writes from arrival to reply (ZooKeeper's `updatelatency`).
    pub update_latency: consensus::Histogram,
    /// Snapshots from start to durable file (ZooKeeper's `snapshottime`).
    pub snapshots: consensus::Histogram,
    pub packets_received: AtomicU64,
    pub packets_sent: AtomicU64,
    pub connections_rejected: AtomicU64,
    /// Connections the connection throttle let through.
    pub connection_request_count: AtomicU64,
    pub bad_frames: AtomicU64,
    latency: Mutex<Latency>,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            started: std::time::Instant::now(),
            read_latency: Default::default(),
            update_latency: Default::default(),
            snapshots: Default::default(),
            packets_received: AtomicU64::default(),
            packets_sent: AtomicU64::default(),
            connections_rejected: AtomicU64::default(),
            connection_request_count: AtomicU64::default(),
            bad_frames: AtomicU64::default(),
            latency: Mutex::default(),
        }
    }
}

impl Stats {
    /// How long the server has run.
    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    pub fn record_latency(&self, ms: u64) {
        self.latency.lock().expect("stats poisoned").record(ms);
    }

    pub fn latency(&self) -> Latency {
        *self.latency.lock().expect("stats poisoned")
    }

    pub fn reset(&self) {
        self.packets_received.store(0, Ordering::Relaxed);
        self.packets_sent.store(0, Ordering::Relaxed);
        *self.latency.lock().expect("stats poisoned") = Latency::default();
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_tracks_min_max_avg() {
        let mut l = Latency::default();
        assert_eq!(l.avg(), 0.0);
        for ms in [5, 1, 9] {
            l.record(ms);
        }
        assert_eq!((l.min(), l.max(), l.last()), (1, 9, 9));
        assert_eq!(l.avg(), 5.0);
    }
}
