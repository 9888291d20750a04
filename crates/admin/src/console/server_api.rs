//! The console's view of the server and its ensemble: sessions with their
//! connections, ephemerals and watches; watches by path; who holds and who
//! waits for the recipes' locks and elections under a znode; each server's
//! role and zxid, and the leaders this one has seen; the live figures the charts draw. Closing a session is
//! done as its own client would: by resuming it and closing it.

use std::collections::HashMap;
use std::time::Duration;

use client::{child_path, Client, ConnectOptions};
use serde_json::{json, Value};
use server::Monitor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::console::tree_api::{Answer, Failure};
use crate::console::users::client_address;

/// How long another server has to answer `srvr`.
const PEER_ANSWER_TIMEOUT: Duration = Duration::from_secs(1);

/// Every session the tree holds, with what this server knows of it.
pub fn sessions(monitor: &Monitor) -> Value {
    let connections: HashMap<i64, _> = monitor
        .connections()
        .into_iter()
        .map(|c| (c.session_id, c))
        .collect();
    let ephemerals: HashMap<i64, Vec<String>> = monitor.ephemerals().into_iter().collect();
    let watches = monitor.watches_by_session();
    let sessions: Vec<Value> = monitor
        .sessions()
        .into_iter()
        .map(|(id, timeout_ms)| {
            let here = connections.get(&id);
            json!({
                "id": format!("{id:#x}"),
                "timeout_ms": timeout_ms,
                "client": here.map(|c| c.remote.to_string()),
                "last_seen_ms": here.map(|c| c.last_response_epoch_ms().max(c.established_ms)),
                "ephemerals": ephemerals.get(&id).cloned().unwrap_or_default(),
                "watches": watches.get(&id).cloned().unwrap_or_default(),
            })
        })
        .collect();
    json!({ "sessions": sessions })
}

pub fn watches(monitor: &Monitor) -> Value {
    let by_path: Vec<Value> = monitor
        .watches_by_path()
        .into_iter()
        .map(|(path, ids)| {
            let ids: Vec<String> = ids.iter().map(|id| format!("{id:#x}")).collect();
            json!({"path": path, "sessions": ids})
        })
        .collect();
    json!({ "watches": by_path })
}

/// Closes `session_id` by resuming it with its password and closing it,
/// as its client would, if the person may administer the root.
pub async fn close_session(monitor: &Monitor, ids: &[jute::Id], session_id: i64) -> Answer {
    if monitor.permits("/", jute::perms::ADMIN, ids) != Some(true) {
        return Err(Failure {
            status: axum::http::StatusCode::FORBIDDEN,
            message: "closing a session needs ADMIN on / (or the super user)".into(),
        });
    }
    let password = monitor
        .session_password(session_id)
        .ok_or_else(|| Failure::bad_request(format!("no session {session_id:#x}")))?;
    let options = ConnectOptions::new()
        .connect_timeout(Duration::from_secs(5))
        .resume_session(session_id, password);
    let client = Client::connect(&client_address(monitor), options)
        .await
        .map_err(Failure::from)?;
    client.close().await;
    Ok(json!({"closed": format!("{session_id:#x}")}))
}

/// The children of `path` that a lock, election or semaphore recipe
/// leaves: sequential names, in the order of their counters. The first
/// holds the lock (or leads); the rest wait, each with its session.
pub async fn recipe_queue(zk: &Client, path: &str) -> Answer {
    let mut contenders: Vec<(i64, String)> = zk
        .get_children(path)
        .await?
        .into_iter()
        .filter_map(|name| Some((client::recipes::sequence(&name)?, name)))
        .collect();
    contenders.sort();
    let stats: Vec<_> = contenders
        .iter()
        .map(|(_, name)| zk.exists(&child_path(path, name)))
        .collect();
    let mut queue = Vec::with_capacity(contenders.len());
    for ((_, name), stat) in contenders.iter().zip(stats) {
        let owner = stat.await?.map(|s| s.ephemeral_owner).unwrap_or(0);
        queue.push(json!({"name": name, "session": format!("{owner:#x}")}));
    }
    Ok(json!({"queue": queue}))
}

