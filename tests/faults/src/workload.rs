//! The clients whose history is checked: each worker owns a session on one
//! server and performs random reads, writes, compare-and-sets, creates and
//! deletes on a few shared znodes, recording every invocation and its
//! outcome. A worker whose session expires starts a new one under a new
//! client id, so each client id in the history is one session.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use client::{Client, ConnectOptions, CreateMode, Error};
use history::{Action, Op, Outcome, Recorder, Ret};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

/// A request that takes longer than this is given up as unknown: it may
/// still take effect, at any later time.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(6);
/// Where the checked znodes live.
pub const ROOT: &str = "/faults";

pub fn key(k: usize) -> String {
    format!("{ROOT}/k{k}")
}

pub struct Worker {
    pub index: usize,
    /// The servers this worker's sessions connect to (a connect string).
    /// When it changes, the session moves to them as ZooKeeper's
    /// `updateServerList` moves it, keeping its id.
    pub servers: watch::Receiver<String>,
    pub keys: usize,
    pub seed: u64,
}

impl Worker {
    /// Runs until `stop`, returning how many operations it invoked.
    pub async fn run(mut self, recorder: Arc<Recorder>, stop: Arc<AtomicBool>) -> u64 {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut invoked = 0;
        let mut generation = 0u32;
        let mut counter = 0u32;
        let mut versions = vec![0i32; self.keys];
        while !stop.load(Ordering::Relaxed) {
            // One client id per session: the session checks are per session.
            let client_id = (self.index as u32) * 1000 + generation;
            generation += 1;
            let options = ConnectOptions::new()
                .session_timeout(SESSION_TIMEOUT)
                .connect_timeout(Duration::from_secs(2));
            let servers = self.servers.borrow_and_update().clone();
            let zk = match tokio::time::timeout(REQUEST_TIMEOUT, Client::connect(&servers, options))
                .await
            {
                Ok(Ok(zk)) => zk,
                _ => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            while !stop.load(Ordering::Relaxed) {
                if self.servers.has_changed().unwrap_or(false) {
                    let servers = self.servers.borrow_and_update().clone();
                    // Refused only by a session already ended, which the
                    // next operation finds.
                    let _ = zk.update_server_list(&servers).await;
                }
                // Operations sent while the client knows it is cut off
                // would only pile up unknown outcomes for the checker.
                if zk.state() == client::SessionState::Disconnected {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                let k = rng.gen_range(0..self.keys);
                counter += 1;
                let value = (u64::from(client_id) << 32) | u64::from(counter);
                let action = match rng.gen_range(0..100) {
                    0..=39 => Action::Read,
                    40..=59 => Action::Write(value),
                    60..=79 => Action::Cas {
                        expected_version: versions[k],
                        value,
                    },
                    80..=89 => Action::Create(value),
                    _ => Action::Delete,
                };
                let op = Op {
                    path: key(k),
                    action,
                };
                let id = recorder.invoke(client_id, op.clone());
                invoked += 1;
                let outcome = perform(&zk, &op).await;
                if let Outcome::Returned {
                    ret: Ret::Data { version, .. } | Ret::Set { version },
                    ..
                } = outcome
                {
                    versions[k] = version;
                }
                let unknown = matches!(outcome, Outcome::Unknown);
                recorder.complete(id, outcome);
                if unknown {
                    if zk_expired(&zk) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            zk.close().await;
        }
        invoked
    }
}

fn zk_expired(zk: &Client) -> bool {
    matches!(
        zk.state(),
        client::SessionState::Expired | client::SessionState::Closed
    )
}

/// Performs one operation; a read is `sync` then `getData`, pipelined, so
/// it sees every write acknowledged before it began (ZooKeeper's reads are
/// otherwise only sequentially consistent).
pub async fn perform(zk: &Client, op: &Op) -> Outcome {
    let path = op.path.as_str();
    let result = tokio::time::timeout(REQUEST_TIMEOUT, async {
        match op.action {
            Action::Read => {
                let sync = zk.sync(path);
                let read = zk.get_data(path);
                sync.await?;
                let (data, stat) = read.await?;
                Ok(Ret::Data {
                    value: decode(&data.unwrap_or_default()),
                    version: stat.version,
                })
            }
            Action::Write(value) => zk
                .set_data(path, value.to_string().as_bytes(), None)
                .await
                .map(|stat| Ret::Set {
                    version: stat.version,
                }),
            Action::Cas {
                expected_version,
                value,
            } => zk
                .set_data(path, value.to_string().as_bytes(), Some(expected_version))
                .await
                .map(|stat| Ret::Set {
                    version: stat.version,
                }),
            Action::Create(value) => zk
                .create(path, value.to_string().as_bytes(), CreateMode::Persistent)
                .await
                .map(|_| Ret::Done),
            Action::Delete => zk.delete(path, None).await.map(|()| Ret::Done),
        }
    })
    .await;
    let ret = match result {
        Ok(Ok(ret)) => ret,
        Ok(Err(Error::NoNode { .. })) => Ret::NoNode,
        Ok(Err(Error::NodeExists { .. })) => Ret::NodeExists,
        Ok(Err(Error::BadVersion { .. })) => Ret::BadVersion,
        // Connection loss, expiry, a timeout: it may or may not have
        // happened.
        Ok(Err(_)) | Err(_) => return Outcome::Unknown,
    };
    Outcome::Returned {
        ret,
        zxid: Some(zk.last_zxid_seen()),
    }
}

/// Values are written as decimal; anything else (the empty data of a node
/// created by the harness's setup) reads as 0.
fn decode(data: &[u8]) -> u64 {
    std::str::from_utf8(data)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
