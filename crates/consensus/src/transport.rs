//! The peer transport: how the servers of an ensemble carry raft messages
//! and application payloads to each other (DESIGN §5) — long-lived TCP
//! connections on a separate peer port, length-prefixed frames, batched
//! writes.
//!
//! Shape: for every other server, one outbound connection owned by a writer
//! task, which drains that peer's bounded queue into one `write_all` per
//! batch and reconnects with capped, jittered exponential backoff when the
//! connection fails. A listener takes the other direction: each inbound
//! connection gets a reader task that checks every frame and hands it to
//! `deliver`. Traffic from A to B always travels on A's outbound
//! connection; B answers on its own.
//!
//! Wire format, integers big-endian:
//! - Hello, once each way: magic `PDKp`, `u16` protocol version, `u64` id of
//!   the sender, `u64` id of the server it means to reach. The connecting
//!   side speaks first; the listener checks magic, version, that the sender
//!   is in its peer list and that it is the one meant, then answers with its
//!   own hello (which the connector checks the same way) or closes.
//! - Then frames, connector to listener only: `u32` length of what follows,
//!   `u8` kind, body. Kind 1: a raft `Message` in protobuf; kind 2: an
//!   application payload, opaque here; kind 3: a [`Control`] message of
//!   the consensus layer itself (`u8` tag, then its fields); kind 4: a
//!   piece of a snapshot file (`u64` index of the snapshot, `u8` 1 on its
//!   last piece and 0 before, then the bytes).
//!
//! Concurrency constraints, and how they are met:
//! 1. What one peer sends arrives in the order it was sent: one queue, one
//!    writer task and one connection per direction; the reader delivers frame
//!    by frame; a newer inbound connection from the same peer closes the
//!    older one, so a peer's old and new connections never run side by side
//!    for long.
//! 2. Senders never block (they run on the consensus thread): `try_send`
//!    into bounded queues. A full queue, an unknown peer or a peer without a
//!    live connection is reported back; raft copes with lost messages.
//! 3. Nothing a peer sends is trusted: every hello field, every length
//!    (checked before anything is reserved for it), every kind, every body
//!    and the `from` and `to` of every raft message. A violation closes that
//!    connection alone, with a warning naming the address and the reason.
//!
//! The hello identifies; it does not authenticate. The peer port belongs on
//! a network only the servers reach.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use protobuf::Message as _;
use raft::prelude::{Message, MessageType};
use rand::Rng;
use tls::rustls::pki_types::ServerName;
use tls::MaybeTls;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::fence::Control;

/// Default for [`TransportConfig::frame_bytes_max`]: room for a raft
/// message carrying a large batch of entries or a snapshot.
pub const FRAME_BYTES_MAX_DEFAULT: usize = 64 << 20;
/// Default for [`TransportConfig::queue_frames_max`].
pub const QUEUE_FRAMES_MAX_DEFAULT: usize = 4096;
/// The largest per-peer queue the configuration may ask for.
const QUEUE_FRAMES_LIMIT: usize = 1 << 20;

const MAGIC: [u8; 4] = *b"PDKp";
const PROTOCOL_VERSION: u16 = 1;
/// Magic, version, from, to.
const HELLO_BYTES: usize = 4 + 2 + 8 + 8;
/// `u32` length, then the `u8` kind the length counts.
const LENGTH_BYTES: usize = 4;
const FRAME_HEADER_BYTES: usize = LENGTH_BYTES + 1;
const KIND_RAFT: u8 = 1;
const KIND_APP: u8 = 2;
const KIND_CONTROL: u8 = 3;
const KIND_SNAPSHOT: u8 = 4;
/// A snapshot piece's index and last-piece flag, before its bytes.
const SNAPSHOT_PIECE_HEADER_BYTES: usize = 8 + 1;
/// Tags of the control messages, and their body sizes (tag included).
const CONTROL_TERM_QUERY: u8 = 1;
const CONTROL_TERM_ANSWER: u8 = 2;
const CONTROL_TERM_QUERY_BYTES: usize = 1;
const CONTROL_TERM_ANSWER_BYTES: usize = 1 + 8 + 8;

/// A writer stops taking from its queue once a batch holds this much, so
/// one `write_all` stays bounded (a single larger frame still goes alone).
const BATCH_BYTES_MAX: usize = 1 << 20;
/// What a reader asks the socket for when it needs more bytes.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// Connecting plus both hellos, either side.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);
/// A batch that cannot be written in this long means the peer stopped
/// reading or vanished without a FIN; the connection is replaced. Generous
/// so that a frame of `frame_bytes_max` fits through a slow link.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
const BACKOFF_MS_MIN: u64 = 50;
const BACKOFF_MS_MAX: u64 = 2_000;
/// Inbound connections still in their hello at once. Each lasts at most
/// `HANDSHAKE_TIMEOUT`; after the hello a peer holds at most one.
const HANDSHAKES_PENDING_MAX: usize = 16;
/// Pause after a failed `accept` (out of file descriptors, say), so the
/// listener survives it without spinning.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// The first byte of a TLS handshake record, which a peer's hello (it
/// starts with `MAGIC`) never is: how a unified peer port tells the two.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

const _: () = assert!(HELLO_BYTES == MAGIC.len() + 2 + 8 + 8);
const _: () = assert!(0 < BACKOFF_MS_MIN && BACKOFF_MS_MIN <= BACKOFF_MS_MAX);
const _: () = assert!(FRAME_BYTES_MAX_DEFAULT as u64 <= u32::MAX as u64);
const _: () =
    assert!(0 < QUEUE_FRAMES_MAX_DEFAULT && QUEUE_FRAMES_MAX_DEFAULT <= QUEUE_FRAMES_LIMIT);
const _: () = assert!(READ_CHUNK_BYTES <= BATCH_BYTES_MAX);

/// What arrives from a peer.
#[derive(Debug)]
pub enum Inbound {
    /// Checked: `from` is the peer that sent it, `to` is this server.
    Raft(Message),
    /// An application payload from peer `from`. It is a slice of the read
    /// buffer, not a copy: copy it before keeping it for long, or it keeps
    /// that whole buffer alive.
    App { from: u64, payload: Bytes },
    /// A message of the consensus layer from peer `from`.
    Control { from: u64, control: Control },
    /// The next piece of a snapshot file that peer `from` sends, with the
    /// credit it holds until it is written.
    Snapshot {
        from: u64,
        piece: SnapshotPiece,
        credit: PieceCredit,
    },
}

/// Snapshot pieces a connection's reader hands on that are not written
/// yet (their `PieceCredit`s not dropped) before it reads no more from
/// that peer. Its sender then waits, down to TCP: a follower took a
/// leader's 800 MB snapshot in 1.1 s and wrote it to disk in 4, holding
/// up to 630 MB of it in memory meanwhile.
pub const SNAPSHOT_PIECES_UNWRITTEN_MAX: usize = 8;

/// One of a connection's `SNAPSHOT_PIECES_UNWRITTEN_MAX` credits, given
/// back when dropped: keep it with the piece until the piece is written.
#[derive(Debug, Default)]
pub struct PieceCredit {
    _permit: Option<OwnedSemaphorePermit>,
}

/// Consecutive bytes of snapshot `index`'s file, in the order they are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotPiece {
    pub index: u64,
    pub data: Bytes,
    /// No more bytes of this snapshot follow.
    pub last: bool,
}

/// Where this server listens and who its peers are. Every server of the
/// ensemble should use the same limits: a frame over the receiver's
/// `frame_bytes_max` costs the sender its connection.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    /// This server's id (ZooKeeper's `myid`); never 0, raft's "nobody".
    pub id: u64,
    /// The peer port.
    pub listen: SocketAddr,
    /// Every other server, by id, at its peer port.
    pub peers: HashMap<u64, SocketAddr>,
    /// Largest frame (kind byte and body) sent or accepted.
    pub frame_bytes_max: usize,
    /// Messages queued per peer before sends to it are refused.
    pub queue_frames_max: usize,
    /// TLS between servers; `None` for plain text only.
    pub tls: Option<PeerTls>,
}

/// TLS on the peer port, as ZooKeeper's `sslQuorum` and `portUnification`
/// ask for it. Both ends check the other's certificate against their trust
/// store; the dialling end also checks it names the address it dialled,
/// unless the configuration says otherwise.
#[derive(Debug, Clone)]
pub struct PeerTls {
    /// Dial peers with TLS (`sslQuorum=true`); plain text when `None`.
    pub dial: Option<Arc<tls::rustls::ClientConfig>>,
    /// Accept TLS from peers.
    pub accept: Arc<tls::rustls::ServerConfig>,
    /// Accept plain text too (`portUnification=true`): how an ensemble
    /// moves to TLS one server at a time.
    pub accept_plain: bool,
}

/// The default limits, no peers, and id 0, which `start` refuses: set `id`,
/// `listen` and `peers`.
impl Default for TransportConfig {
    fn default() -> Self {
        Self::new(0, SocketAddr::from(([0, 0, 0, 0], 0)), HashMap::new())
    }
}

impl TransportConfig {
    /// A configuration with the default limits.
    pub fn new(id: u64, listen: SocketAddr, peers: HashMap<u64, SocketAddr>) -> Self {
        Self {
            id,
            listen,
            peers,
            frame_bytes_max: FRAME_BYTES_MAX_DEFAULT,
            queue_frames_max: QUEUE_FRAMES_MAX_DEFAULT,
            tls: None,
        }
    }

