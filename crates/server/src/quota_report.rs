//! What the server does with the quota limits a write passed (see
//! `tree::QuotaBreach`): it warns as ZooKeeper's `RateLogger` does, and it
//! counts the writes refused per top-level namespace for ZooKeeper's
//! `quota_exceeded_error_per_namespace` metric. Only the server that
//! proposed the write reports it, as only ZooKeeper's leader checks
//! quotas, so an ensemble logs and counts each breach once.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tree::QuotaBreach;

/// ZooKeeper's `RateLogger` default: the same message repeated within
/// this interval is counted, not logged again.
const REPEAT_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Default)]
pub struct QuotaReport {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The last message logged and when.
    last: Option<(String, Instant)>,
    /// Repeats of `last` since it was logged.
    repeats: u64,
    exceeded_per_namespace: BTreeMap<String, u64>,
}

impl QuotaReport {
    pub fn report(&self, breaches: &[QuotaBreach]) {
        if breaches.is_empty() {
            return;
        }
        let mut inner = self.inner.lock().expect("quota report poisoned");
        let now = Instant::now();
        for breach in breaches {
            inner.log(breach.to_string(), now);
            if let (true, Some(namespace)) = (breach.hard, &breach.namespace) {
                *inner
                    .exceeded_per_namespace
                    .entry(namespace.clone())
                    .or_default() += 1;
            }
        }
    }

    /// Writes refused by a hard limit, per namespace, since start-up.
    pub fn exceeded_per_namespace(&self) -> BTreeMap<String, u64> {
        let inner = self.inner.lock().expect("quota report poisoned");
        inner.exceeded_per_namespace.clone()
    }
}

impl Inner {
    /// `RateLogger.rateLimitLog`: a new message is logged at once (after
    /// the count of the previous one's repeats); a repeated one only when
    /// the interval since it was last logged has passed.
    fn log(&mut self, message: String, now: Instant) {
        match &self.last {
            Some((last, since)) if *last == message => {
                self.repeats += 1;
                if now.duration_since(*since) >= REPEAT_INTERVAL {
                    self.flush();
                    self.last = Some((message, now));
                }
            }
            _ => {
                self.flush();
                tracing::warn!("{message}");
                self.last = Some((message, now));
            }
        }
    }

    fn flush(&mut self) {
        if let (Some((message, _)), true) = (&self.last, self.repeats > 0) {
            tracing::warn!("[{} times] {message}", self.repeats);
        }
        self.repeats = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tree::QuotaMeasure;

    fn breach(namespace: &str, hard: bool) -> QuotaBreach {
        QuotaBreach {
            quota_path: format!("/{namespace}"),
            namespace: Some(namespace.to_owned()),
            measure: QuotaMeasure::Count,
            usage: 3,
            limit: 2,
            hard,
        }
    }

    #[test]
    fn only_hard_limits_count_as_refused() {
        let report = QuotaReport::default();
        report.report(&[breach("a", false), breach("a", true)]);
        report.report(&[breach("b", true)]);
        let counts: Vec<_> = report.exceeded_per_namespace().into_iter().collect();
        assert_eq!(counts, vec![("a".to_owned(), 1), ("b".to_owned(), 1)]);
    }

    #[test]
    fn repeats_within_the_interval_are_counted_not_logged() {
        let mut inner = Inner::default();
        let start = Instant::now();
        inner.log("m".into(), start);
        inner.log("m".into(), start + Duration::from_millis(10));
        inner.log("m".into(), start + Duration::from_millis(20));
        assert_eq!(inner.repeats, 2);
        inner.log("m".into(), start + REPEAT_INTERVAL);
        assert_eq!(inner.repeats, 0, "flushed once the interval passed");
        inner.log("n".into(), start + REPEAT_INTERVAL);
        assert_eq!(inner.last.as_ref().map(|(m, _)| m.as_str()), Some("n"));
    }
}
