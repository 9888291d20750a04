//! What a workload measures and how it is kept: latencies in an HDR
//! histogram, results as rows of named metrics, printed as a table and
//! written as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::deploy::ByRole;

/// Bytes in a mebibyte, for the `_mb` figures.
pub const MIB: f64 = (1 << 20) as f64;

/// Latencies in microseconds, from 1 µs to 10 minutes at 3 significant
/// digits: a single slow request stays visible in p99.9 and max.
#[derive(Clone)]
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies(Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds"))
    }
}

impl Latencies {
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.0.saturating_record(micros.max(1));
    }

    pub fn merge(&mut self, other: &Latencies) {
        self.0
            .add(&other.0)
            .expect("histograms with the same bounds merge");
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The latency at quantile `q` (0.5 the median, 1.0 the maximum).
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_micros(self.0.value_at_quantile(q))
    }

    /// count, mean and percentiles in milliseconds.
    pub fn metrics(&self) -> Vec<(&'static str, f64)> {
        if self.0.is_empty() {
            return vec![("count", 0.0)];
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        vec![
            ("count", self.0.len() as f64),
            ("mean_ms", self.0.mean() / 1000.0),
            ("p50_ms", ms(self.0.value_at_quantile(0.50))),
            ("p90_ms", ms(self.0.value_at_quantile(0.90))),
            ("p99_ms", ms(self.0.value_at_quantile(0.99))),
            ("p999_ms", ms(self.0.value_at_quantile(0.999))),
            ("max_ms", ms(self.0.max())),
        ]
    }

    /// The cumulative distribution as (latency in ms, fraction at or
    /// below it), a point per distinct bucket, for plotting.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        if self.0.is_empty() {
            return Vec::new();
        }
        self.0
            .iter_quantiles(2)
            .map(|v| {
                (
                    v.value_iterated_to() as f64 / 1000.0,
                    v.quantile_iterated_to(),
                )
            })
            .collect()
    }
}

/// Latencies that many tasks record into one histogram. A histogram is
/// 176 KB, of which recording touches a few lines: one per task (512 in
/// `mix`) spread those lines over megabytes, and recording took 13% of
/// the load generator's CPU, most of it cache misses.
#[derive(Clone, Default)]
pub struct SharedLatencies(Arc<Mutex<Latencies>>);

impl SharedLatencies {
    pub fn record(&self, latency: Duration) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(latency);
    }

    /// What was recorded so far.
    pub fn take(&self) -> Latencies {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// One line of a workload's results: what was measured (`label`, and `x`
/// when it is a point on a curve) and its metrics by name. A name ending in
/// `_per_sec` is better higher; every other metric is better lower.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Row {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
    pub metrics: BTreeMap<String, f64>,
    /// Latency CDF (ms, fraction), when the workload plots one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdf: Vec<(f64, f64)>,
}

impl Row {
    pub fn new(label: impl Into<String>) -> Row {
        Row {
            label: label.into(),
            ..Row::default()
        }
    }

    pub fn at(mut self, x: f64) -> Row {
        self.x = Some(x);
        self
    }

    pub fn metric(mut self, name: &str, value: f64) -> Row {
        self.metrics.insert(name.to_string(), value);
        self
    }

    /// `metric`, when the value is known.
    pub fn metric_if_known(self, name: &str, value: Option<f64>) -> Row {
        match value {
            Some(value) => self.metric(name, value),
            None => self,
        }
    }

    /// Throughput from `count` operations over `elapsed`, and latencies.
    pub fn throughput(self, latencies: &Latencies, elapsed: Duration) -> Row {
        let per_sec = latencies.count() as f64 / elapsed.as_secs_f64().max(1e-9);
        self.metric("ops_per_sec", per_sec).latencies(latencies)
    }

    /// The servers' CPU time per operation, in microseconds, when known.
    pub fn cpu_per_op(self, spent: Option<Duration>, ops: u64) -> Row {
        match spent {
            Some(spent) if ops > 0 => {
                self.metric("cpu_us_per_op", spent.as_secs_f64() * 1e6 / ops as f64)
            }
            _ => self,
        }
    }

    /// An ensemble's CPU by role, in microseconds: the leader's per
    /// operation (every write passes through it), and the followers' per
    /// request they received (the reads they serve).
    pub fn cpu_by_role(self, by_role: Option<ByRole>, ops: u64) -> Row {
        let Some(by_role) = by_role else {
            return self;
        };
        let per = |spent: Duration, count: u64| spent.as_secs_f64() * 1e6 / count as f64;
        let row = if ops > 0 {
            self.metric("leader_cpu_us_per_op", per(by_role.leader_cpu, ops))
        } else {
            self
        };
        if by_role.followers_requests > 0 {
            row.metric(
                "follower_cpu_us_per_request",
                per(by_role.followers_cpu, by_role.followers_requests),
            )
        } else {
            row
        }
    }

    pub fn latencies(mut self, latencies: &Latencies) -> Row {
        for (name, value) in latencies.metrics() {
            self.metrics.insert(name.to_string(), value);
        }
        self
    }

