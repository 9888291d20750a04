//! ZooKeeper's AdminServer commands: names, aliases and JSON shapes as a
//! ZooKeeper 3.9 server answers them. Every answer carries `command` (the
//! primary name, whichever alias was asked) and `error` (null when the
//! command ran); an unknown command, or one that needs a serving server
//! asked too early, is an answer with an error naming what was asked, not
//! an HTTP error, as in ZooKeeper.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::UNIX_EPOCH;

use serde_json::{json, Map, Value};
use server::{ConnectionInfo, Monitor, MonitorValue};

pub type Object = Map<String, Value>;
pub type Arguments = HashMap<String, String>;

/// What a command does.
#[derive(Clone, Copy)]
pub enum Action {
    /// Answers a GET with JSON read from what the server publishes.
    Read(fn(&Monitor, &Arguments) -> Object),
    /// `snapshot`: the whole tree, to an authorized GET.
    Snapshot,
    /// `restore`: a whole tree, from an authorized POST.
    Restore,
}

/// One command: its names (the first is primary), whether it needs a
/// server that is serving, and what it does.
pub struct Command {
    pub names: &'static [&'static str],
    pub needs_serving: bool,
    pub action: Action,
}

impl Command {
    pub fn primary(&self) -> &'static str {
        self.names[0]
    }

    /// Whether the caller must prove every permission on the root
    /// (`authorization`): the commands that hand out or replace the
    /// whole tree.
    pub fn needs_authorization(&self) -> bool {
        matches!(self.action, Action::Snapshot | Action::Restore)
    }
}

const COMMANDS: &[Command] = &[
    read(&["configuration", "conf", "config"], true, configuration),
    read(&["connection_stat_reset", "crst"], true, stat_reset),
    read(&["connections", "cons"], true, connections),
    read(&["dirs"], true, dirs),
    read(&["dump"], true, dump),
    read(&["environment", "env", "envi"], false, environment),
    read(&["get_trace_mask", "gtmk"], false, get_trace_mask),
    read(&["hash"], true, hash),
    read(
        &["initial_configuration", "icfg"],
        true,
        initial_configuration,
    ),
    read(&["is_read_only", "isro"], true, is_read_only),
    read(&["last_snapshot", "lsnp"], true, last_snapshot),
    read(&["leader", "lead"], true, leader),
    read(&["monitor", "mntr"], false, monitor),
    read(&["observer_connection_stat_reset", "orst"], true, |_, _| {
        Object::new()
    }),
    read(&["observers", "obsr"], true, observers),
    Command {
        names: &["restore", "rest"],
        needs_serving: true,
        action: Action::Restore,
    },
    read(&["ruok"], true, |_, _| Object::new()),
    read(&["server_stats", "srvr"], true, server_stats),
    read(&["set_trace_mask", "stmk"], false, set_trace_mask),
    Command {
        names: &["snapshot", "snap"],
        needs_serving: true,
        action: Action::Snapshot,
    },
    read(&["stat_reset", "srst"], true, stat_reset),
    read(&["stats", "stat"], true, stats),
    read(&["system_properties", "sysp"], false, system_properties),
    read(&["voting_view"], true, voting_view),
    read(&["watch_summary", "wchs"], true, watch_summary),
    read(&["watches", "wchc"], true, watches),
    read(&["watches_by_path", "wchp"], true, watches_by_path),
    read(&["zabstate"], false, zabstate),
];

const fn read(
    names: &'static [&'static str],
    needs_serving: bool,
    run: fn(&Monitor, &Arguments) -> Object,
) -> Command {
    Command {
        names,
        needs_serving,
        action: Action::Read(run),
    }
}

/// The listing at the command URL: a link per primary name, sorted.
pub fn links(command_url: &str) -> String {
    let mut names: Vec<&str> = COMMANDS.iter().map(Command::primary).collect();
    names.sort_unstable();
    names
        .iter()
        .map(|name| format!("<a href=\"{command_url}/{name}\">{name}</a>\n<br/>\n"))
        .collect()
}

