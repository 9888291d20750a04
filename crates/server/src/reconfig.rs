//! ZooKeeper's dynamic reconfiguration: the `reconfig` request changes the
//! ensemble's membership while it runs.
//!
//! As in ZooKeeper, the leader decides: a server that does not lead asks
//! it over the peer transport (`PeerNote::ReconfigAsk`) and hears back the
//! zxid of the change or why it was refused. The leader checks the request
//! in ZooKeeper's order (`PrepRequestProcessor`, reconfig case), then
//! proposes one log entry that is both the raft membership change and the
//! txn that rewrites `/zookeeper/config`, so the two commit together.
//! Whoever asked answers its client once it has applied that entry, with
//! the new configuration and its stat, as ZooKeeper's reconfig answers.
//! A refused request goes through the log as an error txn, as any refused
//! write does here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use jute::{perms, ErrorCode, Id, ReconfigRequest, Record};
use tokio::sync::oneshot;
use tree::{Outcome, Txn, TxnOp};

use crate::config::ServerSpec;
use crate::ensemble::PeerNote;
use crate::membership::{parse_config_text, CONFIG_NODE};
use crate::shared::{stamped_txn, Committed, Shared};

/// How long a server waits for the leader's answer before its client sees
/// the request lost (ConnectionLoss), as when its leader goes away.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// A reconfig request and whose it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub request: ReconfigRequest,
    pub session_id: i64,
    pub auth: Vec<Id>,
}

impl Ask {
    fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i64(self.session_id);
        buf.put_u32(self.auth.len() as u32);
        for id in &self.auth {
            id.encode(&mut buf);
        }
        self.request.encode(&mut buf);
        buf.freeze()
    }

    fn decode(mut bytes: Bytes) -> Option<Self> {
        if bytes.remaining() < 12 {
            return None;
        }
        let session_id = bytes.get_i64();
        let count = bytes.get_u32();
        let mut reader = jute::Reader::new(bytes);
        let auth = (0..count)
            .map(|_| Id::decode(&mut reader).ok())
            .collect::<Option<Vec<_>>>()?;
        let request = ReconfigRequest::decode(&mut reader).ok()?;
        Some(Self {
            request,
            session_id,
            auth,
        })
    }
}

/// Asks of this server waiting for the leader's answer.
#[derive(Default)]
pub struct Asks {
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Result<i64, ErrorCode>>>>,
}

/// Proposes the reconfig `ask` through the leader; the receiver gets the
/// applied outcome, or is dropped if the request was lost.
pub fn propose(shared: &Arc<Shared>, ask: Ask) -> oneshot::Receiver<Committed> {
    let (reply, committed) = oneshot::channel();
    let shared = shared.clone();
    tokio::spawn(async move {
        let session_id = ask.session_id;
        let decided = if shared.is_leader() {
            lead(&shared, ask).await
        } else {
            ask_leader(&shared, ask).await
        };
        let outcome = match decided {
            Some(Ok(zxid)) => applied_config(&shared, zxid).await,
            // Through the log, so the refusal keeps its place among the
            // session's writes and takes a zxid, as ZooKeeper's error txn.
            Some(Err(code)) => shared
                .propose(&stamped_txn(session_id, TxnOp::Error { code }))
                .await
                .ok(),
            None => None,
        };
        if let Some(outcome) = outcome {
            let _ = reply.send(outcome);
        }
    });
    committed
}

/// The leader's part: checks the request, proposes the change and waits
/// for it to commit. `None` if it was lost.
async fn lead(shared: &Shared, ask: Ask) -> Option<Result<i64, ErrorCode>> {
    let servers = match decide(shared, &ask) {
        Ok(servers) => servers,
        Err(code) => return Some(Err(code)),
    };
    let txn = Txn {
        auth: ask.auth,
        ..stamped_txn(
            ask.session_id,
            TxnOp::Reconfig {
                members: members_text(&servers),
            },
        )
    };
    let (reply, committed) = oneshot::channel();
    let waiter = crate::shared::Waiter { reply, gate: None };
    let target = consensus::Membership::new(
        servers
            .iter()
            .filter(|s| !s.observer)
            .map(|s| s.id)
            .collect(),
        servers
            .iter()
            .filter(|s| s.observer)
            .map(|s| s.id)
            .collect(),
    );
    shared
        .consensus
        .propose_membership(target, txn.to_vec(), waiter)
        .ok()?;
    let committed = committed.await.ok()?;
    Some(match committed.outcome {
        Outcome::Failed(code) => Err(code),
        _ => Ok(committed.zxid),
    })
}

