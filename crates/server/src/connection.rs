//! One client connection: a four-letter word, or the connect handshake and
//! then two halves — a reader that turns frames into pipeline steps in
//! arrival order, and a writer that completes those steps in the same
//! order, interleaving watch events, and flushes once per drained queue.
//!
//! Bad input costs only this connection: a frame that is oversized,
//! malformed or cut off ends it with a log line and a counter, and nothing
//! a client sends can panic the server.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use jute::{
    ConnectRequest, ConnectResponse, ErrorCode, Id, OpCode, Packet, Reader, Record, Request,
    RequestHeader, SetSASLResponse,
};
use rand::RngCore as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tree::{Lookups, Outcome, TxnOp};

use crate::audit::AuditedWrite;
use crate::pipeline::{self, HeldAnswer, HeldRead, Proposal, SessionContext, Step};
use crate::read_ahead;
use crate::reply::{self, Reply};
use crate::session_order::{self, Barrier, EventOrder, Propose, SessionOrder};
use crate::shared::{
    next_connection_id, now_ms, stamped_txn, ConnectionHandle, QueuedEvent, ReadGate, Shared,
    WatchEvent,
};
use crate::throttle::{Admission, ConnectionKind, InProcess};

/// Steps a connection may have in flight before it stops reading its
/// socket: backpressure on a client that pipelines faster than we apply.
const STEPS_QUEUED_MAX: usize = 1000;
/// Watch events queued for one connection before it counts as not reading.
const EVENTS_QUEUED_MAX: usize = 100_000;
/// The writer flushes at least this often while steps keep coming.
const FLUSH_BYTES: usize = 64 * 1024;
/// Bytes of read answers one connection may have waiting for its writer;
/// past that its reader stops reading, so a client that never reads its
/// replies holds this much of the server's memory, not its whole backlog.
const ANSWER_BYTES_QUEUED_MAX: usize = 1 << 20;
/// How long a closing connection may take to send replies already built.
const FINAL_FLUSH_TIMEOUT: Duration = Duration::from_millis(200);
/// Bytes read from the socket per call, at least.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// ZooKeeper's session passwords are 16 bytes.
const PASSWORD_BYTES: usize = 16;
/// How long the handshake of a client that has seen a newer zxid than this
/// server has applied waits for it to arrive before the client is refused.
/// Right after a leader change a follower is usually a few milliseconds
/// behind the server the client left: waiting a little spares the client a
/// refusal, a round of the other servers and its reconnect backoff, while a
/// server cut off from the quorum still refuses soon enough for the client
/// to try the next one well within its connect timeout.
const CATCH_UP_WAIT: Duration = Duration::from_millis(250);

/// What the reader and the writer of one connection share.
struct Connection {
    shared: Arc<Shared>,
    handle: Arc<ConnectionHandle>,
    order: SessionOrder,
    /// Notified by the writer each time it proposes a write left to it
    /// (`SessionOrder::write_must_wait`).
    write_proposed: Notify,
    /// Cancelled when the connection must close, from either half or from
    /// elsewhere (expiry, a moved session, a client not reading).
    token: CancellationToken,
    /// Permits for ANSWER_BYTES_QUEUED_MAX bytes of answers in the queue.
    answer_budget: Arc<Semaphore>,
    /// This connection's requests in process (see `throttle`).
    in_process: Arc<AtomicUsize>,
}

/// A step on its way to the writer, with the request it answers counted
/// in process until the writer has queued its answer.
struct Queued {
    step: Step,
    _in_process: Option<InProcess>,
}

impl From<Step> for Queued {
    fn from(step: Step) -> Self {
        Self {
            step,
            _in_process: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ConnectionError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Frame(#[from] jute::FrameError),
    #[error("malformed request: {0}")]
    Decode(#[from] jute::DecodeError),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("no connect request within {0:?}")]
    HandshakeTimeout(Duration),
    #[error("client has seen zxid {seen:#x} but this server's last zxid is {ours:#x}; the client should try another server")]
    FromTheFuture { seen: i64, ours: i64 },
    #[error("session could not be created: {0}")]
    SessionNotCreated(String),
    #[error(
        "refusing a client that cannot take a read-only server (readonlymode.enabled, no leader)"
    )]
    NotReadOnlyClient,
    #[error("the leader of the observed ZooKeeper ensemble did not answer for the session; the client should try another server")]
    NoLeader,
}

/// Serves a plain-text connection.
pub async fn serve(shared: Arc<Shared>, stream: TcpStream, remote: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let (reader, writer) = stream.into_split();
    serve_halves(shared, reader, writer, remote, Vec::new()).await;
}

/// Serves a connection whose TLS handshake is done; `ids` are what its
/// certificate proved (`x509:<subject>`, and `super` for the superuser).
pub async fn serve_tls(
    shared: Arc<Shared>,
    stream: tokio_rustls::server::TlsStream<TcpStream>,
    remote: SocketAddr,
    ids: Vec<Id>,
) {
    let (reader, writer) = tokio::io::split(stream);
    serve_halves(shared, reader, writer, remote, ids).await;
}

async fn serve_halves<R, W>(
    shared: Arc<Shared>,
    reader: R,
    writer: W,
    remote: SocketAddr,
    ids: Vec<Id>,
) where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    match run(shared.clone(), reader, writer, remote, ids).await {
        Ok(()) => tracing::debug!(%remote, "connection closed"),
        Err(ConnectionError::Io(e)) => tracing::debug!(%remote, "connection ended: {e}"),
        Err(error) => {
            if matches!(
                error,
                ConnectionError::Frame(_) | ConnectionError::Decode(_) | ConnectionError::Truncated
            ) {
                shared.stats.bad_frames.fetch_add(1, Ordering::Relaxed);
            }
            tracing::warn!(%remote, "closing connection: {error}");
        }
    }
}

async fn run<R, W>(
    shared: Arc<Shared>,
    mut reader: R,
    mut writer: W,
    remote: SocketAddr,
    ids: Vec<Id>,
) -> Result<(), ConnectionError>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let handshake_timeout = shared.config.handshake_timeout();
    let first = tokio::time::timeout(handshake_timeout, async {
        while buf.len() < 4 {
            if reader.read_buf(&mut buf).await? == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
        }
        Ok(true)
    })
    .await
    .map_err(|_| ConnectionError::HandshakeTimeout(handshake_timeout))??;
    if !first {
        return Ok(());
    }
    let first4 = [buf[0], buf[1], buf[2], buf[3]];
    if let Some(word) = jute::four_letter_word(first4) {
        let answer = crate::four_letter::answer(&shared, word, remote);
        writer.write_all(answer.as_bytes()).await?;
        writer.shutdown().await?;
        return Ok(());
    }

