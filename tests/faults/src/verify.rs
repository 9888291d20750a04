//! The checks after a scenario: a last read of every key (part of the
//! history, so a lost acknowledged write shows as a non-linearizable
//! read), linearizability and session guarantees, and every server holding
//! the same znodes.

use std::time::Duration;

use anyhow::Context as _;
use client::{Client, ConnectOptions, Error};
use history::checker::{self, Budget, Verdict};
use history::{Action, History, Op, Recorder, ZnodeModel};
use launch::Server;

use crate::workload::{self, key, ROOT};

/// The client id of the final reads: no worker has it.
const FINAL_READER: u32 = u32::MAX;

pub async fn create_root(connect: &str) -> anyhow::Result<()> {
    let zk = Client::connect(connect, ConnectOptions::new())
        .await
        .context("connecting to create the root")?;
    client::recipes::ensure_path(&zk, ROOT)
        .await
        .context("creating the root")?;
    zk.close().await;
    Ok(())
}

/// Reads every key once more, through any of `servers` (a connect
/// string), into the history.
pub async fn final_reads(servers: &str, recorder: &Recorder, keys: usize) -> Vec<String> {
    let options = ConnectOptions::new().session_timeout(workload::SESSION_TIMEOUT);
    let zk = match Client::connect(servers, options).await {
        Ok(zk) => zk,
        Err(error) => return vec![format!("cannot connect for the final reads: {error}")],
    };
    let mut problems = Vec::new();
    for k in 0..keys {
        let op = Op {
            path: key(k),
            action: Action::Read,
        };
        let id = recorder.invoke(FINAL_READER, op.clone());
        let outcome = workload::perform(&zk, &op).await;
        if outcome == history::Outcome::Unknown {
            problems.push(format!(
                "the final read of {} failed after healing",
                op.path
            ));
        }
        recorder.complete(id, outcome);
    }
    zk.close().await;
    problems
}

pub fn check_history(history: &History) -> Vec<String> {
    let mut problems = Vec::new();
    let budget = Budget {
        timeout: Some(Duration::from_secs(120)),
        ..Budget::default()
    };
    let report = checker::check(&ZnodeModel, history, &budget);
    match &report.verdict {
        Verdict::Linearizable => {}
        Verdict::NotLinearizable(_) => problems.push(format!("NOT LINEARIZABLE: {report}")),
        Verdict::Unknown { .. } => problems.push(format!("checker gave up: {report}")),
    }
    for violation in history::session::check(history) {
        problems.push(format!("session guarantee broken: {violation:?}"));
    }
    problems
}

/// Every server, read on its own after a sync, holds the same keys with
/// the same data and versions and, when `with_config`, the same
/// configuration (servers reached through proxies each list their peers at
/// their own proxies' ports).
pub async fn compare_servers(servers: &[&Server], keys: usize, with_config: bool) -> Vec<String> {
    let mut copies = Vec::new();
    for server in servers {
        match read_all(&server.client_address(), keys).await {
            Ok(copy) => copies.push((server.id(), copy)),
            Err(error) => return vec![format!("reading server.{}: {error:#}", server.id())],
        }
    }
    let (first_id, first) = &copies[0];
    let mut problems = Vec::new();
    for (id, copy) in &copies[1..] {
        if copy.keys != first.keys {
            problems.push(format!(
                "server.{id} differs from server.{first_id}: {:?} vs {:?}",
                copy.keys, first.keys
            ));
        }
        if with_config && copy.config != first.config {
            problems.push(format!(
                "server.{id}'s configuration differs from server.{first_id}'s: {:?} vs {:?}",
                copy.config, first.config
            ));
        }
    }
    problems
}

/// A key's data (`None` when null), version, czxid and mzxid.
type Znode = (Option<Vec<u8>>, i32, i64, i64);

/// What one server holds.
struct Copy {
    /// Each key's znode, or `None` when the key does not exist.
    keys: Vec<(String, Option<Znode>)>,
    /// `/zookeeper/config`'s text and mzxid.
    config: (String, i64),
}

async fn read_all(server: &str, keys: usize) -> anyhow::Result<Copy> {
    let zk = Client::connect(server, ConnectOptions::new()).await?;
    zk.sync(ROOT).await?;
    let mut copy = Vec::new();
    for k in 0..keys {
        let path = key(k);
        let node = match zk.get_data(&path).await {
            Ok((data, stat)) => Some((
                data.map(|d| d.to_vec()),
                stat.version,
                stat.czxid,
                stat.mzxid,
            )),
            Err(Error::NoNode { .. }) => None,
            Err(error) => return Err(error).with_context(|| format!("reading {path}")),
        };
        copy.push((path, node));
    }
    let (config, stat) = zk.get_config().await.context("reading the configuration")?;
    let config = String::from_utf8_lossy(config.as_deref().unwrap_or_default()).into_owned();
    zk.close().await;
    Ok(Copy {
        keys: copy,
        config: (config, stat.mzxid),
    })
}

/// Lines of a server log worth showing when a run fails: warnings, errors
/// and panics, the last `LOG_LINES_SHOWN` of them.
const LOG_LINES_SHOWN: usize = 20;

/// For every server that exited on its own, its exit status and the last
/// warnings and errors of its log: CI keeps only what the harness prints,
/// not the logs it saved.
pub fn dead_servers<'a>(servers: impl IntoIterator<Item = &'a mut Server>) -> Vec<String> {
    let mut problems = Vec::new();
    for server in servers {
        let Some(status) = server.exit_status() else {
            continue;
        };
        let log = std::fs::read_to_string(server.log_path()).unwrap_or_default();
        let notable: Vec<&str> = log
            .lines()
            .filter(|line| {
                ["WARN", "ERROR", "panicked"]
                    .iter()
                    .any(|w| line.contains(w))
            })
            .collect();
        let shown = &notable[notable.len().saturating_sub(LOG_LINES_SHOWN)..];
        problems.push(format!(
            "server.{} exited ({status}); the last warnings and errors of its log:\n      {}",
            server.id(),
            shown.join("\n      ")
        ));
    }
    problems
}
