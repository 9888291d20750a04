//! What servers of an ensemble tell each other outside the log, over the
//! peer transport: which sessions they have heard from (the leader alone
//! expires sessions, so it must know about clients connected elsewhere),
//! and that a session now lives on another server (whose old connection
//! must close, as ZooKeeper's session-moved check ensures).

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use consensus::{PeerNetwork, TransportConfig};

use crate::config::{ConfigError, ServerConfig, ServerSpec};

/// The ensemble as this server sees it.
#[derive(Debug, Clone)]
pub struct Ensemble {
    pub my_id: u64,
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    /// Where this server listens for its peers.
    pub listen: SocketAddr,
    /// Every other server's peer address.
    pub peers: HashMap<u64, SocketAddr>,
}

impl Ensemble {
    /// `None` for a standalone server.
    pub fn from_config(config: &ServerConfig) -> Result<Option<Self>, ConfigError> {
        if config.servers.is_empty() {
            return Ok(None);
        }
        let my_id = config.my_id()?;
        let mut peers = HashMap::new();
        let mut listen = None;
        for server in &config.servers {
            let addr = peer_address(server).ok_or_else(|| ConfigError::Invalid {
                key: format!("server.{}", server.id),
                value: server.host.clone(),
                reason: "the host name does not resolve".into(),
            })?;
            if server.id == my_id {
                listen = Some(addr);
            } else {
                peers.insert(server.id, addr);
            }
        }
        let (voters, learners) = config.group();
        Ok(Some(Self {
            my_id,
            voters,
            learners,
            listen: listen.expect("my_id() checked that a server.N line has this id"),
            peers,
        }))
    }

    pub fn transport_config(&self) -> TransportConfig {
        TransportConfig::new(self.my_id, self.listen, self.peers.clone())
    }
}

/// Where `server` listens for its peers; `None` if its host does not
/// resolve.
fn peer_address(server: &ServerSpec) -> Option<SocketAddr> {
    (server.host.as_str(), server.peer_port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
}

/// The peer addresses of `servers` other than `my_id`, for a membership a
/// reconfig changed; a host that does not resolve is left out, and said.
pub fn peer_addresses(my_id: u64, servers: &[ServerSpec]) -> HashMap<u64, SocketAddr> {
    let mut peers = HashMap::new();
    for server in servers.iter().filter(|s| s.id != my_id) {
        match peer_address(server) {
            Some(addr) => {
                peers.insert(server.id, addr);
            }
            None => tracing::warn!(
                server = server.id,
                host = %server.host,
                "server.{} of the new configuration cannot be reached: its host name does not resolve",
                server.id
            ),
        }
    }
    peers
}

/// A note from one server to another, outside the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerNote {
    /// Sessions whose clients this server heard from since its last report.
    SessionsHeard(Vec<i64>),
    /// A client resumed this session on the sending server.
    SessionMoved(i64),
    /// A reconfig request for the leader to decide (`reconfig::Ask`).
    ReconfigAsk { ask: u64, body: Bytes },
    /// The leader's answer: the change's zxid, or the error code that
    /// refused it.
    ReconfigAnswer { ask: u64, zxid: i64, err: i32 },
}

const NOTE_SESSIONS_HEARD: u8 = 1;
const NOTE_SESSION_MOVED: u8 = 2;
const NOTE_RECONFIG_ASK: u8 = 3;
const NOTE_RECONFIG_ANSWER: u8 = 4;

impl PeerNote {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        match self {
            PeerNote::SessionsHeard(ids) => {
                buf.put_u8(NOTE_SESSIONS_HEARD);
                buf.put_u32(ids.len() as u32);
                for id in ids {
                    buf.put_i64(*id);
                }
            }
            PeerNote::SessionMoved(id) => {
                buf.put_u8(NOTE_SESSION_MOVED);
                buf.put_i64(*id);
            }
            PeerNote::ReconfigAsk { ask, body } => {
                buf.put_u8(NOTE_RECONFIG_ASK);
                buf.put_u64(*ask);
                buf.put_slice(body);
            }
            PeerNote::ReconfigAnswer { ask, zxid, err } => {
                buf.put_u8(NOTE_RECONFIG_ANSWER);
                buf.put_u64(*ask);
                buf.put_i64(*zxid);
                buf.put_i32(*err);
            }
        }
        buf.freeze()
    }

    /// `None` for a note this version does not understand or a damaged one:
    /// peers are servers, but a note is advisory and never worth a crash.
    pub fn decode(mut bytes: Bytes) -> Option<Self> {
        if bytes.is_empty() {
            return None;
        }
        match bytes.get_u8() {
            NOTE_SESSIONS_HEARD => {
                if bytes.remaining() < 4 {
                    return None;
                }
                let count = bytes.get_u32() as usize;
                if bytes.remaining() != count.checked_mul(8)? {
                    return None;
                }
                Some(PeerNote::SessionsHeard(
                    (0..count).map(|_| bytes.get_i64()).collect(),
                ))
            }
            NOTE_SESSION_MOVED if bytes.remaining() == 8 => {
                Some(PeerNote::SessionMoved(bytes.get_i64()))
            }
            NOTE_RECONFIG_ASK if bytes.remaining() >= 8 => Some(PeerNote::ReconfigAsk {
                ask: bytes.get_u64(),
                body: bytes,
            }),
            NOTE_RECONFIG_ANSWER if bytes.remaining() == 20 => Some(PeerNote::ReconfigAnswer {
                ask: bytes.get_u64(),
                zxid: bytes.get_i64(),
                err: bytes.get_i32(),
            }),
            _ => None,
        }
    }
}

/// Shares `note` with every peer.
pub fn broadcast(network: &PeerNetwork, note: &PeerNote) {
    network.broadcast_app(note.encode());
}

/// Shared by the server: the ensemble and its network, if any.
pub type Peers = Option<(Ensemble, Arc<PeerNetwork>)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_round_trip_and_damage_is_ignored() {
        for note in [
            PeerNote::SessionsHeard(vec![1, -2, i64::MAX]),
            PeerNote::SessionsHeard(vec![]),
            PeerNote::SessionMoved(42),
            PeerNote::ReconfigAsk {
                ask: 7,
                body: Bytes::from_static(b"request"),
            },
            PeerNote::ReconfigAnswer {
                ask: 7,
                zxid: 0x1_0000_0004,
                err: -13,
            },
        ] {
            assert_eq!(PeerNote::decode(note.encode()), Some(note));
        }
        assert_eq!(PeerNote::decode(Bytes::from_static(&[1, 0, 0, 0, 9])), None);
        assert_eq!(PeerNote::decode(Bytes::from_static(&[9])), None);
        assert_eq!(PeerNote::decode(Bytes::new()), None);
    }
}