    if !shared.is_serving() {
        // Like ZooKeeper before it has joined a quorum: no sessions yet;
        // the client tries another server or again later.
        tracing::debug!(%remote, "closing a client connection: not serving yet");
        return Ok(());
    }
    let max_frame = shared.config.jute_max_buffer;
    let Some(frame) = tokio::time::timeout(
        handshake_timeout,
        next_frame(&mut reader, &mut buf, max_frame, &mut Instant::now()),
    )
    .await
    .map_err(|_| ConnectionError::HandshakeTimeout(handshake_timeout))??
    else {
        return Ok(());
    };
    let connect = ConnectRequest::decode(&mut Reader::new(frame))?;
    if !connection_throttle_admits(&shared, &connect, remote) {
        return Ok(());
    }
    let connection = next_connection_id(&shared);
    let Some((session, connect_response)) =
        establish(&shared, &connect, connection, remote, &mut writer, ids).await?
    else {
        return Ok(());
    };

    let token = CancellationToken::new();
    let (events_tx, events) = mpsc::channel(EVENTS_QUEUED_MAX);
    let handle = Arc::new(ConnectionHandle {
        remote,
        session_id: AtomicI64::new(session.session_id),
        events: events_tx,
        answers_built: AtomicU64::new(0),
        kill: token.clone(),
        established_ms: now_ms(),
        timeout_ms: session.timeout_ms,
        activity: std::sync::Mutex::new(Default::default()),
        auth: std::sync::Mutex::new(session.auth.clone()),
        received: AtomicU64::new(0),
        sent: AtomicU64::new(0),
    });
    shared.connections().insert(connection, handle.clone());
    if let Some(previous) = shared
        .sessions
        .take_ownership(session.session_id, connection)
    {
        shared.kill_connection(previous);
    }

    let (steps_tx, steps) = mpsc::channel(STEPS_QUEUED_MAX);
    // The connect response goes out first, now that the connection is
    // registered and owns its session.
    steps_tx
        .try_send(Step::Reply(connect_response).into())
        .expect("a new channel has room for one step");
    let conn = Arc::new(Connection {
        shared: shared.clone(),
        handle: handle.clone(),
        order: SessionOrder::default(),
        write_proposed: Notify::new(),
        token: token.clone(),
        answer_budget: Arc::new(Semaphore::new(ANSWER_BYTES_QUEUED_MAX)),
        in_process: Arc::default(),
    });
    let writer_session = SessionContext {
        connection,
        session_id: session.session_id,
        timeout_ms: session.timeout_ms,
        auth: session.auth.clone(),
    };
    let writer_task = tokio::spawn(write_loop(
        conn.clone(),
        writer,
        steps,
        events,
        writer_session,
    ));
    let result = read_loop(&conn, &mut reader, buf, session, steps_tx).await;
    // The writer finishes what was read (a closeSession reply, say) unless
    // the connection was killed; then everything it held is released.
    let _ = writer_task.await;
    token.cancel();
    shared.connections().remove(&connection);
    shared.published().watches.remove_connection(connection);
    shared
        .sessions
        .release_ownership(handle.session_id.load(Ordering::Relaxed), connection);
    result
}

/// ZooKeeper's connection throttle, checked on the connect request: a
/// refused connection is closed unanswered, and its client tries another
/// server.
fn connection_throttle_admits(
    shared: &Shared,
    connect: &ConnectRequest,
    remote: SocketAddr,
) -> bool {
    let kind = if connect.session_id == 0 {
        ConnectionKind::NewSession
    } else {
        ConnectionKind::Renewal
    };
    if !shared.connection_throttle.admit(kind) {
        shared
            .stats
            .connections_rejected
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(%remote, "connection throttle rejected a connection (connection_throttle_* in zoo.cfg)");
        return false;
    }
    shared
        .stats
        .connection_request_count
        .fetch_add(1, Ordering::Relaxed);
    true
}