    fn validate(&self) -> io::Result<()> {
        let invalid = |message: String| Err(io::Error::new(io::ErrorKind::InvalidInput, message));
        if self.id == 0 || self.peers.contains_key(&0) {
            return invalid("server id 0 is reserved by raft; number servers from 1".into());
        }
        if self.peers.contains_key(&self.id) {
            return invalid(format!(
                "the peer list names this server (id {}); list only the other servers",
                self.id
            ));
        }
        if self.frame_bytes_max == 0 || self.frame_bytes_max as u64 > u64::from(u32::MAX) {
            return invalid(format!(
                "frame_bytes_max is {}; it must be between 1 and {}",
                self.frame_bytes_max,
                u32::MAX
            ));
        }
        if self.queue_frames_max == 0 || self.queue_frames_max > QUEUE_FRAMES_LIMIT {
            return invalid(format!(
                "queue_frames_max is {}; it must be between 1 and {QUEUE_FRAMES_LIMIT}",
                self.queue_frames_max
            ));
        }
        Ok(())
    }
}

/// The handle: cheap to clone, `Send + Sync`. Dropping the last clone stops
/// every task; [`Transport::shutdown`] also waits for them to end.
#[derive(Clone)]
pub struct Transport {
    inner: Arc<Inner>,
}

/// Tasks hold none of this (only clones of its token and of the peers'
/// `connected` flags), so dropping the last handle drops it and its `Drop`
/// cancels them.
struct Inner {
    id: u64,
    local_addr: SocketAddr,
    frame_bytes_max: usize,
    queue_frames_max: usize,
    dial_tls: Option<Arc<tls::rustls::ClientConfig>>,
    /// A BTreeMap so that `connected_peers` lists in id order. Changed only
    /// when the group's membership does; a std mutex held for a lookup.
    peers: Mutex<BTreeMap<u64, PeerQueue>>,
    /// The peers whose connections are accepted, shared with the acceptor.
    known: Arc<Mutex<HashSet<u64>>>,
    /// The acceptor's live inbound connections, closed when their peer
    /// leaves.
    live: LiveInbound,
    /// Handed to each new link task; taken at shutdown, so that the tasks
    /// alone keep `tasks_alive` open.
    alive: Mutex<Option<mpsc::Sender<()>>>,
    token: CancellationToken,
    /// Yields `None` once every task has dropped its sender: how
    /// `shutdown` waits for them all (nothing is ever sent on it).
    tasks_alive: tokio::sync::Mutex<mpsc::Receiver<()>>,
}

/// Each peer's live inbound connection: its generation and the token that
/// closes it.
type LiveInbound = Arc<Mutex<HashMap<u64, (u64, CancellationToken)>>>;

struct PeerQueue {
    queue: mpsc::Sender<Outbound>,
    /// Whether the writer has a connection past the hello right now.
    connected: Arc<AtomicBool>,
    /// Ends the peer's link task, when the peer leaves the group.
    link: CancellationToken,
    /// Where the link dials the peer.
    addr: SocketAddr,
}

// The handle is used from the consensus thread and from tokio tasks.
const _: fn() = || {
    fn shared_across_threads<T: Send + Sync + Clone>() {}
    shared_across_threads::<Transport>();
};

impl Drop for Inner {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("id", &self.inner.id)
            .field("local_addr", &self.inner.local_addr)
            .field("connected_peers", &self.connected_peers())
            .finish()
    }
}

enum Outbound {
    Raft(Message),
    App(Bytes),
    Control(Control),
    Snapshot(SnapshotPiece),
}

impl Transport {
    /// Binds the listener and starts the tasks on the current tokio runtime.
    /// `deliver` is called from tokio tasks for each inbound item, in order
    /// per peer; it must not block.
    pub async fn start(
        config: TransportConfig,
        deliver: impl Fn(Inbound) + Send + Sync + 'static,
    ) -> io::Result<Transport> {
        config.validate()?;
        let listener = TcpListener::bind(config.listen).await?;
        Self::start_on(listener, config, deliver)
    }

    /// `start` on a listener already bound, so tests can learn every
    /// server's port before any of them starts.
    pub(crate) fn start_on(
        listener: TcpListener,
        config: TransportConfig,
        deliver: impl Fn(Inbound) + Send + Sync + 'static,
    ) -> io::Result<Transport> {
        config.validate()?;
        let local_addr = listener.local_addr()?;
        let token = CancellationToken::new();
        let (alive, tasks_alive) = mpsc::channel(1);
        let known = Arc::new(Mutex::new(HashSet::new()));
        let live = LiveInbound::default();
        let acceptor = Arc::new(Acceptor {
            id: config.id,
            peers: known.clone(),
            frame_bytes_max: config.frame_bytes_max,
            deliver: Box::new(deliver),
            tls: config.tls.as_ref().map(|tls| {
                (
                    tokio_rustls::TlsAcceptor::from(tls.accept.clone()),
                    tls.accept_plain,
                )
            }),
            token: token.clone(),
            live: live.clone(),
            generation: AtomicU64::new(0),
            _alive: alive.clone(),
        });
        tokio::spawn(acceptor.accept(listener));
        tracing::info!(id = config.id, %local_addr, "peer transport listening on {local_addr}");
        let transport = Transport {
            inner: Arc::new(Inner {
                id: config.id,
                local_addr,
                frame_bytes_max: config.frame_bytes_max,
                queue_frames_max: config.queue_frames_max,
                dial_tls: config.tls.as_ref().and_then(|tls| tls.dial.clone()),
                peers: Mutex::new(BTreeMap::new()),
                known,
                live,
                alive: Mutex::new(Some(alive)),
                token,
                tasks_alive: tokio::sync::Mutex::new(tasks_alive),
            }),
        };
        transport.set_peers(&config.peers);
        Ok(transport)
    }

    /// Adds `peers` to the servers this one talks to (or moves them to
    /// these addresses), keeping the others.
    pub fn add_peers(&self, peers: &HashMap<u64, SocketAddr>) {
        let mut all: HashMap<u64, SocketAddr> = self
            .inner
            .peers
            .lock()
            .expect("transport poisoned")
            .iter()
            .map(|(&id, peer)| (id, peer.addr))
            .collect();
        all.extend(peers);
        self.set_peers(&all);
    }

    /// Makes `peers` (every other server, by id, at its peer port) the
    /// servers this one talks to: links to new ones start, links to those
    /// gone end, and a peer whose address changed is dialled there. For a
    /// change of the group's membership.
    pub fn set_peers(&self, peers: &HashMap<u64, SocketAddr>) {
        let inner = &self.inner;
        let Some(alive) = inner.alive.lock().expect("transport poisoned").clone() else {
            return;
        };
        let mut current = inner.peers.lock().expect("transport poisoned");
        current.retain(|id, peer| {
            let kept = peers.get(id).is_some_and(|addr| *addr == peer.addr);
            if !kept {
                peer.link.cancel();
            }
            kept
        });
        for (&peer, &addr) in peers {
            if peer == inner.id || current.contains_key(&peer) {
                continue;
            }
            let (queue, outbound) = mpsc::channel(inner.queue_frames_max);
            let connected = Arc::new(AtomicBool::new(false));
            let token = inner.token.child_token();
            let link = Link {
                id: inner.id,
                peer,
                addr,
                dial_tls: inner.dial_tls.clone(),
                connected: connected.clone(),
                token: token.clone(),
                _alive: alive.clone(),
            };
            tokio::spawn(link.run(outbound));
            current.insert(
                peer,
                PeerQueue {
                    queue,
                    connected,
                    link: token,
                    addr,
                },
            );
        }
        *inner.known.lock().expect("transport poisoned") = current.keys().copied().collect();
        drop(current);
        let mut live = inner.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.retain(|peer, (_, connection)| {
            let stays = peers.contains_key(peer);
            if !stays {
                connection.cancel();
            }
            stays
        });
    }

    /// Queues raft messages by `msg.to`. Never blocks. Returns, once each
    /// and in first-seen order, the peers that did not get all of their
    /// messages — unknown, not connected, queue full, or a message over
    /// `frame_bytes_max` — so the caller can `report_unreachable` (and
    /// `report_snapshot(Failure)` if one was a snapshot). After a refusal the
    /// peer's later messages in this call are dropped too, so what it does
    /// get has no holes.
    pub fn send_raft(&self, messages: Vec<Message>) -> Vec<u64> {
        let mut refused = Vec::new();
        for message in messages {
            let to = message.to;
            debug_assert!(
                message.from == self.inner.id || is_relayed(&message),
                "raft sends as this server, except what it relays"
            );
            if refused.contains(&to) {
                continue;
            }
            // Checked here, not by the writer, so that the caller learns of
            // it: raft retries an oversized snapshot only when told.
            let frame_bytes = message.compute_size() as usize + 1;
            if frame_bytes > self.inner.frame_bytes_max {
                tracing::warn!(
                    peer = to,
                    "dropped a {:?} for peer {to}: its frame of {frame_bytes} bytes is over frame_bytes_max ({})",
                    message.msg_type,
                    self.inner.frame_bytes_max
                );
                refused.push(to);
                continue;
            }
            if !self.queue(to, Outbound::Raft(message)) {
                refused.push(to);
            }
        }
        refused
    }

    /// Queues an application payload for one peer; false if it was dropped
    /// (unknown or unconnected peer, full queue, over `frame_bytes_max`).
    pub fn send_app(&self, to: u64, payload: Bytes) -> bool {
        if payload.len() + 1 > self.inner.frame_bytes_max {
            tracing::warn!(
                peer = to,
                "dropped a payload for peer {to}: its frame of {} bytes is over frame_bytes_max ({})",
                payload.len() + 1,
                self.inner.frame_bytes_max
            );
            return false;
        }
        self.queue(to, Outbound::App(payload))
    }

    /// Queues a control message for one peer; false if it was dropped
    /// (unknown or unconnected peer, full queue).
    pub fn send_control(&self, to: u64, control: Control) -> bool {
        self.queue(to, Outbound::Control(control))
    }