/// A server that does not lead asks the leader.
async fn ask_leader(shared: &Shared, ask: Ask) -> Option<Result<i64, ErrorCode>> {
    let (_, network) = shared.peers.as_ref()?;
    let leader = shared.consensus.status().leader_id();
    let asks = &shared.reconfig_asks;
    let id = asks.next.fetch_add(1, Ordering::Relaxed);
    let (answer, answered) = oneshot::channel();
    asks.waiting
        .lock()
        .expect("asks poisoned")
        .insert(id, answer);
    let note = PeerNote::ReconfigAsk {
        ask: id,
        body: ask.encode(),
    };
    let sent = leader != 0 && network.send_app(leader, note.encode());
    let result = match sent {
        true => tokio::time::timeout(ANSWER_WAIT, answered).await.ok()?.ok(),
        false => None,
    };
    asks.waiting.lock().expect("asks poisoned").remove(&id);
    result
}

/// On the leader: answers another server's ask once decided and, if
/// accepted, committed.
pub fn answer_ask(shared: &Arc<Shared>, from: u64, ask_id: u64, body: Bytes) {
    let Some(ask) = Ask::decode(body) else {
        tracing::warn!(
            peer = from,
            "ignoring a reconfig ask this server cannot read"
        );
        return;
    };
    let shared = shared.clone();
    tokio::spawn(async move {
        let result = match shared.is_leader() {
            true => lead(&shared, ask).await,
            // Not leading (any more): the asker's wait runs out.
            false => None,
        };
        let Some(result) = result else {
            return;
        };
        let (zxid, err) = match result {
            Ok(zxid) => (zxid, ErrorCode::Ok),
            Err(code) => (0, code),
        };
        if let Some((_, network)) = &shared.peers {
            let note = PeerNote::ReconfigAnswer {
                ask: ask_id,
                zxid,
                err: err.code(),
            };
            network.send_app(from, note.encode());
        }
    });
}

/// The leader's answer to one of this server's asks.
pub fn take_answer(shared: &Shared, ask_id: u64, zxid: i64, err: i32) {
    let waiting = shared
        .reconfig_asks
        .waiting
        .lock()
        .expect("asks poisoned")
        .remove(&ask_id);
    let result = match ErrorCode::from_code(err) {
        Some(ErrorCode::Ok) => Ok(zxid),
        Some(code) => Err(code),
        None => Err(ErrorCode::SystemError),
    };
    if let Some(waiting) = waiting {
        let _ = waiting.send(result);
    }
}

/// Once this server has applied `zxid`: the configuration as it holds it.
/// `None` if it does not within `ANSWER_WAIT`: a server the change removed
/// may never learn that it committed (the leader stops replicating to it),
/// and its client sees ConnectionLoss, which ZooKeeper's clients retry
/// elsewhere.
async fn applied_config(shared: &Shared, zxid: i64) -> Option<Committed> {
    let mut applied = shared.applied.subscribe();
    let index = u64::try_from(zxid).ok()?;
    tokio::time::timeout(ANSWER_WAIT, applied.wait_for(|&at| at >= index))
        .await
        .ok()?
        .ok()?;
    let published = shared.published();
    let (config, stat) = published.tree.get_data(CONFIG_NODE, &[]).ok()?;
    Some(Committed {
        zxid,
        outcome: Outcome::Reconfigured {
            config: config.unwrap_or_default(),
            stat,
        },
        reads: Vec::new(),
    })
}

