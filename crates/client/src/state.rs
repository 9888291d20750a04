//! State shared by the client handles, the session task and the reader
//! task: the session's identity, its connection state and who listens to
//! it, the watch registry, the last zxid seen and the credentials to replay.
//!
//! Each field sits behind a std `Mutex` (or an atomic) held only for a few
//! non-blocking lines and never across an `.await`, which is why std's lock
//! beats tokio's here. Sending on an unbounded channel never blocks, so the
//! state lock may be held while notifying subscribers; that keeps every
//! subscriber's sequence of states in the order the states were set.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::error::Error;
use crate::options::AuthData;
use crate::path::Chroot;
use crate::watch::WatchRegistry;

/// The session as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// Connected to a server; requests flow.
    Connected,
    /// The connection broke; the client is reconnecting. Requests fail with
    /// `ConnectionLoss` until it is back; the session and its watches live
    /// on if it comes back in time.
    Disconnected,
    /// The server declared the session expired. Terminal.
    Expired,
    /// The server rejected the credentials. Terminal.
    AuthFailed,
    /// Closed by [`crate::Client::close`] or by dropping every handle.
    /// Terminal.
    Closed,
}

impl SessionState {
    /// Whether the client is finished in this state.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            SessionState::Expired | SessionState::AuthFailed | SessionState::Closed
        )
    }

    /// The error every call gets once the client is in this terminal state.
    fn terminal_error(self, path: &str) -> Error {
        let path = path.to_owned();
        match self {
            SessionState::Expired => Error::SessionExpired { path },
            SessionState::AuthFailed => Error::AuthFailed { path },
            _ => Error::Closed,
        }
    }
}

/// Every state change of a session from the moment of subscribing, in
/// order; ends after a terminal state.
#[derive(Debug)]
pub struct StateStream {
    rx: mpsc::UnboundedReceiver<SessionState>,
}

impl StateStream {
    /// The next state change; `None` after the terminal one.
    ///
    /// # Cancel safety
    /// Cancel-safe: a state is never lost by dropping this future.
    pub async fn next(&mut self) -> Option<SessionState> {
        self.rx.recv().await
    }

    /// The poll form of [`StateStream::next`].
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<SessionState>> {
        self.rx.poll_recv(cx)
    }
}

#[derive(Debug)]
struct StateCell {
    current: SessionState,
    /// Unbounded because state changes are few (a handful per reconnect)
    /// and a subscriber must see each one.
    subscribers: Vec<mpsc::UnboundedSender<SessionState>>,
}

/// The session's identity, as of the last handshake.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionInfo {
    pub id: i64,
    pub password: Bytes,
    /// As negotiated by the server.
    pub timeout: Duration,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub chroot: Chroot,
    state: Mutex<StateCell>,
    session: Mutex<SessionInfo>,
    pub watches: Mutex<WatchRegistry>,
    /// The zxid of the latest reply (zxid space: the server's, i.e. the
    /// replicated log index in Paddock). Sent on reconnect so no server
    /// older than what the client has seen accepts it, and as the relative
    /// zxid of `setWatches2`, so changes missed while disconnected fire.
    last_zxid: AtomicI64,
    /// Credentials that succeeded on this session, replayed in this order
    /// on every new connection (auth is per connection in ZooKeeper).
    pub auths: Mutex<Vec<AuthData>>,
    /// Requests queued whose callers have not yet taken their replies
    /// (see [`Unanswered`]).
    unanswered: AtomicUsize,
}

/// Counts a queued request until its caller takes the reply (or gives the
/// call up): callers holding answers they have not yet taken are about to
/// run, and may queue more requests (see `session::wait_for_more_callers`).
pub(crate) struct Unanswered(pub Arc<Shared>);

impl Unanswered {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        shared.unanswered.fetch_add(1, Ordering::Relaxed);
        Unanswered(shared)
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        self.0.unanswered.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Locks, ignoring poisoning: every critical section leaves its data
/// consistent at each step, so a panic elsewhere does not corrupt it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub(crate) fn new(chroot: Chroot) -> Self {
        Self {
            chroot,
            state: Mutex::new(StateCell {
                current: SessionState::Disconnected,
                subscribers: Vec::new(),
            }),
            session: Mutex::new(SessionInfo::default()),
            watches: Mutex::new(WatchRegistry::default()),
            last_zxid: AtomicI64::new(0),
            auths: Mutex::new(Vec::new()),
            unanswered: AtomicUsize::new(0),
        }
    }

    /// Requests queued whose callers have not yet taken their replies.
    pub(crate) fn unanswered(&self) -> usize {
        self.unanswered.load(Ordering::Relaxed)
    }

    pub(crate) fn state(&self) -> SessionState {
        lock(&self.state).current
    }

    /// Moves to `next` and tells every subscriber. A terminal state is
    /// final: later changes are ignored, and subscribers are let go.
    pub(crate) fn set_state(&self, next: SessionState) {
        let mut cell = lock(&self.state);
        if cell.current.is_terminal() || cell.current == next {
            return;
        }
        cell.current = next;
        cell.subscribers.retain(|tx| tx.send(next).is_ok());
        if next.is_terminal() {
            cell.subscribers.clear();
        }
    }

    pub(crate) fn subscribe(&self) -> StateStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut cell = lock(&self.state);
        if cell.current.is_terminal() {
            // Nothing will change any more: say how it ended, then end.
            let _ = tx.send(cell.current);
        } else {
            cell.subscribers.push(tx);
        }
        StateStream { rx }
    }

    /// The error for a call on a finished client (`Closed` if, oddly, the
    /// client is not finished).
    pub(crate) fn terminal_error(&self, path: &str) -> Error {
        self.state().terminal_error(path)
    }

    pub(crate) fn session(&self) -> SessionInfo {
        lock(&self.session).clone()
    }

    pub(crate) fn set_session(&self, info: SessionInfo) {
        *lock(&self.session) = info;
    }

    pub(crate) fn last_zxid(&self) -> i64 {
        self.last_zxid.load(Ordering::Acquire)
    }

    /// Records a reply's zxid; never moves backwards.
    pub(crate) fn saw_zxid(&self, zxid: i64) {
        self.last_zxid.fetch_max(zxid, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_see_every_change_until_terminal() {
        let shared = Shared::new(Chroot::default());
        let mut stream = shared.subscribe();
        shared.set_state(SessionState::Connected);
        shared.set_state(SessionState::Connected);
        shared.set_state(SessionState::Disconnected);
        shared.set_state(SessionState::Expired);
        shared.set_state(SessionState::Connected);
        let mut seen = Vec::new();
        while let Ok(state) = stream.rx.try_recv() {
            seen.push(state);
        }
        assert_eq!(
            seen,
            [
                SessionState::Connected,
                SessionState::Disconnected,
                SessionState::Expired
            ]
        );
        assert_eq!(shared.state(), SessionState::Expired);
        assert_eq!(
            shared.terminal_error("/a"),
            Error::SessionExpired { path: "/a".into() }
        );
        let mut late = shared.subscribe();
        assert_eq!(late.rx.try_recv(), Ok(SessionState::Expired));
        assert!(late.rx.try_recv().is_err());
    }
}
