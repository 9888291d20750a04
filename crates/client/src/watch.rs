//! Watches as values: a one-shot watch is a [`Watch`] future, a persistent
//! watch a [`WatchStream`]; the client's [`WatchRegistry`] routes each
//! notification from the server to every local watcher it concerns.
//!
//! The server keeps at most one watch of each kind per path for a
//! connection, however many times the client asked; the registry keeps the
//! many local watchers behind it and fans each event out, following
//! ZooKeeper's `ZKWatchManager.materialize`: data and exist watchers fire on
//! created/changed/deleted, child watchers on children-changed and deleted,
//! persistent watchers on every event at their path, recursive ones on every
//! event at or below theirs except children-changed.
//!
//! The registry is filled by the reader task when a watching read's reply
//! arrives, and emptied by the same task when events arrive, so a watch is
//! registered before any event that follows its read is routed, and an
//! event reaches its watcher before the reply to any later request.
//! Registry keys are server paths (chroot included), which is what both the
//! server's events and `setWatches2` speak.
//!
//! Persistent watchers get an unbounded queue: the reader must never wait
//! for a slow consumer (it would stall every reply and ping of the session),
//! and dropping events would break the promise that a watcher sees every
//! change. Events are small; a consumer that stops reading should drop its
//! stream, which unregisters it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use jute::{EventType, KeeperState, WatcherType};
use tokio::sync::{mpsc, oneshot};

use crate::error::Error;
use crate::state::Shared;

/// A change the server notified, as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    pub event_type: EventType,
    /// `SyncConnected` for node events.
    pub state: KeeperState,
    /// The node's path, without the chroot.
    pub path: String,
    /// The zxid of the change when the server says (ZooKeeper 3.9 and
    /// Paddock do), else -1.
    pub zxid: i64,
}

/// How a watching read registers its watch once the reply is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchKind {
    /// `getData`: a data watch, if the node exists.
    Data,
    /// `exists`: a data watch if the node exists, an exist watch if not.
    Exists,
    /// `getChildren`: a child watch, if the node exists.
    Child,
    /// `addWatch` in persistent mode.
    Persistent,
    /// `addWatch` in persistent recursive mode.
    PersistentRecursive,
}

/// Where a watch's events go.
#[derive(Debug)]
pub(crate) enum WatchSink {
    Once(oneshot::Sender<WatchedEvent>),
    Stream(mpsc::UnboundedSender<WatchedEvent>),
}

/// A watch to register when the reply to the request carrying it succeeds.
#[derive(Debug)]
pub(crate) struct WatchRegistration {
    /// Server path.
    pub path: String,
    pub kind: WatchKind,
    pub sink: WatchSink,
}

/// The client's watchers by server path. See the module docs for who
/// touches it and when.
#[derive(Debug, Default)]
pub(crate) struct WatchRegistry {
    data: HashMap<String, Vec<oneshot::Sender<WatchedEvent>>>,
    exist: HashMap<String, Vec<oneshot::Sender<WatchedEvent>>>,
    child: HashMap<String, Vec<oneshot::Sender<WatchedEvent>>>,
    persistent: HashMap<String, Vec<mpsc::UnboundedSender<WatchedEvent>>>,
    recursive: HashMap<String, Vec<mpsc::UnboundedSender<WatchedEvent>>>,
}

/// The server paths of live watches, by kind, for `setWatches2`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct WatchPaths {
    pub data: Vec<String>,
    pub exist: Vec<String>,
    pub child: Vec<String>,
    pub persistent: Vec<String>,
    pub recursive: Vec<String>,
}

impl WatchPaths {
    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
            && self.exist.is_empty()
            && self.child.is_empty()
            && self.persistent.is_empty()
            && self.recursive.is_empty()
    }
}

