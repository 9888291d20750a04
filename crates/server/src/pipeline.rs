//! The request pipeline: what each decoded request becomes.
//!
//! ZooKeeper's CommitProcessor states three constraints; here is how each
//! is met:
//! 1. *A session's requests complete in the order they were sent.* A
//!    connection turns requests into [`Step`]s in arrival order and one
//!    writer task completes them in that order; `session_order` holds the
//!    whole rule of a session's order, events included.
//! 2. *Writes apply in zxid order.* Every write is one log entry; the apply
//!    loop applies entries in log order and the log index is the zxid.
//! 3. *No race between a write and a read that sets a watch.* A read is
//!    answered, and its watch registered, under the lock that the apply
//!    loop holds while it publishes a version and fires its triggers.
//!
//! Writes are stamped here with what must be decided once — time, the
//! session, its auth ids — and proposed at once; a read is answered from
//! the newest local version once it includes the session's own earlier
//! writes: at once, or by the apply loop right after the write it came
//! behind (`answer_held`), or by the writer in its turn after a sync.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use jute::{
    Acl, AddWatchMode, AddWatchRequest, ClientInfo, CreateMode, CreateRequest, CreateTTLRequest,
    ErrorCode, GetACLResponse, GetAllChildrenNumberResponse, GetChildrenPageResponse,
    GetDataResponse, GetEphemeralsResponse, Id, MultiOp, MultiResponse, MultiResult, OpCode,
    ReadOp, Request, SetACLRequest, SetDataRequest, StatResponse, SyncResponse, WatcherType,
    WhoAmIResponse,
};
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tree::{DataTree, Outcome, Txn, TxnOp};

use crate::audit::AuditedWrite;
use crate::reply::{self, Reply};
use crate::shared::{Committed, ConnectionHandle, Published, ReadGate, Shared, WatchEvent};
use crate::throttle::InProcess;
use crate::watch::{ConnectionId, WatchKind};

/// Bytes of child names in one page of Paddock's paginated getChildren,
/// whatever count the client asked for: a page stays far below any
/// client's frame limit (ZooKeeper's Java client takes 1 MiB), and the
/// time it holds the published tree stays short.
const CHILDREN_PAGE_BYTES_MAX: usize = 256 << 10;

/// What a request becomes, in the order the session sent it.
pub enum Step {
    /// An answer decided without waiting for anything.
    Reply(Bytes),
    /// A read answered at once, with its number (see `session_order`) and
    /// its share of the connection's answer budget, released once written.
    Answered {
        reply: Reply,
        number: u64,
        _budget: Option<OwnedSemaphorePermit>,
    },
    /// A write; its reply is built once it is applied.
    Write {
        xid: i32,
        /// The request's opcode, for per-connection statistics.
        op: i32,
        shape: ReplyShape,
        proposal: Proposal,
        received: Instant,
        /// What the audit log says of it once applied (`audit.enable`).
        audit: Option<AuditedWrite>,
    },
    /// A `sync`: answered once this server has applied everything the
    /// leader had committed when it arrived (raft's read index).
    Sync {
        xid: i32,
        /// Echoed in the reply; `None` when the client sent null.
        path: Option<String>,
        read_index: oneshot::Receiver<Option<u64>>,
    },
    /// A read that waits for the session's earlier writes.
    Read {
        xid: i32,
        request: Request,
        auth: Arc<Vec<Id>>,
        received: Instant,
    },
    /// An answer, after which the connection closes.
    ReplyThenClose(Bytes),
    /// Send everything before this, then close the connection.
    Close,
}

/// Where a write stands. The connection proposes it at once unless an
/// earlier read of the session is still waiting, which must not see it;
/// then it is proposed when its turn comes.
pub enum Proposal {
    /// With the gate the session's later reads wait at, once the
    /// connection has given it one.
    Pending(Txn, Option<Arc<ReadGate>>),
    /// Left to the writer, which has nothing of the session before it, to
    /// carry through the log on its own thread if it may
    /// (`Shared::propose_driving`).
    Driven(Txn, Option<Arc<ReadGate>>),
    /// A reconfig, which the leader checks before it can be a txn.
    Reconfig(Box<crate::reconfig::Ask>),
    Made(oneshot::Receiver<Committed>),
}

impl Proposal {
    /// Proposes it, unless it already is.
    pub fn make(self, shared: &Arc<Shared>) -> oneshot::Receiver<Committed> {
        match self {
            Proposal::Pending(txn, gate) => shared.propose_holding(&txn, gate),
            Proposal::Driven(txn, gate) => shared.propose_driving(&txn, gate),
            Proposal::Reconfig(ask) => crate::reconfig::propose(shared, *ask),
            Proposal::Made(committed) => committed,
        }
    }
}