/// The command called `name` (any of its aliases), if the server can run
/// it now; else the answer that says why not.
pub fn find(monitor: &Monitor, name: &str) -> Result<&'static Command, Value> {
    let Some(command) = COMMANDS.iter().find(|c| c.names.contains(&name)) else {
        let error = format!("Unknown command: {name}");
        return Err(answer(name, Object::new(), Some(error)));
    };
    if command.needs_serving && !monitor.is_serving() {
        let error = "This ZooKeeper instance is not currently serving requests";
        return Err(answer(name, Object::new(), Some(error.to_string())));
    }
    Ok(command)
}

/// Runs a command that reads, with the request's query arguments.
pub fn run_read(
    monitor: &Monitor,
    command: &Command,
    run: fn(&Monitor, &Arguments) -> Object,
    arguments: &Arguments,
) -> Value {
    let mut body = run(monitor, arguments);
    let error = body
        .remove("error")
        .and_then(|e| e.as_str().map(String::from));
    answer(command.primary(), body, error)
}

/// A command's JSON: its fields, then `command` and `error`.
pub fn answer(command: &str, mut body: Object, error: Option<String>) -> Value {
    body.insert("command".into(), json!(command));
    body.insert("error".into(), json!(error));
    Value::Object(body)
}

/// ZooKeeper's `ZooTrace` mask, process-wide as there: 306 by default.
/// Paddock writes no request trace; the mask is kept and reported so that
/// tools that set and read it work.
static TRACE_MASK: AtomicI64 = AtomicI64::new(306);

fn get_trace_mask(_: &Monitor, _: &Arguments) -> Object {
    object(json!({ "tracemask": TRACE_MASK.load(Ordering::Relaxed) }))
}

fn set_trace_mask(_: &Monitor, arguments: &Arguments) -> Object {
    const NEEDS: &str = "setTraceMask requires long traceMask argument";
    match arguments.get("traceMask") {
        None => object(json!({ "error": NEEDS })),
        Some(raw) => match raw.parse::<i64>() {
            Ok(mask) => {
                TRACE_MASK.store(mask, Ordering::Relaxed);
                object(json!({ "tracemask": mask }))
            }
            Err(_) => object(json!({ "error": format!("{NEEDS}, got {raw}") })),
        },
    }
}

/// ZooKeeper's digest log, kept when `zookeeper.digest.enabled`: Paddock
/// keeps none, so the list is empty, as ZooKeeper's with digests off.
fn hash(_: &Monitor, _: &Arguments) -> Object {
    object(json!({ "digests": [] }))
}

/// The newest snapshot: its zxid in hexadecimal without `0x`, and when it
/// was written in seconds; `ffffffffffffffff` and -1 when there is none.
fn last_snapshot(monitor: &Monitor, _: &Arguments) -> Object {
    let (zxid, timestamp) = match monitor.last_snapshot() {
        Some((index, written)) => {
            let seconds = written
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            (format!("{index:x}"), seconds as i64)
        }
        None => (format!("{:x}", -1i64), -1),
    };
    object(json!({ "zxid": zxid, "timestamp": timestamp }))
}

/// What a JVM's system properties tell of the process, for a server that
/// runs in none: the system, the user and the separators, under Java's
/// property names.
fn system_properties(_: &Monitor, _: &Arguments) -> Object {
    let mut properties: Object = server::environment()
        .into_iter()
        .filter(|(key, _)| key.starts_with("os.") || key.starts_with("user."))
        .map(|(key, value)| (key.to_string(), json!(value)))
        .collect();
    let temp = std::env::temp_dir().display().to_string();
    let home = std::env::var("HOME").unwrap_or_default();
    for (key, value) in [
        ("file.separator", "/".to_string()),
        ("java.io.tmpdir", temp),
        ("line.separator", "\n".to_string()),
        ("path.separator", ":".to_string()),
        ("user.home", home),
    ] {
        properties.insert(key.to_string(), json!(value));
    }
    properties
}

fn object(value: Value) -> Object {
    match value {
        Value::Object(map) => map,
        _ => Object::new(),
    }
}

fn configuration(monitor: &Monitor, _: &Arguments) -> Object {
    let c = monitor.config();
    let server_id = if c.servers.is_empty() {
        0
    } else {
        monitor.server_id()
    };
    object(json!({
        "client_port": c.client_port,
        "data_dir": c.data_dir,
        "data_log_dir": c.data_log_dir,
        "tick_time": c.tick_time_ms,
        "max_client_cnxns": c.max_client_cnxns,
        "min_session_timeout": c.min_session_timeout_ms,
        "max_session_timeout": c.max_session_timeout_ms,
        "server_id": server_id,
        "client_port_listen_backlog": c.reported_listen_backlog(),
    }))
}