impl WatchRegistry {
    /// Registers `reg` after its request finished with result code `err`,
    /// following ZooKeeper's `WatchRegistration.register`: a read registers
    /// only if it succeeded, except `exists`, which also watches a missing
    /// node for its creation. Returns whether it registered.
    pub(crate) fn register(&mut self, reg: WatchRegistration, err: i32) -> bool {
        const NO_NODE: i32 = jute::ErrorCode::NoNode as i32;
        let WatchRegistration { path, kind, sink } = reg;
        match (kind, sink, err) {
            (WatchKind::Data | WatchKind::Exists, WatchSink::Once(tx), 0) => {
                self.data.entry(path).or_default().push(tx)
            }
            (WatchKind::Exists, WatchSink::Once(tx), NO_NODE) => {
                self.exist.entry(path).or_default().push(tx)
            }
            (WatchKind::Child, WatchSink::Once(tx), 0) => {
                self.child.entry(path).or_default().push(tx)
            }
            (WatchKind::Persistent, WatchSink::Stream(tx), 0) => {
                self.persistent.entry(path).or_default().push(tx)
            }
            (WatchKind::PersistentRecursive, WatchSink::Stream(tx), 0) => {
                self.recursive.entry(path).or_default().push(tx)
            }
            _ => return false,
        }
        true
    }

    /// Routes one notification for `server_path` to every watcher it
    /// concerns; `event.path` is already the client's path.
    pub(crate) fn fire(&mut self, server_path: &str, event: &WatchedEvent) {
        let mut once = Vec::new();
        let mut take = |map: &mut HashMap<String, Vec<oneshot::Sender<WatchedEvent>>>| {
            if let Some(senders) = map.remove(server_path) {
                once.extend(senders);
            }
        };
        match event.event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                take(&mut self.data);
                take(&mut self.exist);
            }
            EventType::NodeChildrenChanged => take(&mut self.child),
            EventType::NodeDeleted => {
                take(&mut self.data);
                take(&mut self.exist);
                take(&mut self.child);
            }
            // State changes and removal notices are not node events; the
            // server does not send them for watches, so nothing fires.
            EventType::None
            | EventType::DataWatchRemoved
            | EventType::ChildWatchRemoved
            | EventType::PersistentWatchRemoved => return,
        }
        for tx in once {
            // The receiver may be gone: the caller dropped the `Watch`.
            let _ = tx.send(event.clone());
        }
        send_all(&mut self.persistent, server_path, event);
        if event.event_type != EventType::NodeChildrenChanged {
            for ancestor in ancestors_and_self(server_path) {
                send_all(&mut self.recursive, ancestor, event);
            }
        }
    }

    /// Forgets local watchers of `watcher_type` at `server_path` after the
    /// server removed its watch, telling each with a removal event as
    /// ZooKeeper's client does.
    pub(crate) fn remove(
        &mut self,
        server_path: &str,
        watcher_type: WatcherType,
        client_path: &str,
    ) {
        let notice = |event_type| WatchedEvent {
            event_type,
            state: KeeperState::SyncConnected,
            path: client_path.to_owned(),
            zxid: -1,
        };
        let (data, child, persistent, recursive) = match watcher_type {
            WatcherType::Data => (true, false, false, false),
            WatcherType::Children => (false, true, false, false),
            WatcherType::Persistent => (false, false, true, false),
            WatcherType::PersistentRecursive => (false, false, false, true),
            WatcherType::Any => (true, true, true, true),
        };
        if data {
            for map in [&mut self.data, &mut self.exist] {
                for tx in map.remove(server_path).unwrap_or_default() {
                    let _ = tx.send(notice(EventType::DataWatchRemoved));
                }
            }
        }
        if child {
            for tx in self.child.remove(server_path).unwrap_or_default() {
                let _ = tx.send(notice(EventType::ChildWatchRemoved));
            }
        }
        for (wanted, map) in [
            (persistent, &mut self.persistent),
            (recursive, &mut self.recursive),
        ] {
            if wanted {
                // Dropping the senders after the notice ends the streams.
                for tx in map.remove(server_path).unwrap_or_default() {
                    let _ = tx.send(notice(EventType::PersistentWatchRemoved));
                }
            }
        }
    }

    /// The paths whose watches someone still waits on, for re-registration
    /// after a reconnect. Watchers whose receiver was dropped are forgotten
    /// here, so a dropped stream stops costing a server watch from the next
    /// connection on.
    pub(crate) fn live_paths(&mut self) -> WatchPaths {
        fn once(map: &mut HashMap<String, Vec<oneshot::Sender<WatchedEvent>>>) -> Vec<String> {
            map.retain(|_, senders| {
                senders.retain(|tx| !tx.is_closed());
                !senders.is_empty()
            });
            sorted_keys(map)
        }
        fn streams(
            map: &mut HashMap<String, Vec<mpsc::UnboundedSender<WatchedEvent>>>,
        ) -> Vec<String> {
            map.retain(|_, senders| {
                senders.retain(|tx| !tx.is_closed());
                !senders.is_empty()
            });
            sorted_keys(map)
        }
        WatchPaths {
            data: once(&mut self.data),
            exist: once(&mut self.exist),
            child: once(&mut self.child),
            persistent: streams(&mut self.persistent),
            recursive: streams(&mut self.recursive),
        }
    }

    /// Drops every watcher: the session is over. One-shot watches then
    /// resolve with the session's terminal error, streams end.
    pub(crate) fn clear(&mut self) {
        *self = WatchRegistry::default();
    }
}