/// How to present a write's outcome to the client that asked.
pub enum ReplyShape {
    /// `create`: the path alone.
    Path,
    /// `create2`, `createContainer`, `createTTL`: path and stat.
    PathAndStat,
    /// `setData`, `setACL`: the new stat.
    Stat,
    /// `delete`, `closeSession`: nothing but the header.
    Empty,
    /// `multi`: per op, whether a create answers with its stat.
    Multi(Vec<ReplyShape>),
    /// `reconfig`: the new configuration and its stat, as getData's.
    Config,
}

/// The session a connection serves, as the pipeline needs it.
#[derive(Clone)]
pub struct SessionContext {
    pub connection: ConnectionId,
    pub session_id: i64,
    pub timeout_ms: i32,
    pub auth: Arc<Vec<Id>>,
}

/// Turns one request into its step. Auth and SASL are not requests of the
/// session (`jute::Packet`): the connection answers them, since they change
/// the connection itself. `received`: when its last bytes were read, which
/// its latency counts from, as ZooKeeper's does.
pub fn step(
    shared: &Shared,
    session: &SessionContext,
    xid: i32,
    request: Request,
    received: Instant,
) -> Step {
    let audit = shared
        .config
        .audit_enabled
        .then(|| AuditedWrite::of(&request, session.session_id, &session.auth))
        .flatten();
    let mut step = decide(shared, session, xid, request, received);
    if let Step::Write { audit: slot, .. } = &mut step {
        *slot = audit;
    }
    step
}

fn decide(
    shared: &Shared,
    session: &SessionContext,
    xid: i32,
    request: Request,
    received: Instant,
) -> Step {
    let request_op = request.op_code();
    // The log waits for disk space, or the server is read-only without a
    // leader: a write cannot be made durable here, so it is refused at
    // once, as a read-only ZooKeeper server refuses one (the client learns
    // that nothing was done), while reads go on.
    let refuses_writes = shared.refuses_writes();
    let propose = |proposal: Proposal, shape: ReplyShape| {
        if refuses_writes {
            return Step::Reply(reply::header_only(
                xid,
                shared.last_zxid(),
                ErrorCode::NotReadOnly,
            ));
        }
        Step::Write {
            xid,
            op: request_op,
            shape,
            proposal,
            received,
            audit: None,
        }
    };
    let write = |op: TxnOp, shape: ReplyShape| {
        let txn = Txn {
            auth: session.auth.to_vec(),
            enforce_quota: shared.config.enforce_quota,
            ..crate::shared::stamped_txn(session.session_id, op)
        };
        propose(Proposal::Pending(txn, None), shape)
    };
    // A write refused before proposing still goes through the log, as
    // ZooKeeper's error txn does: it takes a zxid and keeps its place
    // among the session's writes.
    let refuse_write = |code: ErrorCode| write(TxnOp::Error { code }, ReplyShape::Empty);

    match request {
        // ZooKeeper answers a ping with the ping xid whatever the client sent.
        Request::Ping => Step::Reply(reply::header_only(
            jute::xid::PING,
            shared.last_zxid(),
            ErrorCode::Ok,
        )),
        Request::Create { op, req } => match create_op(shared, session.session_id, op, req, -1) {
            Ok((txn_op, shape)) => write(txn_op, shape),
            Err(err) => refuse_write(err),
        },
        Request::CreateTtl(req) => match create_ttl_op(shared, session.session_id, req) {
            Ok((txn_op, shape)) => write(txn_op, shape),
            Err(err) => refuse_write(err),
        },
        Request::Delete(req) => write(
            TxnOp::Delete {
                path: req.path,
                version: req.version,
            },
            ReplyShape::Empty,
        ),
        // A null path fails `PathUtils.validatePath` in ZooKeeper's prep
        // stage, which logs an error txn.
        Request::SetData(SetDataRequest { path: None, .. })
        | Request::SetAcl(SetACLRequest { path: None, .. }) => {
            refuse_write(ErrorCode::BadArguments)
        }
        Request::SetData(SetDataRequest {
            path: Some(path),
            data,
            version,
        }) => write(
            TxnOp::SetData {
                path,
                data,
                version,
            },
            ReplyShape::Stat,
        ),
        Request::SetAcl(SetACLRequest {
            path: Some(path),
            acl,
            version,
        }) => match refuse_unconfigured_acl(shared, &acl, |tree| {
            tree.set_acl_checks_before_acl(session.session_id, &path)
        }) {
            Ok(()) => write(TxnOp::SetAcl { path, acl, version }, ReplyShape::Stat),
            Err(err) => refuse_write(err),
        },
        Request::Multi(ops) => {
            let (txn_ops, shapes) = multi_ops(shared, session.session_id, ops);
            write(TxnOp::Multi(txn_ops), ReplyShape::Multi(shapes))
        }
        // A read-only session is this server's alone: closing it is the
        // connection's end, nothing to replicate.
        Request::CloseSession if shared.read_only.is_active() => {
            Step::Reply(reply::header_only(xid, shared.last_zxid(), ErrorCode::Ok))
        }
        Request::CloseSession => write(TxnOp::CloseSession, ReplyShape::Empty),
        request @ (Request::Exists(_)
        | Request::GetData(_)
        | Request::GetChildren(_)
        | Request::GetChildren2(_)
        | Request::GetChildrenPage(_)
        | Request::GetAcl(_)
        | Request::GetEphemerals(_)
        | Request::GetAllChildrenNumber(_)
        | Request::MultiRead(_)
        | Request::WhoAmI
        | Request::AddWatch(_)
        | Request::RemoveWatches(_)
        | Request::CheckWatches(_)
        | Request::SetWatches(_)
        | Request::SetWatches2(_)) => Step::Read {
            xid,
            request,
            auth: session.auth.clone(),
            received,
        },
        // A read-only server has no leader to sync with: ZooKeeper's
        // ReadOnlyRequestProcessor refuses a sync as it refuses a write.
        Request::Sync(_) if shared.read_only.is_active() => Step::Reply(reply::header_only(
            xid,
            shared.last_zxid(),
            ErrorCode::NotReadOnly,
        )),
        Request::Sync(req) => {
            let (answer, read_index) = oneshot::channel();
            // A stopped consensus drops the callback: the sync is lost and
            // the connection closes, as for a lost write.
            let _ = shared.consensus.read_index(Box::new(move |index| {
                let _ = answer.send(index);
            }));
            Step::Sync {
                xid,
                path: req.path,
                read_index,
            }
        }
        // PrepRequestProcessor's order: disabled, then standalone.
        Request::Reconfig(_) if !shared.config.reconfig_enabled => {
            refuse_write(ErrorCode::ReconfigDisabled)
        }
        Request::Reconfig(_) if shared.is_standalone() => refuse_write(ErrorCode::Unimplemented),
        Request::Reconfig(request) => {
            let ask = crate::reconfig::Ask {
                request,
                session_id: session.session_id,
                auth: session.auth.to_vec(),
            };
            propose(Proposal::Reconfig(Box::new(ask)), ReplyShape::Config)
        }
        // A bare `check` is not a request ZooKeeper 3.9 serves outside a
        // multi. ZooKeeper answers an invalid request type with
        // Unimplemented and closes. `UnimplementedRequestProcessor` answers
        // with the request's zxid, which is still -1.
        Request::Check(_) | Request::Unknown(_) => {
            Step::ReplyThenClose(reply::header_only(xid, -1, ErrorCode::Unimplemented))
        }
    }
}

