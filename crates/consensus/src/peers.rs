//! Raft's network across the servers of an ensemble. [`PeerNetwork`]
//! carries raft's messages, the fence's control messages and snapshots over
//! the [`Transport`], and takes in what the peers send: raft's messages and
//! control go to the consensus thread; a snapshot's file arrives in pieces
//! just before raft's snapshot message, is written into the snapshot store
//! as it comes, and the message is stepped only once the file is durable
//! here; application payloads (the state machine's own notes) go to the
//! caller.
//!
//! A snapshot stream runs on a blocking thread and paces itself on the
//! peer's queue, so what it holds in memory stays near
//! `SNAPSHOT_PIECES_IN_FLIGHT` pieces whatever the snapshot's size.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use raft::prelude::{Message, MessageType};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::fence::Control;
use crate::node::{Consensus, Network, SnapshotSent};
use crate::snapshot::Snapshots;
use crate::transport::{Inbound, PieceCredit, SnapshotPiece, Transport, TransportConfig};
use crate::Error;

/// Bytes of snapshot file per piece on the peer connection.
const SNAPSHOT_PIECE_BYTES: usize = 1 << 20;
/// Pieces a snapshot stream may have queued for its peer.
const SNAPSHOT_PIECES_IN_FLIGHT: usize = 8;
/// A snapshot stream that cannot queue a piece for this long gives up;
/// raft tries again.
const SNAPSHOT_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a paced stream looks at its peer's queue again.
const SNAPSHOT_PACE_POLL: Duration = Duration::from_millis(2);
/// A snapshot sent to a peer that asks for the same one again (it could not
/// install it: its disk full, say) waits this long after the last send
/// ended, twice as long with each send more, up to
/// `SNAPSHOT_RESEND_DELAY_MAX`. Raft asks again as soon as the peer
/// rejects its next append, and each send reads and carries the whole
/// file: a follower with a full disk had its leader stream 1.7 GB every
/// 0.6 s.
const SNAPSHOT_RESEND_DELAY_MIN: Duration = Duration::from_secs(1);
const SNAPSHOT_RESEND_DELAY_MAX: Duration = Duration::from_secs(60);

/// Raft's network over the peer transport. The transport starts after the
/// consensus thread (its inbound side steps that thread), so messages raft
/// sends before [`PeerNetwork::start`] are dropped; raft sends again.
pub struct PeerNetwork {
    transport: OnceLock<Transport>,
    snapshots: Arc<Snapshots>,
    /// How many snapshots the store keeps when one arrives.
    snapshots_retained: usize,
    /// Snapshot streams run on this runtime's blocking threads; raft asks
    /// for them from the consensus thread.
    runtime: tokio::runtime::Handle,
    resends: Arc<Resends>,
}

/// The last snapshot sent to each peer, to space out sending it again.
#[derive(Default)]
struct Resends(Mutex<HashMap<u64, LastSend>>);

struct LastSend {
    index: u64,
    /// Sends of this index before the last one.
    again: u32,
    ended: Instant,
}

impl Resends {
    /// How long a send of snapshot `index` to `to` should wait: nothing
    /// unless the last send to `to` was of the same snapshot.
    fn delay(&self, to: u64, index: u64, now: Instant) -> Duration {
        let sends = self.sends();
        let Some(last) = sends.get(&to).filter(|last| last.index == index) else {
            return Duration::ZERO;
        };
        let wait = SNAPSHOT_RESEND_DELAY_MIN
            .saturating_mul(1 << last.again.min(16))
            .min(SNAPSHOT_RESEND_DELAY_MAX);
        wait.saturating_sub(now.saturating_duration_since(last.ended))
    }

    fn ended(&self, to: u64, index: u64, now: Instant) {
        let mut sends = self.sends();
        let again = match sends.get(&to) {
            Some(last) if last.index == index => last.again + 1,
            _ => 0,
        };
        sends.insert(
            to,
            LastSend {
                index,
                again,
                ended: now,
            },
        );
    }

