//! `/metrics` in Prometheus's text format, with the names, types and help
//! lines ZooKeeper's Prometheus provider gives the same values, so
//! dashboards and alerts written for ZooKeeper read Paddock unchanged.
//! Paddock's own values carry a `paddock_` prefix, and the process metrics
//! are those every Prometheus client library exports.
//!
//! The values are read from the server at scrape time, as ZooKeeper's
//! gauges are: nothing is recorded on the request path for this page.

use std::fmt::Write as _;

use server::{HistogramSnapshot, Monitor, MonitorValue};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gauge,
    Counter,
    Summary,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Gauge => "gauge",
            Self::Counter => "counter",
            Self::Summary => "summary",
            Self::Histogram => "histogram",
        }
    }
}

/// The quantiles ZooKeeper's provider reports of its request latencies;
/// its other summaries report the median only.
const LATENCY_QUANTILES: &[f64] = &[0.5, 0.9, 0.99];
const MEDIAN: &[f64] = &[0.5];

/// The type ZooKeeper's provider exports a `mntr` value as; `None` for
/// values it exports under no name (text, or leader-only figures Paddock
/// does not track).
fn zookeeper_kind(name: &str) -> Option<Kind> {
    match name {
        "avg_latency"
        | "max_latency"
        | "min_latency"
        | "packets_received"
        | "packets_sent"
        | "num_alive_connections"
        | "outstanding_requests"
        | "znode_count"
        | "watch_count"
        | "ephemerals_count"
        | "approximate_data_size"
        | "open_file_descriptor_count"
        | "max_file_descriptor_count"
        | "global_sessions"
        | "uptime"
        | "learners"
        | "synced_followers"
        | "synced_non_voting_followers"
        | "synced_observers"
        | "pending_syncs"
        | "connection_drop_probability" => Some(Kind::Gauge),
        "connection_rejected"
        | "looking_count"
        | "connection_request_count"
        | "request_throttle_wait_count"
        | "stale_requests"
        | "stale_requests_dropped"
        | "throttled_ops"
        | "large_requests_rejected" => Some(Kind::Counter),
        _ => None,
    }
}

/// `mntr` values of Paddock's own, exported with the `paddock_` prefix.
fn paddock_kind(name: &str) -> Option<Kind> {
    match name {
        "bad_frames" => Some(Kind::Counter),
        _ => None,
    }
}

/// The page, rendered from the server's current state.
pub fn render(monitor: &Monitor) -> String {
    let mut page = Page::default();
    for (name, value) in monitor.monitor_values() {
        let number = match value {
            MonitorValue::Int(n) => n as f64,
            MonitorValue::Float(x) => x,
            MonitorValue::Text(_) => continue,
        };
        if let Some(kind) = zookeeper_kind(name) {
            page.family(name, name, kind, number);
        } else if let Some(kind) = paddock_kind(name) {
            let prefixed = format!("paddock_{name}");
            page.family(&prefixed, &prefixed, kind, number);
        }
    }
    duration_families(&mut page, monitor);
    quota_families(&mut page, monitor);
    consensus_families(&mut page, monitor);
    process_families(&mut page);
    page.text
}

/// ZooKeeper's summaries in milliseconds, and the same durations as
/// Paddock's histograms in seconds, which Prometheus can aggregate across
/// servers. Quantiles are estimated from the histogram buckets (powers of
/// two of microseconds) over the server's whole life.
fn duration_families(page: &mut Page, monitor: &Monitor) {
    let read = monitor.read_latency();
    let update = monitor.update_latency();
    let log_syncs = monitor.log_sync_durations();
    let snapshots = monitor.snapshot_durations();
    page.summary_ms("readlatency", &read, LATENCY_QUANTILES);
    page.summary_ms("updatelatency", &update, LATENCY_QUANTILES);
    page.summary_ms("fsynctime", &log_syncs, MEDIAN);
    page.summary_ms("snapshottime", &snapshots, MEDIAN);
    page.histogram(
        "paddock_request_duration_seconds",
        "Client requests from arrival to answer, reads and updates apart.",
        &[("read", &read), ("update", &update)],
    );
    page.histogram(
        "paddock_log_sync_duration_seconds",
        "Syncs of the write-ahead log, one fdatasync per batch of entries.",
        &[("", &log_syncs)],
    );
    page.histogram(
        "paddock_snapshot_duration_seconds",
        "Snapshots of the tree, from start to durable file.",
        &[("", &snapshots)],
    );
}

#[derive(Default)]
struct Page {
    text: String,
}

impl Page {
    /// One family of one unlabelled sample.
    fn family(&mut self, name: &str, help: &str, kind: Kind, value: f64) {
        self.header(name, help, kind);
        let _ = writeln!(self.text, "{name} {}", sample(value));
    }