/// The answer to a request whose body did not decode: `MarshallingError`,
/// through the log for a write (ZooKeeper's prep stage makes it an error
/// txn), at once for anything else.
pub fn malformed(
    shared: &Shared,
    session: &SessionContext,
    xid: i32,
    op: i32,
    received: Instant,
) -> Step {
    let is_write = OpCode::from_code(op).is_some_and(OpCode::is_write);
    if !is_write {
        return Step::Reply(reply::header_only(
            xid,
            shared.last_zxid(),
            ErrorCode::MarshallingError,
        ));
    }
    let txn = Txn {
        auth: session.auth.to_vec(),
        ..crate::shared::stamped_txn(
            session.session_id,
            TxnOp::Error {
                code: ErrorCode::MarshallingError,
            },
        )
    };
    Step::Write {
        xid,
        op,
        shape: ReplyShape::Empty,
        proposal: Proposal::Pending(txn, None),
        received,
        audit: None,
    }
}

/// `sasl` ids are valid only when SASL is configured, `x509` ids only when
/// clients can connect with TLS: ZooKeeper knows a scheme only once its
/// provider is registered, and without it its `fixupACL` finds such an id
/// invalid. That comes after the checks its prep stage makes first, which
/// `checks_before_acl` runs on the newest tree, so the first to fail wins
/// as there. (The tree takes both: it cannot know this server's
/// configuration.)
fn refuse_unconfigured_acl(
    shared: &Shared,
    acl: &[Acl],
    checks_before_acl: impl FnOnce(&DataTree) -> Result<(), ErrorCode>,
) -> Result<(), ErrorCode> {
    let unconfigured = |scheme: &str| match scheme {
        "sasl" => shared.sasl_users.is_none(),
        "x509" => shared.client_tls.is_none(),
        _ => false,
    };
    if !acl.iter().any(|a| unconfigured(&a.id.scheme)) {
        return Ok(());
    }
    checks_before_acl(&shared.published().tree)?;
    Err(ErrorCode::InvalidAcl)
}