    fn sends(&self) -> std::sync::MutexGuard<'_, HashMap<u64, LastSend>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Peers whose snapshot file is arriving here. Their appends are dropped
/// meanwhile: raft's snapshot message waits until the file is durable, and
/// an append stepped before it would be rejected (this server's log does
/// not reach it), which makes the leader send the whole snapshot again.
/// Raft sends a dropped append again. A transfer quiet for
/// `SNAPSHOT_STALL_TIMEOUT` holds nothing back any more, so the leader of
/// a stream that died learns of it from the rejection.
#[derive(Default)]
struct Receiving(Mutex<HashMap<u64, Instant>>);

impl Receiving {
    fn piece_from(&self, peer: u64) {
        self.peers().insert(peer, Instant::now());
    }

    /// Ends the peer's import, calling `step` first under the same lock:
    /// an append the peer sends once raft has answered the snapshot then
    /// passes, and only after the snapshot message is on its way to raft.
    fn end(&self, peer: u64, step: impl FnOnce()) {
        let mut peers = self.peers();
        step();
        peers.remove(&peer);
    }

    fn holds_appends_from(&self, peer: u64) -> bool {
        self.peers()
            .get(&peer)
            .is_some_and(|last_piece| last_piece.elapsed() < SNAPSHOT_STALL_TIMEOUT)
    }

    fn peers(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Where what the peers send goes.
struct Inlets {
    raft: Box<dyn Fn(Message) + Send + Sync>,
    control: Box<dyn Fn(u64, Control) + Send + Sync>,
    app: Box<dyn Fn(u64, Bytes) + Send + Sync>,
}

impl PeerNetwork {
    /// Call within a tokio runtime.
    pub fn new(snapshots: Arc<Snapshots>, snapshots_retained: usize) -> Arc<Self> {
        Arc::new(Self {
            transport: OnceLock::new(),
            snapshots,
            snapshots_retained,
            runtime: tokio::runtime::Handle::current(),
            resends: Arc::default(),
        })
    }

    /// Binds the peer port and starts carrying messages: raft's and the
    /// control messages to `consensus`, application payloads to `app`
    /// (called on the transport's tasks in the order each peer sent them;
    /// it must not block).
    pub async fn start<W: Send + 'static>(
        self: &Arc<Self>,
        config: TransportConfig,
        consensus: Consensus<W>,
        app: impl Fn(u64, Bytes) + Send + Sync + 'static,
    ) -> io::Result<()> {
        let control = consensus.clone();
        self.start_with(
            config,
            Inlets {
                // A stopped consensus thread takes nothing more; the server
                // notices it stopping on its own.
                raft: Box::new(move |message| {
                    let _ = consensus.step(message);
                }),
                control: Box::new(move |from, message| {
                    let _ = control.control(from, message);
                }),
                app: Box::new(app),
            },
        )
        .await
    }

    async fn start_with(
        self: &Arc<Self>,
        config: TransportConfig,
        inlets: Inlets,
    ) -> io::Result<()> {
        let inlets = Arc::new(inlets);
        let receiving = Arc::new(Receiving::default());
        let (arriving_tx, arriving) = mpsc::unbounded_channel();
        let deliver = deliver(inlets.clone(), receiving.clone(), arriving_tx);
        let transport = Transport::start(config, deliver).await?;
        self.bind(transport, inlets, receiving, arriving);
        Ok(())
    }

    fn bind(
        &self,
        transport: Transport,
        inlets: Arc<Inlets>,
        receiving: Arc<Receiving>,
        arriving: mpsc::UnboundedReceiver<Arriving>,
    ) {
        let _ = self.transport.set(transport);
        let inbox = SnapshotInbox {
            snapshots: self.snapshots.clone(),
            retained: self.snapshots_retained,
            imports: HashMap::new(),
            receiving,
        };
        tokio::spawn(inbox.run(arriving, move |message| (inlets.raft)(message)));
    }

    /// Queues an application payload for peer `to`; false if it was
    /// dropped (not started, unknown or unconnected peer, full queue).
    pub fn send_app(&self, to: u64, payload: Bytes) -> bool {
        self.transport
            .get()
            .is_some_and(|transport| transport.send_app(to, payload))
    }

    /// Makes `peers` (every other server of the group, by id, at its peer
    /// port) the servers this one talks to, when the membership changes:
    /// links to new servers start, those to servers gone end.
    pub fn set_peers(&self, peers: &HashMap<u64, SocketAddr>) {
        if let Some(transport) = self.transport.get() {
            transport.set_peers(peers);
        }
    }

    /// Adds `peers` to the servers this one talks to, keeping the others.
    pub fn add_peers(&self, peers: &HashMap<u64, SocketAddr>) {
        if let Some(transport) = self.transport.get() {
            transport.add_peers(peers);
        }
    }

    /// Peers with a live outbound connection now, in id order.
    pub fn connected_peers(&self) -> Vec<u64> {
        self.transport
            .get()
            .map(Transport::connected_peers)
            .unwrap_or_default()
    }

    /// Stops the transport and waits for its tasks, so the peer port is
    /// free again. The transport holds a consensus handle and consensus
    /// holds this network: neither drop ends the other.
    pub async fn shutdown(&self) {
        if let Some(transport) = self.transport.get() {
            transport.shutdown().await;
        }
    }

    /// Queues an application payload for every peer, where it can.
    pub fn broadcast_app(&self, payload: Bytes) {
        if let Some(transport) = self.transport.get() {
            for peer in transport.peers() {
                transport.send_app(peer, payload.clone());
            }
        }
    }
}

impl Network for PeerNetwork {
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

