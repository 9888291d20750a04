//! Printing watch and session events as they come, the way zkCli's one
//! default watcher does.
//!
//! zkCli sets every watch with a single watcher object, and the Java
//! client calls a watcher once per notification however many of its
//! watches the notification triggers (`get -w /a` twice, or a data and a
//! child watch on a deleted node, print one event). This client has a
//! value per watch instead, so one task, the hub, owns them all and
//! prints the events of one poll as one set: the client hands a
//! notification to every watch it triggers at once (under its registry's
//! lock, on the runtime's one worker thread), so the copies of one
//! notification are ready together and are printed once.
//!
//! The hub also prints the session's state changes (zkCli's default
//! watcher gets those too: `state:SyncConnected type:None path:null`) and
//! notices the shell queues, in order with the events; and it can be
//! flushed, which the non-interactive modes do after each command so that
//! a command's events follow its output deterministically.

use std::collections::HashSet;
use std::future::{poll_fn, Future};
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use client::{KeeperState, SessionState, StateStream, Watch, WatchStream, WatchedEvent};
use tokio::sync::{mpsc, oneshot};

use crate::format;

/// Where events are printed. The interactive shell prints through the
/// line editor, so an event does not garble the line being typed.
pub trait EventSink: Send + Sync + 'static {
    fn print(&self, text: &str);
}

/// Events on standard output.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdoutSink;

impl EventSink for StdoutSink {
    fn print(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        // Nowhere to report a failure to print: stdout is where we would.
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

/// What the hub waits on.
enum Source {
    Once { path: String, watch: Watch },
    Stream { path: String, stream: WatchStream },
    State(StateStream),
}

enum Request {
    Watch(Source),
    Notice(String),
    Flush(oneshot::Sender<()>),
    /// Forgets the watches at a path (`removewatches -l` without a server).
    Forget(String),
}

/// The handle on the hub task.
#[derive(Clone)]
pub(crate) struct Watches {
    tx: mpsc::UnboundedSender<Request>,
    printing: Arc<AtomicBool>,
}

impl Watches {
    /// Starts the hub. Must be called within a tokio runtime.
    pub(crate) fn start(sink: Arc<dyn EventSink>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let printing = Arc::new(AtomicBool::new(true));
        tokio::spawn(hub(rx, sink, printing.clone()));
        Self { tx, printing }
    }

    pub(crate) fn once(&self, path: &str, watch: Watch) {
        self.send(Request::Watch(Source::Once {
            path: path.to_owned(),
            watch,
        }));
    }

    pub(crate) fn stream(&self, path: &str, stream: WatchStream) {
        self.send(Request::Watch(Source::Stream {
            path: path.to_owned(),
            stream,
        }));
    }

    pub(crate) fn session(&self, states: StateStream) {
        self.send(Request::Watch(Source::State(states)));
    }

    /// Prints `text` after the events already received, if printing is on.
    pub(crate) fn notice(&self, text: String) {
        self.send(Request::Notice(text));
    }

    pub(crate) fn forget(&self, path: &str) {
        self.send(Request::Forget(path.to_owned()));
    }

    /// Returns once every event already delivered to a watch is printed.
    pub(crate) async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        self.send(Request::Flush(done));
        // An error means the hub is gone (the runtime is shutting down).
        let _ = wait.await;
    }

    /// zkCli's `printwatches`.
    pub(crate) fn set_printing(&self, on: bool) {
        self.printing.store(on, Ordering::SeqCst);
    }

    pub(crate) fn printing(&self) -> bool {
        self.printing.load(Ordering::SeqCst)
    }

    fn send(&self, request: Request) {
        // The hub lives as long as the runtime, which outlives the shell.
        let _ = self.tx.send(request);
    }
}

async fn hub(
    mut rx: mpsc::UnboundedReceiver<Request>,
    sink: Arc<dyn EventSink>,
    printing: Arc<AtomicBool>,
) {
    let print = |texts: Vec<String>| {
        if printing.load(Ordering::SeqCst) {
            for text in texts {
                sink.print(&text);
            }
        }
    };
    let mut sources: Vec<Source> = Vec::new();
    loop {
        // Requests first, so a flush sees the watches added before it.
        let step = poll_fn(|cx| {
            if let Poll::Ready(request) = rx.poll_recv(cx) {
                return Poll::Ready(Ok(request));
            }
            let texts = poll_all(&mut sources, cx);
            if texts.is_empty() {
                Poll::Pending
            } else {
                Poll::Ready(Err(texts))
            }
        })
        .await;
        match step {
            Err(texts) => print(texts),
            Ok(None) => return,
            Ok(Some(Request::Watch(source))) => sources.push(source),
            Ok(Some(Request::Notice(text))) => print(vec![text]),
            Ok(Some(Request::Forget(path))) => sources.retain(|source| match source {
                Source::Once { path: p, .. } | Source::Stream { path: p, .. } => *p != path,
                Source::State(_) => true,
            }),
            Ok(Some(Request::Flush(done))) => {
                let texts = poll_fn(|cx| Poll::Ready(poll_all(&mut sources, cx))).await;
                print(texts);
                let _ = done.send(());
            }
        }
    }
}

/// Polls every source once; returns the texts of the events that were
/// ready, each distinct notification once, in order. Sources that are
/// done (a fired one-shot watch, an ended stream) are dropped.
fn poll_all(sources: &mut Vec<Source>, cx: &mut Context<'_>) -> Vec<String> {
    let mut texts = Vec::new();
    let mut seen = HashSet::new();
    sources.retain_mut(|source| {
        let (text, keep) = match source {
            Source::Once { watch, .. } => match Pin::new(watch).poll(cx) {
                Poll::Pending => return true,
                Poll::Ready(Ok(event)) => (Some(node_event(&event)), false),
                // The session ended; its end is reported as a state.
                Poll::Ready(Err(_)) => (None, false),
            },
            Source::Stream { stream, .. } => match stream.poll_next(cx) {
                Poll::Pending => return true,
                Poll::Ready(Some(event)) => (Some(node_event(&event)), true),
                Poll::Ready(None) => (None, false),
            },
            Source::State(states) => match states.poll_next(cx) {
                Poll::Pending => return true,
                Poll::Ready(Some(state)) => (Some(session_event(state)), true),
                Poll::Ready(None) => (None, false),
            },
        };
        if let Some((text, zxid)) = text {
            if seen.insert((text.clone(), zxid)) {
                texts.push(text);
            }
        }
        keep
    });
    texts
}

/// A node event's text, and its zxid to tell apart two notifications that
/// read the same.
fn node_event(event: &WatchedEvent) -> (String, i64) {
    let text = format::event(
        format::keeper_state(event.state),
        format::event_type(event.event_type),
        Some(&event.path),
    );
    (text, event.zxid)
}

/// A session state change as the Java client reports it to the default
/// watcher.
fn session_event(state: SessionState) -> (String, i64) {
    let keeper = match state {
        SessionState::Connected => KeeperState::SyncConnected,
        SessionState::Disconnected => KeeperState::Disconnected,
        SessionState::Expired => KeeperState::Expired,
        SessionState::AuthFailed => KeeperState::AuthFailed,
        SessionState::Closed => KeeperState::Closed,
    };
    (
        format::event(format::keeper_state(keeper), "None", None),
        -1,
    )
}
