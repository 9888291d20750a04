//! A Paddock server as the observer of a running Apache ZooKeeper
//! ensemble. It follows the leader as `paddock mirror` does
//! (`zk_learner`), but its copy is the server's own tree, changed by the
//! server's apply loop: what the leader commits arrives there as the
//! tree's own transactions (`tree_txn`), on the channel raft's committed
//! entries take, with ZooKeeper's zxids as log indexes. A SNAP becomes a
//! Paddock snapshot at the leader's zxid, which the apply loop restores.
//!
//! The server's writes and sessions go to the leader as a ZooKeeper
//! observer forwards its clients' (REQUEST, with the client's auth ids),
//! and each comes back as the INFORM that carries it, matched by session
//! id and cxid: that entry completes the writer's waiter. `sync` is
//! ZooKeeper's SYNC, answered in order. Every ping's answer names the
//! sessions this server's clients kept alive, as the leader alone expires
//! sessions. A client that resumes its session here has the leader
//! revalidate it (REVALIDATE), which also makes this server the session's
//! owner: the leader refuses a session's writes from any other.
//!
//! The takeover: `paddock takeover` creates [`TAKEOVER_PATH`] through the
//! leader. Every observer applies that create at the same zxid, the same
//! point of ZooKeeper's one history, and follows no further: its tree is
//! then the same as every other's, and the server goes on as a Paddock
//! ensemble from there.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use consensus::{
    Applying, CommittedEntry, Consensus, Membership, ReadIndexCallback, SnapshotMeta, Snapshots,
    Status, Unapplied, Upstream,
};
use jute::{
    CreateTTLRequest, DeleteRequest, MultiOp, MultiRequest, OpCode, Record, SetACLRequest,
    SetDataRequest, SyncRequest, WriteExt,
};
use tokio::sync::mpsc::UnboundedSender;
use tree::{Txn, TxnOp};

use crate::tree_txn::{reconfig_txn, tree_change, TreeChange};
use crate::zk_learner::{follow_with, Ended, Event, LearnerConfig, LearnerError, Replica};
use crate::zk_quorum::{fields, kind, QuorumPacket};
use crate::zk_tree::ZkTree;
use crate::zk_txn::{LoggedTxn, ZkTxn};

/// Lists the sessions this server's clients were heard from since it was
/// last asked, with their timeouts.
pub type SessionsTouched = Box<dyn FnMut() -> Vec<(i64, i32)> + Send>;

/// The znode whose creation ends the following: its data lists the
/// Paddock servers (`server.N=...` lines) that go on as an ensemble.
pub const TAKEOVER_PATH: &str = "/paddock-takeover";

/// Where the following ended for a takeover: the zxid that created
/// [`TAKEOVER_PATH`], the last one applied.
pub type TakeoverSender = tokio::sync::oneshot::Sender<i64>;

/// Gets the leader's word on a session a client resumes here:
/// `Some(valid)`, or `None` when no leader answered.
pub type RevalidateCallback = Box<dyn FnOnce(Option<bool>) + Send>;

/// Asks the leader whether session `id` (with its timeout in ms) lives,
/// and to move it to this server if so.
pub type Revalidate = Arc<dyn Fn(i64, i32, RevalidateCallback) + Send + Sync>;

/// What the server gives its observer.
pub struct ObserverParts<W> {
    pub learner: LearnerConfig,
    pub server_id: u64,
    /// The zxid the server's tree is at (its snapshot's index).
    pub zxid: i64,
    pub snapshots: Arc<Snapshots>,
    pub snapshots_retained: usize,
    pub committed: UnboundedSender<Applying<W>>,
    pub sessions_touched: SessionsTouched,
    /// Told the zxid of the takeover once it is applied.
    pub takeover: TakeoverSender,
}

