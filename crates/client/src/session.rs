//! The session task: the single owner of a session's connection life.
//!
//! It connects (servers of the connect string in shuffled order, with
//! backoff after each full round), performs the handshake, replays
//! credentials and re-registers watches, then acts as the connection's
//! writer: it takes commands from the client handles' channel (see below),
//! gives each an xid, records it in flight and writes batches of frames,
//! pinging when it has been idle for a third of the session timeout. A
//! separate reader task (see `reader`) reads concurrently: were one task to
//! do both, a large write could wait on a server that waits for us to read
//! its replies.
//!
//! The command channel is unbounded on purpose. Each command is owned by a
//! caller's [`crate::Call`] that waits for its reply, so the queue never
//! holds more than the callers' own outstanding calls (a bound would keep
//! the same requests in waiting futures instead), and sending on it is
//! synchronous, which is what fixes a session's request order at the
//! moment each method is called. A bounded tokio channel was measured to
//! reorder sends that were started in order once senders had to wait for
//! capacity under load. What is bounded is what matters to the server and
//! to memory the client owns: requests written and not yet answered
//! (`IN_FLIGHT_MAX`), after which the writer waits for replies.
//!
//! When the connection breaks, everything in flight fails with
//! `ConnectionLoss`, the state becomes `Disconnected`, and the task
//! reconnects with the same session id, password and last zxid seen. Only
//! the server can say the session expired; then, or after `close`, the
//! task fails whatever is queued, clears the watches and ends.
//!
//! Concurrency rules:
//! - Requests reach the server in the order their commands entered the
//!   channel, and the reader matches replies in that order.
//! - A request's in-flight entry is pushed before its bytes are written.
//! - After a connection ends, its reader has stopped (awaited) before the
//!   in-flight entries are failed, so a reply is either delivered or
//!   failed, never both.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use jute::{
    encode_frame, xid, AuthPacket, ConnectRequest, ConnectResponse, OpCode, Record, RequestHeader,
    SetWatches2,
};
use rand::seq::SliceRandom;
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, timeout, Instant};

use crate::error::Error;
use crate::options::{AuthData, ConnectOptions, ConnectString, SaslLogin};
use crate::reader::{InFlight, Pending, PendingAuth, ReadEnd, Reader, Reply};
use crate::rebalance::{self, Host};
use crate::sasl_auth;
use crate::state::{lock, SessionInfo, SessionState, Shared};
use crate::transport::WriteHalf;
use crate::watch::{WatchPaths, WatchRegistration};
use tls::MaybeTls;

/// Requests (and auth packets) written and not yet answered. Beyond this
/// the writer waits for replies: it bounds the client's memory for a server
/// that reads faster than it answers.
pub(crate) const IN_FLIGHT_MAX: usize = 8192;
/// A write batch stops growing past this many bytes or commands.
const WRITE_BATCH_BYTES: usize = 64 * 1024;
const WRITE_BATCH_COMMANDS: usize = 512;
/// Backoff between rounds of connection attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Bounds for one connection attempt (TCP connect plus handshake).
const ATTEMPT_MIN: Duration = Duration::from_millis(500);
const ATTEMPT_MAX: Duration = Duration::from_secs(10);
/// Rounds of attempts to take a session back that fit in its timeout.
const RECONNECT_ROUNDS_PER_TIMEOUT: u32 = 3;
/// How long `close` waits for the server to confirm closeSession.
const CLOSE_WAIT_MAX: Duration = Duration::from_secs(2);
/// ZooKeeper's client splits setWatches so that no packet nears
/// `jute.maxbuffer`; it uses the same bound.
const SET_WATCHES_MAX_BYTES: usize = 128 * 1024;
/// A new session is asked for with an all-zero password of this length.
const PASSWORD_BYTES: usize = 16;

const _: () = assert!(WRITE_BATCH_COMMANDS <= IN_FLIGHT_MAX);
const _: () = assert!(BACKOFF_MIN.as_millis() < BACKOFF_MAX.as_millis());