/// Waits, at most [`CATCH_UP_WAIT`], until this server has applied `seen`,
/// the newest zxid its client has seen: ZooKeeper's guarantee that a client
/// never sees the tree go back in time when it changes servers.
async fn caught_up_to(shared: &Shared, seen: i64) -> Result<(), ConnectionError> {
    let mut applied = shared.applied.subscribe();
    let caught_up = async {
        loop {
            // Marked seen before the check, so that anything applied after
            // it wakes the wait.
            applied.borrow_and_update();
            if shared.last_zxid() >= seen {
                return true;
            }
            if applied.changed().await.is_err() {
                return false;
            }
        }
    };
    match tokio::time::timeout(CATCH_UP_WAIT, caught_up).await {
        Ok(true) => Ok(()),
        Ok(false) | Err(_) => Err(ConnectionError::FromTheFuture {
            seen,
            ours: shared.last_zxid(),
        }),
    }
}

/// Creates a session or resumes one, returning it with the connect
/// response to send once the connection is registered (so that a client
/// that has its response is visible to `stat` and to its session's owner).
/// `None` when the client was refused with an expired-session response.
async fn establish<W: AsyncWrite + Unpin>(
    shared: &Shared,
    connect: &ConnectRequest,
    connection: u64,
    remote: SocketAddr,
    writer: &mut W,
    ids: Vec<Id>,
) -> Result<Option<(SessionContext, Bytes)>, ConnectionError> {
    caught_up_to(shared, connect.last_zxid_seen).await?;
    let timeout_ms = shared.config.negotiate_session_timeout(connect.timeout_ms);
    let read_only_mode = shared.read_only.is_active();
    if read_only_mode && connect.read_only != Some(true) {
        return Err(ConnectionError::NotReadOnlyClient);
    }
    let read_only = connect.read_only.map(|_| read_only_mode);
    let (session_id, password) = if connect.session_id == 0 && read_only_mode {
        local_session(shared)
    } else if connect.session_id == 0 {
        create_session(shared, timeout_ms).await?
    } else if let Some(password) = resume_session(shared, connect, timeout_ms).await? {
        (connect.session_id, password)
    } else {
        // ZooKeeper's answer to an unknown session or a wrong password:
        // timeout 0, which clients read as expired.
        tracing::info!(%remote, session = format!("{:#x}", connect.session_id), "refusing reconnect: session expired or wrong password");
        let refusal = ConnectResponse {
            protocol_version: 0,
            timeout_ms: 0,
            session_id: 0,
            password: Bytes::from_static(&[0; PASSWORD_BYTES]),
            read_only,
        };
        writer.write_all(&reply::bare(&refusal)).await?;
        writer.shutdown().await?;
        return Ok(None);
    };
    let response = ConnectResponse {
        protocol_version: 0,
        timeout_ms,
        session_id,
        password,
        read_only,
    };
    tracing::debug!(%remote, session = format!("{session_id:#x}"), timeout_ms, "session established");
    Ok(Some((
        SessionContext {
            connection,
            session_id,
            timeout_ms,
            auth: Arc::new(merge_ids(&[crate::auth::ip_id(remote.ip())], ids)),
        },
        reply::bare(&response),
    )))
}

/// Takes over the session a client resumes here: its password, or `None`
/// when the session is unknown or the password wrong. The servers that
/// may hold its old connection hear that it moved: Paddock's peers by a
/// note, an observed ZooKeeper leader by revalidating it, as its learners
/// do.
async fn resume_session(
    shared: &Shared,
    connect: &ConnectRequest,
    timeout_ms: i32,
) -> Result<Option<Bytes>, ConnectionError> {
    let session_id = connect.session_id;
    let known = shared
        .published()
        .tree
        .session(session_id)
        .map(|s| s.password.clone());
    let Some(password) = known.filter(|password| *password == connect.password) else {
        return Ok(None);
    };
    if let Some(revalidate) = &shared.revalidate {
        match crate::zookeeper_observer::revalidate(revalidate, session_id, timeout_ms).await {
            Some(true) => {}
            Some(false) => return Ok(None),
            None => return Err(ConnectionError::NoLeader),
        }
    }
    shared.sessions.track(
        session_id,
        crate::session::session_timeout(timeout_ms),
        Instant::now(),
    );
    if let Some((_, network)) = &shared.peers {
        let moved = crate::ensemble::PeerNote::SessionMoved(session_id);
        crate::ensemble::broadcast(network, &moved);
    }
    Ok(Some(password))
}

/// A session of a read-only server's own, which no quorum knows: an id
/// and a password, nothing proposed.
fn local_session(shared: &Shared) -> (i64, Bytes) {
    (shared.session_ids.next(), random_password())
}

fn random_password() -> Bytes {
    let mut password = vec![0u8; PASSWORD_BYTES];
    rand::thread_rng().fill_bytes(&mut password);
    Bytes::from(password)
}

