//! What the server publishes about itself, as plain data: the one source
//! of the four-letter words, the AdminServer commands and the metrics, so
//! the three always agree. Everything here reads; only [`Monitor::reset_stats`]
//! changes anything, and only counters.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use consensus::{HistogramSnapshot, Role};

use crate::config::ServerConfig;
use crate::shared::{now_ms, Shared};
use crate::stats::{Latency, Stats};

/// What `srvr` and `mntr` report as the version: the ZooKeeper protocol
/// level we implement, then ours.
pub const VERSION: &str = concat!("3.9.3-paddock-", env!("CARGO_PKG_VERSION"));

/// The version as ZooKeeper prints it, with a build date.
pub fn full_version() -> String {
    format!("{VERSION}, built on 1970-01-01 00:00 GMT")
}

/// A read-only view of a running server, for the rooms that report on it
/// (the AdminServer and the metrics endpoint).
#[derive(Clone)]
pub struct Monitor {
    shared: Arc<Shared>,
}

/// The counters and sizes `srvr`, `stat` and the `server_stats` command
/// report.
#[derive(Debug, Clone)]
pub struct ServerStats {
    pub mode: &'static str,
    pub read_only: bool,
    pub latency: Latency,
    pub packets_received: u64,
    pub packets_sent: u64,
    /// Open client connections, counting the one asking when asked by a
    /// four-letter word, as ZooKeeper does.
    pub connections: usize,
    pub outstanding_requests: u64,
    pub last_zxid: i64,
    pub node_count: usize,
    pub uptime_ms: u64,
}

/// One client connection, as `cons` lists it.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub remote: SocketAddr,
    pub session_id: i64,
    pub received: u64,
    pub sent: u64,
    pub last_op: &'static str,
    pub established_ms: i64,
    pub timeout_ms: i32,
    pub last_cxid: i32,
    pub last_zxid: i64,
    /// When its last answer was made; none before the first.
    pub last_response: Option<Instant>,
    pub latency: Latency,
}

impl ConnectionInfo {
    /// ZooKeeper's `lastResponseTime`, as `cons` and the admin server's
    /// `connections` show it: milliseconds of the monotonic clock
    /// (`System.nanoTime` / 10^6, since boot on Linux), not of the wall
    /// clock; 0 before the first answer.
    pub fn last_response_monotonic_ms(&self) -> i64 {
        self.last_response.map_or(0, monotonic_ms_at)
    }

    /// When its last answer was made, in milliseconds since the epoch; 0
    /// before the first.
    pub fn last_response_epoch_ms(&self) -> i64 {
        self.last_response.map_or(0, epoch_ms_at)
    }
}

/// The wall clock's milliseconds since the epoch at `at`: as far before
/// now as `at` is.
fn epoch_ms_at(at: Instant) -> i64 {
    now_ms().saturating_sub(at.elapsed().as_millis() as i64)
}

/// The monotonic clock's milliseconds (`CLOCK_MONOTONIC`, which
/// `Instant` reads too) at `at`.
fn monotonic_ms_at(at: Instant) -> i64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, which lives
    // through the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let now_ms = now.tv_sec * 1000 + now.tv_nsec / 1_000_000;
    now_ms.saturating_sub(at.elapsed().as_millis() as i64)
}

/// A value of `mntr`: a number where ZooKeeper's is one, so JSON and
/// Prometheus can carry it as such.
#[derive(Debug, Clone, PartialEq)]
pub enum MonitorValue {
    Int(i64),
    Float(f64),
    Text(String),
}

impl std::fmt::Display for MonitorValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::Float(x) => write!(f, "{x:.4}"),
            Self::Text(s) => f.write_str(s),
        }
    }
}

impl Monitor {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    pub fn server_id(&self) -> u64 {
        self.shared.server_id
    }

    pub fn is_serving(&self) -> bool {
        self.shared.is_serving()
    }