/// What a client handle asks of the session task.
#[derive(Debug)]
pub(crate) enum Command {
    Request {
        op: OpCode,
        /// The encoded request body (header excluded: the xid is assigned
        /// here).
        body: Bytes,
        watch: Option<WatchRegistration>,
        reply: oneshot::Sender<Reply>,
    },
    Auth {
        auth: AuthData,
        reply: oneshot::Sender<Reply>,
    },
    Close {
        done: oneshot::Sender<()>,
    },
    /// The servers to use from now on; `moved` says whether the session
    /// leaves its server for one of them (`rebalance`).
    UpdateServerList {
        hosts: Vec<Host>,
        moved: oneshot::Sender<bool>,
    },
}

/// How the session ended.
#[derive(Debug)]
enum Ending {
    /// Closed by a command (`done` to confirm) or by the last handle going.
    Closed(Option<oneshot::Sender<()>>),
    Expired,
    AuthFailed,
}

/// Why one connection attempt failed.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// The server says the session is gone.
    Expired,
    /// SASL authentication failed: the session cannot go on.
    SaslFailed(String),
    Failed(String),
}

/// How serving one connection ended.
enum Served {
    /// The server list changed and the session leaves this server for
    /// another, to even out the load.
    Moved,
    Lost(ReadEnd),
    Close(Option<oneshot::Sender<()>>),
}

/// One live connection.
pub(crate) struct Connection {
    writer: WriteHalf,
    reader: JoinHandle<ReadEnd>,
    /// Set once `reader` has completed (a `JoinHandle` must not be polled
    /// after that).
    reader_end: Option<ReadEnd>,
    in_flight: Arc<Mutex<InFlight>>,
    /// As negotiated.
    timeout: Duration,
    server: String,
    /// The server, as its connect string names it.
    host: Host,
}

impl Connection {
    /// Waits for the reader to stop.
    ///
    /// # Cancel safety
    /// Cancel-safe: polling a `JoinHandle` by reference loses nothing, and
    /// its result is stored before any further await.
    async fn reader_end(&mut self) -> ReadEnd {
        if let Some(end) = &self.reader_end {
            return end.clone();
        }
        let end = match (&mut self.reader).await {
            Ok(end) => end,
            Err(e) => ReadEnd::Protocol(format!("the reader task failed: {e}")),
        };
        self.reader_end = Some(end.clone());
        end
    }

    /// Writes `buf`, giving up if the reader ends first (a dead server may
    /// never drain the socket). Cancelling mid-write is fine here: on error
    /// the connection is abandoned anyway.
    async fn write(&mut self, buf: &[u8]) -> Result<(), ReadEnd> {
        if buf.is_empty() {
            return Ok(());
        }
        let Connection {
            writer,
            reader,
            reader_end,
            ..
        } = self;
        if let Some(end) = reader_end {
            return Err(end.clone());
        }
        tokio::select! {
            // Not cancel-safe (a partial write is lost), which is fine: the
            // other branch ending means the connection is abandoned.
            res = writer.write_all(buf) => {
                res.map_err(|e| ReadEnd::Io(format!("write failed: {e}")))
            }
            // Cancel-safe: polling a `JoinHandle` by reference loses nothing.
            joined = reader => {
                let end = joined.unwrap_or_else(|e| {
                    ReadEnd::Protocol(format!("the reader task failed: {e}"))
                });
                *reader_end = Some(end.clone());
                Err(end)
            }
        }
    }
}

pub(crate) struct SessionTask {
    rx: mpsc::UnboundedReceiver<Command>,
    shared: Arc<Shared>,
    /// Shuffled once; tried round-robin from `next_host`.
    hosts: Vec<(String, u16)>,
    next_host: usize,
    servers: String,
    requested_timeout: Duration,
    max_frame_bytes: usize,
    sasl: Option<SaslLogin>,
    tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    local_address: Option<std::net::IpAddr>,
    /// The next xid to assign: positive, wrapping from `i32::MAX` to 1 so
    /// it never collides with the reserved negative xids.
    next_xid: i32,
    permits: Arc<Semaphore>,
}