/// A createTTL is a create with a TTL.
fn create_ttl_op(
    shared: &Shared,
    session_id: i64,
    req: CreateTTLRequest,
) -> Result<(TxnOp, ReplyShape), ErrorCode> {
    let create = CreateRequest {
        path: req.path,
        data: req.data,
        acl: req.acl,
        flags: req.flags,
    };
    create_op(shared, session_id, OpCode::CreateTtl, create, req.ttl)
}

/// Validates what depends on configuration rather than on the tree (that
/// is checked at apply time) and builds the create txn.
/// `ttl_ms` is -1 for every create but createTTL, as ZooKeeper sends it.
fn create_op(
    shared: &Shared,
    session_id: i64,
    op: OpCode,
    req: CreateRequest,
    ttl_ms: i64,
) -> Result<(TxnOp, ReplyShape), ErrorCode> {
    let CreateRequest {
        path,
        data,
        acl,
        flags,
    } = req;
    let requested = CreateMode::from_flags(flags).ok_or(ErrorCode::BadArguments)?;
    if requested.is_ttl() && !shared.config.extended_types_enabled {
        return Err(ErrorCode::Unimplemented);
    }
    let mode = node_mode(op, requested)?;
    refuse_unconfigured_acl(shared, &acl, |tree| {
        tree.create_checks_before_acl(session_id, &path, mode, ttl_ms)
            .map(drop)
    })?;
    let shape = if op == OpCode::Create {
        ReplyShape::Path
    } else {
        ReplyShape::PathAndStat
    };
    Ok((
        TxnOp::Create {
            path,
            data,
            acl,
            mode,
            ttl_ms,
        },
        shape,
    ))
}

/// The kind of node a create makes. In ZooKeeper the opcode picks the
/// txn and the flags only fill in what that txn carries
/// (`pRequest2TxnCreate`): a create or create2 with the container flag logs
/// a plain `CreateTxn`, so the node is persistent (go-zookeeper sends
/// containers that way); createContainer makes a container whatever its
/// flags. TTL modes keep their mode, so that the tree answers a missing or
/// invalid TTL with BadArguments, as `EphemeralType.validateTTL` does.
///
/// Two refusals where ZooKeeper does otherwise: createTTL with a non-TTL
/// mode (ZooKeeper 3.8 logs a txn that stops its server when applied), and
/// createContainer with a sequential flag (a sequential container, which
/// no client library asks for and our txn cannot express).
fn node_mode(op: OpCode, requested: CreateMode) -> Result<CreateMode, ErrorCode> {
    match op {
        _ if requested.is_ttl() => Ok(requested),
        OpCode::CreateTtl => Err(ErrorCode::BadArguments),
        OpCode::CreateContainer if requested.is_sequential() => Err(ErrorCode::BadArguments),
        OpCode::CreateContainer => Ok(CreateMode::Container),
        _ if requested.is_container() => Ok(CreateMode::Persistent),
        _ => Ok(requested),
    }
}

/// The txn ops of a multi and the shape of each op's answer. An op refused
/// here becomes an `Error` op that fails the multi at its place, as
/// ZooKeeper's prep stage logs an `ErrorTxn` for it: the client gets the
/// per-op results of a failed multi, not a failed request.
fn multi_ops(shared: &Shared, session_id: i64, ops: Vec<MultiOp>) -> (Vec<TxnOp>, Vec<ReplyShape>) {
    let refused = |code| (TxnOp::Error { code }, ReplyShape::Empty);
    let mut txn_ops = Vec::with_capacity(ops.len());
    let mut shapes = Vec::with_capacity(ops.len());
    for op in ops {
        let (txn_op, shape) = match op {
            // ZooKeeper stores a create2 inside a multi as a plain create,
            // and answers it as one: the path without a stat.
            MultiOp::Create { op, req } => {
                let op = if op == OpCode::Create2 {
                    OpCode::Create
                } else {
                    op
                };
                create_op(shared, session_id, op, req, -1).unwrap_or_else(refused)
            }
            MultiOp::CreateTtl(req) => {
                create_ttl_op(shared, session_id, req).unwrap_or_else(refused)
            }
            MultiOp::Delete(req) => (
                TxnOp::Delete {
                    path: req.path,
                    version: req.version,
                },
                ReplyShape::Empty,
            ),
            MultiOp::SetData(req) => (
                TxnOp::SetData {
                    path: req.path,
                    data: req.data,
                    version: req.version,
                },
                ReplyShape::Stat,
            ),
            MultiOp::Check(req) => (
                TxnOp::Check {
                    path: req.path,
                    version: req.version,
                },
                ReplyShape::Empty,
            ),
        };
        txn_ops.push(txn_op);
        shapes.push(shape);
    }
    (txn_ops, shapes)
}