    /// One family of samples labelled `key`, as ZooKeeper's gauge and
    /// counter sets; nothing at all when there is no sample.
    fn keyed<'a>(&mut self, name: &str, kind: Kind, values: impl Iterator<Item = (&'a str, f64)>) {
        let mut values = values.peekable();
        if values.peek().is_none() {
            return;
        }
        self.header(name, name, kind);
        for (key, value) in values {
            let key = escape_label(key);
            let _ = writeln!(self.text, "{name}{{key=\"{key}\",}} {}", sample(value));
        }
    }

    fn header(&mut self, name: &str, help: &str, kind: Kind) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {}", kind.as_str());
    }

    /// A summary in milliseconds, named and labelled as ZooKeeper's.
    fn summary_ms(&mut self, name: &str, durations: &HistogramSnapshot, quantiles: &[f64]) {
        self.header(name, name, Kind::Summary);
        for &q in quantiles {
            let value = sample(durations.quantile(q) * 1e3);
            let _ = writeln!(self.text, "{name}{{quantile=\"{q}\",}} {value}");
        }
        let _ = writeln!(self.text, "{name}_count {}", sample(durations.count as f64));
        let sum_ms = sample(durations.sum_seconds * 1e3);
        let _ = writeln!(self.text, "{name}_sum {sum_ms}");
    }

    /// A histogram in seconds: one series per `(kind label, durations)`,
    /// unlabelled when the label is empty.
    fn histogram(&mut self, name: &str, help: &str, series: &[(&str, &HistogramSnapshot)]) {
        self.header(name, help, Kind::Histogram);
        for (kind, durations) in series {
            let label = |extra: &str| match (kind.is_empty(), extra.is_empty()) {
                (true, true) => String::new(),
                (true, false) => format!("{{{extra}}}"),
                (false, true) => format!("{{kind=\"{kind}\"}}"),
                (false, false) => format!("{{kind=\"{kind}\",{extra}}}"),
            };
            for (bound, count) in &durations.buckets {
                let le = if bound.is_infinite() {
                    "+Inf".to_string()
                } else {
                    format!("{bound}")
                };
                let labels = label(&format!("le=\"{le}\""));
                let _ = writeln!(self.text, "{name}_bucket{labels} {count}");
            }
            let labels = label("");
            let _ = writeln!(self.text, "{name}_sum{labels} {}", durations.sum_seconds);
            let _ = writeln!(self.text, "{name}_count{labels} {}", durations.count);
        }
    }
}