impl SessionTask {
    pub(crate) fn new(
        rx: mpsc::UnboundedReceiver<Command>,
        shared: Arc<Shared>,
        connect: &ConnectString,
        options: &ConnectOptions,
    ) -> Self {
        let mut hosts = connect.hosts.clone();
        hosts.shuffle(&mut rand::thread_rng());
        Self {
            rx,
            shared,
            hosts,
            next_host: 0,
            servers: connect.servers(),
            requested_timeout: options.session_timeout,
            max_frame_bytes: options.max_frame_bytes,
            sasl: options.sasl.clone(),
            tls: options.tls.clone(),
            local_address: options.local_address,
            next_xid: 1,
            permits: Arc::new(Semaphore::new(IN_FLIGHT_MAX)),
        }
    }

    fn take_host(&mut self) -> (String, u16) {
        let host = self.hosts[self.next_host % self.hosts.len()].clone();
        self.next_host = (self.next_host + 1) % self.hosts.len();
        host
    }

    fn take_xid(&mut self) -> i32 {
        let xid = self.next_xid;
        self.next_xid = if xid == i32::MAX { 1 } else { xid + 1 };
        xid
    }

    /// ZooKeeper's client gives each attempt the session timeout divided by
    /// the number of servers, so one round fits in a session timeout. To
    /// take a session back, a round gets a third of it: a server may take
    /// the connection and never answer (ZooKeeper 3.8 does so to one that
    /// arrives while it starts, its close failing half way), and a single
    /// attempt waiting out the whole timeout lets the session expire before
    /// the next one reaches a server that would have kept it.
    fn attempt_timeout(&self) -> Duration {
        let count = u32::try_from(self.hosts.len()).unwrap_or(u32::MAX);
        // Zero until a server negotiated it: no session yet, or one
        // resumed from the options.
        let round = match self.shared.session().timeout {
            Duration::ZERO => self.requested_timeout,
            negotiated => negotiated / RECONNECT_ROUNDS_PER_TIMEOUT,
        };
        (round / count).clamp(ATTEMPT_MIN, ATTEMPT_MAX)
    }

