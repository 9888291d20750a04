//! Four-letter words on the client port, in ZooKeeper's output formats, so
//! monitoring scripts written for ZooKeeper read Paddock unchanged.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use consensus::Role;

use crate::shared::Shared;
use crate::stats::Stats;

/// What `srvr` and `mntr` report as the version: the ZooKeeper protocol
/// level we implement, then ours.
pub const VERSION: &str = concat!("3.9.3-paddock-", env!("CARGO_PKG_VERSION"));

/// The text to send back for `word`, asked by `asker`; the connection
/// closes after it. Like ZooKeeper, the asking connection counts among the
/// server's connections.
pub fn answer(shared: &Shared, word: &str, asker: SocketAddr) -> String {
    if word == "telnet close" {
        return String::new();
    }
    // zkServer.sh status relies on srvr, so ZooKeeper always allows it.
    if word != "srvr" && !shared.config.four_letter_word_enabled(word) {
        return format!("{word} is not executed because it is not in the whitelist.\n");
    }
    let serving_only = matches!(
        word,
        "srvr" | "stat" | "mntr" | "cons" | "wchs" | "wchc" | "wchp" | "dump"
    );
    if serving_only && !shared.is_serving() {
        return "This ZooKeeper instance is not currently serving requests\n".to_string();
    }
    match word {
        "ruok" => "imok".to_string(),
        // Read-only while the log waits for disk space: writes are refused
        // with NotReadOnly, as by a read-only ZooKeeper server.
        "isro" if shared.consensus.status().disk_full() => "ro".to_string(),
        "isro" => "rw".to_string(),
        "srvr" => server_stats(shared, None),
        "stat" => server_stats(shared, Some(asker)),
        "mntr" => monitor(shared),
        "conf" => conf(shared),
        "cons" => connections(shared, asker),
        "envi" => environment(),
        "wchs" => watch_summary(shared),
        "wchc" => watches_by_session(shared),
        "wchp" => watches_by_path(shared),
        "dump" => dump(shared),
        "srst" => {
            shared.stats.reset();
            "Server stats reset.\n".to_string()
        }
        "crst" => {
            shared.stats.reset();
            "Connection stats reset.\n".to_string()
        }
        other => format!("{other} is not supported by this server.\n"),
    }
}

fn mode(shared: &Shared) -> &'static str {
    let Some((ensemble, _)) = &shared.peers else {
        return "standalone";
    };
    if ensemble.is_observer() {
        return "observer";
    }
    match shared.consensus.status().role() {
        Role::Leader => "leader",
        Role::Follower | Role::Candidate => "follower",
    }
}