/// This server's figures for the charts, sampled when asked.
pub fn live(monitor: &Monitor) -> Value {
    let stats = monitor.stats();
    let process = crate::metrics::Process::read();
    let quantiles = |snapshot: server::HistogramSnapshot| {
        json!({
            "p50_ms": snapshot.quantile(0.5) * 1000.0,
            "p99_ms": snapshot.quantile(0.99) * 1000.0,
            "count": snapshot.count,
        })
    };
    json!({
        "packets_received": stats.packets_received,
        "packets_sent": stats.packets_sent,
        "last_zxid": stats.last_zxid,
        "connections": stats.connections,
        "node_count": stats.node_count,
        "read_latency": quantiles(monitor.read_latency()),
        "update_latency": quantiles(monitor.update_latency()),
        "fsync": quantiles(monitor.log_sync_durations()),
        "resident_bytes": process.as_ref().map(|p| p.resident_bytes),
        "cpu_seconds": process.as_ref().map(|p| p.cpu_seconds),
    })
}

/// Each server of the ensemble as its `srvr` answers: mode, zxid,
/// connections; with the lag of its zxid behind the leader's.
pub async fn ensemble(monitor: &Monitor) -> Value {
    let config = monitor.config();
    let mut servers = Vec::new();
    if config.servers.is_empty() {
        let address = client_address(monitor);
        servers.push((monitor.server_id(), address.clone(), srvr(&address).await));
    }
    for spec in &config.servers {
        let port = spec.client_port.unwrap_or(config.client_port);
        let address = format!("{}:{port}", spec.host);
        servers.push((spec.id, address.clone(), srvr(&address).await));
    }
    let leader_zxid = servers
        .iter()
        .filter_map(|(_, _, fields)| fields.as_ref())
        .filter(|f| f.get("Mode").map(String::as_str) == Some("leader"))
        .find_map(zxid);
    let servers: Vec<Value> = servers
        .into_iter()
        .map(|(id, address, fields)| {
            let Some(fields) = fields else {
                return json!({"id": id, "address": address, "mode": "unreachable"});
            };
            let zxid = zxid(&fields);
            json!({
                "id": id,
                "address": address,
                "mode": fields.get("Mode"),
                "zxid": zxid.map(|z| format!("{z:#x}")),
                "lag": leader_zxid.zip(zxid).map(|(leader, own)| leader - own),
                "connections": fields.get("Connections"),
                "latency": fields.get("Latency min/avg/max"),
            })
        })
        .collect();
    json!({
        "me": monitor.server_id(),
        "leader_changes": monitor.consensus().leader_changes(),
        "leaders": leader_history(monitor),
        "servers": servers,
    })
}

/// The leaders this server came to know, oldest first, each with when.
fn leader_history(monitor: &Monitor) -> Vec<Value> {
    let since_epoch_ms = |at: std::time::SystemTime| {
        at.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    };
    monitor
        .consensus()
        .leader_history()
        .into_iter()
        .map(|seen| json!({"id": seen.leader_id, "term": seen.term, "at_ms": since_epoch_ms(seen.at)}))
        .collect()
}

fn zxid(fields: &HashMap<String, String>) -> Option<i64> {
    let hex = fields.get("Zxid")?.strip_prefix("0x")?;
    i64::from_str_radix(hex, 16).ok()
}

/// The `key: value` lines of a server's `srvr`; `None` when it does not
/// answer in time, or answers something else (a refusal).
async fn srvr(address: &str) -> Option<HashMap<String, String>> {
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        stream.write_all(b"srvr").await.ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.ok()?;
        Some(answer)
    };
    let answer = tokio::time::timeout(PEER_ANSWER_TIMEOUT, ask)
        .await
        .ok()??;
    let fields: HashMap<String, String> = answer
        .lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    fields.contains_key("Mode").then_some(fields)
}
