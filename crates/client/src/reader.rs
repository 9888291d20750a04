//! The reader task of one connection: reads reply frames, hands each reply
//! to the request waiting for it, registers watches, routes notifications.
//!
//! ZooKeeper answers a session's requests in the order it sent them, so
//! the requests in flight form a queue in xid order (`InFlight::requests`)
//! and each reply must match the front; anything else means the stream can
//! no longer be trusted, and the connection is dropped (as ZooKeeper's own
//! client does: "Xid out of order"). Three xids are answered outside that
//! order and handled apart: notifications (-1), pings (-2, only proof of
//! life) and auth packets (-4, which ZooKeeper answers as soon as it reads
//! them, ahead of requests still in its pipeline; they keep their own
//! queue).
//!
//! The writer (the session task) pushes a request's entry before writing
//! its bytes, so a reply can never arrive before its entry.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use jute::{
    decode_frame, xid, ErrorCode, EventType, KeeperState, Record, ReplyHeader, WatcherEvent,
};
use tokio::io::AsyncReadExt;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::options::AuthData;
use crate::state::{lock, Shared};
use crate::watch::{WatchRegistration, WatchedEvent};

/// A reply as it came off the wire; the caller decodes the body, so the
/// reader does no per-operation work.
#[derive(Debug)]
pub(crate) struct Reply {
    pub header: ReplyHeader,
    pub body: Bytes,
}

impl Reply {
    /// What a request gets when the connection broke before its reply.
    pub(crate) fn connection_loss() -> Self {
        Reply {
            header: ReplyHeader {
                xid: 0,
                zxid: -1,
                err: ErrorCode::ConnectionLoss.code(),
            },
            body: Bytes::new(),
        }
    }
}

/// A request written and not yet answered.
#[derive(Debug)]
pub(crate) struct Pending {
    pub xid: i32,
    /// `None` for the client's own requests (setWatches2) whose reply
    /// nobody awaits.
    pub reply: Option<oneshot::Sender<Reply>>,
    pub watch: Option<WatchRegistration>,
    /// Bounds the requests in flight; released with the entry.
    pub _permit: Option<OwnedSemaphorePermit>,
}

/// An auth packet written and not yet answered.
#[derive(Debug)]
pub(crate) struct PendingAuth {
    pub reply: Option<oneshot::Sender<Reply>>,
    /// Credentials to remember for later connections if they succeed;
    /// `None` when they are already remembered (a replay after reconnect).
    pub remember: Option<AuthData>,
    pub _permit: Option<OwnedSemaphorePermit>,
}

/// What one connection has in flight. Shared by the writer, which pushes,
/// and the reader, which pops; each holds the lock for a push or a pop.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// In xid order, which is the order the server answers them.
    pub requests: VecDeque<Pending>,
    pub auths: VecDeque<PendingAuth>,
}

impl InFlight {
    /// Fails everything with `ConnectionLoss`: the connection is gone.
    pub(crate) fn fail_all(self) {
        for pending in self.requests {
            if let Some(tx) = pending.reply {
                let _ = tx.send(Reply::connection_loss());
            }
        }
        for pending in self.auths {
            if let Some(tx) = pending.reply {
                let _ = tx.send(Reply::connection_loss());
            }
        }
    }
}

/// Why a connection's reader stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadEnd {
    /// The server closed the connection.
    Closed,
    Io(String),
    /// Nothing arrived for the read timeout (two thirds of the session
    /// timeout, with pings every third): the server is unreachable.
    Silent(Duration),
    /// The server sent something that cannot be a valid reply.
    Protocol(String),
    /// The server rejected credentials; ZooKeeper then closes the
    /// connection and the session is unusable.
    AuthFailed,
    /// A reply said the session expired. ZooKeeper may keep such a
    /// connection open while silently dropping its requests; reconnecting
    /// at once gets the verdict from the handshake instead of waiting out
    /// the read timeout.
    SessionExpired,
}

impl std::fmt::Display for ReadEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadEnd::Closed => write!(f, "the server closed the connection"),
            ReadEnd::Io(e) => write!(f, "read failed: {e}"),
            ReadEnd::Silent(d) => write!(f, "nothing heard from the server for {d:?}"),
            ReadEnd::Protocol(e) => write!(f, "protocol error: {e}"),
            ReadEnd::AuthFailed => write!(f, "the server rejected the credentials"),
            ReadEnd::SessionExpired => write!(f, "a reply said the session expired"),
        }
    }
}

/// Read buffer growth step: large enough that a big reply arrives in few
/// reads, small enough to not matter per connection.
const READ_CHUNK_BYTES: usize = 64 * 1024;