    /// The first connection, for `Client::connect`: tries until `deadline`.
    pub(crate) async fn connect_first(&mut self, deadline: Instant) -> Result<Connection, Error> {
        let mut last_error = String::from("no attempt finished");
        let mut backoff = BACKOFF_MIN;
        let servers = self.servers.clone();
        let timed_out = |last_error: String| Error::ConnectTimeout {
            servers: servers.clone(),
            last_error,
        };
        loop {
            for _ in 0..self.hosts.len() {
                let host = self.take_host();
                match tokio::time::timeout_at(deadline, self.establish(&host)).await {
                    Err(_) => return Err(timed_out(last_error)),
                    Ok(Ok(conn)) => return Ok(conn),
                    Ok(Err(Attempt::Expired)) => {
                        return Err(Error::SessionExpired {
                            path: String::new(),
                        })
                    }
                    Ok(Err(Attempt::SaslFailed(reason))) => {
                        return Err(Error::SaslFailed {
                            server: format!("{}:{}", host.0, host.1),
                            reason,
                        })
                    }
                    Ok(Err(Attempt::Failed(why))) => {
                        tracing::debug!(%why, "connection attempt failed");
                        last_error = why;
                    }
                }
            }
            let pause = jitter(backoff);
            if Instant::now() + pause >= deadline {
                return Err(timed_out(last_error));
            }
            sleep(pause).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// Connects to one server: TCP, handshake, then credentials and
    /// watches for the new connection. The reader is spawned last, after
    /// every await, so a cancelled attempt leaves no task behind.
    async fn establish(&mut self, host: &(String, u16)) -> Result<Connection, Attempt> {
        let server = format!("{}:{}", host.0, host.1);
        let limit = self.attempt_timeout();
        let (stream, response, leftover) = timeout(limit, self.handshake(host))
            .await
            .map_err(|_| Attempt::Failed(format!("{server}: no handshake within {limit:?}")))?
            .map_err(|e| match e {
                Attempt::Failed(why) => Attempt::Failed(format!("{server}: {why}")),
                other => other,
            })?;
        let negotiated = Duration::from_millis(u64::try_from(response.timeout_ms).unwrap_or(0));
        let (read_half, mut write_half) = stream.split();
        let in_flight = Arc::new(Mutex::new(InFlight::default()));
        let prime = self.prime(&in_flight);
        write_half
            .write_all(&prime)
            .await
            .map_err(|e| Attempt::Failed(format!("{server}: write failed: {e}")))?;

        self.shared.set_session(SessionInfo {
            id: response.session_id,
            password: response.password,
            timeout: negotiated,
        });
        let reader = Reader {
            socket: read_half,
            buf: leftover,
            in_flight: in_flight.clone(),
            shared: self.shared.clone(),
            read_timeout: negotiated * 2 / 3,
            max_frame_bytes: self.max_frame_bytes,
        };
        let reader = tokio::spawn(reader.run());
        tracing::info!(
            %server,
            session_id = format_args!("{:#x}", response.session_id),
            timeout_ms = response.timeout_ms,
            "connected"
        );
        self.shared.set_state(SessionState::Connected);
        Ok(Connection {
            writer: write_half,
            reader,
            reader_end: None,
            in_flight,
            timeout: negotiated,
            server,
            host: host.clone(),
        })
    }

    /// TCP connect (and the TLS handshake, with TLS), the connect
    /// request/response exchange, and SASL when the client logs in with it.
    async fn handshake(
        &mut self,
        host: &(String, u16),
    ) -> Result<(MaybeTls, ConnectResponse, BytesMut), Attempt> {
        let failed =
            |what: &str, e: &dyn std::fmt::Display| Attempt::Failed(format!("{what}: {e}"));
        let mut stream = crate::transport::connect(host, self.local_address, self.tls.as_ref())
            .await
            .map_err(Attempt::Failed)?;
        let session = self.shared.session();
        let password = if session.id == 0 {
            Bytes::from_static(&[0; PASSWORD_BYTES])
        } else {
            session.password
        };
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.shared.last_zxid(),
            timeout_ms: i32::try_from(self.requested_timeout.as_millis()).unwrap_or(i32::MAX),
            session_id: session.id,
            password,
            read_only: Some(false),
        };
        let mut out = BytesMut::new();
        encode_frame(&mut out, |buf| request.encode(buf));
        stream
            .write_all(&out)
            .await
            .map_err(|e| failed("sending the connect request failed", &e))?;

        let mut buf = BytesMut::with_capacity(1024);
        let frame = read_frame(&mut stream, &mut buf, self.max_frame_bytes)
            .await
            .map_err(|why| Attempt::Failed(format!("during the handshake: {why}")))?;
        let response =
            ConnectResponse::from_bytes(frame).map_err(|e| failed("bad connect response", &e))?;
        if response.timeout_ms <= 0 {
            // ZooKeeper's answer to a session it no longer has.
            return if session.id != 0 {
                Err(Attempt::Expired)
            } else {
                Err(Attempt::Failed("the server refused a new session".into()))
            };
        }
        if let Some(login) = self.sasl.clone() {
            let max_frame_bytes = self.max_frame_bytes;
            sasl_auth::authenticate(
                &mut stream,
                &mut buf,
                &login,
                || self.take_xid(),
                max_frame_bytes,
            )
            .await?;
        }
        Ok((stream, response, buf))
    }

    /// The first bytes of a new connection: the remembered credentials,
    /// then the watches to re-register, with their in-flight entries.
    /// Credentials go first so that the watches are re-registered with the
    /// session's full identity.
    fn prime(&mut self, in_flight: &Mutex<InFlight>) -> BytesMut {
        let mut out = BytesMut::new();
        let mut in_flight = lock(in_flight);
        let auths = lock(&self.shared.auths).clone();
        for auth in auths {
            encode_auth(&mut out, &auth);
            in_flight.auths.push_back(PendingAuth {
                reply: None,
                remember: None,
                _permit: None,
            });
        }
        let paths = lock(&self.shared.watches).live_paths();
        if !paths.is_empty() {
            for batch in set_watches_batches(paths, self.shared.last_zxid()) {
                encode_frame(&mut out, |buf| {
                    RequestHeader {
                        xid: xid::SET_WATCHES,
                        op: OpCode::SetWatches2.code(),
                    }
                    .encode(buf);
                    batch.encode(buf);
                });
                in_flight.requests.push_back(Pending {
                    xid: xid::SET_WATCHES,
                    reply: None,
                    watch: None,
                    _permit: None,
                });
            }
        }
        out
    }

    /// Runs the session until it ends; consumes the task.
    pub(crate) async fn run(mut self, mut conn: Connection) {
        let ending = loop {
            match self.serve(&mut conn).await {
                Served::Close(done) => {
                    self.close_session(&mut conn).await;
                    teardown(conn).await;
                    break Ending::Closed(done);
                }
                Served::Moved => {
                    tracing::info!(server = %conn.server, "leaving the server to even out the load of the new server list");
                    teardown(conn).await;
                    self.shared.set_state(SessionState::Disconnected);
                    match self.reconnect().await {
                        Ok(next) => conn = next,
                        Err(ending) => break ending,
                    }
                }
                Served::Lost(end) => {
                    tracing::warn!(server = %conn.server, reason = %end, "connection lost");
                    teardown(conn).await;
                    if end == ReadEnd::AuthFailed {
                        break Ending::AuthFailed;
                    }
                    self.shared.set_state(SessionState::Disconnected);
                    match self.reconnect().await {
                        Ok(next) => conn = next,
                        Err(ending) => break ending,
                    }
                }
            }
        };
        self.finish(ending);
    }

    /// Writes commands to one connection until it breaks or the client
    /// closes.
    async fn serve(&mut self, conn: &mut Connection) -> Served {
        let ping_every = conn.timeout / 3;
        let mut out = BytesMut::with_capacity(WRITE_BATCH_BYTES);
        loop {
            out.clear();
            let ping_at = Instant::now() + ping_every;
            let (first, permit) = tokio::select! {
                // Cancel-safe (see `reader_end`).
                end = conn.reader_end() => return Served::Lost(end),
                // Cancel-safe: `recv` is, and a permit taken before it is
                // returned to the semaphore when dropped.
                next = next_command(&mut self.rx, &self.permits) => next,
                // Cancel-safe: a sleep holds nothing.
                () = sleep_until(ping_at) => {
                    encode_header_only(&mut out, xid::PING, OpCode::Ping);
                    if let Err(end) = conn.write(&out).await {
                        return Served::Lost(end);
                    }
                    continue;
                }
            };
            let mut batch = Batch::default();
            self.take(first, permit, &conn.host, &mut out, &mut batch);
            self.fill(&conn.host, &conn.in_flight, &mut out, &mut batch)
                .await;
            {
                let mut in_flight = lock(&conn.in_flight);
                in_flight.requests.extend(batch.pending);
                in_flight.auths.extend(batch.auths);
            }
            if let Err(end) = conn.write(&out).await {
                return Served::Lost(end);
            }
            if let Some(done) = batch.close {
                return Served::Close(done);
            }
            if batch.moving {
                return Served::Moved;
            }
        }
    }

    /// Adds `command` (`None`: the client is gone) to the batch.
    fn take(
        &mut self,
        command: Option<Command>,
        permit: Option<OwnedSemaphorePermit>,
        host: &Host,
        out: &mut BytesMut,
        batch: &mut Batch,
    ) {
        match command {
            None => batch.close = Some(None),
            Some(Command::Close { done }) => batch.close = Some(Some(done)),
            Some(Command::UpdateServerList { hosts, moved }) => {
                batch.moving |= self.update_hosts(hosts, Some(host), moved);
            }
            Some(command) => {
                self.encode(command, permit, out, &mut batch.pending, &mut batch.auths)
            }
        }
    }

    /// Takes what else is queued into the batch, waiting for callers about
    /// to queue more (see `callers_about_to_queue`) while they do.
    async fn fill(
        &mut self,
        host: &Host,
        in_flight: &Mutex<InFlight>,
        out: &mut BytesMut,
        batch: &mut Batch,
    ) {
        self.take_queued(host, out, batch);
        while batch.is_open(out) && self.callers_about_to_queue(in_flight, batch) {
            tokio::task::yield_now().await;
            if self.take_queued(host, out, batch) == 0 {
                break;
            }
        }
    }

    /// Takes what is queued now, while the batch is open; returns how many
    /// commands it took.
    fn take_queued(&mut self, host: &Host, out: &mut BytesMut, batch: &mut Batch) -> usize {
        let mut taken = 0;
        while batch.is_open(out) {
            let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                break;
            };
            let Ok(command) = self.rx.try_recv() else {
                break;
            };
            self.take(Some(command), Some(permit), host, out, batch);
            taken += 1;
        }
        taken
    }