    pub fn mode(&self) -> &'static str {
        mode(&self.shared)
    }

    pub fn is_read_only(&self) -> bool {
        is_read_only(&self.shared)
    }

    /// The leader's id, 0 while there is none; 1 when standalone.
    pub fn leader_id(&self) -> u64 {
        self.shared.consensus.status().leader_id()
    }

    pub fn last_zxid(&self) -> i64 {
        self.shared.last_zxid()
    }

    /// The tree as last applied and the zxid it is at: a version of its
    /// own (an O(1) clone) that later writes leave as it is.
    pub fn tree(&self) -> (tree::DataTree, i64) {
        let published = self.shared.published();
        (published.tree.clone(), published.last_zxid)
    }

    /// A session's password, so that a tool of the server's own can resume
    /// the session as its client would (to close it); `None` for a
    /// session the tree does not hold.
    pub fn session_password(&self, session_id: i64) -> Option<bytes::Bytes> {
        let published = self.shared.published();
        published
            .tree
            .session(session_id)
            .map(|s| s.password.clone())
    }

    /// A one-time token that grants `ids` to the session that presents it
    /// in an `auth` packet of [`crate::DELEGATED_SCHEME`] on this server.
    pub fn lend_identity(&self, ids: Vec<jute::Id>) -> Vec<u8> {
        self.shared.delegations.lend(ids)
    }

    /// Whether `ids` may do each permission in `perms` on `path`; `None`
    /// when there is no such znode.
    pub fn permits(&self, path: &str, perms: i32, ids: &[jute::Id]) -> Option<bool> {
        let tree = self.shared.published().tree.clone();
        tree.permits_each(path, perms, ids)
    }

    /// The newest snapshot in the data directory: the zxid (log index) it
    /// is at and when it was written.
    pub fn last_snapshot(&self) -> Option<(u64, std::time::SystemTime)> {
        consensus::last_snapshot(&self.shared.config.data_dir)
    }

    pub fn stats(&self) -> ServerStats {
        server_stats(&self.shared, 0)
    }

    pub fn monitor_values(&self) -> Vec<(&'static str, MonitorValue)> {
        monitor_values(&self.shared, 0)
    }

    pub fn connections(&self) -> Vec<ConnectionInfo> {
        connections(&self.shared)
    }

    /// (connections watching, paths watched, watches).
    pub fn watch_summary(&self) -> (usize, usize, usize) {
        self.shared.published().watches.summary()
    }

    /// Watched paths by session id.
    pub fn watches_by_session(&self) -> BTreeMap<i64, Vec<String>> {
        watches_by_session(&self.shared)
    }

    /// Watching session ids by path.
    pub fn watches_by_path(&self) -> BTreeMap<String, Vec<i64>> {
        watches_by_path(&self.shared)
    }

    /// Every session with its timeout in ms.
    pub fn sessions(&self) -> Vec<(i64, i32)> {
        sessions(&self.shared)
    }

    /// Session ids by when they expire unless heard from (ms since the
    /// epoch, rounded up to a tick as ZooKeeper buckets them).
    pub fn session_expiries(&self) -> BTreeMap<i64, Vec<i64>> {
        let tick_ms = i64::from(self.shared.config.tick_time_ms);
        let now_ms = crate::shared::now_ms();
        let mut buckets: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for (id, left) in self.shared.sessions.time_left(std::time::Instant::now()) {
            let expiry_ms = now_ms + left.as_millis() as i64;
            let bucket = (expiry_ms + tick_ms - 1) / tick_ms * tick_ms;
            buckets.entry(bucket).or_default().push(id);
        }
        buckets
    }

    /// Sessions that own ephemeral nodes, with their paths.
    pub fn ephemerals(&self) -> Vec<(i64, Vec<String>)> {
        ephemerals(&self.shared)
    }

    pub fn conf(&self) -> Vec<(&'static str, String)> {
        conf(&self.shared)
    }

    /// Bytes under the data and the log directory.
    pub fn dir_sizes(&self) -> (u64, u64) {
        let config = &self.shared.config;
        (dir_size(&config.data_dir), dir_size(&config.data_log_dir))
    }

    /// Ids of the peers this server is connected to.
    pub fn connected_peers(&self) -> Vec<u64> {
        self.shared
            .peers
            .as_ref()
            .map_or_else(Vec::new, |(_, network)| network.connected_peers())
    }

    /// Quota limits and usage per top-level namespace.
    pub fn quotas_per_namespace(&self) -> tree::QuotasPerNamespace {
        // A clone is O(1); the walk runs outside the lock.
        let tree = self.shared.published().tree.clone();
        tree.quotas_per_namespace()
    }

    /// Writes this server refused for a hard quota limit, per namespace.
    pub fn quota_exceeded_per_namespace(&self) -> BTreeMap<String, u64> {
        self.shared.quota_report.exceeded_per_namespace()
    }

    /// Raft's view: term, commit index, last log index, leader changes.
    pub fn consensus(&self) -> &consensus::Status {
        self.shared.consensus.status()
    }

    /// Reads from arrival to answer.
    pub fn read_latency(&self) -> HistogramSnapshot {
        self.shared.stats.read_latency.snapshot()
    }

    /// Writes from arrival to reply.
    pub fn update_latency(&self) -> HistogramSnapshot {
        self.shared.stats.update_latency.snapshot()
    }

    /// Snapshots, from start to durable file.
    pub fn snapshot_durations(&self) -> HistogramSnapshot {
        self.shared.stats.snapshots.snapshot()
    }

    /// Syncs of the log (one fdatasync per batch of entries).
    pub fn log_sync_durations(&self) -> HistogramSnapshot {
        self.shared.consensus.status().log_syncs().snapshot()
    }

    pub fn reset_stats(&self) {
        self.shared.stats.reset();
    }
}