/// `srvr`, or `stat` when `asker` is given (it lists the clients too).
fn server_stats(shared: &Shared, asker: Option<SocketAddr>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Zookeeper version: {VERSION}, built on 1970-01-01 00:00 GMT"
    );
    if let Some(asker) = asker {
        out.push_str("Clients:\n");
        for handle in shared.connections().values() {
            let _ = writeln!(
                out,
                " /{}[1](queued=0,recved={},sent={})",
                handle.remote,
                handle.received.load(Ordering::Relaxed),
                handle.sent.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(out, "{}", four_letter_client(asker));
        out.push('\n');
    }
    let latency = shared.stats.latency();
    let (zxid, nodes) = {
        let published = shared.published();
        (published.last_zxid, published.tree.node_count())
    };
    let _ = writeln!(
        out,
        "Latency min/avg/max: {}/{:.4}/{}",
        latency.min(),
        latency.avg(),
        latency.max()
    );
    let _ = writeln!(
        out,
        "Received: {}",
        Stats::get(&shared.stats.packets_received)
    );
    let _ = writeln!(out, "Sent: {}", Stats::get(&shared.stats.packets_sent));
    let _ = writeln!(out, "Connections: {}", connection_count(shared));
    let _ = writeln!(
        out,
        "Outstanding: {}",
        Stats::get(&shared.stats.outstanding_requests)
    );
    let _ = writeln!(out, "Zxid: {zxid:#x}");
    let _ = writeln!(out, "Mode: {}", mode(shared));
    let _ = writeln!(out, "Node count: {nodes}");
    if mode(shared) == "leader" {
        // ZooKeeper's leader adds its proposal sizes; Paddock does not
        // track them, and says so with ZooKeeper's "none yet" value.
        out.push_str("Proposal sizes last/min/max: -1/-1/-1\n");
    }
    out
}

/// Client connections, counting the one asking.
fn connection_count(shared: &Shared) -> usize {
    shared.connections().len() + 1
}

/// How the asking connection shows in `stat` and `cons`: no session, one
/// packet received, nothing sent yet.
fn four_letter_client(asker: SocketAddr) -> String {
    format!(" /{asker}[0](queued=0,recved=1,sent=0)")
}

/// ZooKeeper's short name of an operation, as `cons` shows it (`lop=`).
pub fn op_name(op: i32) -> &'static str {
    match jute::OpCode::from_code(op) {
        Some(jute::OpCode::Create | jute::OpCode::Create2) => "CREA",
        Some(jute::OpCode::CreateContainer) => "CCON",
        Some(jute::OpCode::CreateTtl) => "CTTL",
        Some(jute::OpCode::Delete) => "DELE",
        Some(jute::OpCode::Exists) => "EXIS",
        Some(jute::OpCode::GetData) => "GETD",
        Some(jute::OpCode::SetData) => "SETD",
        Some(jute::OpCode::GetAcl) => "GACL",
        Some(jute::OpCode::SetAcl) => "SACL",
        Some(jute::OpCode::GetChildren) => "GETC",
        Some(jute::OpCode::GetChildren2 | jute::OpCode::GetChildrenPage) => "GETC",
        Some(jute::OpCode::Sync) => "SYNC",
        Some(jute::OpCode::Ping) => "PING",
        Some(jute::OpCode::Multi) => "MULT",
        Some(jute::OpCode::MultiRead) => "MLTR",
        Some(jute::OpCode::SetWatches | jute::OpCode::SetWatches2) => "SETW",
        Some(jute::OpCode::AddWatch) => "ADDW",
        Some(jute::OpCode::RemoveWatches) => "REMW",
        Some(jute::OpCode::CheckWatches) => "CHKW",
        Some(jute::OpCode::GetEphemerals) => "GETE",
        Some(jute::OpCode::GetAllChildrenNumber) => "GETACN",
        Some(jute::OpCode::WhoAmI) => "HOMI",
        Some(jute::OpCode::CloseSession) => "CLOSE",
        _ => "NA",
    }
}

fn monitor(shared: &Shared) -> String {
    let latency = shared.stats.latency();
    let (nodes, data_bytes, ephemerals, watch_count) = {
        let published = shared.published();
        (
            published.tree.node_count(),
            published.tree.approximate_data_bytes(),
            published.tree.ephemeral_count(),
            published.watches.summary().2,
        )
    };
    let values: Vec<(&str, String)> = vec![
        (
            "zk_version",
            format!("{VERSION}, built on 1970-01-01 00:00 GMT"),
        ),
        ("zk_server_state", mode(shared).to_string()),
        ("zk_avg_latency", format!("{:.4}", latency.avg())),
        ("zk_max_latency", latency.max().to_string()),
        ("zk_min_latency", latency.min().to_string()),
        (
            "zk_packets_received",
            Stats::get(&shared.stats.packets_received).to_string(),
        ),
        (
            "zk_packets_sent",
            Stats::get(&shared.stats.packets_sent).to_string(),
        ),
        (
            "zk_num_alive_connections",
            connection_count(shared).to_string(),
        ),
        (
            "zk_outstanding_requests",
            Stats::get(&shared.stats.outstanding_requests).to_string(),
        ),
        ("zk_znode_count", nodes.to_string()),
        ("zk_watch_count", watch_count.to_string()),
        ("zk_ephemerals_count", ephemerals.to_string()),
        ("zk_approximate_data_size", data_bytes.to_string()),
        ("zk_open_file_descriptor_count", open_fds().to_string()),
        ("zk_max_file_descriptor_count", max_fds().to_string()),
        ("zk_global_sessions", shared.sessions.len().to_string()),
        ("zk_last_proposal_size", "-1".to_string()),
        (
            "zk_bad_frames",
            Stats::get(&shared.stats.bad_frames).to_string(),
        ),
        (
            "zk_connection_rejected",
            Stats::get(&shared.stats.connections_rejected).to_string(),
        ),
    ];
    let mut values = values;
    values.extend(peer_values(shared));
    values
        .into_iter()
        .map(|(key, value)| format!("{key}\t{value}\n"))
        .collect()
}