fn stat_reset(monitor: &Monitor, _: &Arguments) -> Object {
    monitor.reset_stats();
    Object::new()
}

fn connection(c: &ConnectionInfo, brief: bool) -> Value {
    let mut info = object(json!({
        "remote_socket_address": c.remote.to_string(),
        "interest_ops": 1,
        "outstanding_requests": 0,
        "packets_received": c.received,
        "packets_sent": c.sent,
    }));
    if !brief {
        info.extend(object(json!({
            "session_id": c.session_id,
            "last_operation": c.last_op,
            "established": c.established_ms,
            "session_timeout": c.timeout_ms,
            "last_cxid": c.last_cxid,
            "last_zxid": c.last_zxid,
            "last_response_time": c.last_response_monotonic_ms(),
            "last_latency": c.latency.last(),
            "min_latency": c.latency.min(),
            "avg_latency": c.latency.avg().round() as u64,
            "max_latency": c.latency.max(),
        })));
    }
    Value::Object(info)
}

fn connection_list(monitor: &Monitor, brief: bool) -> Object {
    let connections: Vec<Value> = monitor
        .connections()
        .iter()
        .map(|c| connection(c, brief))
        .collect();
    object(json!({ "connections": connections, "secure_connections": [] }))
}

fn connections(monitor: &Monitor, _: &Arguments) -> Object {
    connection_list(monitor, false)
}

fn dirs(monitor: &Monitor, _: &Arguments) -> Object {
    let (data, log) = monitor.dir_sizes();
    object(json!({ "datadir_size": data, "logdir_size": log }))
}

fn dump(monitor: &Monitor, _: &Arguments) -> Object {
    let expiries: Object = monitor
        .session_expiries()
        .into_iter()
        .map(|(at, ids)| (at.to_string(), json!(ids)))
        .collect();
    let ephemerals: Object = monitor
        .ephemerals()
        .into_iter()
        .map(|(id, paths)| (id.to_string(), json!(paths)))
        .collect();
    object(json!({
        "expiry_time_to_session_ids": expiries,
        "session_id_to_ephemeral_paths": ephemerals,
    }))
}

fn environment(_: &Monitor, _: &Arguments) -> Object {
    server::environment()
        .into_iter()
        .map(|(key, value)| (key.to_string(), json!(value)))
        .collect()
}

/// The configuration the server started with, in zoo.cfg's form.
fn initial_configuration(monitor: &Monitor, _: &Arguments) -> Object {
    object(json!({ "initial_configuration": monitor.config().initial_configuration }))
}

fn is_read_only(monitor: &Monitor, _: &Arguments) -> Object {
    object(json!({ "read_only": monitor.is_read_only() }))
}

fn leader(monitor: &Monitor, _: &Arguments) -> Object {
    let servers = &monitor.config().servers;
    if servers.is_empty() {
        return object(json!({ "error": "server is not initialized" }));
    }
    let leader_id = monitor.leader_id();
    let leader_ip = servers
        .iter()
        .find(|s| s.id == leader_id)
        .map_or(String::new(), |s| s.host.clone());
    object(json!({
        "is_leader": monitor.mode() == "leader",
        "leader_id": leader_id,
        "leader_ip": leader_ip,
    }))
}

fn monitor(monitor: &Monitor, _: &Arguments) -> Object {
    monitor
        .monitor_values()
        .into_iter()
        .map(|(key, value)| {
            let value = match value {
                MonitorValue::Int(n) => json!(n),
                MonitorValue::Float(x) => json!(x),
                MonitorValue::Text(s) => json!(s),
            };
            (key.to_string(), value)
        })
        .collect()
}

/// Paddock's observers are raft learners fed by the leader; the ones it is
/// connected to are the synced ones.
fn observers(monitor: &Monitor, _: &Arguments) -> Object {
    let observers: Vec<Value> = if monitor.mode() == "leader" {
        let connected = monitor.connected_peers();
        monitor
            .config()
            .servers
            .iter()
            .filter(|s| s.observer && connected.contains(&s.id))
            .map(|s| json!({ "sid": s.id }))
            .collect()
    } else {
        Vec::new()
    };
    object(json!({ "synced_observers": observers.len(), "observers": observers }))
}