/// The reply to a `sync` whose read index this server has applied.
pub fn sync_reply(shared: &Shared, xid: i32, path: Option<String>) -> Bytes {
    reply::with_body(xid, shared.last_zxid(), &SyncResponse { path })
}

/// The reply to an applied write.
pub fn write_reply(xid: i32, shape: &ReplyShape, committed: Committed) -> Bytes {
    let zxid = committed.zxid;
    match (shape, committed.outcome) {
        (_, Outcome::Failed(err)) => reply::header_only(xid, zxid, err),
        (ReplyShape::Path, Outcome::Created { path, .. }) => {
            reply::with_body(xid, zxid, &jute::CreateResponse { path })
        }
        (ReplyShape::PathAndStat, Outcome::Created { path, stat }) => {
            reply::with_body(xid, zxid, &jute::Create2Response { path, stat })
        }
        (ReplyShape::Stat, Outcome::SetData { stat } | Outcome::SetAcl { stat }) => {
            reply::with_body(xid, zxid, &StatResponse { stat })
        }
        (ReplyShape::Config, Outcome::Reconfigured { config, stat }) => reply::with_body(
            xid,
            zxid,
            &GetDataResponse {
                data: Some(config),
                stat,
            },
        ),
        (ReplyShape::Multi(shapes), Outcome::Multi(results)) => {
            let results = multi_results(shapes, results);
            reply::with_body(xid, zxid, &MultiResponse(results))
        }
        _ => reply::header_only(xid, zxid, ErrorCode::Ok),
    }
}

fn multi_results(
    shapes: &[ReplyShape],
    results: Vec<Result<Outcome, ErrorCode>>,
) -> Vec<MultiResult> {
    shapes
        .iter()
        .zip(results)
        .map(|(shape, result)| match (shape, result) {
            (_, Err(err)) => MultiResult::Error { err: err.code() },
            (ReplyShape::Path, Ok(Outcome::Created { path, .. })) => MultiResult::Create { path },
            (_, Ok(Outcome::Created { path, stat })) => MultiResult::Create2 { path, stat },
            (_, Ok(Outcome::SetData { stat })) => MultiResult::SetData { stat },
            (_, Ok(Outcome::Deleted)) => MultiResult::Delete,
            (_, Ok(_)) => MultiResult::Check,
        })
        .collect()
}

/// A read held behind a write of its session, for the apply loop to
/// answer right after it applies the write (see `session_order`).
pub struct HeldRead {
    pub xid: i32,
    pub request: Request,
    /// With the session's auth ids as they were when the read came.
    pub session: SessionContext,
    pub handle: Arc<ConnectionHandle>,
    pub received: Instant,
    /// Counted in process until its answer is queued.
    pub in_process: Option<InProcess>,
}

/// A held read's answer, on its way to the connection with its write's
/// outcome.
pub struct HeldAnswer {
    pub xid: i32,
    pub op: i32,
    pub answer: ReadAnswer,
    pub number: u64,
    /// Events a `setWatches` owes the client, to go before the answer.
    pub fired: Vec<WatchEvent>,
    pub received: Instant,
    pub answered: Instant,
    /// Counted in process until its answer is queued.
    pub _in_process: Option<InProcess>,
}

/// Answers the reads held behind a write (apply loop), in order, all under
/// one hold of the published lock: taken for each, the lock's line went
/// back and forth between the apply loop and the connections' readers.
/// Leaves out a read whose connection has closed meanwhile. What is costly
/// to encode is left to the connection's writer (`ReadAnswer::into_reply`).
pub fn answer_held(shared: &Shared, reads: Vec<HeldRead>) -> Vec<HeldAnswer> {
    if reads.is_empty() {
        return Vec::new();
    }
    let mut answers = Vec::with_capacity(reads.len());
    let mut published = shared.published();
    for read in reads {
        // Under the lock: a connection that ends is marked closed before
        // its watches are dropped under this lock, so a watch registered
        // here is dropped with them, never left behind.
        if read.handle.kill.is_cancelled() {
            continue;
        }
        let op = read.request.op_code();
        let mut fired = Vec::new();
        let (answer, number) = answer_read(
            &mut published,
            &read.session,
            &read.session.auth,
            read.xid,
            read.request,
            &mut fired,
            &read.handle.answers_built,
        );
        answers.push(HeldAnswer {
            xid: read.xid,
            op,
            answer,
            number,
            fired,
            received: read.received,
            answered: Instant::now(),
            _in_process: read.in_process,
        });
    }
    answers
}

