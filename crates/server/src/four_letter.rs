//! Four-letter words on the client port, in ZooKeeper's output formats, so
//! monitoring scripts written for ZooKeeper read Paddock unchanged.

use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::monitor::{self, full_version};
use crate::shared::Shared;

/// A four-letter word's own connection is not in the connection table,
/// and ZooKeeper counts it.
const ASKING_CONNECTION: usize = 1;

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
        "isro" if monitor::is_read_only(shared) => "ro".to_string(),
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

/// `srvr`, or `stat` when `asker` is given (it lists the clients too).
fn server_stats(shared: &Shared, asker: Option<SocketAddr>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Zookeeper version: {}", full_version());
    if let Some(asker) = asker {
        out.push_str("Clients:\n");
        for c in monitor::connections(shared) {
            let _ = writeln!(
                out,
                " /{}[1](queued=0,recved={},sent={})",
                c.remote, c.received, c.sent
            );
        }
        let _ = writeln!(out, "{}", four_letter_client(asker));
        out.push('\n');
    }
    let stats = monitor::server_stats(shared, ASKING_CONNECTION);
    let latency = stats.latency;
    let _ = writeln!(
        out,
        "Latency min/avg/max: {}/{:.4}/{}",
        latency.min(),
        latency.avg(),
        latency.max()
    );
    let _ = writeln!(out, "Received: {}", stats.packets_received);
    let _ = writeln!(out, "Sent: {}", stats.packets_sent);
    let _ = writeln!(out, "Connections: {}", stats.connections);
    let _ = writeln!(out, "Outstanding: {}", stats.outstanding_requests);
    let _ = writeln!(out, "Zxid: {:#x}", stats.last_zxid);
    let _ = writeln!(out, "Mode: {}", stats.mode);
    let _ = writeln!(out, "Node count: {}", stats.node_count);
    if stats.mode == "leader" {
        // ZooKeeper's leader adds its proposal sizes; Paddock does not
        // track them, and says so with ZooKeeper's "none yet" value.
        out.push_str("Proposal sizes last/min/max: -1/-1/-1\n");
    }
    out
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

/// `mntr`: ZooKeeper's keys, prefixed `zk_`, tab-separated.
fn monitor(shared: &Shared) -> String {
    monitor::monitor_values(shared, ASKING_CONNECTION)
        .into_iter()
        .map(|(key, value)| format!("zk_{key}\t{value}\n"))
        .collect()
}

fn conf(shared: &Shared) -> String {
    monitor::conf(shared)
        .into_iter()
        .map(|(key, value)| format!("{key}={value}\n"))
        .collect()
}

fn connections(shared: &Shared, asker: SocketAddr) -> String {
    let mut out = String::new();
    for c in monitor::connections(shared) {
        let _ = writeln!(
            out,
            " /{}[1](queued=0,recved={},sent={},sid={:#x},lop={},est={},to={},lcxid={:#x},lzxid={:#x},lresp={},llat={},minlat={},avglat={:.0},maxlat={})",
            c.remote,
            c.received,
            c.sent,
            c.session_id,
            c.last_op,
            c.established_ms,
            c.timeout_ms,
            c.last_cxid,
            c.last_zxid,
            c.last_response_monotonic_ms(),
            c.latency.last(),
            c.latency.min(),
            c.latency.avg(),
            c.latency.max(),
        );
    }
    let _ = writeln!(out, "{}", four_letter_client(asker));
    out.push('\n');
    out
}

fn environment() -> String {
    let mut out = String::from("Environment:\n");
    for (key, value) in monitor::environment() {
        let _ = writeln!(out, "{key}={value}");
    }
    out
}

fn watch_summary(shared: &Shared) -> String {
    let (connections, paths, watches) = shared.published().watches.summary();
    format!("{connections} connections watching {paths} paths\nTotal watches:{watches}\n")
}

fn watches_by_session(shared: &Shared) -> String {
    let mut out = String::new();
    for (session, paths) in monitor::watches_by_session(shared) {
        let _ = writeln!(out, "{session:#x}");
        for path in paths {
            let _ = writeln!(out, "\t{path}");
        }
    }
    out.push('\n');
    out
}

fn watches_by_path(shared: &Shared) -> String {
    let mut out = String::new();
    for (path, sessions) in monitor::watches_by_path(shared) {
        let _ = writeln!(out, "{path}");
        for session in sessions {
            let _ = writeln!(out, "\t{session:#x}");
        }
    }
    out.push('\n');
    out
}

fn dump(shared: &Shared) -> String {
    let mut out = String::from("SessionTracker dump:\n");
    let sessions = monitor::sessions(shared);
    let _ = writeln!(out, "Global Sessions({}):", sessions.len());
    for (id, timeout_ms) in sessions {
        let _ = writeln!(out, "{id:#x}\t{timeout_ms}ms");
    }
    out.push_str("ephemeral nodes dump:\n");
    let with_ephemerals = monitor::ephemerals(shared);
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