fn server_stats(monitor: &Monitor, _: &Arguments) -> Object {
    let stats = monitor.stats();
    let (data_dir_size, log_dir_size) = monitor.dir_sizes();
    // Paddock does not track reply sizes; -1 is ZooKeeper's "none yet".
    let client_response = json!({
        "last_buffer_size": -1,
        "min_buffer_size": -1,
        "max_buffer_size": -1,
    });
    object(json!({
        "version": server::full_version(),
        "read_only": stats.read_only,
        "server_stats": {
            "packets_sent": stats.packets_sent,
            "packets_received": stats.packets_received,
            "fsync_threshold_exceed_count": 0,
            "client_response_stats": client_response,
            "data_dir_size": data_dir_size,
            "log_dir_size": log_dir_size,
            "provider_null": monitor.config().metrics.is_none(),
            "server_state": stats.mode,
            "last_processed_zxid": stats.last_zxid,
            "outstanding_requests": stats.outstanding_requests,
            "avg_latency": stats.latency.avg(),
            "max_latency": stats.latency.max(),
            "min_latency": stats.latency.min(),
            "num_alive_client_connections": stats.connections,
            "auth_failed_count": 0,
            "non_mtlsremote_conn_count": 0,
            "non_mtlslocal_conn_count": 0,
            "uptime": stats.uptime_ms,
        },
        "client_response": client_response,
        "node_count": stats.node_count,
    }))
}

fn stats(monitor: &Monitor, arguments: &Arguments) -> Object {
    let mut body = server_stats(monitor, arguments);
    body.extend(connection_list(monitor, true));
    body
}

/// Each voting server as ZooKeeper writes it in a dynamic config:
/// `host:peerPort:electionPort:role;clientAddress:clientPort`.
fn voting_view(monitor: &Monitor, _: &Arguments) -> Object {
    let view: Object = monitor
        .config()
        .servers
        .iter()
        .filter(|s| !s.observer)
        .map(|s| {
            let client = s
                .client_port
                .map_or(String::new(), |port| format!(";0.0.0.0:{port}"));
            let address = format!(
                "{}:{}:{}:participant{client}",
                s.host, s.peer_port, s.election_port
            );
            (s.id.to_string(), json!(address))
        })
        .collect();
    object(json!({ "current_config": view }))
}

fn watch_summary(monitor: &Monitor, _: &Arguments) -> Object {
    let (connections, paths, watches) = monitor.watch_summary();
    object(json!({
        "num_connections": connections,
        "num_paths": paths,
        "num_total_watches": watches,
    }))
}

fn watches(monitor: &Monitor, _: &Arguments) -> Object {
    let by_session: Object = monitor
        .watches_by_session()
        .into_iter()
        .map(|(session, paths)| (session.to_string(), json!(paths)))
        .collect();
    object(json!({ "session_id_to_watched_paths": by_session }))
}

fn watches_by_path(monitor: &Monitor, _: &Arguments) -> Object {
    let by_path: Object = monitor
        .watches_by_path()
        .into_iter()
        .map(|(path, sessions)| (path, json!(sessions)))
        .collect();
    object(json!({ "path_to_session_ids": by_path }))
}

/// ZooKeeper's Zab phase, in raft's terms: a server following or leading
/// a known leader is broadcasting; one without a leader is electing.
fn zabstate(monitor: &Monitor, _: &Arguments) -> Object {
    let config = monitor.config();
    let Some(me) = config.servers.iter().find(|s| s.id == monitor.server_id()) else {
        return object(json!({ "voting": false, "zabstate": "" }));
    };
    let zabstate = if monitor.leader_id() == 0 {
        "election"
    } else {
        "broadcast"
    };
    let zxid = monitor.last_zxid();
    object(json!({
        "myid": me.id,
        "is_leader": monitor.mode() == "leader",
        "quorum_address": format!("{}:{}", me.host, me.peer_port),
        "election_address": format!("{}:{}", me.host, me.election_port),
        "client_address": format!("0.0.0.0:{}", config.client_port),
        "voting": !me.observer,
        "last_zxid": format!("{zxid:#x}"),
        "zab_epoch": zxid >> 32,
        "zab_counter": zxid & 0xffff_ffff,
        "zabstate": zabstate,
    }))
}