async fn create_session(shared: &Shared, timeout_ms: i32) -> Result<(i64, Bytes), ConnectionError> {
    if shared.consensus.status().disk_full() {
        return Err(ConnectionError::SessionNotCreated(
            "the disk is full, so no session can be created here until space is freed".into(),
        ));
    }
    let session_id = shared.session_ids.next();
    // A ZooKeeper ensemble derives a session's password from its id, and
    // its servers check it so when a client moves to one of them.
    let password = if shared.config.observes_zookeeper() {
        Bytes::from(migrate::zookeeper_password(session_id))
    } else {
        random_password()
    };
    let txn = stamped_txn(
        session_id,
        TxnOp::CreateSession {
            timeout_ms,
            password: password.clone(),
        },
    );
    match shared.propose(&txn).await {
        Ok(committed) if matches!(committed.outcome, Outcome::SessionCreated) => {
            Ok((session_id, password))
        }
        Ok(committed) => Err(ConnectionError::SessionNotCreated(format!(
            "{:?}",
            committed.outcome
        ))),
        Err(_) => Err(ConnectionError::SessionNotCreated(
            "the proposal was lost (no leader)".into(),
        )),
    }
}

/// Reads the next whole frame; `None` at a clean end of stream.
/// Cancel safe: partial frames stay in `buf`.
/// The next frame; `read_at` is set to when its last bytes were read from
/// the socket, which is when the request arrived as ZooKeeper counts it.
async fn next_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut BytesMut,
    max_frame_bytes: usize,
    read_at: &mut Instant,
) -> Result<Option<Bytes>, ConnectionError> {
    loop {
        if let Some(frame) = jute::decode_frame(buf, max_frame_bytes)? {
            return Ok(Some(frame));
        }
        buf.reserve(READ_CHUNK_BYTES);
        let read = reader.read_buf(buf).await?;
        *read_at = Instant::now();
        if read == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(ConnectionError::Truncated)
            };
        }
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    conn: &Connection,
    reader: &mut R,
    mut buf: BytesMut,
    mut session: SessionContext,
    steps: mpsc::Sender<Queued>,
) -> Result<(), ConnectionError> {
    let (shared, handle, token) = (&*conn.shared, &*conn.handle, &conn.token);
    let max_frame = shared.config.jute_max_buffer;
    let mut sasl = crate::sasl::SaslExchange::default();
    let mut arrived = Instant::now();
    let mut touched = None;
    let mut latest = Barrier::None;
    loop {
        // globalOutstandingLimit: a connection with requests in process is
        // not read while the server has too many.
        if !shared.requests.paused(&conn.in_process, token).await {
            return Ok(());
        }
        // Cancel safety: `next_frame` keeps partial input in `buf`, and a
        // cancelled token means the connection is going away regardless.
        let frame = tokio::select! {
            _ = token.cancelled() => return Ok(()),
            frame = next_frame(reader, &mut buf, max_frame, &mut arrived) => frame?,
        };
        let Some(frame) = frame else {
            return Ok(());
        };
        shared
            .stats
            .packets_received
            .fetch_add(1, Ordering::Relaxed);
        handle.received.fetch_add(1, Ordering::Relaxed);
        // The session is heard from when its bytes arrive: once for all
        // the requests one read brought, not once each (a touch takes the
        // session table's locks).
        if touched != Some(arrived) {
            shared.sessions.touch(session.session_id, arrived);
            touched = Some(arrived);
            prefetch_reads(shared, &frame, &buf);
        }
        let frame_bytes = frame.len();
        let mut r = Reader::new(frame);
        let header = RequestHeader::decode(&mut r)?;
        let packet = match Packet::decode(header.op, &mut r) {
            Ok(packet) => packet,
            // ZooKeeper decodes auth and SASL packets outside its request
            // pipeline, and a failure there closes the connection unanswered.
            Err(error) if [OpCode::Auth.code(), OpCode::Sasl.code()].contains(&header.op) => {
                tracing::info!(remote = %handle.remote, op = header.op, "malformed authentication packet, closing: {error}");
                shared.stats.bad_frames.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(error) => {
                tracing::debug!(remote = %handle.remote, op = header.op, "malformed request body: {error}");
                shared.stats.bad_frames.fetch_add(1, Ordering::Relaxed);
                let step = pipeline::malformed(shared, &session, header.xid, header.op, arrived);
                let last_in_hand = buf.is_empty();
                let Some(step) =
                    schedule(conn, &session, &mut latest, &mut None, step, last_in_hand)
                else {
                    continue;
                };
                if steps.send(step.into()).await.is_err() {
                    return Ok(());
                }
                continue;
            }
        };
        let closing = matches!(packet, Packet::Request(Request::CloseSession));
        let mut in_process = None;
        let step = match packet {
            Packet::Auth(packet) => match identify(shared, &packet, handle.remote.ip()) {
                Some(ids) => {
                    session.auth = Arc::new(merge_ids(&session.auth, ids));
                    *handle.auth.lock().expect("auth poisoned") = session.auth.clone();
                    Step::Reply(reply::header_only(header.xid, 0, ErrorCode::Ok))
                }
                None => {
                    let failed = reply::header_only(header.xid, 0, ErrorCode::AuthFailed);
                    let _ = steps.send(Step::Reply(failed).into()).await;
                    let _ = steps.send(Step::Close.into()).await;
                    return Ok(());
                }
            },
            Packet::Sasl(request) => {
                let step = sasl_step(conn, &mut session, &mut sasl, header.xid, request.token);
                if matches!(step, Step::ReplyThenClose(_) | Step::Close) {
                    let _ = steps.send(step.into()).await;
                    return Ok(());
                }
                step
            }
            Packet::Request(request) => {
                match admit(conn, header.xid, &request, arrived, frame_bytes).await {
                    Admitted::Run(counted) => {
                        in_process = counted;
                        pipeline::step(shared, &session, header.xid, request, arrived)
                    }
                    Admitted::Refused(reply) => Step::Reply(reply),
                    Admitted::Dropped => continue,
                    Admitted::TooLarge => {
                        // At once, as ZooKeeper closes it: answers not yet
                        // written are lost with the connection.
                        tracing::info!(remote = %handle.remote, bytes = frame_bytes, "closing the connection: its large request would pass largeRequestMaxBytes");
                        token.cancel();
                        return Ok(());
                    }
                }
            }
        };
        if matches!(step, Step::Write { .. }) && !writes_before_proposed(conn).await {
            return Ok(());
        }
        // Nothing more read: a write may be left to the writer to carry
        // through the log itself (when nothing else of the session is in
        // process); with more in hand it joins the next batch.
        let last_in_hand = buf.is_empty();
        let Some(step) = schedule(
            conn,
            &session,
            &mut latest,
            &mut in_process,
            step,
            last_in_hand,
        ) else {
            continue;
        };
        let step = match step {
            Step::Answered { reply, number, .. } => {
                let size = reply.wire_len().clamp(1, ANSWER_BYTES_QUEUED_MAX) as u32;
                let Ok(budget) = conn.answer_budget.clone().acquire_many_owned(size).await else {
                    return Ok(());
                };
                Step::Answered {
                    reply,
                    number,
                    _budget: Some(budget),
                }
            }
            step => step,
        };
        let queued = Queued {
            step,
            _in_process: in_process,
        };
        if steps.send(queued).await.is_err() {
            return Ok(());
        }
        if closing {
            let _ = steps.send(Step::Close.into()).await;
            return Ok(());
        }
    }
}

/// Starts loading what the reads among `first` (a request, unframed) and
/// the frames after it in `rest` will look up, when there are several:
/// their cache misses then overlap (see `read_ahead`).
fn prefetch_reads(shared: &Shared, first: &[u8], rest: &[u8]) {
    if rest.is_empty() {
        return;
    }
    let mut lookups = Lookups::default();
    let first = read_ahead::read_path(first).into_iter();
    first
        .chain(read_ahead::read_paths(rest))
        .for_each(|path| lookups.add_path(path));
    if lookups.len() > 1 {
        shared.published().tree.prefetch(&lookups);
    }
}

/// Waits while the writer has writes of the session to propose and is
/// about to (`SessionOrder::write_must_wait`); false if the connection
/// closes meanwhile.
async fn writes_before_proposed(conn: &Connection) -> bool {
    while conn.order.write_must_wait() {
        // A notification from before this wait is kept as a permit: at
        // worst the loop checks once more.
        tokio::select! {
            _ = conn.token.cancelled() => return false,
            _ = conn.write_proposed.notified() => {}
        }
    }
    true
}

/// What the load limits decided for a request.
enum Admitted {
    /// Run it, counted in process (unless it is a ping, an auth packet or
    /// setWatches, which ZooKeeper does not count).
    Run(Option<InProcess>),
    /// Answer with this reply instead.
    Refused(Bytes),
    /// Its connection closed while it was held: forget it.
    Dropped,
    /// A large request past `largeRequestMaxBytes`: close the connection.
    TooLarge,
}

/// Passes a request through the request throttler and counts it in
/// process. A request held past `throttled_op_wait_time` is answered
/// `Throttled` without running, except a closeSession, as in ZooKeeper.
async fn admit(
    conn: &Connection,
    xid: i32,
    request: &Request,
    arrived: Instant,
    bytes: usize,
) -> Admitted {
    if xid <= 0 {
        return Admitted::Run(None);
    }
    let requests = &conn.shared.requests;
    let throttlable = !matches!(request, Request::CloseSession);
    match requests.admit(&conn.token, throttlable, arrived).await {
        Admission::Run => match requests.enter(&conn.in_process, bytes) {
            Some(counted) => Admitted::Run(Some(counted)),
            None => Admitted::TooLarge,
        },
        Admission::Throttled => Admitted::Refused(reply::header_only(
            xid,
            conn.shared.last_zxid(),
            ErrorCode::Throttled,
        )),
        Admission::Dropped => Admitted::Dropped,
    }
}

/// Runs a step now when the session's order allows it, else leaves it for
/// the writer (see `session_order`); `None` when a read is held behind a
/// write, to be answered with it. `latest` is the session's latest write
/// or sync, which this keeps up to date; a read held takes `in_process`.
/// `last_in_hand`: no more of the client's requests are read yet.
fn schedule(
    conn: &Connection,
    session: &SessionContext,
    latest: &mut Barrier<HeldRead>,
    in_process: &mut Option<InProcess>,
    step: Step,
    last_in_hand: bool,
) -> Option<Step> {
    let step = match step {
        Step::Write {
            xid,
            op,
            shape,
            proposal: Proposal::Pending(txn, _),
            received,
            audit,
        } => {
            let gate = Arc::new(ReadGate::default());
            *latest = Barrier::Write(gate.clone());
            let alone = last_in_hand && conn.in_process.load(Ordering::Relaxed) <= 1;
            let proposal = match conn.order.write_arrived(alone) {
                // The writer proposes it, as the runtime's next task on this
                // thread: were the reader to drive it, the apply loop woken
                // by the commit and the writer woken by this step would be
                // two tasks queued here at once, and the runtime would wake
                // its other worker to take one (two futex calls a write).
                Propose::Next => Proposal::Driven(txn, Some(gate)),
                Propose::Now => Proposal::Made(conn.shared.propose_holding(&txn, Some(gate))),
                Propose::InTurn => Proposal::Pending(txn, Some(gate)),
            };
            Step::Write {
                xid,
                op,
                shape,
                proposal,
                received,
                audit,
            }
        }
        // A reconfig is decided by the leader before it is a txn, and its
        // answer is not the apply loop's: it waits for the reads before
        // it, and the reads after it wait for it, as for a sync.
        Step::Write { .. } | Step::Sync { .. } => {
            conn.order.sync_arrived();
            *latest = Barrier::Sync;
            step
        }
        // `auth` is the session's, which the read carries.
        Step::Read {
            xid,
            request,
            received,
            ..
        } => {
            let read = HeldRead {
                xid,
                request,
                session: session.clone(),
                handle: conn.handle.clone(),
                in_process: in_process.take(),
                received,
            };
            match conn.order.read_arrived(read, latest) {
                session_order::Answer::Now(read) => {
                    *in_process = read.in_process;
                    let (reply, number) = answer_read(
                        conn,
                        session,
                        &read.session.auth,
                        read.xid,
                        read.request,
                        read.received,
                    );
                    Step::Answered {
                        reply,
                        number,
                        _budget: None,
                    }
                }
                session_order::Answer::InTurn(read) => {
                    *in_process = read.in_process;
                    Step::Read {
                        xid: read.xid,
                        request: read.request,
                        auth: read.session.auth,
                        received: read.received,
                    }
                }
                session_order::Answer::Held => return None,
            }
        }
        other => other,
    };
    Some(step)
}

/// A read's reply, preceded by any events `setWatches` owes the client.
fn answer_read(
    conn: &Connection,
    session: &SessionContext,
    auth: &Arc<Vec<Id>>,
    xid: i32,
    request: Request,
    received: Instant,
) -> (Reply, u64) {
    let shared = &*conn.shared;
    let op = request.op_code();
    let mut fired = Vec::new();
    let (answer, number) = pipeline::answer_read(
        &mut shared.published(),
        session,
        auth,
        xid,
        request,
        &mut fired,
        &conn.handle.answers_built,
    );
    let answer = answer.into_reply();
    let answered = Instant::now();
    shared.stats.read_latency.record(answered - received);
    record_activity(conn, op, xid, shared.last_zxid(), received, answered);
    (with_events_before(&fired, answer), number)
}

/// A read the apply loop answered after the write it was held behind.
fn finish_held_answer(conn: &Connection, held: HeldAnswer) -> (Reply, u64) {
    let shared = &*conn.shared;
    shared
        .stats
        .read_latency
        .record(held.answered - held.received);
    let zxid = shared.last_zxid();
    record_activity(conn, held.op, held.xid, zxid, held.received, held.answered);
    let answer = held.answer.into_reply();
    (with_events_before(&held.fired, answer), held.number)
}

fn with_events_before(fired: &[WatchEvent], answer: Reply) -> Reply {
    if fired.is_empty() {
        return answer;
    }
    let mut out = BytesMut::new();
    for event in fired {
        reply::event(&mut out, event);
    }
    answer.put(&mut out);
    Reply::Frame(out.freeze())
}

/// One SASL packet, as ZooKeeper's `processSasl` answers it: a null token
/// closes the connection unanswered (ZooKeeper takes its length before
/// anything else); a failed exchange is `AuthFailed` with a null token,
/// then the close.
fn sasl_step(
    conn: &Connection,
    session: &mut SessionContext,
    exchange: &mut crate::sasl::SaslExchange,
    xid: i32,
    token: Option<Bytes>,
) -> Step {
    let remote = conn.handle.remote;
    let Some(token) = token else {
        tracing::info!(%remote, "SASL packet with a null token, closing");
        return Step::Close;
    };
    match exchange.respond(conn.shared.sasl_users.as_ref(), &token) {
        Ok((response, user)) => {
            if let Some(user) = user {
                session.auth = Arc::new(merge_ids(&session.auth, vec![Id::new("sasl", user)]));
                *conn.handle.auth.lock().expect("auth poisoned") = session.auth.clone();
            }
            Step::Reply(reply::with_body(xid, 0, &response))
        }
        Err(reason) => {
            tracing::info!(%remote, "SASL authentication failed: {reason}");
            let failed = SetSASLResponse { token: None };
            Step::ReplyThenClose(reply::error_with_body(
                xid,
                0,
                ErrorCode::AuthFailed,
                &failed,
            ))
        }
    }
}

/// The ids an `auth` packet grants, or `None` when it is refused: a token
/// lent to one of the server's own tools, or a scheme's provider.
fn identify(
    shared: &Shared,
    packet: &jute::AuthPacket,
    remote: std::net::IpAddr,
) -> Option<Vec<Id>> {
    if packet.scheme == crate::delegation::DELEGATED_SCHEME {
        return shared.delegations.redeem(packet.auth.as_deref()?);
    }
    crate::auth::authenticate(
        &packet.scheme,
        packet.auth.as_deref(),
        remote,
        shared.config.super_digest.as_deref(),
    )
}

fn merge_ids(current: &[Id], added: Vec<Id>) -> Vec<Id> {
    let mut ids = current.to_vec();
    for id in added {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

enum SyncAnswer {
    Synced,
    /// The leader could not confirm the read index: close, so the client
    /// sees ConnectionLoss and retries.
    Lost,
    Cancelled,
}

async fn await_sync(
    shared: &Shared,
    token: &CancellationToken,
    read_index: tokio::sync::oneshot::Receiver<Option<u64>>,
) -> SyncAnswer {
    // Cancel safety: both waits only observe; nothing is lost by stopping.
    let index = tokio::select! {
        index = read_index => index,
        _ = token.cancelled() => return SyncAnswer::Cancelled,
    };
    let Ok(Some(index)) = index else {
        return SyncAnswer::Lost;
    };
    let mut applied = shared.applied.subscribe();
    tokio::select! {
        caught_up = applied.wait_for(|&applied| applied >= index) => {
            if caught_up.is_ok() { SyncAnswer::Synced } else { SyncAnswer::Lost }
        }
        _ = token.cancelled() => SyncAnswer::Cancelled,
    }
}

enum WriteAnswer {
    /// The reply, and the answers to the reads held behind the write.
    Reply(Bytes, Vec<HeldAnswer>),
    /// The proposal was lost: close, so the client sees ConnectionLoss and
    /// retries elsewhere.
    Lost,
    Cancelled,
}

/// A write in the writer's hands, waiting for its outcome.
struct PendingWrite<'a> {
    xid: i32,
    /// The request's opcode, for per-connection statistics.
    op: i32,
    shape: &'a pipeline::ReplyShape,
    received: Instant,
    audit: Option<&'a AuditedWrite>,
}

/// Puts `answer` (read answer number `read`, or any other reply) in `out`
/// with the events that go right before and right after it; returns the
/// frames put.
fn place(
    out: &mut BytesMut,
    event_order: &mut EventOrder,
    read: Option<u64>,
    answer: &Reply,
) -> u64 {
    let mut frames = 1;
    for event in event_order.before(read) {
        reply::event(out, &event);
        frames += 1;
    }
    answer.put(out);
    for event in event_order.after(read) {
        reply::event(out, &event);
        frames += 1;
    }
    frames
}

async fn await_write(
    conn: &Connection,
    write: PendingWrite<'_>,
    committed: tokio::sync::oneshot::Receiver<crate::shared::Committed>,
) -> WriteAnswer {
    let PendingWrite {
        xid,
        op,
        shape,
        received,
        audit,
    } = write;
    // Cancel safety: a cancelled token ends the connection; the write
    // itself is in the log and completes without us. Biased towards the
    // outcome: a session's close completes its waiter and then closes its
    // connection, and that reply must still go out.
    let committed = tokio::select! {
        biased;
        committed = committed => committed,
        _ = conn.token.cancelled() => return WriteAnswer::Cancelled,
    };
    match committed {
        Ok(mut committed) => {
            let answered = Instant::now();
            conn.shared.stats.update_latency.record(answered - received);
            record_activity(conn, op, xid, committed.zxid, received, answered);
            if let Some(audit) = audit {
                audit.log(conn.handle.remote.ip(), &committed.outcome);
            }
            let reads = std::mem::take(&mut committed.reads);
            WriteAnswer::Reply(pipeline::write_reply(xid, shape, committed), reads)
        }
        Err(_) => WriteAnswer::Lost,
    }
}

/// What `cons` and `stat` report of the request received and answered
/// then: times already read, as a request reads the clock once (three
/// reads of it were 5% of a standalone server's CPU under reads).
fn record_activity(
    conn: &Connection,
    op: i32,
    xid: i32,
    zxid: i64,
    received: Instant,
    answered: Instant,
) {
    let latency_ms = (answered - received).as_millis() as u64;
    conn.shared.stats.record_latency(latency_ms);
    let mut activity = conn.handle.activity.lock().expect("activity poisoned");
    activity.last_op = crate::four_letter::op_name(op);
    activity.last_cxid = xid;
    activity.last_zxid = zxid;
    activity.last_response = Some(answered);
    activity.latency.record(latency_ms);
}

async fn write_loop<W: AsyncWrite + Unpin>(
    conn: Arc<Connection>,
    mut writer: W,
    mut steps: mpsc::Receiver<Queued>,
    mut events: mpsc::Receiver<QueuedEvent>,
    session: SessionContext,
) {
    let mut event_order = EventOrder::default();
    let (shared, handle, token, order) = (&*conn.shared, &*conn.handle, &conn.token, &conn.order);
    let mut out = BytesMut::with_capacity(FLUSH_BYTES);
    let mut frames_out = 0u64;
    loop {
        let mut close = false;
        // Cancel safety: `recv` on both channels is cancel safe; a
        // cancelled token ends the connection, so a lost step is moot.
        tokio::select! {
            biased;
            _ = token.cancelled() => break,
            Some(queued) = events.recv() => {
                if let Some(event) = event_order.arrived(queued) {
                    reply::event(&mut out, &event);
                    frames_out += 1;
                }
            }
            queued = steps.recv() => {
                // `_in_process` lives to the end of this branch: the request
                // leaves the count once its answer is queued.
                let Some(Queued { step, _in_process }) = queued else { break };
                let mut read = None;
                let mut held = Vec::new();
                let answer = match step {
                    Step::Reply(bytes) => Some(Reply::Frame(bytes)),
                    Step::Answered { reply, number, .. } => {
                        read = Some(number);
                        Some(reply)
                    }
                    Step::ReplyThenClose(bytes) => {
                        close = true;
                        Some(Reply::Frame(bytes))
                    }
                    Step::Close => {
                        close = true;
                        None
                    }
                    Step::Write { xid, op, shape, proposal, received, audit } => {
                        let reconfig = matches!(proposal, Proposal::Reconfig(_));
                        let left_to_writer = matches!(proposal, Proposal::Pending(..) | Proposal::Driven(..));
                        let committed = proposal.make(&conn.shared);
                        if left_to_writer {
                            order.write_proposed();
                            conn.write_proposed.notify_one();
                        }
                        let write = PendingWrite { xid, op, shape: &shape, received, audit: audit.as_ref() };
                        let answer = await_write(&conn, write, committed).await;
                        if reconfig {
                            order.sync_finished();
                        }
                        match answer {
                            WriteAnswer::Reply(bytes, reads) => {
                                held = reads;
                                Some(Reply::Frame(bytes))
                            }
                            WriteAnswer::Lost => { close = true; None }
                            WriteAnswer::Cancelled => break,
                        }
                    }
                    Step::Sync { xid, path, read_index } => {
                        let synced = await_sync(shared, token, read_index).await;
                        order.sync_finished();
                        match synced {
                            SyncAnswer::Synced => {
                                Some(Reply::Frame(pipeline::sync_reply(shared, xid, path)))
                            }
                            SyncAnswer::Lost => { close = true; None }
                            SyncAnswer::Cancelled => break,
                        }
                    }
                    Step::Read { xid, request, auth, received } => {
                        let (answer, number) = answer_read(&conn, &session, &auth, xid, request, received);
                        order.waiting_read_answered();
                        read = Some(number);
                        Some(answer)
                    }
                };
                if let Some(answer) = answer {
                    while let Ok(queued) = events.try_recv() {
                        event_order.hold(queued);
                    }
                    frames_out += place(&mut out, &mut event_order, read, &answer);
                    for held in held {
                        let (answer, number) = finish_held_answer(&conn, held);
                        frames_out += place(&mut out, &mut event_order, Some(number), &answer);
                    }
                }
            }
        }
        let drained = steps.is_empty() && events.is_empty();
        if close || out.len() >= FLUSH_BYTES || (drained && !out.is_empty()) {
            // Biased towards writing: what is ready goes out even when the
            // connection is being killed (a closeSession's reply races the
            // kill of the closed session's connection), and a client that
            // does not read still cannot hold the writer past the kill.
            let written = tokio::select! {
                biased;
                written = writer.write_all(&out) => written,
                _ = token.cancelled() => break,
            };
            out.clear();
            shared
                .stats
                .packets_sent
                .fetch_add(frames_out, Ordering::Relaxed);
            handle.sent.fetch_add(frames_out, Ordering::Relaxed);
            frames_out = 0;
            if written.is_err() {
                break;
            }
        }
        if close {
            break;
        }
    }
    // Replies already decided still go out: a closeSession reply races the
    // apply loop closing the session's connection, and may still be queued.
    // Bounded, because a killed connection may be one whose client stopped
    // reading.
    while let Ok(Queued { step, .. }) = steps.try_recv() {
        match step {
            Step::Reply(bytes) | Step::ReplyThenClose(bytes) => out.extend_from_slice(&bytes),
            Step::Answered { reply, .. } => reply.put(&mut out),
            Step::Write {
                xid,
                shape,
                proposal: Proposal::Made(mut committed),
                audit,
                ..
            } => {
                if let Ok(mut committed) = committed.try_recv() {
                    if let Some(audit) = &audit {
                        audit.log(conn.handle.remote.ip(), &committed.outcome);
                    }
                    let reads = std::mem::take(&mut committed.reads);
                    out.extend_from_slice(&pipeline::write_reply(xid, &shape, committed));
                    for held in reads {
                        finish_held_answer(&conn, held).0.put(&mut out);
                    }
                }
            }
            Step::Write { .. } | Step::Read { .. } | Step::Sync { .. } | Step::Close => break,
        }
    }
    if !out.is_empty() {
        let _ = tokio::time::timeout(FINAL_FLUSH_TIMEOUT, writer.write_all(&out)).await;
    }
    let _ = writer.shutdown().await;
    token.cancel();
}