/// ZooKeeper's checks of a reconfig, in its order, against the committed
/// configuration: the servers the ensemble is to have.
fn decide(shared: &Shared, ask: &Ask) -> Result<Vec<ServerSpec>, ErrorCode> {
    if shared.consensus.status().membership_changing() {
        return Err(ErrorCode::ReconfigInProgress);
    }
    let (current, version) = {
        let published = shared.published();
        let (text, _) = published
            .tree
            .get_data(CONFIG_NODE, &[])
            .map_err(|_| ErrorCode::SystemError)?;
        parse_config_text(&String::from_utf8_lossy(&text.unwrap_or_default()))
            .map_err(|_| ErrorCode::SystemError)?
    };
    let request = &ask.request;
    if request.cur_config_id != -1 && request.cur_config_id != version {
        return Err(ErrorCode::BadVersion);
    }
    let servers = match &request.new_members {
        Some(members) => new_members(members)?,
        None => incremental(&current, request)?,
    };
    // With standaloneEnabled (the default) an ensemble keeps at least two
    // voters, else at least one.
    let voters: Vec<u64> = servers
        .iter()
        .filter(|s| !s.observer)
        .map(|s| s.id)
        .collect();
    let voters_min = if shared.config.standalone_enabled {
        2
    } else {
        1
    };
    if voters.len() < voters_min {
        return Err(ErrorCode::BadArguments);
    }
    if !quorum_reachable(shared, &voters) {
        return Err(ErrorCode::NewConfigNoQuorum);
    }
    let permitted = shared
        .published()
        .tree
        .permits_each(CONFIG_NODE, perms::WRITE, &ask.auth);
    if permitted != Some(true) {
        return Err(ErrorCode::NoAuth);
    }
    Ok(servers)
}

/// The non-incremental form: the whole new membership, comma-separated
/// `server.N=...` entries.
fn new_members(members: &str) -> Result<Vec<ServerSpec>, ErrorCode> {
    let mut servers = Vec::new();
    for entry in members.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        servers.push(server_entry(entry, false)?);
    }
    servers.sort_by_key(|s| s.id);
    servers.dedup_by_key(|s| s.id);
    Ok(servers)
}

/// The incremental form: servers leaving by id, servers joining (or
/// changing) by their `server.N=...` entry.
fn incremental(
    current: &[ServerSpec],
    request: &ReconfigRequest,
) -> Result<Vec<ServerSpec>, ErrorCode> {
    let mut servers: Vec<ServerSpec> = current.to_vec();
    if let Some(leaving) = &request.leaving_servers {
        for id in leaving.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            // ZooKeeper parses the id with Long.parseLong, unchecked.
            let id: u64 = id.parse().map_err(|_| ErrorCode::MarshallingError)?;
            servers.retain(|s| s.id != id);
        }
    }
    if let Some(joining) = &request.joining_servers {
        for entry in joining.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let server = server_entry(entry, true)?;
            servers.retain(|s| s.id != server.id);
            servers.push(server);
        }
    }
    servers.sort_by_key(|s| s.id);
    Ok(servers)
}

/// `server.N=host:peer:election[:role][;[host:]clientPort]`; a joining
/// server must give its client port.
fn server_entry(entry: &str, client_required: bool) -> Result<ServerSpec, ErrorCode> {
    let (key, value) = entry.split_once('=').ok_or(ErrorCode::BadArguments)?;
    let id = key
        .trim()
        .strip_prefix("server.")
        .and_then(|id| id.parse::<u64>().ok())
        .filter(|&id| id != 0)
        .ok_or(ErrorCode::BadArguments)?;
    let server = ServerSpec::parse(id, value.trim()).map_err(|_| ErrorCode::BadArguments)?;
    if client_required && server.client_port.is_none() {
        return Err(ErrorCode::BadArguments);
    }
    Ok(server)
}

/// ZooKeeper's `isQuorumSynced`: the leader and the voters of the new
/// configuration it is in touch with must be a majority of them, or the
/// change could never commit.
fn quorum_reachable(shared: &Shared, voters: &[u64]) -> bool {
    let connected = shared
        .peers
        .as_ref()
        .map(|(_, network)| network.connected_peers())
        .unwrap_or_default();
    let reachable = voters
        .iter()
        .filter(|&&id| id == shared.server_id || connected.contains(&id))
        .count();
    reachable > voters.len() / 2
}