/// A read's answer as built under the published lock. The parts that take
/// long to encode are encoded once the lock is released, by whoever sends
/// it: for a node of millions of children that takes seconds, in which
/// the apply loop and every other reader would otherwise wait.
pub enum ReadAnswer {
    /// As it goes out: a frame, or getData's answer (`Reply::Data`).
    Ready(Reply),
    Children(ChildrenAnswer),
    /// getAllChildrenNumber walks the whole subtree: on an O(1) clone.
    Count {
        tree: DataTree,
        zxid: i64,
        xid: i32,
        path: String,
        auth: Arc<Vec<Id>>,
    },
}

impl ReadAnswer {
    pub fn into_reply(self) -> Reply {
        match self {
            ReadAnswer::Ready(reply) => reply,
            ReadAnswer::Children(children) => Reply::Frame(children.into_frame()),
            ReadAnswer::Count {
                tree,
                zxid,
                xid,
                path,
                auth,
            } => Reply::Frame(match tree.all_children_number(&path, &auth) {
                Ok(total_number) => {
                    reply::with_body(xid, zxid, &GetAllChildrenNumberResponse { total_number })
                }
                Err(err) => reply::header_only(xid, zxid, err),
            }),
        }
    }
}

/// Answers a read from the newest applied version, `published` (locked by
/// the caller), registering its watch in the same critical section, and
/// numbers the answer there (see `session_order`). `fired` collects events
/// a `setWatches` owes the client at once, to be sent before this reply.
pub fn answer_read(
    published: &mut Published,
    session: &SessionContext,
    auth: &Arc<Vec<Id>>,
    xid: i32,
    request: Request,
    fired: &mut Vec<WatchEvent>,
    answers_built: &AtomicU64,
) -> (ReadAnswer, u64) {
    let number = answers_built.fetch_add(1, Ordering::AcqRel) + 1;
    let answer = match request {
        Request::GetChildren(req) => {
            ReadAnswer::Children(list_children(published, session, auth, xid, req, false))
        }
        Request::GetChildren2(req) => {
            ReadAnswer::Children(list_children(published, session, auth, xid, req, true))
        }
        Request::GetAllChildrenNumber(req) => ReadAnswer::Count {
            tree: published.tree.clone(),
            zxid: published.last_zxid,
            xid,
            path: req.path,
            auth: auth.clone(),
        },
        Request::GetData(req) => {
            ReadAnswer::Ready(LockedRead::new(published, session, xid).get_data(req, auth))
        }
        request => ReadAnswer::Ready(Reply::Frame(answer_locked(
            published, session, auth, xid, request, fired,
        ))),
    };
    (answer, number)
}

/// A getChildren answer, encoded after the published lock is released.
pub enum ChildrenAnswer {
    Listed {
        xid: i32,
        zxid: i64,
        names: tree::Children,
        stat: Option<jute::Stat>,
    },
    Refused(Bytes),
}

impl ChildrenAnswer {
    fn into_frame(self) -> Bytes {
        match self {
            ChildrenAnswer::Listed {
                xid,
                zxid,
                names,
                stat,
            } => reply::children(xid, zxid, &names, stat.as_ref()),
            ChildrenAnswer::Refused(frame) => frame,
        }
    }
}

/// getChildren (getChildren2 `with_stat`): an O(1) copy of the names, and
/// the watch registered, under the published lock.
fn list_children(
    published: &mut Published,
    session: &SessionContext,
    auth: &[Id],
    xid: i32,
    req: jute::GetChildrenRequest,
    with_stat: bool,
) -> ChildrenAnswer {
    let zxid = published.last_zxid;
    match published.tree.children(&req.path, auth) {
        Ok((names, stat)) => {
            if req.watch {
                published
                    .watches
                    .add(session.connection, WatchKind::Child, &req.path);
            }
            ChildrenAnswer::Listed {
                xid,
                zxid,
                names,
                stat: with_stat.then_some(stat),
            }
        }
        Err(err) => ChildrenAnswer::Refused(reply::header_only(xid, zxid, err)),
    }
}