    /// Whether a caller holds an answer it has not taken yet, and so is
    /// about to run and may queue its next request. The reader hands out a
    /// batch of answers at once; but a task woken runs next on its worker,
    /// so the writer ran as soon as the first caller woken queued, and sent
    /// each request in a write of its own: one `sendto` per request under
    /// `paddock bench mix`, a third of the load generator's CPU. Requests
    /// in flight or in this batch are unanswered without such a caller, so
    /// a lone caller's request goes out at once.
    fn callers_about_to_queue(&self, in_flight: &Mutex<InFlight>, batch: &Batch) -> bool {
        let asked = lock(in_flight).requests.len() + batch.pending.len();
        self.shared.unanswered() > asked
    }

    /// Takes a new server list. Connected to `current`, the session may
    /// leave it to even out the load (`rebalance::plan`); the servers it
    /// should go to are then tried first. Returns, and tells `moved`,
    /// whether it leaves.
    fn update_hosts(
        &mut self,
        hosts: Vec<Host>,
        current: Option<&Host>,
        moved: oneshot::Sender<bool>,
    ) -> bool {
        let mut rng = rand::thread_rng();
        let first =
            current.and_then(|current| rebalance::plan(&self.hosts, &hosts, current, &mut rng));
        let mut ordered = first.clone().unwrap_or_default();
        ordered.shuffle(&mut rng);
        let mut rest: Vec<Host> = hosts.into_iter().filter(|h| !ordered.contains(h)).collect();
        rest.shuffle(&mut rng);
        ordered.extend(rest);
        self.servers = ordered
            .iter()
            .map(|(host, port)| format!("{host}:{port}"))
            .collect::<Vec<_>>()
            .join(",");
        self.hosts = ordered;
        self.next_host = 0;
        let moving = first.is_some();
        let _ = moved.send(moving);
        moving
    }