/// A label value in the text format: backslash, quote and newline escaped.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value as Prometheus reads it: always with a decimal point, as
/// ZooKeeper's Java client prints doubles.
fn sample(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

/// ZooKeeper's per-namespace quota metrics, labelled `key` as its
/// provider labels every gauge and counter set. A family with no
/// namespace is left out.
fn quota_families(page: &mut Page, monitor: &Monitor) {
    let quotas = monitor.quotas_per_namespace();
    let gauges = [
        ("quota_count_limit_per_namespace", &quotas.count_limit),
        ("quota_bytes_limit_per_namespace", &quotas.bytes_limit),
        ("quota_count_usage_per_namespace", &quotas.count_usage),
        ("quota_bytes_usage_per_namespace", &quotas.bytes_usage),
    ];
    for (name, per_namespace) in gauges {
        let values = per_namespace.iter().map(|(ns, v)| (ns.as_str(), *v as f64));
        page.keyed(name, Kind::Gauge, values);
    }
    let exceeded = monitor.quota_exceeded_per_namespace();
    let values = exceeded.iter().map(|(ns, n)| (ns.as_str(), *n as f64));
    page.keyed("quota_exceeded_error_per_namespace", Kind::Counter, values);
}

fn consensus_families(page: &mut Page, monitor: &Monitor) {
    let status = monitor.consensus();
    let gauges = [
        (
            "paddock_raft_term",
            "The raft term this server is in.",
            status.term(),
        ),
        (
            "paddock_raft_leader_id",
            "The id of the server this one follows or is; 0 while there is no leader.",
            status.leader_id(),
        ),
        (
            "paddock_raft_commit_index",
            "The index of the last log entry known committed.",
            status.commit_index(),
        ),
        (
            "paddock_raft_last_index",
            "The index of the last entry in this server's log.",
            status.last_index(),
        ),
    ];
    for (name, help, value) in gauges {
        page.family(name, help, Kind::Gauge, value as f64);
    }
    page.family(
        "paddock_raft_leader_changes_total",
        "Times this server has seen the leader change.",
        Kind::Counter,
        status.leader_changes() as f64,
    );
    page.family(
        "paddock_last_applied_zxid",
        "The zxid of the last transaction applied to this server's tree.",
        Kind::Gauge,
        monitor.last_zxid() as f64,
    );
}

/// The process metrics of Prometheus's client libraries, from /proc.
fn process_families(page: &mut Page) {
    let Some(process) = Process::read() else {
        return;
    };
    let families = [
        (
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            Kind::Counter,
            process.cpu_seconds,
        ),
        (
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            Kind::Gauge,
            process.start_time_seconds,
        ),
        (
            "process_open_fds",
            "Number of open file descriptors.",
            Kind::Gauge,
            process.open_fds,
        ),
        (
            "process_max_fds",
            "Maximum number of open file descriptors.",
            Kind::Gauge,
            process.max_fds,
        ),
        (
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            Kind::Gauge,
            process.virtual_bytes,
        ),
        (
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            Kind::Gauge,
            process.resident_bytes,
        ),
    ];
    for (name, help, kind, value) in families {
        page.family(name, help, kind, value);
    }
}

/// What the process spends, from `/proc/self`.
pub(crate) struct Process {
    pub cpu_seconds: f64,
    start_time_seconds: f64,
    open_fds: f64,
    max_fds: f64,
    virtual_bytes: f64,
    pub resident_bytes: f64,
}

impl Process {
    pub fn read() -> Option<Self> {
        // SAFETY: sysconf only reads a configuration value.
        let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        // SAFETY: as above.
        let page_bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as f64;
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name may hold spaces; the fields after it are fixed.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
        let boot_seconds = boot_time_seconds()?;
        Some(Self {
            cpu_seconds: (field(14)? + field(15)?) / ticks_per_second,
            start_time_seconds: boot_seconds + field(22)? / ticks_per_second,
            open_fds: server::open_fds() as f64,
            max_fds: server::max_fds() as f64,
            virtual_bytes: field(23)?,
            resident_bytes: field(24)? * page_bytes,
        })
    }
}

fn boot_time_seconds() -> Option<f64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_print_as_java_doubles_do() {
        assert_eq!(sample(35.0), "35.0");
        assert_eq!(sample(0.0), "0.0");
        assert_eq!(sample(1.2158), "1.2158");
        assert_eq!(sample(f64::NAN), "NaN");
    }

    #[test]
    fn a_family_has_help_type_and_sample_lines() {
        let mut page = Page::default();
        page.family("znode_count", "znode_count", Kind::Gauge, 35.0);
        assert_eq!(
            page.text,
            "# HELP znode_count znode_count\n# TYPE znode_count gauge\nznode_count 35.0\n"
        );
    }

    #[test]
    fn a_keyed_family_labels_each_sample_as_zookeeper_s_sets_do() {
        let mut page = Page::default();
        page.keyed("q", Kind::Counter, [("a\"b", 2.0), ("c", 1.0)].into_iter());
        assert_eq!(
            page.text,
            "# HELP q q\n# TYPE q counter\nq{key=\"a\\\"b\",} 2.0\nq{key=\"c\",} 1.0\n"
        );
        let mut empty = Page::default();
        empty.keyed("q", Kind::Gauge, std::iter::empty());
        assert!(empty.text.is_empty());
    }

    fn durations(ms: &[u64]) -> HistogramSnapshot {
        let histogram = consensus::Histogram::default();
        for &ms in ms {
            histogram.record(std::time::Duration::from_millis(ms));
        }
        histogram.snapshot()
    }

    #[test]
    fn a_summary_is_in_milliseconds_with_zookeeper_s_labels() {
        let mut page = Page::default();
        page.summary_ms("fsynctime", &durations(&[2, 2]), MEDIAN);
        let lines: Vec<&str> = page.text.lines().collect();
        assert_eq!(lines[1], "# TYPE fsynctime summary");
        let median: f64 = lines[2]
            .strip_prefix("fsynctime{quantile=\"0.5\",} ")
            .unwrap()
            .parse()
            .unwrap();
        assert!((1.024..=2.048).contains(&median), "{median}");
        assert_eq!(lines[3], "fsynctime_count 2.0");
        assert_eq!(lines[4], "fsynctime_sum 4.0");
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_per_kind() {
        let mut page = Page::default();
        let (read, update) = (durations(&[1]), durations(&[]));
        page.histogram("h", "help", &[("read", &read), ("update", &update)]);
        assert!(page.text.contains("# TYPE h histogram\n"));
        assert!(page
            .text
            .contains("h_bucket{kind=\"read\",le=\"0.001024\"} 1\n"));
        assert!(page
            .text
            .contains("h_bucket{kind=\"read\",le=\"+Inf\"} 1\n"));
        assert!(page.text.contains("h_count{kind=\"read\"} 1\n"));
        assert!(page.text.contains("h_count{kind=\"update\"} 0\n"));
        let mut page = Page::default();
        page.histogram("g", "help", &[("", &read)]);
        assert!(page.text.contains("g_bucket{le=\"+Inf\"} 1\n"));
        assert!(page.text.contains("g_sum 0.001\n"));
    }

    #[test]
    fn the_process_is_read_from_proc() {
        let process = Process::read().expect("/proc/self is readable");
        assert!(process.cpu_seconds >= 0.0);
        assert!(process.resident_bytes > 0.0);
        assert!(process.open_fds > 0.0 && process.max_fds >= process.open_fds);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(process.start_time_seconds <= now + 1.0);
        assert!(process.start_time_seconds > now - 3600.0);
    }
}