    pub fn with_cdf(mut self, latencies: &Latencies) -> Row {
        self.cdf = latencies.cdf();
        self
    }
}

/// Whether a larger value of this metric is the better one.
pub fn higher_is_better(metric: &str) -> bool {
    metric.ends_with("_per_sec")
}

/// A workload's whole result against one target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    pub workload: String,
    /// What was measured: a system name and topology, or a connect string.
    pub target: String,
    /// The command that reproduces this measurement.
    pub command: String,
    pub settings: BTreeMap<String, String>,
    pub rows: Vec<Row>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// CPU the hypervisor took from this machine while the workload ran
    /// (`launch::stolen_time`), in milliseconds summed over the CPUs:
    /// every latency of the run may carry some of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stolen_ms: Option<f64>,
}

/// What the hypervisor took during a run, for a person reading a table.
fn stolen_line(stolen_ms: f64) -> String {
    format!(
        "the hypervisor took {stolen_ms:.0} ms of this machine's CPU while the workload ran \
         (steal in /proc/stat, summed over the CPUs): latency stalls may be its doing"
    )
}

/// Columns first in this order, then any others by name.
const COLUMN_ORDER: &[&str] = &[
    "ops_per_sec",
    "count",
    "seconds",
    "mean_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "p999_ms",
    "max_ms",
];

impl Measurement {
    pub fn new(workload: &str, target: &str, command: String) -> Measurement {
        Measurement {
            workload: workload.to_string(),
            target: target.to_string(),
            command,
            settings: BTreeMap::new(),
            rows: Vec::new(),
            notes: Vec::new(),
            stolen_ms: None,
        }
    }

    pub fn setting(&mut self, name: &str, value: impl ToString) {
        self.settings.insert(name.to_string(), value.to_string());
    }

    /// Every metric name of the rows, in display order.
    pub fn columns(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for row in &self.rows {
            for name in row.metrics.keys() {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        names.sort_by_key(|name| {
            let rank = COLUMN_ORDER
                .iter()
                .position(|c| c == name)
                .unwrap_or(COLUMN_ORDER.len());
            (rank, name.clone())
        });
        names
    }

    /// A fixed-width text table for the terminal.
    pub fn table(&self) -> String {
        let columns = self.columns();
        let label_width = self
            .rows
            .iter()
            .map(|r| r.label.len())
            .chain([self.workload.len()])
            .max()
            .unwrap_or(8);
        let mut out = String::new();
        let _ = write!(out, "{:label_width$}", self.workload);
        for column in &columns {
            let _ = write!(out, " {column:>12}");
        }
        out.push('\n');
        for row in &self.rows {
            let _ = write!(out, "{:label_width$}", row.label);
            for column in &columns {
                match row.metrics.get(column) {
                    Some(value) => {
                        let _ = write!(out, " {:>12}", format_value(*value));
                    }
                    None => {
                        let _ = write!(out, " {:>12}", "-");
                    }
                }
            }
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        if let Some(stolen) = self.stolen_ms {
            let _ = writeln!(out, "{}", stolen_line(stolen));
        }
        out
    }

    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }

    pub fn read_json(path: &Path) -> anyhow::Result<Measurement> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

/// Numbers as a person reads them: no more digits than matter.
pub fn format_value(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 100.0 || value == value.trunc() {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else if magnitude >= 0.1 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_every_recorded_latency() {
        let mut latencies = Latencies::default();
        for ms in 1..=100 {
            latencies.record(Duration::from_millis(ms));
        }
        let metrics: BTreeMap<_, _> = latencies.metrics().into_iter().collect();
        assert_eq!(metrics["count"], 100.0);
        assert!((metrics["p50_ms"] - 50.0).abs() < 0.1);
        assert!((metrics["p99_ms"] - 99.0).abs() < 0.1);
        assert!((metrics["max_ms"] - 100.0).abs() < 0.1);
        let cdf = latencies.cdf();
        assert!((cdf.last().unwrap().1 - 1.0).abs() < 1e-9);
        assert!(cdf.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn a_measurement_survives_json_and_prints_every_column() {
        let mut latencies = Latencies::default();
        latencies.record(Duration::from_micros(1500));
        let mut m = Measurement::new("latency", "paddock standalone", "paddock bench".into());
        m.rows.push(
            Row::new("get")
                .throughput(&latencies, Duration::from_secs(1))
                .metric("rss_mb", 12.0),
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        m.write_json(&path).unwrap();
        let back = Measurement::read_json(&path).unwrap();
        assert_eq!(back.rows[0].metrics, m.rows[0].metrics);
        let table = back.table();
        assert!(table.contains("ops_per_sec") && table.contains("rss_mb"));
        assert_eq!(back.columns()[0], "ops_per_sec");
    }

    #[test]
    fn only_rates_are_better_higher() {
        assert!(higher_is_better("ops_per_sec"));
        assert!(!higher_is_better("p99_ms"));
        assert!(!higher_is_better("rss_mb"));
    }
}
