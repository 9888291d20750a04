//! A histogram of durations that any thread records into with three
//! relaxed atomic adds and no lock, read whole for metrics: log syncs
//! here, request latencies and snapshots in the server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets by powers of two of microseconds: the first holds up to 16 µs,
/// each next one twice the bound of the one before, the last one
/// everything above about 34 s.
const FIRST_BOUND_US_LOG2: u32 = 4;
const BUCKETS: usize = 23;

#[derive(Debug)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS],
    total_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            total_us: AtomicU64::new(0),
        }
    }
}

/// A histogram as read at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// (upper bound in seconds, observations at or below it), in bound
    /// order, cumulative as Prometheus wants them; the last bound is
    /// infinite.
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum_seconds: f64,
}

impl Histogram {
    pub fn record(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.counts[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
        self.total_us.fetch_add(us, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0;
        let buckets = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, count)| {
                cumulative += count.load(Ordering::Relaxed);
                (upper_bound_seconds(i), cumulative)
            })
            .collect();
        HistogramSnapshot {
            buckets,
            count: cumulative,
            sum_seconds: self.total_us.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

fn bucket_of(us: u64) -> usize {
    let log2_ceiling = 64 - us.saturating_sub(1).leading_zeros();
    (log2_ceiling.saturating_sub(FIRST_BOUND_US_LOG2) as usize).min(BUCKETS - 1)
}

fn upper_bound_seconds(bucket: usize) -> f64 {
    if bucket == BUCKETS - 1 {
        return f64::INFINITY;
    }
    (1u64 << (FIRST_BOUND_US_LOG2 as usize + bucket)) as f64 / 1e6
}

impl HistogramSnapshot {
    /// The `q` quantile (0..=1) in seconds, interpolated within its bucket;
    /// NaN without observations, as Prometheus clients report it. One in
    /// the last bucket reads as the bound below it.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return f64::NAN;
        }
        let rank = q.clamp(0.0, 1.0) * self.count as f64;
        let mut lower = (0.0, 0);
        for &(bound, cumulative) in &self.buckets {
            if cumulative as f64 >= rank && cumulative > lower.1 {
                if bound.is_infinite() {
                    return lower.0;
                }
                let within = (rank - lower.1 as f64) / (cumulative - lower.1) as f64;
                return lower.0 + (bound - lower.0) * within;
            }
            lower = (bound, cumulative);
        }
        lower.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_duration_lands_in_the_bucket_of_its_power_of_two() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(16), 0);
        assert_eq!(bucket_of(17), 1);
        assert_eq!(bucket_of(32), 1);
        assert_eq!(bucket_of(1_000), 6);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(upper_bound_seconds(0), 16e-6);
        assert_eq!(upper_bound_seconds(6), 1024e-6);
    }

    #[test]
    fn snapshot_is_cumulative_with_count_and_sum() {
        let h = Histogram::default();
        for ms in [1, 1, 3, 100] {
            h.record(Duration::from_millis(ms));
        }
        let s = h.snapshot();
        assert_eq!(s.count, 4);
        assert!((s.sum_seconds - 0.105).abs() < 1e-9);
        assert_eq!(s.buckets.last(), Some(&(f64::INFINITY, 4)));
        assert!(s.buckets.windows(2).all(|w| w[0].1 <= w[1].1));
        let at_most_2ms = s.buckets.iter().find(|(b, _)| *b >= 0.002).unwrap();
        assert_eq!(at_most_2ms.1, 2);
    }

    #[test]
    fn quantiles_fall_within_the_bucket_of_the_rank() {
        let h = Histogram::default();
        assert!(h.snapshot().quantile(0.5).is_nan());
        for _ in 0..90 {
            h.record(Duration::from_micros(800));
        }
        for _ in 0..10 {
            h.record(Duration::from_millis(50));
        }
        let s = h.snapshot();
        let median = s.quantile(0.5);
        assert!((512e-6..=1024e-6).contains(&median), "{median}");
        let p99 = s.quantile(0.99);
        assert!((32_768e-6..=65_536e-6).contains(&p99), "{p99}");
        h.record(Duration::from_secs(3600));
        assert!(h.snapshot().quantile(1.0).is_finite());
    }
}
