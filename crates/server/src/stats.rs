//! Server-wide counters for four-letter words and metrics.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Stats {
    pub packets_received: AtomicU64,
    pub packets_sent: AtomicU64,
    pub outstanding_requests: AtomicU64,
    latency_count: AtomicU64,
    latency_total_ms: AtomicU64,
    latency_min_ms: AtomicU64,
    latency_max_ms: AtomicU64,
    pub connections_rejected: AtomicU64,
    pub bad_frames: AtomicU64,
}

impl Stats {
    pub fn record_latency(&self, ms: u64) {
        if self.latency_count.fetch_add(1, Ordering::Relaxed) == 0 {
            self.latency_min_ms.store(ms, Ordering::Relaxed);
        } else {
            self.latency_min_ms.fetch_min(ms, Ordering::Relaxed);
        }
        self.latency_total_ms.fetch_add(ms, Ordering::Relaxed);
        self.latency_max_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// (min, avg, max) request latency in milliseconds.
    pub fn latency(&self) -> (u64, f64, u64) {
        let count = self.latency_count.load(Ordering::Relaxed);
        if count == 0 {
            return (0, 0.0, 0);
        }
        let total = self.latency_total_ms.load(Ordering::Relaxed);
        (
            self.latency_min_ms.load(Ordering::Relaxed),
            total as f64 / count as f64,
            self.latency_max_ms.load(Ordering::Relaxed),
        )
    }

    pub fn reset(&self) {
        for counter in [
            &self.packets_received,
            &self.packets_sent,
            &self.latency_count,
            &self.latency_total_ms,
            &self.latency_min_ms,
            &self.latency_max_ms,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