    /// Appends one command's frame and notes its in-flight entry.
    fn encode(
        &mut self,
        command: Command,
        permit: Option<OwnedSemaphorePermit>,
        out: &mut BytesMut,
        pending: &mut Vec<Pending>,
        auths: &mut Vec<PendingAuth>,
    ) {
        match command {
            Command::Request {
                op,
                body,
                watch,
                reply,
            } => {
                let xid = self.take_xid();
                encode_frame(out, |buf| {
                    RequestHeader { xid, op: op.code() }.encode(buf);
                    buf.extend_from_slice(&body);
                });
                pending.push(Pending {
                    xid,
                    reply: Some(reply),
                    watch,
                    _permit: permit,
                });
            }
            Command::Auth { auth, reply } => {
                encode_auth(out, &auth);
                auths.push(PendingAuth {
                    reply: Some(reply),
                    remember: Some(auth),
                    _permit: permit,
                });
            }
            Command::Close { .. } | Command::UpdateServerList { .. } => {
                unreachable!("handled by the caller")
            }
        }
    }

    /// Sends closeSession and waits (briefly) for the server to confirm, so
    /// its ephemeral nodes are gone when `close` returns.
    async fn close_session(&mut self, conn: &mut Connection) {
        let xid = self.take_xid();
        let (tx, rx) = oneshot::channel();
        lock(&conn.in_flight).requests.push_back(Pending {
            xid,
            reply: Some(tx),
            watch: None,
            _permit: None,
        });
        let mut out = BytesMut::new();
        encode_header_only(&mut out, xid, OpCode::CloseSession);
        if conn.write(&out).await.is_err() {
            return;
        }
        let wait = conn.timeout.min(CLOSE_WAIT_MAX);
        // Every branch is cancel-safe (a oneshot receiver, `reader_end`, a
        // sleep), and whichever comes first ends the wait.
        tokio::select! {
            _ = rx => {}
            _ = conn.reader_end() => {}
            () = sleep(wait) => tracing::debug!("no reply to closeSession within {wait:?}"),
        }
    }