/// Sorted so that `setWatches2` is deterministic (easier to read in a
/// packet capture, and testable).
fn sorted_keys<V>(map: &HashMap<String, V>) -> Vec<String> {
    let mut keys: Vec<String> = map.keys().cloned().collect();
    keys.sort();
    keys
}

fn send_all(
    map: &mut HashMap<String, Vec<mpsc::UnboundedSender<WatchedEvent>>>,
    path: &str,
    event: &WatchedEvent,
) {
    if let Some(senders) = map.get_mut(path) {
        senders.retain(|tx| tx.send(event.clone()).is_ok());
        if senders.is_empty() {
            map.remove(path);
        }
    }
}

/// "/a/b" -> "/a/b", "/a", "/".
fn ancestors_and_self(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let current = next?;
        next = match current.rfind('/') {
            _ if current == "/" => None,
            Some(0) => Some("/"),
            Some(at) => Some(&current[..at]),
            None => None,
        };
        Some(current)
    })
}

/// A one-shot watch: resolves with the first event for its node, or with
/// the session's terminal error (`SessionExpired`, `Closed`, ...) if the
/// watch can no longer fire. Survives reconnects: the client re-registers
/// it. Dropping it forgets the watch locally.
#[derive(Debug)]
#[must_use = "a watch does nothing unless awaited"]
pub struct Watch {
    rx: oneshot::Receiver<WatchedEvent>,
    shared: Arc<Shared>,
}

impl Watch {
    pub(crate) fn new(rx: oneshot::Receiver<WatchedEvent>, shared: Arc<Shared>) -> Self {
        Self { rx, shared }
    }
}

impl Future for Watch {
    type Output = Result<WatchedEvent, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(Ok(event)) => Poll::Ready(Ok(event)),
            // The registry only drops a watcher when the session is over.
            Poll::Ready(Err(_)) => Poll::Ready(Err(self.shared.terminal_error(""))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The events of a persistent watch, in order. Ends (`None`) when the watch
/// is removed or the session is over; survives reconnects. Dropping it
/// forgets the watch locally; the server-side watch goes at the next
/// reconnect or with [`crate::Client::remove_watches`].
#[derive(Debug)]
pub struct WatchStream {
    rx: mpsc::UnboundedReceiver<WatchedEvent>,
}

impl WatchStream {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<WatchedEvent>) -> Self {
        Self { rx }
    }

    /// The next event; `None` once the watch is gone.
    ///
    /// # Cancel safety
    /// Cancel-safe: an event is never lost by dropping this future.
    pub async fn next(&mut self) -> Option<WatchedEvent> {
        self.rx.recv().await
    }

    /// An event if one is already queued.
    pub fn try_next(&mut self) -> Option<WatchedEvent> {
        self.rx.try_recv().ok()
    }

    /// The poll form of [`WatchStream::next`], to adapt this to any
    /// `Stream` trait.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<WatchedEvent>> {
        self.rx.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: EventType, path: &str) -> WatchedEvent {
        WatchedEvent {
            event_type,
            state: KeeperState::SyncConnected,
            path: path.into(),
            zxid: 7,
        }
    }