    /// Queues a piece of a snapshot for one peer; false if it was dropped
    /// (unknown or unconnected peer, full queue, over `frame_bytes_max`).
    pub fn send_snapshot_piece(&self, to: u64, piece: SnapshotPiece) -> bool {
        let frame_bytes = 1 + SNAPSHOT_PIECE_HEADER_BYTES + piece.data.len();
        if frame_bytes > self.inner.frame_bytes_max {
            tracing::warn!(
                peer = to,
                "dropped a snapshot piece for peer {to}: its frame of {frame_bytes} bytes is over frame_bytes_max ({})",
                self.inner.frame_bytes_max
            );
            return false;
        }
        self.queue(to, Outbound::Snapshot(piece))
    }

    fn queue(&self, to: u64, item: Outbound) -> bool {
        let peers = self.inner.peers.lock().expect("transport poisoned");
        let Some(peer) = peers.get(&to) else {
            return false;
        };
        // Without a connection the message would only go stale in the
        // queue; refusing it tells raft now that the peer is unreachable.
        peer.connected.load(Ordering::Relaxed) && peer.queue.try_send(item).is_ok()
    }

    /// Frames queued for `to` and not yet written: a bulk sender (a
    /// snapshot stream) waits while this is high, so what it has in flight
    /// stays bounded in bytes, not only in frames.
    pub fn queued_frames(&self, to: u64) -> usize {
        self.inner
            .peers
            .lock()
            .expect("transport poisoned")
            .get(&to)
            .map_or(0, |peer| peer.queue.max_capacity() - peer.queue.capacity())
    }

    /// The address the listener is bound to (tests bind port 0).
    #[cfg(test)]
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// Every peer, in id order.
    pub fn peers(&self) -> Vec<u64> {
        let peers = self.inner.peers.lock().expect("transport poisoned");
        peers.keys().copied().collect()
    }

    /// Peers with a live outbound connection now, in id order.
    pub fn connected_peers(&self) -> Vec<u64> {
        self.inner
            .peers
            .lock()
            .expect("transport poisoned")
            .iter()
            .filter(|(_, peer)| peer.connected.load(Ordering::Relaxed))
            .map(|(&id, _)| id)
            .collect()
    }

    /// Stops accepting, closes every connection and returns once every task
    /// has ended, so the peer port is free again. Queued messages are
    /// dropped; every clone of this handle stops sending.
    pub async fn shutdown(&self) {
        self.inner.token.cancel();
        self.inner.alive.lock().expect("transport poisoned").take();
        // A tokio mutex because it is held across the `recv` below, which
        // waits for the tasks; concurrent callers wait together.
        let mut tasks_alive = self.inner.tasks_alive.lock().await;
        while tasks_alive.recv().await.is_some() {}
    }
}

/// Why a peer connection was closed or could not be opened.
#[derive(Debug, thiserror::Error)]
enum PeerError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("the hello did not complete within {0:?}")]
    HandshakeTimeout(Duration),
    #[error("bad magic {0:02x?}: not a Paddock peer")]
    BadMagic([u8; 4]),
    #[error("peer protocol version {0}; this server speaks {PROTOCOL_VERSION}")]
    Version(u16),
    #[error("the hello claims id {0}, which is not in this server's peer list")]
    UnknownPeer(u64),
    #[error("addressed to server {to}, but this is server {me}")]
    Misaddressed { to: u64, me: u64 },
    #[error("the peer closed the connection during the hello; its log says why (it may not list server {0} as a peer, or be another server)")]
    HelloRefused(u64),
    #[error(
        "the server there answered as {from} (to {to}); the peer list says {expected} is there"
    )]
    WrongPeer { expected: u64, from: u64, to: u64 },
    #[error("a frame of length 0 has no kind")]
    EmptyFrame,
    #[error("a frame of {len} bytes is over frame_bytes_max ({max})")]
    Oversized { len: u64, max: usize },
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("a control message of {len} bytes with tag {tag} is not one this server knows")]
    BadControl { tag: u8, len: usize },
    #[error(
        "a snapshot piece of {len} bytes has no index and last-piece flag (0 or 1) before its data"
    )]
    BadSnapshotPiece { len: usize },
    #[error("undecodable raft message: {0}")]
    Undecodable(protobuf::ProtobufError),
    #[error("a raft message claims to come from {claimed} on the connection of peer {peer}")]
    Spoofed { claimed: u64, peer: u64 },
    #[error("the connection ended in the middle of a frame")]
    Truncated,
    #[error("the peer closed the connection")]
    Closed,
    #[error("the peer wrote on a connection only this side writes to")]
    Unexpected,
    #[error("a write made no progress for {0:?}")]
    WriteStalled(Duration),
    #[error("TLS: {0}")]
    Tls(io::Error),
}

/// The first bytes each side sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hello {
    from: u64,
    to: u64,
}

impl Hello {
    fn encode(self) -> [u8; HELLO_BYTES] {
        let mut bytes = [0; HELLO_BYTES];
        bytes[..4].copy_from_slice(&MAGIC);
        bytes[4..6].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        bytes[6..14].copy_from_slice(&self.from.to_be_bytes());
        bytes[14..].copy_from_slice(&self.to.to_be_bytes());
        bytes
    }

    fn decode(bytes: &[u8; HELLO_BYTES]) -> Result<Hello, PeerError> {
        let mut bytes = &bytes[..];
        let mut magic = [0; 4];
        bytes.copy_to_slice(&mut magic);
        if magic != MAGIC {
            return Err(PeerError::BadMagic(magic));
        }
        let version = bytes.get_u16();
        if version != PROTOCOL_VERSION {
            return Err(PeerError::Version(version));
        }
        Ok(Hello {
            from: bytes.get_u64(),
            to: bytes.get_u64(),
        })
    }

    async fn read(stream: &mut (impl AsyncRead + Unpin)) -> Result<Hello, PeerError> {
        let mut bytes = [0; HELLO_BYTES];
        stream.read_exact(&mut bytes).await?;
        Hello::decode(&bytes)
    }
}

/// Proposals and read-index requests that reach a server which is not the
/// leader are passed on to the leader by raft with their original sender's
/// id, so they arrive with a `from` other than the connection's server.
/// Everything else raft sends as itself.
fn is_relayed(message: &Message) -> bool {
    matches!(
        message.get_msg_type(),
        MessageType::MsgPropose | MessageType::MsgReadIndex
    )
}

/// Takes one frame off the front of `buf`: `Ok(None)` when more bytes are
/// needed. Reserves nothing: `next_frame` decides where a frame is read.
fn decode_frame(
    buf: &mut BytesMut,
    frame_bytes_max: usize,
) -> Result<Option<(u8, Bytes)>, PeerError> {
    let Some(total) = frame_total(buf, frame_bytes_max)? else {
        return Ok(None);
    };
    if buf.len() < total {
        return Ok(None);
    }
    let mut frame = buf.split_to(total);
    frame.advance(LENGTH_BYTES);
    let kind = frame.get_u8();
    Ok(Some((kind, frame.freeze())))
}

/// The whole size of the frame `buf` starts with, its length included,
/// once that length is in: checked before anything is reserved for it.
fn frame_total(buf: &[u8], frame_bytes_max: usize) -> Result<Option<usize>, PeerError> {
    let Some(&length) = buf.first_chunk::<LENGTH_BYTES>() else {
        return Ok(None);
    };
    let length = u32::from_be_bytes(length);
    if length == 0 {
        return Err(PeerError::EmptyFrame);
    }
    // `frame_bytes_max` fits in a u32 (validated), so `total` cannot overflow.
    let length = length as usize;
    if length > frame_bytes_max {
        return Err(PeerError::Oversized {
            len: length as u64,
            max: frame_bytes_max,
        });
    }
    Ok(Some(LENGTH_BYTES + length))
}

/// Appends `item` as one frame, except a snapshot piece's data, which is
/// returned instead for the caller to write right after `out`: the frame's
/// length counts it, and its megabyte is never copied. On failure `out` is
/// left as it was.
fn encode_frame(item: &Outbound, out: &mut Vec<u8>) -> Result<Option<Bytes>, String> {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
    let mut tail = None;
    match item {
        Outbound::Raft(message) => {
            out[start + LENGTH_BYTES] = KIND_RAFT;
            if let Err(error) = message.write_to_vec(out) {
                out.truncate(start);
                return Err(format!("encoding a raft message: {error}"));
            }
        }
        Outbound::App(payload) => {
            out[start + LENGTH_BYTES] = KIND_APP;
            out.extend_from_slice(payload);
        }
        Outbound::Control(control) => {
            out[start + LENGTH_BYTES] = KIND_CONTROL;
            encode_control(*control, out);
        }
        Outbound::Snapshot(piece) => {
            out[start + LENGTH_BYTES] = KIND_SNAPSHOT;
            out.extend_from_slice(&piece.index.to_be_bytes());
            out.push(u8::from(piece.last));
            tail = Some(piece.data.clone());
        }
    }
    let tail_len = tail.as_ref().map_or(0, Bytes::len);
    // Sizes were checked against frame_bytes_max (≤ u32::MAX) when queued.
    let Ok(length) = u32::try_from(out.len() - start - LENGTH_BYTES + tail_len) else {
        out.truncate(start);
        return Err("a frame over 4 GiB".into());
    };
    out[start..start + LENGTH_BYTES].copy_from_slice(&length.to_be_bytes());
    Ok(tail)
}

fn encode_control(control: Control, out: &mut Vec<u8>) {
    match control {
        Control::TermQuery => out.push(CONTROL_TERM_QUERY),
        Control::TermAnswer { term, commit } => {
            out.push(CONTROL_TERM_ANSWER);
            out.extend_from_slice(&term.to_be_bytes());
            out.extend_from_slice(&commit.to_be_bytes());
        }
    }
}