    fn send_control(&self, to: u64, control: Control) -> bool {
        self.transport
            .get()
            .is_some_and(|transport| transport.send_control(to, control))
    }

    fn send_snapshot(&self, message: Message, done: SnapshotSent) {
        let Some(transport) = self.transport.get().cloned() else {
            done(false);
            return;
        };
        let snapshots = self.snapshots.clone();
        let resends = self.resends.clone();
        self.runtime.spawn_blocking(move || {
            let to = message.to;
            let index = message.get_snapshot().get_metadata().index;
            let delay = resends.delay(to, index, Instant::now());
            if !delay.is_zero() {
                tracing::warn!(
                    peer = to,
                    index,
                    "the peer asks again for the snapshot last sent to it, which it could not \
                     install (see its log); sending it again in {delay:?}"
                );
                std::thread::sleep(delay);
            }
            let streamed = stream_snapshot(&transport, &snapshots, to, index);
            resends.ended(to, index, Instant::now());
            match streamed {
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
}

/// Sorts what arrives: raft's snapshot message and snapshot pieces to the
/// snapshot inbox (in the order they came), appends from a peer whose
/// snapshot is arriving nowhere (see `Receiving`), everything else to its
/// inlet.
fn deliver(
    inlets: Arc<Inlets>,
    receiving: Arc<Receiving>,
    arriving: mpsc::UnboundedSender<Arriving>,
) -> impl Fn(Inbound) + Send + Sync + 'static {
    move |inbound| match inbound {
        Inbound::Raft(message) if message.get_msg_type() == MessageType::MsgSnapshot => {
            let _ = arriving.send(Arriving::Message(message));
        }
        Inbound::Raft(message)
            if message.get_msg_type() == MessageType::MsgAppend
                && receiving.holds_appends_from(message.from) =>
        {
            tracing::debug!(
                peer = message.from,
                index = message.index,
                "dropped an append that came before its leader's snapshot: raft sends it again"
            );
        }
        Inbound::Raft(message) => (inlets.raft)(message),
        Inbound::Control { from, control } => (inlets.control)(from, control),
        Inbound::App { from, payload } => (inlets.app)(from, payload),
        Inbound::Snapshot {
            from,
            piece,
            credit,
        } => {
            receiving.piece_from(from);
            let _ = arriving.send(Arriving::Piece {
                from,
                piece,
                credit,
            });
        }
    }
}

/// Streams the file of snapshot `index` to `to` piece by piece, pacing on
/// the peer's queue. Blocking: run it off the async workers.
fn stream_snapshot(
    transport: &Transport,
    snapshots: &Snapshots,
    to: u64,
    index: u64,
) -> Result<(), String> {
    let (found, mut pieces) = snapshots
        .latest_raw()
        .map_err(|e| e.to_string())?
        .ok_or("no snapshot on disk")?;
    if found != index {
        return Err(format!(
            "raft asked for snapshot {index}, the newest is {found}"
        ));
    }
    let mut sent_bytes = 0u64;
    loop {
        // The piece's own memory, which the queue then holds until it is
        // written to the peer's socket as it is.
        let data = pieces
            .next_piece(SNAPSHOT_PIECE_BYTES)
            .map_err(|e| e.to_string())?;
        let read = data.len();
        // A short read is the end of the file (an exact multiple of the
        // piece size ends with an empty last piece).
        let piece = SnapshotPiece {
            index,
            data: Bytes::from(data),
            last: read < SNAPSHOT_PIECE_BYTES,
        };
        let last = piece.last;
        queue_paced(transport, to, piece)?;
        sent_bytes += read as u64;
        if last {
            break;
        }
    }
    tracing::info!(peer = to, index, bytes = sent_bytes, "snapshot sent");
    Ok(())
}

fn queue_paced(transport: &Transport, to: u64, piece: SnapshotPiece) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if transport.queued_frames(to) < SNAPSHOT_PIECES_IN_FLIGHT
            && transport.send_snapshot_piece(to, piece.clone())
        {
            return Ok(());
        }
        if started.elapsed() > SNAPSHOT_STALL_TIMEOUT {
            return Err(format!(
                "peer {to} took no snapshot data for {SNAPSHOT_STALL_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(SNAPSHOT_PACE_POLL);
    }
}

/// A snapshot's pieces and raft's message for it, in the order their peer
/// sent them.
enum Arriving {
    Piece {
        from: u64,
        piece: SnapshotPiece,
        credit: PieceCredit,
    },
    Message(Message),
}

/// Snapshots arriving from peers, at most one per peer at a time.
struct SnapshotInbox {
    snapshots: Arc<Snapshots>,
    retained: usize,
    imports: HashMap<u64, Import>,
    receiving: Arc<Receiving>,
}

/// A piece on its way to the disk, holding its connection's credit until
/// it is written (or dropped with an import given up).
struct Unwritten {
    data: Bytes,
    _credit: PieceCredit,
}

impl AsRef<[u8]> for Unwritten {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// Written, the piece frees its connection's credit.
impl From<Unwritten> for Bytes {
    fn from(written: Unwritten) -> Bytes {
        written.data
    }
}

/// A snapshot being written: pieces go to a blocking task that writes them
/// into the store; `None` ends it, and dropping the sender aborts it.
struct Import {
    index: u64,
    pieces: std::sync::mpsc::Sender<Option<Unwritten>>,
    written: JoinHandle<Result<(), Error>>,
}

impl SnapshotInbox {
    async fn run(
        mut self,
        mut arriving: mpsc::UnboundedReceiver<Arriving>,
        step: impl Fn(Message),
    ) {
        while let Some(item) = arriving.recv().await {
            match item {
                Arriving::Piece {
                    from,
                    piece,
                    credit,
                } => self.piece(from, piece, credit),
                Arriving::Message(message) => {
                    let from = message.from;
                    let written = self.written(&message).await;
                    // The peer's import is over, whichever way: its appends
                    // now come after the snapshot, or bring a rejection
                    // that makes it send a snapshot again.
                    self.receiving.end(from, || {
                        if written {
                            step(message);
                        }
                    });
                }
            }
        }
    }

    fn piece(&mut self, from: u64, piece: SnapshotPiece, credit: PieceCredit) {
        let current = self.imports.get(&from).map(|import| import.index);
        if current != Some(piece.index) {
            // A newer snapshot replaces an unfinished one; dropping the old
            // sender aborts its write.
            self.imports.insert(from, self.start(piece.index));
        }
        let import = &self.imports[&from];
        // Kept as it arrived: a whole piece has memory of its own, and a
        // shorter one keeps at most a read's worth of the connection's
        // buffer alive while it waits for the disk.
        let _ = import.pieces.send(Some(Unwritten {
            data: piece.data,
            _credit: credit,
        }));
        if piece.last {
            let _ = import.pieces.send(None);
        }
    }

    fn start(&self, index: u64) -> Import {
        let (pieces, received) = std::sync::mpsc::channel();
        let snapshots = self.snapshots.clone();
        let retained = self.retained;
        let written =
            tokio::task::spawn_blocking(move || snapshots.install(index, retained, received));
        Import {
            index,
            pieces,
            written,
        }
    }

    /// Whether the file raft's snapshot `message` names arrived whole and
    /// is durable here.
    async fn written(&mut self, message: &Message) -> bool {
        let from = message.from;
        let index = message.get_snapshot().get_metadata().index;
        let Some(import) = self.imports.remove(&from).filter(|i| i.index == index) else {
            tracing::warn!(
                peer = from,
                index,
                "ignoring a snapshot message whose file did not arrive"
            );
            return false;
        };
        match import.written.await {
            Ok(Ok(())) => {
                tracing::info!(peer = from, index, "snapshot received");
                true
            }
            Ok(Err(error)) => {
                tracing::warn!(peer = from, index, "snapshot not installed: {error}");
                false
            }
            Err(join) => {
                tracing::warn!(peer = from, index, "snapshot writer failed: {join}");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::SnapshotMeta;
    use tokio::net::TcpListener;
    use tokio::sync::mpsc::UnboundedReceiver;

    const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

    struct Server {
        network: Arc<PeerNetwork>,
        snapshots: Arc<Snapshots>,
        raft: UnboundedReceiver<Message>,
        dir: tempfile::TempDir,
    }

    /// Servers 1 and 2 on loopback, each with its own snapshot store.
    async fn pair() -> (Server, Server) {
        let listeners = [
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
        ];
        let addrs: Vec<_> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let mut servers = Vec::new();
        for (i, listener) in listeners.into_iter().enumerate() {
            let id = i as u64 + 1;
            let other = 3 - id;
            let dir = tempfile::tempdir().unwrap();
            let snapshots = Arc::new(Snapshots::open(dir.path()).unwrap());
            let network = PeerNetwork::new(snapshots.clone(), 2);
            let (raft_tx, raft) = mpsc::unbounded_channel();
            let inlets = Arc::new(Inlets {
                raft: Box::new(move |message| {
                    let _ = raft_tx.send(message);
                }),
                control: Box::new(|_, _| {}),
                app: Box::new(|_, _| {}),
            });
            let receiving = Arc::new(Receiving::default());
            let (arriving_tx, arriving) = mpsc::unbounded_channel();
            let config = TransportConfig::new(
                id,
                addrs[i],
                HashMap::from([(other, addrs[other as usize - 1])]),
            );
            let deliver = deliver(inlets.clone(), receiving.clone(), arriving_tx);
            let transport = Transport::start_on(listener, config, deliver).unwrap();
            network.bind(transport, inlets, receiving, arriving);
            servers.push(Server {
                network,
                snapshots,
                raft,
                dir,
            });
        }
        let second = servers.pop().unwrap();
        (servers.pop().unwrap(), second)
    }

    fn save(snapshots: &Snapshots, index: u64, body: &[u8]) {
        let meta = SnapshotMeta {
            index,
            term: 1,
            membership: crate::Membership::new(vec![1, 2], vec![]),
        };
        snapshots.save(&meta, 2, |out| out.write_all(body)).unwrap();
    }

    fn raw_bytes(snapshots: &Snapshots) -> (u64, Vec<u8>) {
        let (index, mut pieces) = snapshots.latest_raw().unwrap().unwrap();
        let mut bytes = Vec::new();
        loop {
            let piece = pieces.next_piece(SNAPSHOT_PIECE_BYTES).unwrap();
            if piece.is_empty() {
                break (index, bytes);
            }
            bytes.extend_from_slice(&piece);
        }
    }

    fn snapshot_message(index: u64) -> Message {
        let mut message = Message::default();
        message.set_msg_type(MessageType::MsgSnapshot);
        message.from = 1;
        message.to = 2;
        message.mut_snapshot().mut_metadata().index = index;
        message
    }

    async fn sent(network: &PeerNetwork, message: Message) -> bool {
        loop {
            let (done_tx, done) = tokio::sync::oneshot::channel();
            network.send_snapshot(
                message.clone(),
                Box::new(move |ok| {
                    let _ = done_tx.send(ok);
                }),
            );
            if done.await.unwrap() {
                return true;
            }
            // Not connected yet: raft would try again too.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn next(raft: &mut UnboundedReceiver<Message>) -> Message {
        tokio::time::timeout(EVENT_TIMEOUT, raft.recv())
            .await
            .expect("raft's message did not arrive in time")
            .unwrap()
    }

    /// The index of the next snapshot message stepped.
    async fn next_snapshot_index(raft: &mut UnboundedReceiver<Message>) -> u64 {
        next(raft).await.get_snapshot().get_metadata().index
    }

    /// Bytes that differ from piece to piece, so a lost or reordered piece
    /// shows.
    fn body(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i / 7 % 251) as u8).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_snapshot_file_arrives_whole_before_its_message_is_stepped() {
        let (leader, mut follower) = pair().await;
        // Under one piece, several pieces, and exactly two pieces (which
        // ends with an empty last piece).
        let overhead = {
            save(&leader.snapshots, 1, b"");
            raw_bytes(&leader.snapshots).1.len()
        };
        let sizes = [
            1000,
            3 * SNAPSHOT_PIECE_BYTES + 12345,
            2 * SNAPSHOT_PIECE_BYTES - overhead,
        ];
        for (index, size) in (10..).zip(sizes) {
            save(&leader.snapshots, index, &body(size));
            assert!(sent(&leader.network, snapshot_message(index)).await);
            assert_eq!(next_snapshot_index(&mut follower.raft).await, index);
            assert_eq!(raw_bytes(&follower.snapshots), raw_bytes(&leader.snapshots));
        }
        assert_eq!(
            raw_bytes(&leader.snapshots).1.len(),
            2 * SNAPSHOT_PIECE_BYTES
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_damaged_snapshot_is_never_sent_whole() {
        let (leader, mut follower) = pair().await;
        save(&leader.snapshots, 10, &body(5000));
        assert!(sent(&leader.network, snapshot_message(10)).await);
        assert_eq!(next_snapshot_index(&mut follower.raft).await, 10);
        // A byte of the leader's file flipped in its second piece: the
        // first piece goes, the rest and raft's message never do.
        save(&leader.snapshots, 11, &body(3 * SNAPSHOT_PIECE_BYTES));
        let file = leader.dir.path().join("snap-000000000000000b.snap");
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[SNAPSHOT_PIECE_BYTES + 100] ^= 1;
        std::fs::write(&file, bytes).unwrap();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        leader.network.send_snapshot(
            snapshot_message(11),
            Box::new(move |ok| {
                let _ = done_tx.send(ok);
            }),
        );
        assert!(!done.await.unwrap(), "a damaged snapshot was sent");
        // The next good snapshot replaces the unfinished one.
        save(&leader.snapshots, 12, &body(5000));
        assert!(sent(&leader.network, snapshot_message(12)).await);
        assert_eq!(next_snapshot_index(&mut follower.raft).await, 12);
        assert_eq!(raw_bytes(&follower.snapshots), raw_bytes(&leader.snapshots));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_snapshot_message_without_its_file_is_not_stepped() {
        let (leader, mut follower) = pair().await;
        save(&leader.snapshots, 7, &body(5000));
        assert!(sent(&leader.network, snapshot_message(7)).await);
        next(&mut follower.raft).await;
        // Raft's message for a snapshot whose file never came, then a real
        // one: only the real one reaches raft.
        let transport = leader.network.transport.get().unwrap();
        assert!(transport.send_raft(vec![snapshot_message(8)]).is_empty());
        save(&leader.snapshots, 9, &body(5000));
        assert!(sent(&leader.network, snapshot_message(9)).await);
        assert_eq!(next_snapshot_index(&mut follower.raft).await, 9);
        assert_eq!(raw_bytes(&follower.snapshots).0, 9);
    }

    fn append_message(index: u64) -> Message {
        let mut message = Message::default();
        message.set_msg_type(MessageType::MsgAppend);
        message.from = 1;
        message.to = 2;
        message.index = index;
        message
    }

    /// An append stepped before the snapshot it follows would be rejected,
    /// and the rejection would make the leader send the snapshot again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appends_that_come_while_a_snapshot_arrives_are_dropped() {
        let (leader, mut follower) = pair().await;
        let transport = leader.network.transport.get().unwrap().clone();
        save(&leader.snapshots, 30, &body(3 * SNAPSHOT_PIECE_BYTES));
        let (_, whole) = raw_bytes(&leader.snapshots);
        let first_piece = SnapshotPiece {
            index: 29,
            data: Bytes::copy_from_slice(&whole[..100]),
            last: false,
        };
        while !transport.send_snapshot_piece(2, first_piece.clone()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(transport.send_raft(vec![append_message(29)]).is_empty());
        assert!(sent(&leader.network, snapshot_message(30)).await);
        assert_eq!(next_snapshot_index(&mut follower.raft).await, 30);
        // Once the snapshot is stepped, appends pass again.
        assert!(transport.send_raft(vec![append_message(30)]).is_empty());
        let after = next(&mut follower.raft).await;
        assert_eq!(after.get_msg_type(), MessageType::MsgAppend);
        assert_eq!(after.index, 30);
    }

    #[test]
    fn a_snapshot_asked_for_again_waits_longer_each_time() {
        let resends = Resends::default();
        let start = Instant::now();
        assert_eq!(resends.delay(2, 7, start), Duration::ZERO);
        let mut waits = Vec::new();
        for _ in 0..9 {
            resends.ended(2, 7, start);
            waits.push(resends.delay(2, 7, start).as_secs());
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        // The time since the last send counts; other snapshots and other
        // peers do not wait.
        let later = start + Duration::from_secs(45);
        assert_eq!(resends.delay(2, 7, later), Duration::from_secs(15));
        assert_eq!(resends.delay(2, 8, start), Duration::ZERO);
        assert_eq!(resends.delay(3, 7, start), Duration::ZERO);
        resends.ended(2, 8, start);
        assert_eq!(resends.delay(2, 8, start), Duration::from_secs(1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_newer_snapshot_replaces_an_unfinished_one() {
        let (leader, mut follower) = pair().await;
        let transport = leader.network.transport.get().unwrap().clone();
        let piece = |index, data: &[u8], last| SnapshotPiece {
            index,
            data: Bytes::copy_from_slice(data),
            last,
        };
        save(&leader.snapshots, 20, &body(3000));
        let (_, whole) = raw_bytes(&leader.snapshots);
        // Half of snapshot 19, never finished, then all of 20.
        loop {
            if transport.send_snapshot_piece(2, piece(19, &whole[..100], false)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(sent(&leader.network, snapshot_message(20)).await);
        assert_eq!(next_snapshot_index(&mut follower.raft).await, 20);
        assert_eq!(raw_bytes(&follower.snapshots), (20, whole));
    }
}
