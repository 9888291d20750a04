//! What servers of an ensemble tell each other outside the log, over the
//! peer transport: which sessions they have heard from (the leader alone
//! expires sessions, so it must know about clients connected elsewhere),
//! and that a session now lives on another server (whose old connection
//! must close, as ZooKeeper's session-moved check ensures).

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use consensus::{Control, Message, Network, SnapshotSent, Snapshots, Transport};

use crate::config::{ConfigError, ServerConfig};

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
            let addr = (server.host.as_str(), server.peer_port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut addrs| addrs.next())
                .ok_or_else(|| ConfigError::Invalid {
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
        let (observers, participants): (Vec<_>, Vec<_>) =
            config.servers.iter().partition(|s| s.observer);
        Ok(Some(Self {
            my_id,
            voters: participants.iter().map(|s| s.id).collect(),
            learners: observers.iter().map(|s| s.id).collect(),
            listen: listen.expect("my_id() checked that a server.N line has this id"),
            peers,
        }))
    }

    pub fn is_observer(&self) -> bool {
        self.learners.contains(&self.my_id)
    }
}

/// Bytes of snapshot per chunk on the peer connection.
const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;
/// Chunks a snapshot stream may have queued for its peer: what it holds in
/// memory stays near this many chunk sizes, whatever the snapshot's size.
const SNAPSHOT_CHUNKS_IN_FLIGHT: usize = 8;
/// A snapshot stream that cannot queue a chunk for this long gives up;
/// raft tries again.
const SNAPSHOT_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Raft's network over the peer transport, bound once the transport is up
/// (the transport's inbound side needs the consensus handle first).
/// Messages sent before that are dropped; raft sends again.
pub struct PeerNetwork {
    transport: OnceLock<Transport>,
    snapshots: Arc<Snapshots>,
    /// Snapshot streams run on the server's runtime; raft asks for them
    /// from the consensus thread.
    runtime: tokio::runtime::Handle,
}

impl PeerNetwork {
    pub fn new(snapshots: Arc<Snapshots>, runtime: tokio::runtime::Handle) -> Self {
        Self {
            transport: OnceLock::new(),
            snapshots,
            runtime,
        }
    }

    pub fn bind(&self, transport: Transport) {
        let _ = self.transport.set(transport);
    }

    pub fn transport(&self) -> Option<&Transport> {
        self.transport.get()
    }
}

impl Network for PeerNetwork {
    fn send_snapshot(&self, message: Message, done: SnapshotSent) {
        let Some(transport) = self.transport.get().cloned() else {
            done(false);
            return;
        };
        let snapshots = self.snapshots.clone();
        self.runtime.spawn_blocking(move || {
            let to = message.to;
            let index = message.get_snapshot().get_metadata().index;
            match stream_snapshot(&transport, &snapshots, to, index) {
                Ok(()) => done(transport.send_raft(vec![message]).is_empty()),
                Err(reason) => {
                    tracing::warn!(
                        peer = to,
                        index,
                        "sending a snapshot failed: {reason}; raft will try again"
                    );
                    done(false);
                }
            }
        });
    }

    fn send_control(&self, to: u64, control: Control) -> bool {
        self.transport
            .get()
            .is_some_and(|transport| transport.send_control(to, control))
    }

    fn send(&self, messages: Vec<Message>) -> Vec<u64> {
        match self.transport.get() {
            Some(transport) => transport.send_raft(messages),
            None => {
                let mut unreachable: Vec<u64> = messages.iter().map(|m| m.to).collect();
                unreachable.sort_unstable();
                unreachable.dedup();
                unreachable
            }
        }
    }
}

