//! State every task of the server shares, and the locking rule for it.
//!
//! `published` pairs the newest applied tree with the watch registry under
//! one std mutex: a read that sets a watch looks at the tree and registers
//! the watch in one critical section, and the apply loop applies a txn to
//! the tree and fires its triggers in one critical section, so no change
//! can slip between a read and its watch. Lock order where two are
//! held: `published`, then `connections`. No lock is held across an await.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use consensus::Consensus;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tree::{DataTree, Outcome, Txn, TxnOp};

use crate::config::ServerConfig;
use crate::pipeline::{HeldAnswer, HeldRead};
use crate::session::{SessionIds, SessionTracker};
use crate::session_order::WriteGate;
use crate::stats::Stats;
use crate::watch::{ConnectionId, WatchRegistry};

/// What the apply loop hands back to the connection that proposed a txn.
pub struct Committed {
    /// The txn's log index.
    pub zxid: i64,
    pub outcome: Outcome,
    /// The answers to the session's reads held behind it, in order.
    pub reads: Vec<HeldAnswer>,
}

/// Completed by the apply loop; dropped if the proposal is lost.
pub struct Waiter {
    pub reply: oneshot::Sender<Committed>,
    /// Where the session's reads that came after this write wait for it
    /// (see `session_order`); none for a write no session waits on.
    pub gate: Option<Arc<ReadGate>>,
}

/// The reads of a session held behind one of its writes.
pub type ReadGate = WriteGate<HeldRead>;

pub struct Published {
    pub tree: DataTree,
    pub watches: WatchRegistry,
    /// Zxid (log index) of the last applied transaction: what replies
    /// report. Raft's own entries (a new leader's no-op) are not
    /// transactions and leave it alone, so a fresh server reports 0 as
    /// ZooKeeper does.
    pub last_zxid: i64,
    /// Log index of the last applied entry of any kind.
    pub applied_index: u64,
}

impl Drop for Published {
    /// Frees the tree elsewhere once the server is gone (the last
    /// reference to it dropped, so nothing reads or applies to it), and a
    /// process that exits then does not wait for it: the exit returns the
    /// memory at once. A caller in the same process that goes on still
    /// gets the memory back.
    fn drop(&mut self) {
        free_elsewhere(std::mem::take(&mut self.tree));
    }
}

/// Frees `tree` on a thread of its own: a tree that shares nothing with
/// the one serving is freed node by node, which held a stopping server
/// with 470k znodes of 10 KB for 1.4 s (jemalloc's frees and the nodes'
/// drops in the profile); a tree of 10M znodes is 30M allocations.
pub(crate) fn free_elsewhere(tree: DataTree) {
    // If no thread can start, the tree is freed here, as the closure
    // holding it is dropped.
    let _ = std::thread::Builder::new()
        .name("tree-free".into())
        .spawn(move || drop(tree));
}

/// A watch event on its way to one connection.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    pub zxid: i64,
    pub event: jute::EventType,
    pub path: String,
}

/// A watch event on its way to a connection, stamped with how many read
/// answers the connection had built when it was queued (see
/// `session_order`).
#[derive(Debug, Clone)]
pub struct QueuedEvent {
    pub event: WatchEvent,
    pub after_answers: u64,
}

/// What other tasks may do to a connection.
pub struct ConnectionHandle {
    pub remote: SocketAddr,
    pub session_id: AtomicI64,
    pub events: mpsc::Sender<QueuedEvent>,
    /// Read answers built for this connection, counted under the published
    /// lock so that events can be stamped against them.
    pub answers_built: AtomicU64,
    /// Closes the connection: the client is too slow, the session expired
    /// or moved to another connection.
    pub kill: CancellationToken,
    /// When the session was established here, in ms since the epoch.
    pub established_ms: i64,
    pub timeout_ms: i32,
    pub activity: Mutex<Activity>,
    /// The session's ids, checked against a node's ACL before an event
    /// about it is delivered, as ZooKeeper does.
    pub auth: Mutex<Arc<Vec<jute::Id>>>,
    pub received: AtomicU64,
    pub sent: AtomicU64,
}