    fn once(
        reg: &mut WatchRegistry,
        path: &str,
        kind: WatchKind,
        err: i32,
    ) -> oneshot::Receiver<WatchedEvent> {
        let (tx, rx) = oneshot::channel();
        reg.register(
            WatchRegistration {
                path: path.into(),
                kind,
                sink: WatchSink::Once(tx),
            },
            err,
        );
        rx
    }

    fn stream(
        reg: &mut WatchRegistry,
        path: &str,
        kind: WatchKind,
    ) -> mpsc::UnboundedReceiver<WatchedEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        assert!(reg.register(
            WatchRegistration {
                path: path.into(),
                kind,
                sink: WatchSink::Stream(tx),
            },
            0,
        ));
        rx
    }

    #[test]
    fn ancestors() {
        let all: Vec<&str> = ancestors_and_self("/a/b/c").collect();
        assert_eq!(all, ["/a/b/c", "/a/b", "/a", "/"]);
        assert_eq!(ancestors_and_self("/").collect::<Vec<_>>(), ["/"]);
    }

    #[test]
    fn one_shot_watches_fire_once_by_kind() {
        let mut reg = WatchRegistry::default();
        let mut data = once(&mut reg, "/a", WatchKind::Data, 0);
        let mut data2 = once(&mut reg, "/a", WatchKind::Data, 0);
        let mut child = once(&mut reg, "/a", WatchKind::Child, 0);
        let mut exist = once(&mut reg, "/b", WatchKind::Exists, -101);
        let mut failed = once(&mut reg, "/c", WatchKind::Data, -101);
        assert!(failed.try_recv().is_err());

        reg.fire("/a", &event(EventType::NodeDataChanged, "/a"));
        assert_eq!(
            data.try_recv().unwrap().event_type,
            EventType::NodeDataChanged
        );
        assert!(data2.try_recv().is_ok());
        assert!(
            child.try_recv().is_err(),
            "child watch must not fire on data change"
        );

        reg.fire("/a", &event(EventType::NodeDeleted, "/a"));
        assert_eq!(child.try_recv().unwrap().event_type, EventType::NodeDeleted);

        reg.fire("/b", &event(EventType::NodeCreated, "/b"));
        assert_eq!(exist.try_recv().unwrap().event_type, EventType::NodeCreated);
        assert!(reg.live_paths().is_empty());
    }

    #[test]
    fn persistent_and_recursive_watches() {
        let mut reg = WatchRegistry::default();
        let mut p = stream(&mut reg, "/a", WatchKind::Persistent);
        let mut r = stream(&mut reg, "/a", WatchKind::PersistentRecursive);
        reg.fire("/a/x", &event(EventType::NodeCreated, "/a/x"));
        reg.fire("/a", &event(EventType::NodeChildrenChanged, "/a"));
        reg.fire("/a", &event(EventType::NodeDataChanged, "/a"));
        assert_eq!(
            p.try_recv().unwrap().event_type,
            EventType::NodeChildrenChanged
        );
        assert_eq!(p.try_recv().unwrap().event_type, EventType::NodeDataChanged);
        assert!(p.try_recv().is_err());
        assert_eq!(r.try_recv().unwrap().path, "/a/x");
        assert_eq!(r.try_recv().unwrap().event_type, EventType::NodeDataChanged);
        assert!(
            r.try_recv().is_err(),
            "recursive watches skip children-changed"
        );

        let paths = reg.live_paths();
        assert_eq!(paths.persistent, ["/a"]);
        assert_eq!(paths.recursive, ["/a"]);

        reg.remove("/a", WatcherType::Persistent, "/a");
        assert_eq!(
            p.try_recv().unwrap().event_type,
            EventType::PersistentWatchRemoved
        );
        assert!(matches!(
            p.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        drop(r);
        assert!(reg.live_paths().is_empty());
    }
}