pub(crate) fn mode(shared: &Shared) -> &'static str {
    if shared.peers.is_none() {
        return "standalone";
    }
    if shared.read_only.is_active() {
        return "read-only";
    }
    // The membership as of now: a reconfig may have moved this server
    // between participant and observer since zoo.cfg was read.
    let status = shared.consensus.status();
    let membership = status.membership();
    if membership.learners.contains(&shared.server_id) {
        return "observer";
    }
    match status.role() {
        Role::Leader => "leader",
        Role::Follower | Role::Candidate => "follower",
    }
}

/// Read-only while the log waits for disk space or in read-only mode:
/// writes are refused with NotReadOnly, as by a read-only ZooKeeper server.
pub(crate) fn is_read_only(shared: &Shared) -> bool {
    shared.refuses_writes()
}

/// `extra_connections`: connections not in the table to count, such as a
/// four-letter word's own.
pub(crate) fn server_stats(shared: &Shared, extra_connections: usize) -> ServerStats {
    let (last_zxid, node_count) = {
        let published = shared.published();
        (published.last_zxid, published.tree.node_count())
    };
    ServerStats {
        mode: mode(shared),
        read_only: is_read_only(shared),
        latency: shared.stats.latency(),
        packets_received: Stats::get(&shared.stats.packets_received),
        packets_sent: Stats::get(&shared.stats.packets_sent),
        connections: shared.connections().len() + extra_connections,
        outstanding_requests: shared.requests.in_process() as u64,
        last_zxid,
        node_count,
        uptime_ms: shared.stats.uptime().as_millis() as u64,
    }
}

/// What the load limits did, under ZooKeeper's metric names.
fn throttle_values(shared: &Shared) -> Vec<(&'static str, MonitorValue)> {
    let counts = &shared.requests.counts;
    let counter = |n: &std::sync::atomic::AtomicU64| MonitorValue::Int(Stats::get(n) as i64);
    vec![
        (
            "connection_request_count",
            counter(&shared.stats.connection_request_count),
        ),
        (
            "connection_drop_probability",
            MonitorValue::Float(shared.connection_throttle.drop_probability()),
        ),
        (
            "request_throttle_wait_count",
            counter(&counts.request_throttle_wait_count),
        ),
        ("stale_requests", counter(&counts.stale_requests)),
        (
            "stale_requests_dropped",
            counter(&counts.stale_requests_dropped),
        ),
        ("throttled_ops", counter(&counts.throttled_ops)),
        (
            "large_requests_rejected",
            counter(&counts.large_requests_rejected),
        ),
    ]
}