/// Starts following the ensemble on a thread of its own; the handle is
/// the server's consensus, beside the way to revalidate sessions.
pub fn observe_zookeeper<W: Send + 'static>(
    parts: ObserverParts<W>,
) -> io::Result<(Consensus<W>, Revalidate)> {
    let status = Arc::new(Status::default());
    let forwarding = Arc::new(Mutex::new(Forwarding::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let learner = parts.learner.clone();
    let mut replica = ServerReplica {
        server_id: parts.server_id,
        zxid: parts.zxid,
        loading: None,
        leader: 0,
        epoch: 0,
        txns: 0,
        committed: parts.committed,
        snapshots: parts.snapshots,
        snapshots_retained: parts.snapshots_retained,
        status: status.clone(),
        forwarding: forwarding.clone(),
        sessions_touched: parts.sessions_touched,
        takeover: Some(parts.takeover),
        stop: stop.clone(),
    };
    let stopping = stop.clone();
    let revalidating = forwarding.clone();
    let revalidate: Revalidate = Arc::new(move |session_id, timeout_ms, callback| {
        revalidate_session(&revalidating, session_id, timeout_ms, callback)
    });
    let thread = std::thread::Builder::new()
        .name("zookeeper-observer".into())
        .spawn(move || run(&learner, &mut replica, &stopping))?;
    let send = move |request: Upstream<W>| match request {
        Upstream::Propose { data, waiter } => {
            forward(&forwarding, data, waiter);
            true
        }
        Upstream::ReadIndex { callback } => {
            forward_sync(&forwarding, callback);
            true
        }
        Upstream::Stop => {
            stop.store(true, Ordering::Relaxed);
            true
        }
    };
    Ok((
        Consensus::upstream(Arc::new(send), status, thread),
        revalidate,
    ))
}

/// Follows until stopped; a server whose ensemble is gone keeps serving
/// reads of what it has, and tries again.
fn run<W>(learner: &LearnerConfig, replica: &mut ServerReplica<W>, stop: &AtomicBool) {
    let mut report = |event: Event| match event {
        Event::Synced { server, how, zxid } => tracing::info!(
            zxid = format!("{zxid:#x}"),
            "synced by {how} from the ZooKeeper leader at {server}"
        ),
        Event::Lost { server, reason } => {
            tracing::warn!("lost the ZooKeeper leader at {server}: {reason}")
        }
        Event::Progress { .. } => {}
    };
    while !stop.load(Ordering::Relaxed) {
        match follow_with(learner, replica, stop, &mut report) {
            Ok(Ended::Stopped) => return,
            Ok(Ended::EnsembleGone { last }) => {
                tracing::warn!("no ZooKeeper server leads ({last}); still trying")
            }
            Err(error) => {
                tracing::error!("following ZooKeeper stopped: {error}");
                return;
            }
        }
    }
}

/// Requests on their way to the leader, and the connection they take.
struct Forwarding<W> {
    /// The connection to the leader, once synced.
    link: Option<TcpStream>,
    next_cxid: i32,
    /// Writers waiting for their INFORM, by session and cxid.
    pending: HashMap<(i64, i32), W>,
    /// Syncs waiting for the leader's SYNC, oldest first.
    syncs: VecDeque<ReadIndexCallback>,
    /// Resumed sessions waiting for the leader's REVALIDATE, by id (a
    /// session asked for again waits for the same answer).
    revalidations: HashMap<i64, Vec<RevalidateCallback>>,
}

impl<W> Default for Forwarding<W> {
    fn default() -> Self {
        Self {
            link: None,
            next_cxid: 1,
            pending: HashMap::new(),
            syncs: VecDeque::new(),
            revalidations: HashMap::new(),
        }
    }
}

impl<W> Forwarding<W> {
    fn take_cxid(&mut self) -> i32 {
        let cxid = self.next_cxid;
        self.next_cxid = if cxid == i32::MAX { 1 } else { cxid + 1 };
        cxid
    }

    /// Sends a packet to the leader; false when there is no leader or the
    /// write failed (the reader then sees the connection end).
    fn send(&mut self, packet: &QuorumPacket) -> bool {
        match &self.link {
            Some(link) => packet.write(&mut &*link).is_ok(),
            None => false,
        }
    }

    /// The connection ended: what waited on it is lost, as proposals are
    /// when raft's leader changes (their clients retry).
    fn unlink(&mut self) {
        self.link = None;
        self.pending.clear();
        for callback in self.syncs.drain(..) {
            callback(None);
        }
        for callback in self.revalidations.drain().flat_map(|(_, waiting)| waiting) {
            callback(None);
        }
    }
}

fn lock<W>(forwarding: &Mutex<Forwarding<W>>) -> MutexGuard<'_, Forwarding<W>> {
    forwarding.lock().expect("forwarding poisoned")
}

/// Forwards a proposed txn as the client request that makes it. A txn
/// ZooKeeper has no request for (a refusal decided here, a membership
/// change) is dropped: its client sees the request lost.
fn forward<W>(forwarding: &Mutex<Forwarding<W>>, data: Vec<u8>, waiter: W) {
    let Ok(txn) = Txn::decode(Bytes::from(data)) else {
        return;
    };
    let Some((op, body)) = request(&txn.op) else {
        tracing::warn!("{:?} has no ZooKeeper request: not forwarded", txn.op);
        return;
    };
    let mut forwarding = lock(forwarding);
    let cxid = forwarding.take_cxid();
    let mut data = BytesMut::new();
    data.write_i64(txn.session_id);
    data.write_i32(cxid);
    data.write_i32(op.code());
    data.extend_from_slice(&body);
    let mut packet = QuorumPacket::new(kind::REQUEST, -1, Some(data.to_vec()));
    packet.auth = txn.auth;
    if forwarding.send(&packet) {
        forwarding.pending.insert((txn.session_id, cxid), waiter);
    }
}

/// Asks the leader for a SYNC: it comes once everything the leader had
/// committed is on its way here.
fn forward_sync<W>(forwarding: &Mutex<Forwarding<W>>, callback: ReadIndexCallback) {
    let mut forwarding = lock(forwarding);
    let cxid = forwarding.take_cxid();
    let body = SyncRequest {
        path: Some("/".into()),
    }
    .to_bytes();
    let data = fields(|out| {
        out.i64(0)?;
        out.i32(cxid)?;
        out.i32(OpCode::Sync.code())
    });
    let packet = QuorumPacket::new(kind::REQUEST, -1, Some([data, body.to_vec()].concat()));
    if forwarding.send(&packet) {
        forwarding.syncs.push_back(callback);
    } else {
        callback(None);
    }
}

/// Sends REVALIDATE `{long id; int timeoutMs}` (ZooKeeper's
/// `Learner.validateSession`); the leader answers `{long id; boolean
/// valid}`.
fn revalidate_session<W>(
    forwarding: &Mutex<Forwarding<W>>,
    session_id: i64,
    timeout_ms: i32,
    callback: RevalidateCallback,
) {
    let mut forwarding = lock(forwarding);
    let data = fields(|out| {
        out.i64(session_id)?;
        out.i32(timeout_ms)
    });
    if forwarding.send(&QuorumPacket::new(kind::REVALIDATE, -1, Some(data))) {
        forwarding
            .revalidations
            .entry(session_id)
            .or_default()
            .push(callback);
    } else {
        callback(None);
    }
}

/// A committed create of the takeover znode (not a failed one, which
/// ZooKeeper logs as an error txn).
fn is_takeover(txn: &LoggedTxn) -> bool {
    matches!(&txn.txn, ZkTxn::Create(create) if create.path == TAKEOVER_PATH)
}

/// The leader's answer to a REVALIDATE: the session and whether it lives.
fn revalidated(data: &[u8]) -> Option<(i64, bool)> {
    let id = i64::from_be_bytes(data.get(..8)?.try_into().ok()?);
    let valid = *data.get(8)? != 0;
    Some((id, valid))
}

/// The client request (opcode and body) that makes `op`.
fn request(op: &TxnOp) -> Option<(OpCode, Bytes)> {
    Some(match op {
        TxnOp::CreateSession { timeout_ms, .. } => (
            OpCode::CreateSession,
            Bytes::copy_from_slice(&timeout_ms.to_be_bytes()),
        ),
        TxnOp::CloseSession => (OpCode::CloseSession, Bytes::new()),
        TxnOp::SetAcl { path, acl, version } => (
            OpCode::SetAcl,
            SetACLRequest {
                path: Some(path.clone()),
                acl: acl.clone(),
                version: *version,
            }
            .to_bytes(),
        ),
        TxnOp::Multi(ops) => {
            let ops = ops.iter().map(multi_op).collect::<Option<Vec<_>>>()?;
            (OpCode::Multi, MultiRequest(ops).to_bytes())
        }
        op => match multi_op(op)? {
            MultiOp::Create { op, req } => (op, req.to_bytes()),
            MultiOp::CreateTtl(req) => (OpCode::CreateTtl, req.to_bytes()),
            MultiOp::Delete(req) => (OpCode::Delete, req.to_bytes()),
            MultiOp::SetData(req) => (OpCode::SetData, req.to_bytes()),
            MultiOp::Check(req) => (OpCode::Check, req.to_bytes()),
        },
    })
}

/// The request of one op that a multi may hold.
fn multi_op(op: &TxnOp) -> Option<MultiOp> {
    Some(match op {
        TxnOp::Create {
            path,
            data,
            acl,
            mode,
            ttl_ms,
        } => MultiOp::create_in(
            *mode,
            OpCode::Create2,
            CreateTTLRequest {
                path: path.clone(),
                data: data.clone(),
                acl: acl.clone(),
                flags: mode.flags(),
                ttl: *ttl_ms,
            },
        ),
        TxnOp::Delete { path, version } => MultiOp::Delete(DeleteRequest {
            path: path.clone(),
            version: *version,
        }),
        TxnOp::SetData {
            path,
            data,
            version,
        } => MultiOp::SetData(SetDataRequest {
            path: path.clone(),
            data: data.clone(),
            version: *version,
        }),
        TxnOp::Check { path, version } => MultiOp::Check(jute::CheckVersionRequest {
            path: path.clone(),
            version: *version,
        }),
        _ => return None,
    })
}

/// The server's side of the learner: its tree is the apply loop's.
struct ServerReplica<W> {
    server_id: u64,
    zxid: i64,
    /// The leader's fuzzy snapshot and what followed it, until UPTODATE.
    loading: Option<ZkTree>,
    leader: u64,
    epoch: i64,
    txns: u64,
    committed: UnboundedSender<Applying<W>>,
    snapshots: Arc<Snapshots>,
    snapshots_retained: usize,
    status: Arc<Status>,
    forwarding: Arc<Mutex<Forwarding<W>>>,
    sessions_touched: SessionsTouched,
    /// `None` once the takeover is applied: nothing after it is.
    takeover: Option<TakeoverSender>,
    stop: Arc<AtomicBool>,
}

impl<W> ServerReplica<W> {
    /// Writes the synced tree as a snapshot at its zxid and has the apply
    /// loop restore it.
    fn hand_over(&mut self, zk: ZkTree) -> Result<(), LearnerError> {
        if zk.contains(TAKEOVER_PATH) {
            // Its history goes past the point where the others stopped.
            return Err(LearnerError::TakenOverMeanwhile);
        }
        let tree = zk.into_tree().map_err(LearnerError::Tree)?;
        let meta = SnapshotMeta {
            index: self.zxid as u64,
            term: self.epoch as u64,
            membership: Membership::new(vec![self.server_id], vec![]),
        };
        self.snapshots
            .save(&meta, self.snapshots_retained, |out| {
                tree.write_snapshot(out)
            })
            .map_err(|e| LearnerError::Save(e.to_string()))?;
        let _ = self.committed.send(Applying::Restore(meta));
        Ok(())
    }

    /// Follows no further: writes still on their way to the leader are
    /// lost to their clients, who retry on the ensemble to come.
    fn take_over(&mut self) {
        tracing::info!(
            zxid = format!("{:#x}", self.zxid),
            "{TAKEOVER_PATH} was created: following ZooKeeper no further"
        );
        self.stop.store(true, Ordering::Relaxed);
        lock(&self.forwarding).unlink();
        if let Some(takeover) = self.takeover.take() {
            let _ = takeover.send(self.zxid);
        }
    }

    fn publish(&self) {
        self.status
            .follow_upstream(self.leader, self.epoch as u64, self.zxid as u64);
    }
}

impl<W> Replica for ServerReplica<W> {
    fn zxid(&self) -> i64 {
        self.zxid
    }

    fn load(&mut self, tree: ZkTree, zxid: i64) {
        self.loading = Some(tree);
        self.zxid = zxid;
    }

    fn up_to_date(&mut self, leader: u64, epoch: i64) -> Result<(), LearnerError> {
        self.leader = leader.max(1);
        self.epoch = epoch;
        if let Some(zk) = self.loading.take() {
            self.hand_over(zk)?;
        }
        self.publish();
        Ok(())
    }

    fn apply(&mut self, txn: LoggedTxn) -> Result<(), String> {
        let zxid = txn.header.zxid;
        if self.takeover.is_none() {
            return Ok(());
        }
        if let Some(zk) = &mut self.loading {
            zk.replay(&txn);
        } else {
            let change = match tree_change(&txn) {
                TreeChange::Txn(change) => change,
                TreeChange::Config(config) => reconfig_txn(&txn, &config),
            };
            let mut data = BytesMut::new();
            change.encode(&mut data);
            let data = data.freeze();
            let key = (txn.header.client_id, txn.header.cxid);
            let waiter = lock(&self.forwarding).pending.remove(&key);
            let entry = CommittedEntry {
                index: zxid as u64,
                term: self.epoch as u64,
                data,
                waiter,
                membership: None,
            };
            let _ = self
                .committed
                .send(Applying::Entries(vec![entry], Unapplied::untracked()));
        }
        self.zxid = zxid;
        self.txns += 1;
        if self.loading.is_none() {
            self.publish();
            if is_takeover(&txn) {
                self.take_over();
            }
        }
        Ok(())
    }

    fn start_over(&mut self) {
        self.loading = None;
        self.zxid = 0;
    }

    fn txns(&self) -> u64 {
        self.txns
    }

    fn sessions_touched(&mut self) -> Vec<u8> {
        fields(|out| {
            for (id, timeout_ms) in (self.sessions_touched)() {
                out.i64(id)?;
                out.i32(timeout_ms)?;
            }
            Ok(())
        })
    }

    fn linked(&mut self, link: Option<TcpStream>) {
        let mut forwarding = lock(&self.forwarding);
        match link {
            Some(link) => forwarding.link = Some(link),
            None => forwarding.unlink(),
        }
    }

    fn other(&mut self, packet: QuorumPacket) {
        match packet.kind {
            kind::SYNC => {
                if let Some(callback) = lock(&self.forwarding).syncs.pop_front() {
                    callback(Some(self.zxid as u64));
                }
            }
            kind::REVALIDATE => {
                let Some((session_id, valid)) = packet.data.as_deref().and_then(revalidated) else {
                    tracing::warn!("a REVALIDATE from the leader too short to read: ignored");
                    return;
                };
                let waiting = lock(&self.forwarding).revalidations.remove(&session_id);
                for callback in waiting.into_iter().flatten() {
                    callback(Some(valid));
                }
            }
            other => tracing::warn!("ignored {} from the leader", kind::name(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use jute::{Acl, CreateMode, CreateRequest, Id};
    use tree::{DataTree, Outcome};

    use super::*;
    use crate::zk_txn::{CreateTxn, TxnHeader, ZkOwner};

    fn create(path: &str, mode: CreateMode, ttl_ms: i64) -> TxnOp {
        TxnOp::Create {
            path: path.into(),
            data: Some(Bytes::from_static(b"d")),
            acl: vec![Acl {
                perms: 31,
                id: Id::new("world", "anyone"),
            }],
            mode,
            ttl_ms,
        }
    }

    #[test]
    fn each_write_is_forwarded_as_the_request_that_makes_it() {
        let (op, body) = request(&create("/a", CreateMode::EphemeralSequential, 0)).unwrap();
        assert_eq!(op, OpCode::Create2);
        let sent = CreateRequest::from_bytes(body).unwrap();
        assert_eq!(
            (sent.path.as_str(), sent.flags),
            ("/a", CreateMode::EphemeralSequential.flags())
        );
        let (op, _) = request(&create("/c", CreateMode::Container, 0)).unwrap();
        assert_eq!(op, OpCode::CreateContainer);
        let (op, body) = request(&create("/t", CreateMode::PersistentWithTtl, 5000)).unwrap();
        assert_eq!(op, OpCode::CreateTtl);
        assert_eq!(CreateTTLRequest::from_bytes(body).unwrap().ttl, 5000);
        let session = TxnOp::CreateSession {
            timeout_ms: 30_000,
            password: Bytes::new(),
        };
        // ZooKeeper's learner sends only the timeout; the leader derives
        // the password from the session id.
        assert_eq!(
            request(&session),
            Some((
                OpCode::CreateSession,
                Bytes::copy_from_slice(&30_000i32.to_be_bytes())
            ))
        );
        assert_eq!(
            request(&TxnOp::CloseSession),
            Some((OpCode::CloseSession, Bytes::new()))
        );
        let multi = TxnOp::Multi(vec![
            create("/m", CreateMode::Persistent, 0),
            TxnOp::Delete {
                path: "/m".into(),
                version: -1,
            },
        ]);
        let (op, body) = request(&multi).unwrap();
        assert_eq!(op, OpCode::Multi);
        assert_eq!(MultiRequest::from_bytes(body).unwrap().0.len(), 2);
        let reconfig = TxnOp::Reconfig {
            members: "server.1=h:1:2\n".into(),
        };
        assert_eq!(
            request(&reconfig),
            None,
            "membership is ZooKeeper's to change"
        );
    }

    #[test]
    fn the_leader_s_revalidation_answer_is_read_and_a_short_one_refused() {
        let mut answer = 0x65_0000_0000_0007i64.to_be_bytes().to_vec();
        answer.push(1);
        assert_eq!(revalidated(&answer), Some((0x65_0000_0000_0007, true)));
        answer[8] = 0;
        assert_eq!(revalidated(&answer), Some((0x65_0000_0000_0007, false)));
        assert_eq!(revalidated(&answer[..8]), None);
    }

    fn logged(zxid: i64, txn: ZkTxn) -> LoggedTxn {
        LoggedTxn {
            header: TxnHeader {
                client_id: 0x65,
                cxid: 1,
                zxid,
                time_ms: 1_000,
                op: 0,
            },
            txn,
        }
    }

    #[test]
    fn only_a_committed_create_of_the_marker_is_the_takeover() {
        let create = |path: &str| {
            ZkTxn::Create(CreateTxn {
                op: OpCode::Create.code(),
                path: path.into(),
                data: Some(Bytes::from_static(b"server.1=h:1:2;3\n")),
                acl: vec![],
                owner: ZkOwner::Persistent,
                parent_cversion: 1,
            })
        };
        assert!(is_takeover(&logged(5, create(TAKEOVER_PATH))));
        assert!(!is_takeover(&logged(5, create("/paddock-takeover-not"))));
        let failed = ZkTxn::Error {
            code: jute::ErrorCode::NodeExists.code(),
        };
        assert!(!is_takeover(&logged(5, failed)));
    }

    #[test]
    fn a_reconfig_writes_the_configuration_byte_for_byte_as_zookeeper() {
        let zxid = 0x1_0000_0005;
        let config = format!(
            "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
             server.101=127.0.0.1:2890:3890:observer;127.0.0.1:2183\nversion={zxid:x}"
        );
        let set = ZkTxn::SetData {
            path: "/zookeeper/config".into(),
            data: Some(Bytes::from(config.clone())),
            version: -1,
        };
        let txn = reconfig_txn(&logged(zxid, set), config.as_bytes());
        let mut tree = DataTree::new();
        let applied = tree.apply(zxid, &txn);
        assert!(matches!(applied.outcome, Outcome::Reconfigured { .. }));
        let (data, stat) = tree.get_data("/zookeeper/config", &[]).unwrap();
        assert_eq!(data.as_deref(), Some(config.as_bytes()));
        assert_eq!(stat.mzxid, zxid);
    }
}