pub(crate) struct Reader {
    pub socket: crate::transport::ReadHalf,
    /// Bytes already read past the handshake.
    pub buf: BytesMut,
    pub in_flight: Arc<Mutex<InFlight>>,
    pub shared: Arc<Shared>,
    pub read_timeout: Duration,
    pub max_frame_bytes: usize,
}

impl Reader {
    pub(crate) async fn run(mut self) -> ReadEnd {
        loop {
            loop {
                match decode_frame(&mut self.buf, self.max_frame_bytes) {
                    Ok(Some(frame)) => {
                        if let Err(end) = self.dispatch(frame) {
                            return end;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return ReadEnd::Protocol(e.to_string()),
                }
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK_BYTES / 4 {
                self.buf.reserve(READ_CHUNK_BYTES);
            }
            let read = tokio::time::timeout(self.read_timeout, self.socket.read_buf(&mut self.buf));
            match read.await {
                Err(_) => return ReadEnd::Silent(self.read_timeout),
                Ok(Ok(0)) => return ReadEnd::Closed,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return ReadEnd::Io(e.to_string()),
            }
        }
    }

    fn dispatch(&mut self, frame: Bytes) -> Result<(), ReadEnd> {
        if frame.len() < ReplyHeader::ENCODED_BYTES {
            return Err(ReadEnd::Protocol(format!(
                "a reply of {} bytes is shorter than its header",
                frame.len()
            )));
        }
        let header = ReplyHeader::from_bytes(frame.slice(..ReplyHeader::ENCODED_BYTES))
            .map_err(|e| ReadEnd::Protocol(e.to_string()))?;
        let body = frame.slice(ReplyHeader::ENCODED_BYTES..);
        match header.xid {
            xid::NOTIFICATION => self.notify(header, body),
            xid::PING => Ok(()),
            xid::AUTH => self.auth_reply(header, body),
            _ => self.reply(header, body),
        }
    }

    fn reply(&mut self, header: ReplyHeader, body: Bytes) -> Result<(), ReadEnd> {
        let pending = lock(&self.in_flight).requests.pop_front();
        let pending = match pending {
            Some(p) if p.xid == header.xid => p,
            Some(p) => {
                return Err(ReadEnd::Protocol(format!(
                    "reply for xid {} while xid {} was next",
                    header.xid, p.xid
                )))
            }
            None => {
                return Err(ReadEnd::Protocol(format!(
                    "reply for xid {} with no request in flight",
                    header.xid
                )))
            }
        };
        if header.zxid > 0 {
            self.shared.saw_zxid(header.zxid);
        }
        if let Some(reg) = pending.watch {
            // Before the reply is handed over, so no event that follows the
            // read can miss its watcher.
            lock(&self.shared.watches).register(reg, header.err);
        }
        let expired = header.err == ErrorCode::SessionExpired.code();
        if let Some(tx) = pending.reply {
            // The caller may have given up (dropped its future): fine.
            let _ = tx.send(Reply { header, body });
        }
        if expired {
            return Err(ReadEnd::SessionExpired);
        }
        Ok(())
    }

    fn auth_reply(&mut self, header: ReplyHeader, body: Bytes) -> Result<(), ReadEnd> {
        let Some(pending) = lock(&self.in_flight).auths.pop_front() else {
            return Err(ReadEnd::Protocol(
                "an auth reply with no auth in flight".into(),
            ));
        };
        if header.err == 0 {
            if let Some(auth) = pending.remember {
                // Remembered here, on the live connection, so no reconnect
                // can slip between success and remembering.
                lock(&self.shared.auths).push(auth);
            }
        }
        if let Some(tx) = pending.reply {
            let _ = tx.send(Reply { header, body });
        }
        if header.err == ErrorCode::AuthFailed.code() {
            return Err(ReadEnd::AuthFailed);
        }
        Ok(())
    }

    fn notify(&mut self, header: ReplyHeader, body: Bytes) -> Result<(), ReadEnd> {
        let event = WatcherEvent::from_bytes(body).map_err(|e| ReadEnd::Protocol(e.to_string()))?;
        let (Some(event_type), Some(state)) = (
            EventType::from_code(event.event_type),
            KeeperState::from_code(event.state),
        ) else {
            tracing::warn!(
                event_type = event.event_type,
                state = event.state,
                path = %event.path,
                "ignoring a notification of an unknown type"
            );
            return Ok(());
        };
        if event_type == EventType::None {
            // Connection states travel on the state stream, decided by the
            // client; the server has no reason to send them.
            tracing::debug!(?state, "ignoring a state notification from the server");
            return Ok(());
        }
        let watched = WatchedEvent {
            event_type,
            state,
            path: self.shared.chroot.strip(&event.path),
            zxid: header.zxid,
        };
        lock(&self.shared.watches).fire(&event.path, &watched);
        Ok(())
    }
}