pub(crate) fn monitor_values(
    shared: &Shared,
    extra_connections: usize,
) -> Vec<(&'static str, MonitorValue)> {
    use MonitorValue::{Float, Int, Text};
    let stats = server_stats(shared, extra_connections);
    let (data_bytes, ephemerals, watches) = {
        let published = shared.published();
        (
            published.tree.approximate_data_bytes(),
            published.tree.ephemeral_count(),
            published.watches.summary().2,
        )
    };
    let count = |n: usize| Int(n as i64);
    let counter = |n: u64| Int(n as i64);
    let mut values = vec![
        ("version", Text(full_version())),
        ("server_state", Text(stats.mode.to_string())),
        ("avg_latency", Float(stats.latency.avg())),
        ("max_latency", counter(stats.latency.max())),
        ("min_latency", counter(stats.latency.min())),
        ("packets_received", counter(stats.packets_received)),
        ("packets_sent", counter(stats.packets_sent)),
        ("num_alive_connections", count(stats.connections)),
        ("outstanding_requests", counter(stats.outstanding_requests)),
        ("znode_count", count(stats.node_count)),
        ("watch_count", count(watches)),
        ("ephemerals_count", count(ephemerals)),
        ("approximate_data_size", counter(data_bytes)),
        ("open_file_descriptor_count", count(open_fds())),
        ("max_file_descriptor_count", counter(max_fds())),
        ("global_sessions", count(shared.sessions.len())),
        ("uptime", counter(stats.uptime_ms)),
        ("last_proposal_size", Int(-1)),
        ("bad_frames", counter(Stats::get(&shared.stats.bad_frames))),
        (
            "connection_rejected",
            counter(Stats::get(&shared.stats.connections_rejected)),
        ),
    ];
    values.extend(throttle_values(shared));
    values.extend(peer_values(shared));
    values
}

/// What an ensemble member adds to `mntr`: its peer state as ZooKeeper
/// words it, and, on the leader, the learners it is in touch with.
fn peer_values(shared: &Shared) -> Vec<(&'static str, MonitorValue)> {
    use MonitorValue::{Int, Text};
    let Some((_, network)) = &shared.peers else {
        return Vec::new();
    };
    let status = shared.consensus.status();
    let state = match (mode(shared), status.leader_id()) {
        (_, 0) => "looking",
        ("observer", _) => "observing - broadcast",
        ("leader", _) => "leading - broadcast",
        _ => "following - broadcast",
    };
    let mut values = vec![
        ("peer_state", Text(state.to_string())),
        ("looking_count", Int(status.leader_changes() as i64)),
    ];
    if mode(shared) == "leader" {
        let connected = network.connected_peers();
        let membership = status.membership();
        let voters = connected
            .iter()
            .filter(|id| membership.voters.contains(id))
            .count();
        let observers = connected.len() - voters;
        values.extend([
            ("learners", Int(connected.len() as i64)),
            ("synced_followers", Int(voters as i64)),
            ("synced_non_voting_followers", Int(0)),
            ("synced_observers", Int(observers as i64)),
            ("pending_syncs", Int(0)),
        ]);
    }
    values
}

/// File descriptors this process has open.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

/// The soft limit on open files, from `/proc/self/limits`.
pub fn max_fds() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|line| line.starts_with("Max open files"))
                .and_then(|line| line.split_whitespace().nth(3))
                .and_then(|soft| soft.parse().ok())
        })
        .unwrap_or(0)
}