/// The piece keeps `body`'s memory: a whole piece is read into memory of
/// its own (`read_into_own_buffer`), so the receiver keeps it as it is.
fn decode_snapshot_piece(mut body: Bytes) -> Result<SnapshotPiece, PeerError> {
    let bad = PeerError::BadSnapshotPiece { len: body.len() };
    if body.len() < SNAPSHOT_PIECE_HEADER_BYTES {
        return Err(bad);
    }
    let index = body.get_u64();
    let last = match body.get_u8() {
        0 => false,
        1 => true,
        _ => return Err(bad),
    };
    Ok(SnapshotPiece {
        index,
        data: body,
        last,
    })
}

fn decode_control(body: &[u8]) -> Result<Control, PeerError> {
    let bad = || PeerError::BadControl {
        tag: body.first().copied().unwrap_or(0),
        len: body.len(),
    };
    match (body.first().copied(), body.len()) {
        (Some(CONTROL_TERM_QUERY), CONTROL_TERM_QUERY_BYTES) => Ok(Control::TermQuery),
        (Some(CONTROL_TERM_ANSWER), CONTROL_TERM_ANSWER_BYTES) => {
            let field = |at: usize| -> Result<u64, PeerError> {
                let bytes = body[at..at + 8].try_into().map_err(|_| bad())?;
                Ok(u64::from_be_bytes(bytes))
            };
            Ok(Control::TermAnswer {
                term: field(1)?,
                commit: field(9)?,
            })
        }
        _ => Err(bad()),
    }
}

/// Capped exponential backoff with jitter, so servers restarted together
/// do not reconnect in lockstep.
struct Backoff {
    step_ms: u64,
}

impl Backoff {
    fn new() -> Self {
        Self {
            step_ms: BACKOFF_MS_MIN,
        }
    }

    fn reset(&mut self) {
        self.step_ms = BACKOFF_MS_MIN;
    }

    /// Uniform in [step/2, step]; the step then doubles up to the cap.
    fn next_delay(&mut self) -> Duration {
        let step_ms = self.step_ms;
        self.step_ms = (step_ms * 2).min(BACKOFF_MS_MAX);
        Duration::from_millis(rand::thread_rng().gen_range(step_ms / 2..=step_ms))
    }
}

/// The outbound side of one peer: its writer task.
struct Link {
    id: u64,
    peer: u64,
    addr: SocketAddr,
    /// TLS to dial with (`sslQuorum`).
    dial_tls: Option<Arc<tls::rustls::ClientConfig>>,
    connected: Arc<AtomicBool>,
    token: CancellationToken,
    /// Dropped when the task ends; see `Inner::tasks_alive`.
    _alive: mpsc::Sender<()>,
}

impl Link {
    async fn run(self, mut queue: mpsc::Receiver<Outbound>) {
        let mut backoff = Backoff::new();
        // Whether the previous attempt failed too: one warning per outage.
        let mut failing = false;
        loop {
            let attempt = tokio::select! {
                biased;
                // Cancel safety: `cancelled` only waits; it fires on shutdown.
                () = self.token.cancelled() => return,
                // Cancel safety: an abandoned connect or hello only drops
                // its own socket.
                attempt = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.connect()) => attempt
                    .unwrap_or(Err(PeerError::HandshakeTimeout(HANDSHAKE_TIMEOUT))),
            };
            match attempt {
                Ok(stream) => {
                    tracing::info!(peer = self.peer, addr = %self.addr, "connected to peer {} at {}", self.peer, self.addr);
                    failing = false;
                    self.connected.store(true, Ordering::Relaxed);
                    let since = Instant::now();
                    let end = self.pump(stream, &mut queue).await;
                    self.connected.store(false, Ordering::Relaxed);
                    let Err(error) = end else {
                        return;
                    };
                    // They were meant for a connection that is gone; raft
                    // resends what still matters once told the peer is back.
                    let mut dropped = 0;
                    while queue.try_recv().is_ok() {
                        dropped += 1;
                    }
                    tracing::warn!(
                        peer = self.peer,
                        addr = %self.addr,
                        "lost the connection to peer {} at {}: {error}; dropped {dropped} queued messages, reconnecting",
                        self.peer,
                        self.addr
                    );
                    // A connection that dies right after it opens must not
                    // turn into a reconnect loop at the shortest delay.
                    if since.elapsed() >= Duration::from_millis(BACKOFF_MS_MAX) {
                        backoff.reset();
                    }
                }
                Err(error) if failing => {
                    tracing::debug!(peer = self.peer, addr = %self.addr, "still cannot reach peer {}: {error}", self.peer);
                }
                Err(error) => {
                    failing = true;
                    tracing::warn!(
                        peer = self.peer,
                        addr = %self.addr,
                        "cannot reach peer {} at {}: {error}; retrying with backoff",
                        self.peer,
                        self.addr
                    );
                }
            }
            tokio::select! {
                biased;
                // Cancel safety: `cancelled` only waits; it fires on shutdown.
                () = self.token.cancelled() => return,
                // Cancel safety: a sleep holds nothing.
                () = tokio::time::sleep(backoff.next_delay()) => {}
            }
        }
    }

    async fn connect(&self) -> Result<MaybeTls, PeerError> {
        let tcp = TcpStream::connect(self.addr).await?;
        tcp.set_nodelay(true)?;
        let mut stream = match &self.dial_tls {
            None => MaybeTls::Plain(tcp),
            Some(config) => {
                let name = ServerName::IpAddress(self.addr.ip().into());
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(PeerError::Tls)?;
                MaybeTls::Client(Box::new(tls))
            }
        };
        let hello = Hello {
            from: self.id,
            to: self.peer,
        };
        stream.write_all(&hello.encode()).await?;
        let answer = match Hello::read(&mut stream).await {
            Err(PeerError::Io(error)) if error.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(PeerError::HelloRefused(self.id));
            }
            answer => answer?,
        };
        if answer.from != self.peer || answer.to != self.id {
            return Err(PeerError::WrongPeer {
                expected: self.peer,
                from: answer.from,
                to: answer.to,
            });
        }
        Ok(stream)
    }

    /// Writes queued messages until the connection fails (`Err`) or the
    /// transport stops (`Ok`).
    async fn pump(
        &self,
        stream: MaybeTls,
        queue: &mut mpsc::Receiver<Outbound>,
    ) -> Result<(), PeerError> {
        let (mut reader, mut writer) = stream.split();
        let mut out = Vec::new();
        let mut probe = [0u8; 1];
        loop {
            let first = tokio::select! {
                biased;
                // Cancel safety: `cancelled` only waits; it fires on shutdown.
                () = self.token.cancelled() => return Ok(()),
                // The listener never writes after its hello, so any outcome
                // here ends the connection; this is how a peer's restart is
                // noticed before a write fails. Cancel safety: a `read` that
                // does not complete has taken no bytes.
                read = reader.read(&mut probe) => {
                    return Err(match read {
                        Ok(0) => PeerError::Closed,
                        Ok(_) => PeerError::Unexpected,
                        Err(error) => error.into(),
                    });
                }
                // Cancel safety: `recv` loses no message when it does not
                // complete.
                item = queue.recv() => match item {
                    Some(item) => item,
                    None => return Ok(()),
                },
            };
            // A snapshot piece's data ends the batch: it is written as it
            // is, after the frames before it.
            let mut tail = self.encode(&first, &mut out);
            while tail.is_none() && out.len() < BATCH_BYTES_MAX {
                let Ok(item) = queue.try_recv() else {
                    break;
                };
                tail = self.encode(&item, &mut out);
            }
            if out.is_empty() {
                continue;
            }
            let write = async {
                writer.write_all(&out).await?;
                if let Some(tail) = &tail {
                    writer.write_all(tail).await?;
                }
                Ok::<(), io::Error>(())
            };
            let written = tokio::select! {
                biased;
                // Cancel safety: `cancelled` only waits; it fires on shutdown.
                () = self.token.cancelled() => return Ok(()),
                // Not cancel-safe (a cancelled `write_all` may leave part of
                // a frame on the wire), which is fine only because the one
                // other branch abandons the connection.
                written = tokio::time::timeout(WRITE_TIMEOUT, write) => written,
            };
            written.map_err(|_| PeerError::WriteStalled(WRITE_TIMEOUT))??;
            out.clear();
            // One large raft message must not pin its buffer for good.
            out.shrink_to(BATCH_BYTES_MAX);
        }
    }

    /// Encodes `item` into `out`, returning the bytes to write after it
    /// (see `encode_frame`).
    fn encode(&self, item: &Outbound, out: &mut Vec<u8>) -> Option<Bytes> {
        encode_frame(item, out).unwrap_or_else(|reason| {
            tracing::warn!(
                peer = self.peer,
                "dropped a message for peer {}: {reason}",
                self.peer
            );
            None
        })
    }
}

/// The inbound side, shared by the accept task and every connection task.
struct Acceptor {
    id: u64,
    /// The peers whose connections are accepted: the transport's.
    peers: Arc<Mutex<HashSet<u64>>>,
    frame_bytes_max: usize,
    deliver: Box<dyn Fn(Inbound) + Send + Sync>,
    /// TLS to accept with, and whether plain text is accepted too.
    tls: Option<(tokio_rustls::TlsAcceptor, bool)>,
    token: CancellationToken,
    /// Each peer's live inbound connection (its generation and token), so
    /// that a newer one closes it, and so does the peer's leaving. A std
    /// mutex: held for one insert or remove, never across an await.
    live: LiveInbound,
    generation: AtomicU64,
    /// Dropped with the last task holding this; see `Inner::tasks_alive`.
    _alive: mpsc::Sender<()>,
}

