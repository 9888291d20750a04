//! An async client for the ZooKeeper protocol, as served by Paddock and by
//! Apache ZooKeeper.
//!
//! One [`Client`] is one session. Its methods map one-to-one onto the
//! protocol's operations; each sends its request at once and returns a
//! [`Call`] to await, so requests reach the server in the order the methods
//! are called (ZooKeeper's per-session FIFO order) and any number may be
//! outstanding, from any number of tasks: they are pipelined on one
//! connection and their replies matched in order. Watches are values: a one-shot watch is a [`Watch`]
//! future returned next to the read that set it, a persistent watch a
//! [`WatchStream`]; the session's own state changes come on a separate
//! [`StateStream`]. When a connection breaks, calls in flight fail with
//! [`Error::ConnectionLoss`] and the client reconnects (to any server of
//! the connect string) with the same session, credentials and watches; only
//! if the server says the session expired does the client end, with
//! [`Error::SessionExpired`] for every later call.
//!
//! Layout:
//! - `client`: [`Client`], one method per operation returning a [`Call`];
//!   encodes and queues in the caller's task and decodes the reply there.
//! - `session`: the session task, single owner of the connection's life:
//!   connect, handshake, reconnect with backoff, replay credentials and
//!   watches (`setWatches2`); it writes pipelined request batches and pings.
//! - `reader`: the per-connection reader task: matches replies to the
//!   requests in flight (in xid order), registers and fires watches.
//! - `watch`: [`WatchedEvent`], [`Watch`], [`WatchStream`] and the
//!   registry that routes events to local watchers.
//! - `transport`: the byte stream to a server, plain TCP or TLS.
//! - `state`: [`SessionState`], [`StateStream`] and the state shared by the
//!   handles and the two tasks.
//! - `data`: [`IntoData`], what writes take: bytes, or `None` for null
//!   data, which ZooKeeper keeps apart from empty (reads answer
//!   `Option<Bytes>`).
//! - `ops`: [`CreateOptions`], multi ops ([`Op`], [`Transaction`]) and
//!   results ([`OpResult`], [`ReadResult`]).
//! - `options`: [`ConnectOptions`] and the connect string.
//! - `path`: path validation and the chroot.
//! - `sasl_auth`: SASL DIGEST-MD5 on each new connection, before any
//!   request (the mechanism itself is the `sasl` crate's).
//! - `quota`: `setquota`, `listquota` and `delquota` as zkCli does them.
//! - `error`: [`Error`], one variant per ZooKeeper result code plus the
//!   client's own.
//! - `recipes`: coordination recipes on the client (locks, semaphore,
//!   election, group membership, barriers, queues, counter, watched value),
//!   one file each.
//!
//! Wire records come from the `jute` crate; the ones callers touch
//! (`Stat`, `Acl`, `CreateMode`, ...) are re-exported here.
//!
//! ```no_run
//! use client::{Client, ConnectOptions, CreateMode, EventType};
//!
//! # async fn demo() -> Result<(), client::Error> {
//! let zk = Client::connect("127.0.0.1:2181/app", ConnectOptions::new()).await?;
//! let (path, stat) = zk.create("/config", b"v1", CreateMode::Persistent).await?;
//! assert_eq!((path.as_str(), stat.version), ("/config", 0));
//!
//! // Read and watch; the watch resolves on the next change.
//! let (data, _stat, watch) = zk.get_data_watched("/config").await?;
//! assert_eq!(data.as_deref(), Some(&b"v1"[..]));
//! zk.set_data("/config", b"v2", Some(0)).await?;
//! assert_eq!(watch.await?.event_type, EventType::NodeDataChanged);
//!
//! // Every change below /config, as a stream.
//! let mut events = zk.watch_persistent("/config", true).await?;
//! zk.create("/config/a", b"", CreateMode::Ephemeral).await?;
//! let event = events.next().await.expect("an event");
//! assert_eq!(event.path, "/config/a");
//!
//! // All or nothing.
//! zk.transaction()
//!     .check("/config", 1)
//!     .delete("/config/a", None)
//!     .commit()
//!     .await?;
//! zk.close().await;
//! # Ok(()) }
//! ```

mod client;
mod data;
mod error;
mod ops;
mod options;
mod path;
mod quota;
mod reader;
mod rebalance;
pub mod recipes;
mod sasl_auth;
mod session;
mod state;
mod transport;
mod watch;

pub use client::{Call, ChildrenPage, Client};
pub use data::IntoData;
pub use error::Error;
pub use ops::{CreateOptions, Op, OpResult, ReadResult, Transaction, MAX_TTL};
pub use options::{ConnectOptions, DEFAULT_MAX_FRAME_BYTES, DEFAULT_PORT};
pub use path::child_path;
pub use quota::{check_quota_target, quota_path, Quota, QuotaLimits, QUOTA_ROOT};
pub use state::{SessionState, StateStream};
pub use watch::{Watch, WatchStream, WatchedEvent};

pub use bytes::Bytes;
pub use jute::{
    perms, Acl, AddWatchMode, ClientInfo, CreateMode, ErrorCode, EventType, Id, KeeperState,
    ReadOp, Stat, StatsTrack, WatcherType,
};
pub use tokio_rustls::rustls;