/// What the reconfig txn carries: a line per server, without the version
/// the txn's zxid will give.
fn members_text(servers: &[ServerSpec]) -> String {
    servers
        .iter()
        .map(|s| format!("server.{}={s}\n", s.id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: u64, value: &str) -> ServerSpec {
        ServerSpec::parse(id, value).unwrap()
    }

    fn three() -> Vec<ServerSpec> {
        (1..=3)
            .map(|id| {
                spec(
                    id,
                    &format!("127.0.0.1:{}:{};{}", 2887 + id, 3887 + id, 2180 + id),
                )
            })
            .collect()
    }

    fn request(joining: Option<&str>, leaving: Option<&str>) -> ReconfigRequest {
        ReconfigRequest {
            joining_servers: joining.map(Into::into),
            leaving_servers: leaving.map(Into::into),
            new_members: None,
            cur_config_id: -1,
        }
    }

    fn ids(servers: &[ServerSpec]) -> Vec<u64> {
        servers.iter().map(|s| s.id).collect()
    }

    #[test]
    fn servers_leave_by_id_and_join_by_entry() {
        let joined = incremental(
            &three(),
            &request(
                Some("server.4=127.0.0.1:2892:3892:participant;2184"),
                Some("2"),
            ),
        )
        .unwrap();
        assert_eq!(ids(&joined), [1, 3, 4]);
        // An id not in the configuration is passed over, as ZooKeeper does.
        assert_eq!(
            ids(&incremental(&three(), &request(None, Some("7"))).unwrap()),
            [1, 2, 3]
        );
        // A joiner with an existing id replaces it: here as an observer.
        let moved = incremental(
            &three(),
            &request(Some("server.3=127.0.0.1:2890:3890:observer;2183"), None),
        )
        .unwrap();
        assert!(moved[2].observer);
    }

    #[test]
    fn bad_entries_are_refused_with_zookeeper_s_codes() {
        let refused =
            |joining, leaving| incremental(&three(), &request(joining, leaving)).unwrap_err();
        assert_eq!(refused(None, Some("abc")), ErrorCode::MarshallingError);
        for joining in [
            "server.4=127.0.0.1:2892:3892",
            "server.4=127.0.0.1:2892;2184",
            "4=127.0.0.1:2892:3892;2184",
            "server.x=127.0.0.1:2892:3892;2184",
            "server.4",
        ] {
            assert_eq!(
                refused(Some(joining), None),
                ErrorCode::BadArguments,
                "{joining}"
            );
        }
        assert_eq!(
            new_members("server.1=a:1:2;3,foo=bar").unwrap_err(),
            ErrorCode::BadArguments
        );
    }

    #[test]
    fn the_new_members_form_replaces_the_whole_membership() {
        let servers = new_members(
            "server.2=127.0.0.1:2889:3889;2182, server.1=127.0.0.1:2888:3888:observer;2181",
        )
        .unwrap();
        assert_eq!(ids(&servers), [1, 2]);
        assert!(servers[0].observer);
        assert_eq!(
            members_text(&servers),
            "server.1=127.0.0.1:2888:3888:observer;0.0.0.0:2181\n\
             server.2=127.0.0.1:2889:3889:participant;0.0.0.0:2182\n"
        );
    }

    #[test]
    fn an_ask_round_trips() {
        let ask = Ask {
            request: ReconfigRequest {
                joining_servers: Some("server.4=a:1:2;3".into()),
                leaving_servers: None,
                new_members: None,
                cur_config_id: 0x1_0000_0000,
            },
            session_id: 42,
            auth: vec![Id {
                scheme: "digest".into(),
                id: "super:x".into(),
            }],
        };
        assert_eq!(Ask::decode(ask.encode()), Some(ask));
        assert_eq!(Ask::decode(Bytes::from_static(b"short")), None);
    }
}