    /// Reconnects to the next servers until one takes the session back, the
    /// server says it expired, or the client closes. Commands that arrive
    /// meanwhile fail with `ConnectionLoss` after each failed attempt, as
    /// ZooKeeper's client fails its queue, rather than waiting an unbounded
    /// time.
    async fn reconnect(&mut self) -> Result<Connection, Ending> {
        self.fail_queued()?;
        let mut backoff = BACKOFF_MIN;
        loop {
            for _ in 0..self.hosts.len() {
                let host = self.take_host();
                match self.establish(&host).await {
                    Ok(conn) => return Ok(conn),
                    Err(Attempt::Expired) => return Err(Ending::Expired),
                    Err(Attempt::SaslFailed(reason)) => {
                        tracing::warn!(%reason, "SASL authentication failed");
                        return Err(Ending::AuthFailed);
                    }
                    Err(Attempt::Failed(why)) => {
                        tracing::debug!(%why, "reconnect attempt failed");
                    }
                }
                self.fail_queued()?;
            }
            let until = Instant::now() + jitter(backoff);
            loop {
                tokio::select! {
                    // Cancel-safe: a sleep holds nothing.
                    () = sleep_until(until) => break,
                    // Cancel-safe: `recv` is.
                    command = self.rx.recv() => self.answer_disconnected(command)?,
                }
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// Answers a command while there is no connection: a request fails
    /// with `ConnectionLoss`, a new server list is taken (with no server
    /// to leave).
    fn answer_disconnected(&mut self, command: Option<Command>) -> Result<(), Ending> {
        match command {
            None => Err(Ending::Closed(None)),
            Some(Command::Close { done }) => Err(Ending::Closed(Some(done))),
            Some(Command::Request { reply, .. } | Command::Auth { reply, .. }) => {
                let _ = reply.send(Reply::connection_loss());
                Ok(())
            }
            Some(Command::UpdateServerList { hosts, moved }) => {
                self.update_hosts(hosts, None, moved);
                Ok(())
            }
        }
    }

    /// Fails every queued command with `ConnectionLoss`.
    fn fail_queued(&mut self) -> Result<(), Ending> {
        loop {
            match self.rx.try_recv() {
                Ok(command) => self.answer_disconnected(Some(command))?,
                Err(mpsc::error::TryRecvError::Empty) => return Ok(()),
                Err(mpsc::error::TryRecvError::Disconnected) => return Err(Ending::Closed(None)),
            }
        }
    }

    /// Publishes the end, then lets go of everything that waits on the
    /// session: queued callers and watchers then read the terminal state.
    fn finish(mut self, ending: Ending) {
        let (state, mut dones) = match ending {
            Ending::Closed(done) => (SessionState::Closed, done.into_iter().collect()),
            Ending::Expired => (SessionState::Expired, Vec::new()),
            Ending::AuthFailed => (SessionState::AuthFailed, Vec::new()),
        };
        tracing::info!(?state, "session ended");
        self.shared.set_state(state);
        lock(&self.shared.watches).clear();
        self.rx.close();
        while let Ok(command) = self.rx.try_recv() {
            if let Command::Close { done } = command {
                dones.push(done);
            }
        }
        for done in dones {
            let _ = done.send(());
        }
    }
}

/// The commands one write carries.
#[derive(Default)]
struct Batch {
    pending: Vec<Pending>,
    auths: Vec<PendingAuth>,
    /// The session closes after this write (`Some(None)`: the client is
    /// gone, no one waits).
    close: Option<Option<oneshot::Sender<()>>>,
    /// The session leaves this server after this write.
    moving: bool,
}

impl Batch {
    /// Whether another command may join it.
    fn is_open(&self, out: &BytesMut) -> bool {
        self.close.is_none()
            && !self.moving
            && out.len() < WRITE_BATCH_BYTES
            && self.pending.len() + self.auths.len() < WRITE_BATCH_COMMANDS
    }
}

/// Waits for an in-flight permit, then for a command.
async fn next_command(
    rx: &mut mpsc::UnboundedReceiver<Command>,
    permits: &Arc<Semaphore>,
) -> (Option<Command>, Option<OwnedSemaphorePermit>) {
    // The semaphore is never closed, so this always yields a permit.
    let permit = permits.clone().acquire_owned().await.ok();
    (rx.recv().await, permit)
}

/// Stops a connection's reader, closes its socket and fails what it had
/// in flight.
async fn teardown(mut conn: Connection) {
    if conn.reader_end.is_none() {
        conn.reader.abort();
        // Wait until it has really stopped touching the in-flight queue.
        let _ = (&mut conn.reader).await;
    }
    drop(conn.writer);
    let in_flight = std::mem::take(&mut *lock(&conn.in_flight));
    in_flight.fail_all();
}

/// The next frame from `stream`, whose unread input is in `buf`.
pub(crate) async fn read_frame(
    stream: &mut MaybeTls,
    buf: &mut BytesMut,
    max_frame_bytes: usize,
) -> Result<Bytes, String> {
    loop {
        match jute::decode_frame(buf, max_frame_bytes) {
            Ok(Some(frame)) => return Ok(frame),
            Ok(None) => {}
            Err(e) => return Err(format!("a bad frame: {e}")),
        }
        match stream.read_buf(buf).await {
            Ok(0) => return Err("the server closed the connection".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("reading failed: {e}")),
        }
    }
}

fn encode_header_only(out: &mut BytesMut, xid: i32, op: OpCode) {
    encode_frame(out, |buf| RequestHeader { xid, op: op.code() }.encode(buf));
}

fn encode_auth(out: &mut BytesMut, auth: &AuthData) {
    encode_frame(out, |buf| {
        RequestHeader {
            xid: xid::AUTH,
            op: OpCode::Auth.code(),
        }
        .encode(buf);
        AuthPacket {
            auth_type: 0,
            scheme: auth.scheme.clone(),
            auth: Some(auth.auth.clone()),
        }
        .encode(buf);
    });
}

/// Splits the watches to re-register into `setWatches2` packets whose
/// paths stay under `SET_WATCHES_MAX_BYTES`, like ZooKeeper's client.
fn set_watches_batches(paths: WatchPaths, relative_zxid: i64) -> Vec<SetWatches2> {
    let mut batches = Vec::new();
    let mut current = SetWatches2 {
        relative_zxid,
        ..SetWatches2::default()
    };
    let mut bytes = 0;
    let lists = [
        (paths.data, 0),
        (paths.exist, 1),
        (paths.child, 2),
        (paths.persistent, 3),
        (paths.recursive, 4),
    ];
    for (list, which) in lists {
        for path in list {
            if bytes > 0 && bytes + path.len() > SET_WATCHES_MAX_BYTES {
                batches.push(std::mem::replace(
                    &mut current,
                    SetWatches2 {
                        relative_zxid,
                        ..SetWatches2::default()
                    },
                ));
                bytes = 0;
            }
            bytes += path.len();
            match which {
                0 => current.data_watches.push(path),
                1 => current.exist_watches.push(path),
                2 => current.child_watches.push(path),
                3 => current.persistent_watches.push(path),
                _ => current.persistent_recursive_watches.push(path),
            }
        }
    }
    if bytes > 0 {
        batches.push(current);
    }
    batches
}

/// Between half and all of `d`, so that many clients cut off at once do
/// not reconnect in step.
fn jitter(d: Duration) -> Duration {
    d.mul_f64(rand::thread_rng().gen_range(0.5..=1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_watches_are_split_by_size() {
        let long = "x".repeat(60 * 1024);
        let paths = WatchPaths {
            data: vec![format!("/{long}a"), format!("/{long}b")],
            exist: vec!["/e".into()],
            child: vec![format!("/{long}c")],
            persistent: vec!["/p".into()],
            recursive: vec!["/r".into()],
        };
        let batches = set_watches_batches(paths, 42);
        assert_eq!(batches.len(), 2);
        assert!(batches.iter().all(|b| b.relative_zxid == 42));
        assert_eq!(batches[0].data_watches.len(), 2);
        assert_eq!(batches[0].exist_watches, ["/e"]);
        assert_eq!(batches[1].child_watches.len(), 1);
        assert_eq!(batches[1].persistent_watches, ["/p"]);
        assert_eq!(batches[1].persistent_recursive_watches, ["/r"]);
        assert!(set_watches_batches(WatchPaths::default(), 1).is_empty());
    }
}