impl Acceptor {
    fn knows(&self, peer: u64) -> bool {
        self.peers
            .lock()
            .expect("transport poisoned")
            .contains(&peer)
    }

    async fn accept(self: Arc<Self>, listener: TcpListener) {
        let handshakes = Arc::new(Semaphore::new(HANDSHAKES_PENDING_MAX));
        loop {
            let permit = tokio::select! {
                biased;
                // Cancel safety: `cancelled` only waits; it fires on shutdown.
                () = self.token.cancelled() => return,
                // Cancel safety: a cancelled wait only gives up its place in
                // line, and this task is the only one waiting.
                permit = handshakes.clone().acquire_owned() => permit,
            };
            let Ok(permit) = permit else {
                return; // The semaphore is never closed.
            };
            let accepted = tokio::select! {
                biased;
                // Cancel safety: `cancelled` only waits; it fires on shutdown.
                () = self.token.cancelled() => return,
                // Cancel safety: `accept` is documented cancel-safe.
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, remote)) => {
                    tokio::spawn(self.clone().serve(stream, remote, permit));
                }
                Err(error) => {
                    tracing::warn!("accepting a peer connection failed: {error}; retrying");
                    tokio::select! {
                        biased;
                        // Cancel safety: `cancelled` only waits; it fires on shutdown.
                        () = self.token.cancelled() => return,
                        // Cancel safety: a sleep holds nothing.
                        () = tokio::time::sleep(ACCEPT_RETRY) => {}
                    }
                }
            }
        }
    }

    async fn serve(
        self: Arc<Self>,
        stream: TcpStream,
        remote: SocketAddr,
        permit: OwnedSemaphorePermit,
    ) {
        let mut peer = None;
        match self.read_connection(stream, &mut peer, permit).await {
            Ok(()) => {
                tracing::debug!(%remote, peer, "peer connection from {remote} closed");
            }
            Err(error) => match peer {
                Some(id) => tracing::warn!(
                    %remote,
                    peer = id,
                    "dropping the connection from peer {id} at {remote}: {error}"
                ),
                None => {
                    tracing::warn!(%remote, "dropping the peer-port connection from {remote}: {error}")
                }
            },
        }
    }

    /// `Ok` when the peer closed cleanly, a newer connection of the same
    /// peer replaced this one, or the transport stopped.
    async fn read_connection(
        &self,
        tcp: TcpStream,
        peer: &mut Option<u64>,
        permit: OwnedSemaphorePermit,
    ) -> Result<(), PeerError> {
        let (from, mut stream) = tokio::select! {
            biased;
            // Cancel safety: `cancelled` only waits; it fires on shutdown.
            () = self.token.cancelled() => return Ok(()),
            // Cancel safety: a half-done handshake is abandoned with its
            // connection.
            opened = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.open(tcp)) => {
                opened.map_err(|_| PeerError::HandshakeTimeout(HANDSHAKE_TIMEOUT))??
            }
        };
        *peer = Some(from);
        drop(permit);
        let slot = self.claim(from);
        let pieces_unwritten = Arc::new(Semaphore::new(SNAPSHOT_PIECES_UNWRITTEN_MAX));
        let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
        loop {
            let frame = tokio::select! {
                biased;
                // Cancel safety: `cancelled` only waits. Fires on shutdown or
                // when a newer connection of this peer takes over.
                () = slot.token.cancelled() => return Ok(()),
                // Cancel safety: a frame half read may be lost, but the
                // only other branch abandons the connection.
                frame = next_frame(&mut stream, &mut buf, self.frame_bytes_max) => frame?,
            };
            let Some((kind, body)) = frame else {
                return Ok(());
            };
            let mut inbound = self.decode(kind, body, from)?;
            if let Inbound::Snapshot { credit, .. } = &mut inbound {
                let permit = tokio::select! {
                    biased;
                    // Cancel safety: `cancelled` only waits.
                    () = slot.token.cancelled() => return Ok(()),
                    // Cancel safety: a cancelled wait only gives up its place
                    // in line, and this task is the only one waiting.
                    permit = pieces_unwritten.clone().acquire_owned() => permit,
                };
                *credit = PieceCredit {
                    _permit: permit.ok(),
                };
            }
            (self.deliver)(inbound);
        }
    }

    /// TLS as configured, then the hello: the peer's id and the stream.
    async fn open(&self, tcp: TcpStream) -> Result<(u64, MaybeTls), PeerError> {
        tcp.set_nodelay(true)?;
        let mut stream = self.upgrade(tcp).await?;
        let from = self.handshake(&mut stream).await?;
        Ok((from, stream))
    }

    /// The TLS handshake when the peer port takes TLS; with
    /// `portUnification`, only when the peer opens with a TLS record.
    async fn upgrade(&self, tcp: TcpStream) -> Result<MaybeTls, PeerError> {
        let Some((acceptor, accept_plain)) = &self.tls else {
            return Ok(MaybeTls::Plain(tcp));
        };
        if *accept_plain {
            let mut first = [0u8; 1];
            let opens_tls = tcp.peek(&mut first).await? == 1 && first[0] == TLS_HANDSHAKE_RECORD;
            if !opens_tls {
                return Ok(MaybeTls::Plain(tcp));
            }
        }
        let tls = acceptor.accept(tcp).await.map_err(PeerError::Tls)?;
        Ok(MaybeTls::Server(Box::new(tls)))
    }

    /// Reads and checks the peer's hello, answers it; returns the peer's id.
    async fn handshake(&self, stream: &mut MaybeTls) -> Result<u64, PeerError> {
        let hello = Hello::read(stream).await?;
        if !self.knows(hello.from) {
            return Err(PeerError::UnknownPeer(hello.from));
        }
        if hello.to != self.id {
            return Err(PeerError::Misaddressed {
                to: hello.to,
                me: self.id,
            });
        }
        let answer = Hello {
            from: self.id,
            to: hello.from,
        };
        stream.write_all(&answer.encode()).await?;
        Ok(hello.from)
    }

    /// Registers `peer`'s new connection and closes its previous one: a
    /// peer reconnects only when it has given up on the old one, which may
    /// linger half-open here.
    fn claim(&self, peer: u64) -> InboundSlot<'_> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let token = self.token.child_token();
        let previous = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(peer, (generation, token.clone()));
        // Cancelled after the lock is released.
        if let Some((_, previous)) = previous {
            previous.cancel();
        }
        InboundSlot {
            acceptor: self,
            peer,
            generation,
            token,
        }
    }

    fn decode(&self, kind: u8, body: Bytes, peer: u64) -> Result<Inbound, PeerError> {
        match kind {
            KIND_RAFT => {
                // `parse_from_bytes` copies entry data out of the read
                // buffer; sharing it instead would let one small entry kept
                // in the raft log pin a whole read buffer.
                let message = Message::parse_from_bytes(&body).map_err(PeerError::Undecodable)?;
                let relayed =
                    is_relayed(&message) && (self.knows(message.from) || message.from == self.id);
                if message.from != peer && !relayed {
                    return Err(PeerError::Spoofed {
                        claimed: message.from,
                        peer,
                    });
                }
                if message.to != self.id {
                    return Err(PeerError::Misaddressed {
                        to: message.to,
                        me: self.id,
                    });
                }
                Ok(Inbound::Raft(message))
            }
            KIND_APP => Ok(Inbound::App {
                from: peer,
                payload: body,
            }),
            KIND_CONTROL => Ok(Inbound::Control {
                from: peer,
                control: decode_control(&body)?,
            }),
            KIND_SNAPSHOT => Ok(Inbound::Snapshot {
                from: peer,
                piece: decode_snapshot_piece(body)?,
                credit: PieceCredit::default(),
            }),
            other => Err(PeerError::UnknownKind(other)),
        }
    }
}

/// A peer's entry in `Acceptor::live`, removed when its connection ends
/// unless a newer connection has taken the place.
struct InboundSlot<'a> {
    acceptor: &'a Acceptor,
    peer: u64,
    generation: u64,
    token: CancellationToken,
}

impl Drop for InboundSlot<'_> {
    fn drop(&mut self) {
        let mut live = self
            .acceptor
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if live
            .get(&self.peer)
            .is_some_and(|(generation, _)| *generation == self.generation)
        {
            live.remove(&self.peer);
        }
    }
}

/// The next frame: `Ok(None)` on a clean end between frames.
async fn next_frame(
    stream: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    frame_bytes_max: usize,
) -> Result<Option<(u8, Bytes)>, PeerError> {
    loop {
        if let Some(frame) = decode_frame(buf, frame_bytes_max)? {
            return Ok(Some(frame));
        }
        if let Some(total) = frame_total(buf, frame_bytes_max)? {
            if total > READ_CHUNK_BYTES {
                return read_into_own_buffer(stream, buf, total).await.map(Some);
            }
        }
        buf.reserve(READ_CHUNK_BYTES);
        if stream.read_buf(buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(PeerError::Truncated)
            };
        }
    }
}