/// What `cons` reports of a connection's latest request.
#[derive(Debug, Clone)]
pub struct Activity {
    /// ZooKeeper's four-letter name of the last operation (`GETD`, ...).
    pub last_op: &'static str,
    pub last_cxid: i32,
    pub last_zxid: i64,
    /// When the last answer was made; none yet before the first.
    pub last_response: Option<Instant>,
    pub latency: crate::stats::Latency,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            last_op: "NA",
            last_cxid: -1,
            last_zxid: -1,
            last_response: None,
            latency: Default::default(),
        }
    }
}

pub struct Shared {
    pub config: ServerConfig,
    pub server_id: u64,
    pub published: Mutex<Published>,
    pub sessions: SessionTracker,
    pub session_ids: SessionIds,
    pub consensus: Consensus<Waiter>,
    pub connections: Mutex<HashMap<ConnectionId, Arc<ConnectionHandle>>>,
    pub next_connection_id: AtomicU64,
    /// Open sockets per client address, handshake or not, for
    /// `maxClientCnxns`.
    pub sockets_per_ip: Mutex<HashMap<std::net::IpAddr, usize>>,
    /// Client sockets the open-files limit allows, its reserve for the
    /// server's own files kept (`open_files`); `None` when unlimited.
    pub client_sockets_max: Option<usize>,
    /// Requests in process and their limits.
    pub requests: Arc<crate::throttle::RequestGate>,
    pub connection_throttle: crate::throttle::ConnectionThrottle,
    /// TLS for clients; `None` when neither `secureClientPort` nor
    /// `client.portUnification` asks for it.
    pub client_tls: Option<Arc<crate::tls_listener::TlsService>>,
    pub stats: Stats,
    pub quota_report: crate::quota_report::QuotaReport,
    /// The user the server runs as, which the audit log names.
    pub server_user: String,
    /// Users of the JAAS `Server` section; `None` without one, when SASL
    /// is not configured.
    pub sasl_users: Option<crate::sasl::SaslUsers>,
    /// The ensemble and its peer network; `None` when standalone.
    pub peers: crate::ensemble::Peers,
    /// False until this server has caught up with the log: until then it
    /// answers four-letter words only, as ZooKeeper does.
    pub serving: std::sync::atomic::AtomicBool,
    /// The log index of the last applied entry, for `sync` to wait on.
    pub applied: tokio::sync::watch::Sender<u64>,
    pub read_only: crate::read_only::ReadOnlyMode,
    /// Identities lent to sessions the server's own tools open.
    pub delegations: crate::delegation::Delegations,
    /// Reconfig requests this server asked the leader to decide.
    pub reconfig_asks: crate::reconfig::Asks,
    /// Asks the leader of the ZooKeeper ensemble this server observes to
    /// revalidate a resumed session; `None` unless `observeZooKeeper`.
    pub revalidate: Option<migrate::Revalidate>,
}

impl Shared {
    pub fn published(&self) -> MutexGuard<'_, Published> {
        self.published.lock().expect("published state poisoned")
    }

    pub fn connections(&self) -> MutexGuard<'_, HashMap<ConnectionId, Arc<ConnectionHandle>>> {
        self.connections.lock().expect("connection table poisoned")
    }

    pub fn is_standalone(&self) -> bool {
        self.peers.is_none()
    }

    pub fn is_serving(&self) -> bool {
        self.serving.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Writes are refused here now: the log waits for disk space, or the
    /// server serves read-only clients without a leader.
    pub fn refuses_writes(&self) -> bool {
        self.consensus.status().disk_full() || self.read_only.is_active()
    }

    pub fn is_leader(&self) -> bool {
        self.consensus.status().role() == consensus::Role::Leader
    }

    pub fn last_zxid(&self) -> i64 {
        self.published().last_zxid
    }

    /// Proposes an encoded txn; the receiver resolves when it is applied,
    /// or errs if the proposal was lost.
    pub fn propose(&self, txn: &tree::Txn) -> oneshot::Receiver<Committed> {
        self.propose_holding(txn, None)
    }

    /// Proposes an encoded txn whose session's later reads wait at `gate`
    /// until the apply loop has applied it and answers them.
    pub fn propose_holding(
        &self,
        txn: &tree::Txn,
        gate: Option<Arc<ReadGate>>,
    ) -> oneshot::Receiver<Committed> {
        let (data, waiter, committed) = proposal(txn, gate);
        // A stopped consensus drops the waiter: the caller sees a lost
        // request and closes its connection, and the server is stopping.
        let _ = self.consensus.propose(data, waiter);
        committed
    }

    /// As `propose_holding`, for a client's last request in hand: a
    /// server alone with its log idle writes and syncs it, and hands it to
    /// the apply loop, on this thread (`Consensus::propose_driving`).
    pub fn propose_driving(
        &self,
        txn: &tree::Txn,
        gate: Option<Arc<ReadGate>>,
    ) -> oneshot::Receiver<Committed> {
        let (data, waiter, committed) = proposal(txn, gate);
        let _ = self.consensus.propose_driving(data, waiter);
        committed
    }

    pub fn kill_connection(&self, connection: ConnectionId) {
        if let Some(handle) = self.connections().get(&connection) {
            handle.kill.cancel();
        }
    }
}