/// What an ensemble member adds to `mntr`: its peer state as ZooKeeper
/// words it, and, on the leader, the learners it is in touch with.
fn peer_values(shared: &Shared) -> Vec<(&'static str, String)> {
    let Some((ensemble, network)) = &shared.peers else {
        return Vec::new();
    };
    let state = match (mode(shared), shared.consensus.status().leader_id()) {
        (_, 0) => "looking",
        ("observer", _) => "observing - broadcast",
        ("leader", _) => "leading - broadcast",
        _ => "following - broadcast",
    };
    let leader_changes = shared.consensus.status().leader_changes();
    let mut values = vec![
        ("zk_peer_state", state.to_string()),
        ("zk_looking_count", leader_changes.to_string()),
    ];
    if mode(shared) == "leader" {
        let connected = network.connected_peers();
        let voters = connected
            .iter()
            .filter(|id| ensemble.voters.contains(id))
            .count();
        let observers = connected.len() - voters;
        values.extend([
            ("zk_learners", connected.len().to_string()),
            ("zk_synced_followers", voters.to_string()),
            ("zk_synced_non_voting_followers", "0".to_string()),
            ("zk_synced_observers", observers.to_string()),
            ("zk_pending_syncs", "0".to_string()),
        ]);
    }
    values
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

/// The soft limit on open files, from `/proc/self/limits`.
fn max_fds() -> u64 {
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

fn conf(shared: &Shared) -> String {
    let c = &shared.config;
    let mut out = String::new();
    let _ = writeln!(out, "clientPort={}", c.client_port);
    let _ = writeln!(out, "secureClientPort=-1");
    let _ = writeln!(out, "dataDir={}", c.data_dir.display());
    let _ = writeln!(out, "dataDirSize={}", dir_size(&c.data_dir));
    let _ = writeln!(out, "dataLogDir={}", c.data_log_dir.display());
    let _ = writeln!(out, "dataLogSize={}", dir_size(&c.data_log_dir));
    let _ = writeln!(out, "tickTime={}", c.tick_time_ms);
    let _ = writeln!(out, "maxClientCnxns={}", c.max_client_cnxns);
    let _ = writeln!(out, "minSessionTimeout={}", c.min_session_timeout_ms);
    let _ = writeln!(out, "maxSessionTimeout={}", c.max_session_timeout_ms);
    let _ = writeln!(out, "clientPortListenBacklog=-1");
    let _ = writeln!(
        out,
        "serverId={}",
        if shared.is_standalone() {
            0
        } else {
            shared.server_id
        }
    );
    out
}

fn dir_size(dir: &std::path::Path) -> u64 {
    fn walk(dir: &std::path::Path) -> u64 {
        std::fs::read_dir(dir).map_or(0, |entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
    }
    walk(dir)
}

fn connections(shared: &Shared, asker: SocketAddr) -> String {
    let mut out = String::new();
    for handle in shared.connections().values() {
        let activity = handle.activity.lock().expect("activity poisoned").clone();
        let _ = writeln!(
            out,
            " /{}[1](queued=0,recved={},sent={},sid={:#x},lop={},est={},to={},lcxid={:#x},lzxid={:#x},lresp={},llat={},minlat={},avglat={:.0},maxlat={})",
            handle.remote,
            handle.received.load(Ordering::Relaxed),
            handle.sent.load(Ordering::Relaxed),
            handle.session_id.load(Ordering::Relaxed),
            activity.last_op,
            handle.established_ms,
            handle.timeout_ms,
            activity.last_cxid,
            activity.last_zxid,
            activity.last_response_ms,
            activity.latency.last(),
            activity.latency.min(),
            activity.latency.avg(),
            activity.latency.max(),
        );
    }
    let _ = writeln!(out, "{}", four_letter_client(asker));
    out.push('\n');
    out
}

fn environment() -> String {
    let mut out = String::from("Environment:\n");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let pairs = [
        (
            "zookeeper.version",
            format!("{VERSION}, built on 1970-01-01 00:00 GMT"),
        ),
        ("host.name", host.trim().to_string()),
        ("os.name", std::env::consts::OS.to_string()),
        ("os.arch", std::env::consts::ARCH.to_string()),
        (
            "os.version",
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
        ),
        ("user.name", std::env::var("USER").unwrap_or_default()),
        ("user.dir", cwd),
    ];
    for (key, value) in pairs {
        let _ = writeln!(out, "{key}={value}");
    }
    out
}

fn watch_summary(shared: &Shared) -> String {
    let (connections, paths, watches) = shared.published().watches.summary();
    format!("{connections} connections watching {paths} paths\nTotal watches:{watches}\n")
}

fn watches_by_session(shared: &Shared) -> String {
    let pairs = shared.published().watches.pairs();
    let connections = shared.connections();
    let mut by_session: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
    for (connection, path) in pairs {
        let session = connections
            .get(&connection)
            .map_or(0, |h| h.session_id.load(Ordering::Relaxed));
        by_session.entry(session).or_default().push(path);
    }
    let mut out = String::new();
    for (session, paths) in by_session {
        let _ = writeln!(out, "{session:#x}");
        for path in paths {
            let _ = writeln!(out, "\t{path}");
        }
    }
    out.push('\n');
    out
}

fn watches_by_path(shared: &Shared) -> String {
    let pairs = shared.published().watches.pairs();
    let connections = shared.connections();
    let mut by_path: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    for (connection, path) in pairs {
        let session = connections
            .get(&connection)
            .map_or(0, |h| h.session_id.load(Ordering::Relaxed));
        by_path.entry(path).or_default().push(session);
    }
    let mut out = String::new();
    for (path, sessions) in by_path {
        let _ = writeln!(out, "{path}");
        for session in sessions {
            let _ = writeln!(out, "\t{session:#x}");
        }
    }
    out.push('\n');
    out
}

fn dump(shared: &Shared) -> String {
    let published = shared.published();
    let tree = &published.tree;
    let mut out = String::from("SessionTracker dump:\n");
    let sessions: Vec<i64> = tree.sessions().map(|(id, _)| id).collect();
    let _ = writeln!(out, "Global Sessions({}):", sessions.len());
    for (id, info) in tree.sessions() {
        let _ = writeln!(out, "{id:#x}\t{}ms", info.timeout_ms);
    }
    out.push_str("ephemeral nodes dump:\n");
    let with_ephemerals: Vec<(i64, Vec<String>)> = sessions
        .iter()
        .map(|&id| (id, tree.get_ephemerals(id, "/")))
        .filter(|(_, paths)| !paths.is_empty())
        .collect();
    let _ = writeln!(out, "Sessions with Ephemerals ({}):", with_ephemerals.len());
    for (id, paths) in with_ephemerals {
        let _ = writeln!(out, "{id:#x}:");
        for path in paths {
            let _ = writeln!(out, "\t{path}");
        }
    }
    out.push_str("Connections dump:\n");
    out
}