/// The rest of a frame of `total` bytes, of which `buf` holds the start,
/// read into memory of its own rather than into `buf`. A frame split
/// off the connection's buffer shares its memory: a snapshot piece waiting
/// for the disk would keep the whole buffer alive, and the follower copied
/// each piece out of it (a megabyte a piece). Read alone, the piece is
/// kept as it arrived, and `buf` never grows past a read's worth.
async fn read_into_own_buffer(
    stream: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    total: usize,
) -> Result<(u8, Bytes), PeerError> {
    let mut frame = BytesMut::with_capacity(total);
    frame.extend_from_slice(buf);
    buf.clear();
    while frame.len() < total {
        let missing = (total - frame.len()) as u64;
        if (&mut *stream).take(missing).read_buf(&mut frame).await? == 0 {
            return Err(PeerError::Truncated);
        }
    }
    frame.advance(LENGTH_BYTES);
    let kind = frame.get_u8();
    Ok((kind, frame.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::prelude::{Entry, MessageType};
    use std::future::Future;
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    /// Every test ends within this, pass or fail.
    const TEST_TIME_LIMIT: Duration = Duration::from_secs(30);
    /// How long one expected event may take.
    const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

    async fn within<F: Future>(test: F) -> F::Output {
        tokio::time::timeout(TEST_TIME_LIMIT, test)
            .await
            .expect("the test ran out of time")
    }

    fn config(id: u64, listen: SocketAddr, peers: &[(u64, SocketAddr)]) -> TransportConfig {
        TransportConfig::new(id, listen, peers.iter().copied().collect())
    }

    fn started(
        listener: TcpListener,
        config: TransportConfig,
    ) -> (Transport, UnboundedReceiver<Inbound>) {
        let (tx, rx) = unbounded_channel();
        let transport = Transport::start_on(listener, config, move |item| {
            let _ = tx.send(item);
        })
        .unwrap();
        (transport, rx)
    }

    async fn started_at(config: TransportConfig) -> (Transport, UnboundedReceiver<Inbound>) {
        let listener = TcpListener::bind(config.listen).await.unwrap();
        started(listener, config)
    }

    async fn loopback() -> TcpListener {
        TcpListener::bind("127.0.0.1:0").await.unwrap()
    }

    /// Servers 1..=n, each knowing all the others, with their inboxes.
    async fn cluster(n: u64) -> Vec<(Transport, UnboundedReceiver<Inbound>)> {
        let mut listeners = Vec::new();
        for _ in 0..n {
            listeners.push(loopback().await);
        }
        let addrs: Vec<(u64, SocketAddr)> = (1..=n)
            .zip(&listeners)
            .map(|(id, l)| (id, l.local_addr().unwrap()))
            .collect();
        let mut servers = Vec::new();
        for (listener, &(id, addr)) in listeners.into_iter().zip(&addrs) {
            let peers: Vec<_> = addrs.iter().copied().filter(|&(p, _)| p != id).collect();
            servers.push(started(listener, config(id, addr, &peers)));
        }
        for (transport, _) in &servers {
            for &(peer, _) in &addrs {
                if peer != transport.inner.id {
                    wait_connected(transport, peer).await;
                }
            }
        }
        servers
    }

    #[tokio::test]
    async fn a_peer_joins_and_leaves_while_the_others_run() {
        within(async {
            let mut servers = cluster(2).await;
            let listener = loopback().await;
            let addr = listener.local_addr().unwrap();
            let others: Vec<(u64, SocketAddr)> = servers
                .iter()
                .map(|(t, _)| (t.inner.id, t.inner.local_addr))
                .collect();
            let (third, mut third_rx) = started(listener, config(3, addr, &others));
            let mut with_third: HashMap<u64, SocketAddr> = others.iter().copied().collect();
            with_third.insert(3, addr);
            for (transport, _) in &servers {
                transport.set_peers(&with_third);
                wait_connected(transport, 3).await;
            }
            wait_connected(&third, 1).await;
            assert!(servers[0].0.send_app(3, Bytes::from_static(b"welcome")));
            assert_eq!(summary(&next(&mut third_rx).await), (1, "welcome".into()));
            assert!(third.send_app(1, Bytes::from_static(b"hello")));
            assert_eq!(summary(&next(&mut servers[0].1).await), (3, "hello".into()));

            // Server 1 forgets server 3: nothing goes there, and 3's
            // connection to 1 is refused at the hello.
            let without_third: HashMap<u64, SocketAddr> = with_third
                .iter()
                .filter(|(&id, _)| id != 3)
                .map(|(&id, &a)| (id, a))
                .collect();
            servers[0].0.set_peers(&without_third);
            assert_eq!(servers[0].0.peers(), [2]);
            assert!(!servers[0].0.send_app(3, Bytes::from_static(b"gone")));
            third.send_app(1, Bytes::from_static(b"still there?"));
            assert!(
                tokio::time::timeout(Duration::from_millis(300), servers[0].1.recv())
                    .await
                    .is_err(),
                "server 1 took a payload from a peer it no longer knows"
            );
            // Server 2 still talks to both.
            assert!(servers[1].0.send_app(1, Bytes::from_static(b"two")));
            assert_eq!(summary(&next(&mut servers[0].1).await), (2, "two".into()));
            third.shutdown().await;
            for (transport, _) in &servers {
                transport.shutdown().await;
            }
        })
        .await;
    }

    async fn wait_connected(transport: &Transport, peer: u64) {
        while !transport.connected_peers().contains(&peer) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn append(from: u64, to: u64, index: u64) -> Message {
        let mut message = Message::default();
        message.set_msg_type(MessageType::MsgAppend);
        message.from = from;
        message.to = to;
        message.term = 1;
        message.index = index;
        message.mut_entries().push(Entry {
            index: index + 1,
            term: 1,
            data: Bytes::from(format!("entry {index}")),
            ..Default::default()
        });
        message
    }

    async fn next(rx: &mut UnboundedReceiver<Inbound>) -> Inbound {
        tokio::time::timeout(EVENT_TIMEOUT, rx.recv())
            .await
            .expect("nothing arrived in time")
            .expect("the transport stopped")
    }

    /// What a test compares: (sender, raft index, app payload or control).
    fn summary(item: &Inbound) -> (u64, String) {
        match item {
            Inbound::Raft(m) => {
                assert_eq!(m.entries[0].data, format!("entry {}", m.index).as_bytes());
                (m.from, format!("raft {}", m.index))
            }
            Inbound::App { from, payload } => (*from, String::from_utf8(payload.to_vec()).unwrap()),
            Inbound::Control { from, control } => (*from, format!("{control:?}")),
            Inbound::Snapshot { from, piece, .. } => (*from, format!("{piece:?}")),
        }
    }

    /// Sends `count` items mixing raft, app, control and snapshot pieces from `from` to
    /// `to`, returning what the receiver should see.
    fn send_mixed(transport: &Transport, from: u64, to: u64, count: u64) -> Vec<(u64, String)> {
        let mut expected = Vec::new();
        for i in 0..count {
            if i % 3 == 2 {
                let payload = format!("app {i}");
                assert!(transport.send_app(to, Bytes::from(payload.clone())));
                expected.push((from, payload));
            } else if i % 5 == 4 {
                let control = if i % 2 == 0 {
                    Control::TermQuery
                } else {
                    Control::TermAnswer {
                        term: i << 40,
                        commit: i,
                    }
                };
                assert!(transport.send_control(to, control));
                expected.push((from, format!("{control:?}")));
            } else if i % 7 == 6 {
                let piece = SnapshotPiece {
                    index: i,
                    data: Bytes::from(vec![i as u8; i as usize]),
                    last: i % 2 == 0,
                };
                assert!(transport.send_snapshot_piece(to, piece.clone()));
                expected.push((from, format!("{piece:?}")));
            } else {
                assert_eq!(
                    transport.send_raft(vec![append(from, to, i)]),
                    Vec::<u64>::new()
                );
                expected.push((from, format!("raft {i}")));
            }
        }
        expected
    }

    async fn receive(rx: &mut UnboundedReceiver<Inbound>, count: usize) -> Vec<(u64, String)> {
        let mut seen = Vec::new();
        while seen.len() < count {
            seen.push(summary(&next(rx).await));
        }
        seen
    }

    /// Sends one raft message from `from` to `to` until it arrives (a
    /// fresh connection may take a moment to be usable).
    async fn reaches(from: &Transport, to: u64, rx: &mut UnboundedReceiver<Inbound>, index: u64) {
        let id = from.inner.id;
        loop {
            if from.send_raft(vec![append(id, to, index)]).is_empty() {
                assert_eq!(summary(&next(rx).await), (id, format!("raft {index}")));
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Reads until the other side closes; panics if it does not in time.
    async fn assert_closed(stream: &mut TcpStream) {
        let mut sink = [0u8; 256];
        let closed = tokio::time::timeout(EVENT_TIMEOUT, async {
            loop {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "the transport kept a bad connection open");
    }

    fn raw_frame(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut frame = ((body.len() + 1) as u32).to_be_bytes().to_vec();
        frame.push(kind);
        frame.extend_from_slice(body);
        frame
    }

    /// A raw connection that completed the hello as `from` with server `to`.
    async fn raw_peer(addr: SocketAddr, from: u64, to: u64) -> TcpStream {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(&Hello { from, to }.encode())
            .await
            .unwrap();
        let answer = Hello::read(&mut stream).await.unwrap();
        assert_eq!(answer, Hello { from: to, to: from });
        stream
    }

    #[tokio::test]
    async fn two_transports_exchange_raft_messages_and_app_payloads_in_order() {
        within(async {
            let mut servers = cluster(2).await;
            let (t2, mut rx2) = servers.pop().unwrap();
            let (t1, mut rx1) = servers.pop().unwrap();
            assert_eq!(t1.connected_peers(), vec![2]);
            assert_eq!(t2.connected_peers(), vec![1]);

            let to_2 = send_mixed(&t1, 1, 2, 600);
            let to_1 = send_mixed(&t2, 2, 1, 600);
            assert_eq!(receive(&mut rx2, to_2.len()).await, to_2);
            assert_eq!(receive(&mut rx1, to_1.len()).await, to_1);

            // Many messages in one call arrive in that order too.
            let batch: Vec<_> = (1000..1100).map(|i| append(1, 2, i)).collect();
            assert!(t1.send_raft(batch).is_empty());
            let expected: Vec<_> = (1000..1100).map(|i| (1, format!("raft {i}"))).collect();
            assert_eq!(receive(&mut rx2, 100).await, expected);
        })
        .await;
    }

    #[tokio::test]
    async fn a_reader_holds_back_while_its_snapshot_pieces_wait_for_the_disk() {
        within(async {
            let mut servers = cluster(2).await;
            let (_t2, mut rx2) = servers.pop().unwrap();
            let (t1, _rx1) = servers.pop().unwrap();
            let sent = SNAPSHOT_PIECES_UNWRITTEN_MAX + 4;
            for i in 0..sent {
                let piece = SnapshotPiece {
                    index: 7,
                    data: Bytes::from(vec![i as u8; 1000]),
                    last: i + 1 == sent,
                };
                assert!(t1.send_snapshot_piece(2, piece));
            }
            assert!(t1.send_raft(vec![append(1, 2, 99)]).is_empty());

            let mut held = Vec::new();
            for _ in 0..SNAPSHOT_PIECES_UNWRITTEN_MAX {
                held.push(next(&mut rx2).await);
            }
            let quiet = tokio::time::timeout(Duration::from_millis(300), rx2.recv()).await;
            assert!(quiet.is_err(), "a piece came past the credits held");

            // One written: one more comes.
            held.remove(0);
            let Inbound::Snapshot { piece, .. } = next(&mut rx2).await else {
                panic!("expected the next piece");
            };
            assert_eq!(piece.data[0], SNAPSHOT_PIECES_UNWRITTEN_MAX as u8);
            drop(held);
            let rest = receive(&mut rx2, 4).await;
            assert_eq!(rest.last(), Some(&(1, "raft 99".to_string())));
        })
        .await;
    }

    #[tokio::test]
    async fn three_transports_exchange_in_order_between_every_pair() {
        within(async {
            let mut servers = cluster(3).await;
            let mut expected: HashMap<u64, Vec<(u64, String)>> = HashMap::new();
            for from in 1..=3u64 {
                for to in (1..=3u64).filter(|&to| to != from) {
                    let sent = send_mixed(&servers[from as usize - 1].0, from, to, 200);
                    expected.entry(to).or_default().extend(sent);
                }
            }
            for to in 1..=3u64 {
                let want = &expected[&to];
                let seen = receive(&mut servers[to as usize - 1].1, want.len()).await;
                for from in (1..=3u64).filter(|&from| from != to) {
                    let of = |items: &[(u64, String)]| -> Vec<(u64, String)> {
                        items.iter().filter(|(f, _)| *f == from).cloned().collect()
                    };
                    assert_eq!(of(&seen), of(want), "from {from} to {to}");
                }
            }
        })
        .await;
    }

    #[tokio::test]
    async fn a_peer_started_later_is_reached_after_backoff() {
        within(async {
            let l1 = loopback().await;
            let a1 = l1.local_addr().unwrap();
            // Reserve an address for server 2, then free it: nothing listens
            // there until server 2 starts.
            let a2 = loopback().await.local_addr().unwrap();
            let (t1, mut rx1) = started(l1, config(1, a1, &[(2, a2)]));
            assert_eq!(
                t1.send_raft(vec![append(1, 2, 0)]),
                vec![2],
                "nobody is listening yet"
            );
            assert!(!t1.send_app(2, Bytes::from_static(b"early")));
            // Let a few connection attempts fail, so the backoff grows.
            tokio::time::sleep(Duration::from_millis(400)).await;
            assert!(t1.connected_peers().is_empty());

            let (t2, mut rx2) = started_at(config(2, a2, &[(1, a1)])).await;
            wait_connected(&t1, 2).await;
            reaches(&t1, 2, &mut rx2, 7).await;
            reaches(&t2, 1, &mut rx1, 8).await;
        })
        .await;
    }

    #[tokio::test]
    async fn a_restarted_peer_is_reconnected() {
        within(async {
            let mut servers = cluster(2).await;
            let (t2, mut rx2) = servers.pop().unwrap();
            let (t1, mut rx1) = servers.pop().unwrap();
            reaches(&t1, 2, &mut rx2, 1).await;
            let a1 = t1.local_addr();
            let a2 = t2.local_addr();

            t2.shutdown().await;
            drop(t2);
            while t1.connected_peers().contains(&2) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(
                t1.send_raft(vec![append(1, 2, 2)]),
                vec![2],
                "server 2 is down"
            );

            let (t2, mut rx2) = started_at(config(2, a2, &[(1, a1)])).await;
            wait_connected(&t1, 2).await;
            reaches(&t1, 2, &mut rx2, 3).await;
            reaches(&t2, 1, &mut rx1, 4).await;
            // Whatever the old server 2 received stays with it: its inbox
            // ended when it shut down.
        })
        .await;
    }

    /// Server 1 expects peers 2 (running) and 3 (played by raw sockets in
    /// the test). Every bad connection is closed; 2's traffic keeps
    /// flowing after each.
    #[tokio::test]
    async fn malformed_connections_are_closed_and_real_traffic_keeps_flowing() {
        within(async {
            let l1 = loopback().await;
            let l2 = loopback().await;
            let (a1, a2) = (l1.local_addr().unwrap(), l2.local_addr().unwrap());
            let a3 = loopback().await.local_addr().unwrap();
            let mut c1 = config(1, a1, &[(2, a2), (3, a3)]);
            c1.frame_bytes_max = 1 << 16;
            let (_t1, mut rx1) = started(l1, c1);
            let (t2, _rx2) = started(l2, config(2, a2, &[(1, a1)]));
            wait_connected(&t2, 1).await;
            let mut index = 0;
            // A fresh message from the real server 2 still gets through.
            macro_rules! traffic_flows {
                () => {
                    index += 1;
                    reaches(&t2, 1, &mut rx1, index).await;
                };
            }
            traffic_flows!();

            // Garbage instead of a hello.
            let mut garbage = TcpStream::connect(a1).await.unwrap();
            garbage.write_all(&[0xAB; 64]).await.unwrap();
            assert_closed(&mut garbage).await;
            traffic_flows!();

            // A hello with the wrong magic.
            let mut hello = Hello { from: 3, to: 1 }.encode();
            hello[..4].copy_from_slice(b"ZKZK");
            let mut wrong_magic = TcpStream::connect(a1).await.unwrap();
            wrong_magic.write_all(&hello).await.unwrap();
            assert_closed(&mut wrong_magic).await;
            traffic_flows!();

            // A hello from an id not in the peer list, or meant for another
            // server.
            for (from, to) in [(9, 1), (3, 2)] {
                let mut stranger = TcpStream::connect(a1).await.unwrap();
                stranger
                    .write_all(&Hello { from, to }.encode())
                    .await
                    .unwrap();
                assert_closed(&mut stranger).await;
            }
            traffic_flows!();

            // A good frame is delivered; then an oversized length closes the
            // connection before anything is reserved for it.
            let mut oversized = raw_peer(a1, 3, 1).await;
            let good = append(3, 1, 50).write_to_bytes().unwrap();
            oversized
                .write_all(&raw_frame(KIND_RAFT, &good))
                .await
                .unwrap();
            assert_eq!(summary(&next(&mut rx1).await), (3, "raft 50".to_string()));
            oversized
                .write_all(&(1u32 << 16 | 1).to_be_bytes())
                .await
                .unwrap();
            assert_closed(&mut oversized).await;
            traffic_flows!();

            // A raft message whose `from` is not the connection's peer.
            let mut spoofer = raw_peer(a1, 3, 1).await;
            let spoofed = append(2, 1, 60).write_to_bytes().unwrap();
            spoofer
                .write_all(&raw_frame(KIND_RAFT, &spoofed))
                .await
                .unwrap();
            assert_closed(&mut spoofer).await;
            traffic_flows!();

            // A proposal relayed by a server that is not the leader keeps
            // its original sender: delivered when that sender is a known
            // server, refused when it is not.
            let mut relay = raw_peer(a1, 3, 1).await;
            let mut relayed = append(2, 1, 70);
            relayed.set_msg_type(MessageType::MsgPropose);
            relay
                .write_all(&raw_frame(KIND_RAFT, &relayed.write_to_bytes().unwrap()))
                .await
                .unwrap();
            assert_eq!(summary(&next(&mut rx1).await), (2, "raft 70".to_string()));
            relayed.from = 9;
            relay
                .write_all(&raw_frame(KIND_RAFT, &relayed.write_to_bytes().unwrap()))
                .await
                .unwrap();
            assert_closed(&mut relay).await;
            traffic_flows!();

            // An unknown kind, an undecodable body, control messages of an
            // unknown tag or the wrong size, snapshot pieces without their
            // header or with a bad flag, an empty frame, a frame cut short.
            let bad_frames = [
                raw_frame(7, b"what"),
                raw_frame(KIND_RAFT, &[0xFF; 16]),
                raw_frame(KIND_CONTROL, &[9]),
                raw_frame(KIND_CONTROL, &[CONTROL_TERM_QUERY, 0]),
                raw_frame(KIND_CONTROL, &[CONTROL_TERM_ANSWER, 0, 0, 0, 0]),
                raw_frame(KIND_CONTROL, &[]),
                raw_frame(KIND_SNAPSHOT, &[0; 8]),
                raw_frame(KIND_SNAPSHOT, &[0, 0, 0, 0, 0, 0, 0, 1, 2, b'x']),
                0u32.to_be_bytes().to_vec(),
                raw_frame(KIND_APP, b"cut short")[..8].to_vec(),
            ];
            for bad in bad_frames {
                let mut peer = raw_peer(a1, 3, 1).await;
                peer.write_all(&bad).await.unwrap();
                peer.shutdown().await.unwrap();
                assert_closed(&mut peer).await;
                traffic_flows!();
            }

            // Nothing from the bad connections was delivered.
            assert!(rx1.try_recv().is_err());
            assert_eq!(t2.connected_peers(), vec![1]);
        })
        .await;
    }

    /// A fake server 2 completes the hello and then never reads, so the
    /// writer blocks on a full socket and the queue behind it fills.
    #[tokio::test]
    async fn a_full_queue_or_an_unknown_peer_is_reported() {
        within(async {
            let l1 = loopback().await;
            let a1 = l1.local_addr().unwrap();
            let fake = loopback().await;
            let a2 = fake.local_addr().unwrap();
            let (stuck_tx, stuck_rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let (mut stream, _) = fake.accept().await.unwrap();
                assert_eq!(
                    Hello::read(&mut stream).await.unwrap(),
                    Hello { from: 1, to: 2 }
                );
                stream
                    .write_all(&Hello { from: 2, to: 1 }.encode())
                    .await
                    .unwrap();
                // Keep the connection open, unread, for the rest of the test.
                let _ = stuck_tx.send(stream);
            });
            let mut c1 = config(1, a1, &[(2, a2)]);
            c1.queue_frames_max = 4;
            let (t1, _rx1) = started(l1, c1);
            wait_connected(&t1, 2).await;
            let _stuck = stuck_rx.await.unwrap();

            let payload = Bytes::from(vec![7u8; 256 << 10]);
            let mut sent = 0;
            while t1.send_app(2, payload.clone()) {
                sent += 1;
                // Let the writer fill the socket before the queue fills.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert!(sent >= 4, "at least the queue's worth went in ({sent})");
            assert_eq!(
                t1.send_raft(vec![append(1, 2, 0), append(1, 99, 0), append(1, 2, 1)]),
                vec![2, 99]
            );
            assert_eq!(
                t1.connected_peers(),
                vec![2],
                "a full queue is not a lost connection"
            );
        })
        .await;
    }

    /// Server 1 expects server 2 at an address where (a) something answers
    /// the hello as server 5, (b) server 3 listens, which refuses a hello
    /// meant for server 2. Neither is ever taken for server 2.
    #[tokio::test]
    async fn a_server_that_is_not_the_peer_expected_is_not_used() {
        within(async {
            let impostor = loopback().await;
            let a5 = impostor.local_addr().unwrap();
            tokio::spawn(async move {
                let mut held = Vec::new();
                while let Ok((mut stream, _)) = impostor.accept().await {
                    let _ = Hello::read(&mut stream).await;
                    let answer = Hello { from: 5, to: 1 }.encode();
                    let _ = stream.write_all(&answer).await;
                    held.push(stream);
                }
            });
            let l1 = loopback().await;
            let l3 = loopback().await;
            let (a1, a3) = (l1.local_addr().unwrap(), l3.local_addr().unwrap());
            let (_t3, _rx3) = started(l3, config(3, a3, &[(1, a1)]));
            let (t1, _rx1) = started(l1, config(1, a1, &[(2, a5), (4, a3)]));
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(t1.connected_peers().is_empty());
            assert_eq!(
                t1.send_raft(vec![append(1, 2, 0), append(1, 4, 0)]),
                vec![2, 4]
            );
        })
        .await;
    }

    #[tokio::test]
    async fn oversized_outbound_messages_are_refused() {
        within(async {
            let mut servers = cluster(2).await;
            let (_t2, mut rx2) = servers.pop().unwrap();
            let (t1, _rx1) = servers.pop().unwrap();
            let limit = t1.inner.frame_bytes_max;
            assert!(!t1.send_app(2, Bytes::from(vec![0; limit])));
            let mut big = append(1, 2, 0);
            big.mut_entries()[0].data = Bytes::from(vec![0; limit]);
            assert_eq!(t1.send_raft(vec![big]), vec![2]);
            assert!(t1.send_app(2, Bytes::from(vec![b'x'; limit - 1])));
            match next(&mut rx2).await {
                Inbound::App { from: 1, payload } => assert_eq!(payload.len(), limit - 1),
                other => panic!("unexpected {other:?}"),
            }
        })
        .await;
    }

    #[test]
    fn frames_are_checked_before_anything_is_reserved() {
        let max = 1 << 10;
        let mut buf = BytesMut::new();
        assert!(decode_frame(&mut buf, max).unwrap().is_none());
        buf.extend_from_slice(&[0, 0]);
        assert!(
            decode_frame(&mut buf, max).unwrap().is_none(),
            "half a length"
        );

        let mut oversized = BytesMut::from(&u32::MAX.to_be_bytes()[..]);
        let capacity = oversized.capacity();
        assert!(matches!(
            decode_frame(&mut oversized, max),
            Err(PeerError::Oversized { len, .. }) if len == u64::from(u32::MAX)
        ));
        assert_eq!(oversized.capacity(), capacity, "nothing reserved");
        assert!(matches!(
            decode_frame(&mut BytesMut::from(&[0u8; 4][..]), max),
            Err(PeerError::EmptyFrame)
        ));

        let mut out = Vec::new();
        assert_eq!(
            encode_frame(&Outbound::App(Bytes::from_static(b"one")), &mut out),
            Ok(None)
        );
        assert_eq!(
            encode_frame(&Outbound::Raft(append(1, 2, 5)), &mut out),
            Ok(None)
        );
        let mut buf = BytesMut::new();
        for byte in &out[..out.len() - 1] {
            buf.extend_from_slice(&[*byte]);
            let _ = decode_frame(&mut buf, max).unwrap();
        }
        buf.extend_from_slice(&out[out.len() - 1..]);
        let (kind, body) = decode_frame(&mut buf, max)
            .unwrap()
            .expect("the second frame");
        assert_eq!(kind, KIND_RAFT);
        assert_eq!(Message::parse_from_bytes(&body).unwrap(), append(1, 2, 5));
        assert!(buf.is_empty());
    }

    /// Frames written to a pipe a few kilobytes at a time, then its end.
    fn trickled(frames: &[Outbound], cut: usize) -> tokio::io::DuplexStream {
        let mut out = Vec::new();
        for frame in frames {
            if let Some(tail) = encode_frame(frame, &mut out).unwrap() {
                out.extend_from_slice(&tail);
            }
        }
        out.truncate(out.len() - cut);
        let (mut writer, reader) = tokio::io::duplex(READ_CHUNK_BYTES / 4);
        tokio::spawn(async move {
            for chunk in out.chunks(10_000) {
                writer.write_all(chunk).await.unwrap();
            }
        });
        reader
    }

    #[tokio::test]
    async fn a_frame_larger_than_a_read_is_read_into_memory_of_its_own() {
        within(async {
            let max = 4 << 20;
            let data: Bytes = (0..1 << 20).map(|i| (i % 251) as u8).collect();
            let frames = [
                Outbound::App(Bytes::from_static(b"before")),
                Outbound::Snapshot(SnapshotPiece {
                    index: 7,
                    data: data.clone(),
                    last: true,
                }),
                Outbound::App(Bytes::from_static(b"after")),
            ];
            let mut stream = trickled(&frames, 0);
            let mut buf = BytesMut::new();
            let mut read = Vec::new();
            while let Some(frame) = next_frame(&mut stream, &mut buf, max).await.unwrap() {
                assert!(
                    buf.capacity() <= 2 * READ_CHUNK_BYTES,
                    "the connection's buffer grew to {} bytes",
                    buf.capacity()
                );
                read.push(frame);
            }
            assert_eq!(read.len(), 3);
            assert_eq!(read[0], (KIND_APP, Bytes::from_static(b"before")));
            assert_eq!(read[1].0, KIND_SNAPSHOT);
            let piece = decode_snapshot_piece(read[1].1.clone()).unwrap();
            assert_eq!((piece.index, piece.last), (7, true));
            assert!(piece.data == data, "the piece's bytes, in order");
            assert_eq!(read[2], (KIND_APP, Bytes::from_static(b"after")));

            let mut cut_short = trickled(&frames[..2], 1);
            let mut buf = BytesMut::new();
            assert!(next_frame(&mut cut_short, &mut buf, max)
                .await
                .unwrap()
                .is_some());
            assert!(matches!(
                next_frame(&mut cut_short, &mut buf, max).await,
                Err(PeerError::Truncated)
            ));
        })
        .await;
    }

    #[test]
    fn hellos_round_trip_and_bad_ones_are_named() {
        let hello = Hello { from: 3, to: 1 };
        assert_eq!(Hello::decode(&hello.encode()).unwrap(), hello);
        let mut bad = hello.encode();
        bad[5] = 9;
        assert!(matches!(Hello::decode(&bad), Err(PeerError::Version(9))));
        bad[0] = b'Z';
        assert!(matches!(Hello::decode(&bad), Err(PeerError::BadMagic(_))));
    }

    #[test]
    fn configurations_that_cannot_work_are_refused() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert!(config(1, addr, &[(2, addr)]).validate().is_ok());
        assert!(config(1, addr, &[(1, addr)]).validate().is_err(), "itself");
        assert!(config(0, addr, &[(2, addr)]).validate().is_err(), "id 0");
        let mut zero_queue = config(1, addr, &[]);
        zero_queue.queue_frames_max = 0;
        assert!(zero_queue.validate().is_err());
        let mut zero_frames = config(1, addr, &[]);
        zero_frames.frame_bytes_max = 0;
        assert!(zero_frames.validate().is_err());
        let defaults = TransportConfig {
            id: 1,
            ..TransportConfig::default()
        };
        assert!(defaults.validate().is_ok());
        assert_eq!(defaults.frame_bytes_max, FRAME_BYTES_MAX_DEFAULT);
        assert!(TransportConfig::default().validate().is_err(), "id 0");
    }
}