pub(crate) fn connections(shared: &Shared) -> Vec<ConnectionInfo> {
    shared
        .connections()
        .values()
        .map(|handle| {
            let activity = handle.activity.lock().expect("activity poisoned").clone();
            ConnectionInfo {
                remote: handle.remote,
                session_id: handle.session_id.load(Ordering::Relaxed),
                received: handle.received.load(Ordering::Relaxed),
                sent: handle.sent.load(Ordering::Relaxed),
                last_op: activity.last_op,
                established_ms: handle.established_ms,
                timeout_ms: handle.timeout_ms,
                last_cxid: activity.last_cxid,
                last_zxid: activity.last_zxid,
                last_response: activity.last_response,
                latency: activity.latency,
            }
        })
        .collect()
}

/// Each watch as (session id, path); a connection without a session
/// shows as session 0.
fn watch_pairs(shared: &Shared) -> Vec<(i64, String)> {
    let pairs = shared.published().watches.pairs();
    let connections = shared.connections();
    pairs
        .into_iter()
        .map(|(connection, path)| {
            let session = connections
                .get(&connection)
                .map_or(0, |h| h.session_id.load(Ordering::Relaxed));
            (session, path)
        })
        .collect()
}

pub(crate) fn watches_by_session(shared: &Shared) -> BTreeMap<i64, Vec<String>> {
    let mut by_session: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (session, path) in watch_pairs(shared) {
        by_session.entry(session).or_default().push(path);
    }
    by_session
}

pub(crate) fn watches_by_path(shared: &Shared) -> BTreeMap<String, Vec<i64>> {
    let mut by_path: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (session, path) in watch_pairs(shared) {
        by_path.entry(path).or_default().push(session);
    }
    by_path
}

pub(crate) fn sessions(shared: &Shared) -> Vec<(i64, i32)> {
    shared
        .published()
        .tree
        .sessions()
        .map(|(id, info)| (id, info.timeout_ms))
        .collect()
}

pub(crate) fn ephemerals(shared: &Shared) -> Vec<(i64, Vec<String>)> {
    let published = shared.published();
    let tree = &published.tree;
    tree.sessions()
        .map(|(id, _)| (id, tree.get_ephemerals(id, "/")))
        .filter(|(_, paths)| !paths.is_empty())
        .collect()
}

/// `conf`'s keys and values, in ZooKeeper's order.
pub(crate) fn conf(shared: &Shared) -> Vec<(&'static str, String)> {
    let c = &shared.config;
    let server_id = if shared.is_standalone() {
        0
    } else {
        shared.server_id
    };
    vec![
        ("clientPort", c.client_port.to_string()),
        (
            "secureClientPort",
            c.client_tls.port.map_or(-1, i32::from).to_string(),
        ),
        ("dataDir", c.data_dir.display().to_string()),
        ("dataDirSize", dir_size(&c.data_dir).to_string()),
        ("dataLogDir", c.data_log_dir.display().to_string()),
        ("dataLogSize", dir_size(&c.data_log_dir).to_string()),
        ("tickTime", c.tick_time_ms.to_string()),
        ("maxClientCnxns", c.max_client_cnxns.to_string()),
        ("minSessionTimeout", c.min_session_timeout_ms.to_string()),
        ("maxSessionTimeout", c.max_session_timeout_ms.to_string()),
        (
            "clientPortListenBacklog",
            c.reported_listen_backlog().to_string(),
        ),
        ("serverId", server_id.to_string()),
    ]
}

pub(crate) fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => dir_size(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    })
}

/// `envi`'s keys and values.
pub fn environment() -> Vec<(&'static str, String)> {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    vec![
        ("zookeeper.version", full_version()),
        ("host.name", read("/proc/sys/kernel/hostname")),
        ("os.name", std::env::consts::OS.to_string()),
        ("os.arch", std::env::consts::ARCH.to_string()),
        ("os.version", read("/proc/sys/kernel/osrelease")),
        ("user.name", std::env::var("USER").unwrap_or_default()),
        ("user.dir", cwd),
    ]
}