fn answer_locked(
    published: &mut Published,
    session: &SessionContext,
    auth: &[Id],
    xid: i32,
    request: Request,
    fired: &mut Vec<WatchEvent>,
) -> Bytes {
    let mut read = LockedRead::new(published, session, xid);
    match request {
        Request::Exists(req) => read.exists(req, auth),
        Request::GetChildrenPage(req) => read.children_page(req, auth),
        Request::GetAcl(req) => match read.tree.get_acl(&req.path, auth) {
            Ok((acl, stat)) => read.answer(&GetACLResponse { acl, stat }),
            Err(err) => read.header_only(err),
        },
        Request::GetEphemerals(req) => {
            let ephemerals = read.tree.get_ephemerals(session.session_id, &req.prefix);
            read.answer(&GetEphemeralsResponse { ephemerals })
        }
        Request::MultiRead(ops) => read.multi_read(ops, auth),
        Request::WhoAmI => read.who_am_i(auth),
        Request::AddWatch(req) => read.add_watch(req),
        Request::RemoveWatches(req) => read.watches_of(req, WatchQuery::Remove),
        // checkWatches is removeWatches without the removing.
        Request::CheckWatches(req) => read.watches_of(req, WatchQuery::Check),
        Request::SetWatches(req) => read.set_watches(
            crate::rewatch::Reregister {
                relative_zxid: req.relative_zxid,
                data: req.data_watches,
                exist: req.exist_watches,
                child: req.child_watches,
                persistent: Vec::new(),
                persistent_recursive: Vec::new(),
            },
            fired,
        ),
        Request::SetWatches2(req) => read.set_watches(
            crate::rewatch::Reregister {
                relative_zxid: req.relative_zxid,
                data: req.data_watches,
                exist: req.exist_watches,
                child: req.child_watches,
                persistent: req.persistent_watches,
                persistent_recursive: req.persistent_recursive_watches,
            },
            fired,
        ),
        _ => read.header_only(ErrorCode::Unimplemented),
    }
}

/// One read answered under the published lock: the tree and the watches
/// as of `zxid`, for request `xid` of the session on `connection`.
struct LockedRead<'a> {
    tree: &'a DataTree,
    watches: &'a mut crate::watch::WatchRegistry,
    connection: ConnectionId,
    xid: i32,
    zxid: i64,
}

/// What removeWatches and checkWatches do with the watches they find.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WatchQuery {
    Remove,
    Check,
}

impl<'a> LockedRead<'a> {
    fn new(published: &'a mut Published, session: &SessionContext, xid: i32) -> Self {
        LockedRead {
            zxid: published.last_zxid,
            tree: &published.tree,
            watches: &mut published.watches,
            connection: session.connection,
            xid,
        }
    }

    fn answer(&self, body: &impl jute::Record) -> Bytes {
        reply::with_body(self.xid, self.zxid, body)
    }

    /// An answer of a header alone: an error, or OK with no body.
    fn header_only(&self, err: ErrorCode) -> Bytes {
        reply::header_only(self.xid, self.zxid, err)
    }

    fn watch(&mut self, kind: WatchKind, path: &str) {
        self.watches.add(self.connection, kind, path);
    }

    fn exists(&mut self, req: jute::PathAndWatch, auth: &[Id]) -> Bytes {
        match self.tree.exists_checked(&req.path, auth) {
            Ok(stat) => {
                if req.watch {
                    self.watch(WatchKind::Data, &req.path);
                }
                self.answer(&StatResponse { stat })
            }
            Err(ErrorCode::NoNode) => {
                // An exists watch on a missing node waits for its creation.
                // ZooKeeper's `statNode` adds it before looking the path
                // up, so an invalid path (but for a NUL, refused earlier)
                // keeps one too, which removeWatches finds.
                if req.watch {
                    self.watch(WatchKind::Data, &req.path);
                }
                self.header_only(ErrorCode::NoNode)
            }
            Err(err) => self.header_only(err),
        }
    }

    /// The node is shared, not copied: the writer encodes its data.
    fn get_data(&mut self, req: jute::PathAndWatch, auth: &[Id]) -> Reply {
        match self.tree.get_data_node(&req.path, auth) {
            Ok(node) => {
                if req.watch {
                    self.watch(WatchKind::Data, &req.path);
                }
                Reply::Data {
                    xid: self.xid,
                    zxid: self.zxid,
                    stat: node.client_stat(),
                    node,
                }
            }
            Err(err) => Reply::Frame(self.header_only(err)),
        }
    }

    fn children_page(&mut self, req: jute::GetChildrenPageRequest, auth: &[Id]) -> Bytes {
        let Ok(max_children @ 1..) = usize::try_from(req.max_children) else {
            return self.header_only(ErrorCode::BadArguments);
        };
        let page = self.tree.get_children_page(
            &req.path,
            auth,
            &req.start_after,
            max_children,
            CHILDREN_PAGE_BYTES_MAX,
        );
        match page {
            Ok((children, stat, more)) => {
                if req.watch {
                    self.watch(WatchKind::Child, &req.path);
                }
                self.answer(&GetChildrenPageResponse {
                    children,
                    stat,
                    more,
                })
            }
            Err(err) => self.header_only(err),
        }
    }