/// Streams the bytes of snapshot `index` to `to` as chunk notes, pacing on
/// the peer's queue, and ends with an end note. Blocking: run it off the
/// async workers.
fn stream_snapshot(
    transport: &Transport,
    snapshots: &Snapshots,
    to: u64,
    index: u64,
) -> Result<(), String> {
    let (found, mut reader) = snapshots
        .latest_raw()
        .map_err(|e| e.to_string())?
        .ok_or("no snapshot on disk")?;
    if found != index {
        return Err(format!(
            "raft asked for snapshot {index}, the newest is {found}"
        ));
    }
    let mut buf = vec![0u8; SNAPSHOT_CHUNK_BYTES];
    let mut sent_bytes = 0u64;
    loop {
        let read = read_full(&mut reader, &mut buf).map_err(|e| e.to_string())?;
        if read == 0 {
            break;
        }
        let note = PeerNote::SnapshotChunk {
            index,
            data: Bytes::copy_from_slice(&buf[..read]),
        };
        queue_paced(transport, to, note.encode())?;
        sent_bytes += read as u64;
    }
    queue_paced(transport, to, PeerNote::SnapshotEnd { index }.encode())?;
    tracing::info!(peer = to, index, bytes = sent_bytes, "snapshot sent");
    Ok(())
}

fn read_full(reader: &mut dyn std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

fn queue_paced(transport: &Transport, to: u64, payload: Bytes) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if transport.queued_frames(to) < SNAPSHOT_CHUNKS_IN_FLIGHT
            && transport.send_app(to, payload.clone())
        {
            return Ok(());
        }
        if started.elapsed() > SNAPSHOT_STALL_TIMEOUT {
            return Err(format!(
                "peer {to} took no snapshot data for {SNAPSHOT_STALL_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A note from one server to another, outside the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerNote {
    /// Sessions whose clients this server heard from since its last report.
    SessionsHeard(Vec<i64>),
    /// A client resumed this session on the sending server.
    SessionMoved(i64),
    /// The next bytes of snapshot `index`, sent before raft's message.
    SnapshotChunk { index: u64, data: Bytes },
    /// Snapshot `index` is complete.
    SnapshotEnd { index: u64 },
}

const NOTE_SESSIONS_HEARD: u8 = 1;
const NOTE_SESSION_MOVED: u8 = 2;
const NOTE_SNAPSHOT_CHUNK: u8 = 3;
const NOTE_SNAPSHOT_END: u8 = 4;

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
            PeerNote::SnapshotChunk { index, data } => {
                buf.reserve(9 + data.len());
                buf.put_u8(NOTE_SNAPSHOT_CHUNK);
                buf.put_u64(*index);
                buf.put_slice(data);
            }
            PeerNote::SnapshotEnd { index } => {
                buf.put_u8(NOTE_SNAPSHOT_END);
                buf.put_u64(*index);
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
            NOTE_SNAPSHOT_CHUNK if bytes.remaining() >= 8 => {
                let index = bytes.get_u64();
                // A copy: the payload shares the peer connection's read
                // buffer, which must not stay pinned while the chunk waits.
                Some(PeerNote::SnapshotChunk {
                    index,
                    data: Bytes::copy_from_slice(&bytes),
                })
            }
            NOTE_SNAPSHOT_END if bytes.remaining() == 8 => Some(PeerNote::SnapshotEnd {
                index: bytes.get_u64(),
            }),
            _ => None,
        }
    }
}

/// Shares `note` with every peer.
pub fn broadcast(network: &PeerNetwork, ensemble: &Ensemble, note: &PeerNote) {
    if let Some(transport) = network.transport() {
        let payload = note.encode();
        for &peer in ensemble.peers.keys() {
            transport.send_app(peer, payload.clone());
        }
    }
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
            PeerNote::SnapshotChunk {
                index: 9,
                data: Bytes::from_static(b"tree bytes"),
            },
            PeerNote::SnapshotEnd { index: 9 },
        ] {
            assert_eq!(PeerNote::decode(note.encode()), Some(note));
        }
        assert_eq!(PeerNote::decode(Bytes::from_static(&[1, 0, 0, 0, 9])), None);
        assert_eq!(PeerNote::decode(Bytes::from_static(&[9])), None);
        assert_eq!(PeerNote::decode(Bytes::new()), None);
    }
}