/// A txn's proposal: its bytes, its waiter, and where its outcome arrives.
fn proposal(
    txn: &tree::Txn,
    gate: Option<Arc<ReadGate>>,
) -> (Vec<u8>, Waiter, oneshot::Receiver<Committed>) {
    let (reply, committed) = oneshot::channel();
    (txn.to_vec(), Waiter { reply, gate }, committed)
}

/// One accepted socket counted against its address's `maxClientCnxns`
/// and the server's `maxCnxns`; dropping it releases the slot however the
/// connection ends.
pub struct SocketSlot {
    shared: Arc<Shared>,
    ip: std::net::IpAddr,
}

/// Why a socket was refused, for the operator.
#[derive(Debug, thiserror::Error)]
pub enum SlotRefused {
    #[error("{ip} has {limit} connections already; raise maxClientCnxns to allow more")]
    PerAddress { ip: std::net::IpAddr, limit: usize },
    #[error("the server has {limit} connections already; raise maxCnxns to allow more")]
    Total { limit: usize },
    #[error(
        "the server has {limit} connections already, all its open-files limit allows beside \
         the files it needs itself; raise the limit (ulimit -n, LimitNOFILE)"
    )]
    OpenFiles { limit: usize },
}

impl SocketSlot {
    /// Takes a slot for `ip`, unless its limit, the server's (0: none) or
    /// the open files' is reached.
    pub fn take(shared: &Arc<Shared>, ip: std::net::IpAddr) -> Result<Self, SlotRefused> {
        let per_address = shared.config.max_client_cnxns;
        let total = shared.config.limits.max_cnxns;
        let mut counts = shared
            .sockets_per_ip
            .lock()
            .expect("socket counts poisoned");
        let open = counts.values().sum::<usize>();
        if total > 0 && open >= total {
            return Err(SlotRefused::Total { limit: total });
        }
        if let Some(limit) = shared.client_sockets_max.filter(|&limit| open >= limit) {
            return Err(SlotRefused::OpenFiles { limit });
        }
        let count = counts.entry(ip).or_insert(0);
        if per_address > 0 && *count >= per_address {
            return Err(SlotRefused::PerAddress {
                ip,
                limit: per_address,
            });
        }
        *count += 1;
        Ok(Self {
            shared: shared.clone(),
            ip,
        })
    }
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        let mut counts = self
            .shared
            .sockets_per_ip
            .lock()
            .expect("socket counts poisoned");
        if let Some(count) = counts.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// Milliseconds since the epoch, the time stamped into txns.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A txn of `session_id`, stamped with this server's clock now: the one
/// place a txn's time is decided. Every replica applies the time it
/// carries, never its own clock, as ZooKeeper's followers apply the
/// leader's. It carries no auth ids and no quota enforcement; a client's
/// write sets both.
pub fn stamped_txn(session_id: i64, op: TxnOp) -> Txn {
    Txn {
        time_ms: now_ms(),
        session_id,
        auth: Vec::new(),
        enforce_quota: false,
        op,
    }
}

pub fn next_connection_id(shared: &Shared) -> ConnectionId {
    shared.next_connection_id.fetch_add(1, Ordering::Relaxed)
}