    fn multi_read(&self, ops: Vec<ReadOp>, auth: &[Id]) -> Bytes {
        let results = ops
            .into_iter()
            .map(|op| match op {
                ReadOp::GetData(path) => match self.tree.get_data(&path, auth) {
                    Ok((data, stat)) => MultiResult::GetData { data, stat },
                    Err(err) => MultiResult::Error { err: err.code() },
                },
                ReadOp::GetChildren(path) => match self.tree.get_children(&path, auth) {
                    Ok((children, _)) => MultiResult::GetChildren { children },
                    Err(err) => MultiResult::Error { err: err.code() },
                },
            })
            .collect();
        self.answer(&MultiResponse(results))
    }

    fn who_am_i(&self, auth: &[Id]) -> Bytes {
        let client_info = auth
            .iter()
            .map(|id| ClientInfo {
                auth_scheme: id.scheme.clone(),
                user: user_name(id),
            })
            .collect();
        self.answer(&WhoAmIResponse { client_info })
    }

    fn add_watch(&mut self, AddWatchRequest { path, mode }: AddWatchRequest) -> Bytes {
        // ZooKeeper's `WatcherMode.fromZooDef` throws on an unknown mode,
        // which its request processor answers as a marshalling error.
        let kind = match AddWatchMode::from_code(mode) {
            Some(AddWatchMode::Persistent) => WatchKind::Persistent,
            Some(AddWatchMode::PersistentRecursive) => WatchKind::PersistentRecursive,
            None => return self.header_only(ErrorCode::MarshallingError),
        };
        // ZooKeeper files a null path's watch under a null key, which no
        // event ever names: nothing to keep.
        if let Some(path) = path {
            self.watch(kind, &path);
        }
        // ZooKeeper answers addWatch with an ErrorResponse(0) body, which
        // the Java client reads.
        self.answer(&jute::ErrorResponse { err: 0 })
    }

    fn watches_of(&mut self, req: jute::WatchesRequest, query: WatchQuery) -> Bytes {
        // An unknown type makes `WatcherType.fromInt` throw: a marshalling
        // error, as for addWatch.
        let Some(watcher_type) = WatcherType::from_code(req.watcher_type) else {
            return self.header_only(ErrorCode::MarshallingError);
        };
        // A null path: ZooKeeper finds no watch to remove under it, and
        // checking walks its parents, dereferencing it.
        let Some(path) = req.path else {
            return self.header_only(match query {
                WatchQuery::Remove => ErrorCode::NoWatcher,
                WatchQuery::Check => ErrorCode::MarshallingError,
            });
        };
        let mut found = false;
        for &kind in watch_kinds(watcher_type) {
            found |= match query {
                WatchQuery::Remove => self.watches.remove(self.connection, kind, &path),
                WatchQuery::Check => self.watches.contains(self.connection, kind, &path),
            };
        }
        self.header_only(if found {
            ErrorCode::Ok
        } else {
            ErrorCode::NoWatcher
        })
    }

    fn set_watches(
        &mut self,
        reregister: crate::rewatch::Reregister,
        fired: &mut Vec<WatchEvent>,
    ) -> Bytes {
        reregister.apply(self.tree, self.watches, self.connection, fired);
        self.header_only(ErrorCode::Ok)
    }
}

/// What `whoAmI` shows of an id (`AuthenticationProvider.getUserName`):
/// a digest id `user:hash` shows as `user`.
fn user_name(id: &Id) -> String {
    match id.scheme.as_str() {
        "digest" => id.id.split(':').next().unwrap_or_default().to_string(),
        _ => id.id.clone(),
    }
}

/// ZooKeeper's `WatcherType`: 1 children, 2 data, 3 any, 4 persistent,
/// 5 persistent recursive.
fn watch_kinds(watcher_type: WatcherType) -> &'static [WatchKind] {
    match watcher_type {
        WatcherType::Children => &[WatchKind::Child],
        WatcherType::Data => &[WatchKind::Data],
        WatcherType::Any => &[
            WatchKind::Child,
            WatchKind::Data,
            WatchKind::Persistent,
            WatchKind::PersistentRecursive,
        ],
        WatcherType::Persistent => &[WatchKind::Persistent],
        WatcherType::PersistentRecursive => &[WatchKind::PersistentRecursive],
    }
}
