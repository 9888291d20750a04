//! [`Client`], the handle: one method per ZooKeeper operation, each
//! returning a [`Call`].
//!
//! A method does its work up front, in the caller's task: it checks and
//! chroots the path, encodes the request body and queues it for the session
//! task with a oneshot for the reply (STYLE §3's actor handle), then
//! returns a `Call` that awaits the reply and decodes it, again in the
//! caller's task, so the session task only frames bytes. Because the
//! request is queued by the method call itself, a session's requests reach
//! the server in the order the methods were called, whatever order their
//! calls are awaited in: ZooKeeper's FIFO order is the program's order.
//! Many calls may be outstanding at once, from any number of tasks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use jute::{
    Acl, AddWatchMode, AddWatchRequest, ClientInfo, Create2Response, DeleteRequest, ErrorCode,
    GetACLRequest, GetACLResponse, GetAllChildrenNumberRequest, GetAllChildrenNumberResponse,
    GetChildren2Response, GetChildrenPageRequest, GetChildrenPageResponse, GetChildrenResponse,
    GetDataResponse, GetEphemeralsRequest, GetEphemeralsResponse, MultiResponse, OpCode,
    PathAndWatch, ReadOp, ReconfigRequest, Record, Request, SetACLRequest, SetDataRequest, Stat,
    StatResponse, SyncRequest, WatcherType, WatchesRequest, WhoAmIResponse,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::data::IntoData;
use crate::error::Error;
use crate::ops::{self, CreateOptions, Op, OpResult, ReadResult, Transaction};
use crate::options::{AuthData, ConnectOptions, ConnectString};
use crate::path::{child_path, Chroot};
use crate::reader::Reply;
use crate::session::{Command, SessionTask};
use crate::state::{lock, SessionInfo, SessionState, Shared, StateStream, Unanswered};
use crate::watch::{Watch, WatchKind, WatchRegistration, WatchSink, WatchStream};

/// Where servers of an ensemble publish its membership
/// (`ZooDefs.CONFIG_NODE`).
const CONFIG_NODE: &str = "/zookeeper/config";

/// One page of a node's children ([`Client::get_children_page`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildrenPage {
    /// Names, not paths, in byte order.
    pub children: Vec<String>,
    /// The node's `Stat`; `num_children` counts them all.
    pub stat: Stat,
    /// Whether children follow the last name of this page.
    pub more: bool,
}

/// A ZooKeeper session. Cheap to clone: clones share the session. The
/// session closes when [`Client::close`] is called or the last clone is
/// dropped.
///
/// Every operation is a method that sends its request at once and returns
/// a [`Call`] to await for the result; requests reach the server in the
/// order the methods are called.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    tx: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
}

/// An operation already sent (or failed before sending); await it for the
/// result. Dropping it does not cancel the operation, which may already be
/// on its way; it only discards the result.
#[must_use = "the request is sent either way; await the Call for its result"]
pub struct Call<T> {
    inner: Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'static>>,
}

impl<T> Call<T> {
    fn new(future: impl Future<Output = Result<T, Error>> + Send + 'static) -> Self {
        Self {
            inner: Box::pin(future),
        }
    }
}

impl<T> Future for Call<T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T> std::fmt::Debug for Call<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Call")
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let session = self.inner.shared.session();
        f.debug_struct("Client")
            .field("session_id", &format_args!("{:#x}", session.id))
            .field("state", &self.state())
            .field("chroot", &self.chroot())
            .finish()
    }
}

/// A queued request's reply, with what is needed to report its failure.
struct Sent {
    rx: oneshot::Receiver<Reply>,
    call: Unanswered,
    /// The caller's path, for errors.
    path: String,
}

impl Sent {
    /// The reply, whatever its code.
    async fn reply(self) -> Result<Reply, Error> {
        // A dropped sender means the session ended with the request queued
        // (or the session task was gone before it was queued).
        match self.rx.await {
            Ok(reply) => Ok(reply),
            Err(_) => Err(self.call.0.terminal_error(&self.path)),
        }
    }

    /// The body of an OK reply, or the typed error for its code.
    async fn ok(self) -> Result<Bytes, Error> {
        let path = self.path.clone();
        check(self.reply().await?, &path)
    }

    /// The decoded body of an OK reply.
    async fn decode<T: Record>(self) -> Result<T, Error> {
        let path = self.path.clone();
        decode(self.ok().await?, &path)
    }
}

impl Client {
    /// Connects to one of the servers of `connect_string`
    /// ("host:port,host:port[/chroot]") and opens a session (or resumes
    /// one, see [`ConnectOptions::resume_session`]), then authenticates
    /// with the options' credentials. Returns once the session is usable.
    ///
    /// Must be called within a tokio runtime: the session lives in a task
    /// spawned on it.
    pub async fn connect(connect_string: &str, options: ConnectOptions) -> Result<Client, Error> {
        let parsed = ConnectString::parse(connect_string)?;
        let shared = Arc::new(Shared::new(Chroot::new(parsed.chroot.clone())));
        if let Some((id, password)) = &options.resume {
            shared.set_session(SessionInfo {
                id: *id,
                password: password.clone(),
                timeout: Duration::ZERO,
            });
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let mut task = SessionTask::new(rx, shared.clone(), &parsed, &options);
        let deadline = Instant::now() + options.connect_timeout;
        let conn = task.connect_first(deadline).await?;
        tokio::spawn(task.run(conn));
        let client = Client {
            inner: Arc::new(Inner { tx, shared }),
        };
        for AuthData { scheme, auth } in &options.auth {
            if let Err(e) = client.add_auth(scheme, auth).await {
                client.close().await;
                return Err(e);
            }
        }
        Ok(client)
    }

    // ----- the session ---------------------------------------------------

    /// The session id, as the server assigned it.
    pub fn session_id(&self) -> i64 {
        self.inner.shared.session().id
    }

    /// The session password, to resume the session from another client
    /// with [`ConnectOptions::resume_session`].
    pub fn session_password(&self) -> Bytes {
        self.inner.shared.session().password
    }

    /// The session timeout the server granted.
    pub fn session_timeout(&self) -> Duration {
        self.inner.shared.session().timeout
    }

    /// The session's state now.
    pub fn state(&self) -> SessionState {
        self.inner.shared.state()
    }

    /// Every state change from now on (Disconnected, Connected, ... and a
    /// final Expired, AuthFailed or Closed), in order.
    pub fn state_changes(&self) -> StateStream {
        self.inner.shared.subscribe()
    }

    /// The chroot of the connect string, if any.
    pub fn chroot(&self) -> Option<&str> {
        self.inner.shared.chroot.root()
    }

    /// The zxid of the latest reply received.
    pub fn last_zxid_seen(&self) -> i64 {
        self.inner.shared.last_zxid()
    }

    /// Closes the session: the server deletes its ephemeral nodes and
    /// watches. Calls made before complete first; later calls fail with
    /// [`Error::Closed`], pending watches resolve with it, and watch streams
    /// end. Closing a finished client does nothing.
    pub async fn close(&self) {
        let (done, wait) = oneshot::channel();
        if self.inner.tx.send(Command::Close { done }).is_ok() {
            // An error here means the session ended some other way first.
            let _ = wait.await;
        }
    }

    /// Changes the ensemble's membership (ZooKeeper's `reconfig`, which a
    /// server serves with `reconfigEnabled` to its superuser): servers
    /// `joining` ("server.N=host:peer:election[:role];clientPort", comma
    /// separated) and `leaving` (ids, comma separated), or the whole
    /// membership in `new_members`; `from_config`, when given, must be the
    /// current configuration's version. Returns the new configuration, as
    /// `get_config` would, and its `Stat`.
    pub fn reconfig(
        &self,
        joining: Option<&str>,
        leaving: Option<&str>,
        new_members: Option<&str>,
        from_config: Option<i64>,
    ) -> Call<(Bytes, Stat)> {
        let request = Request::Reconfig(ReconfigRequest {
            joining_servers: joining.map(str::to_owned),
            leaving_servers: leaving.map(str::to_owned),
            new_members: new_members.map(str::to_owned),
            cur_config_id: from_config.unwrap_or(-1),
        });
        // ZooKeeperAdmin's errors name no path.
        let sent = self.send(&request, None, "");
        Call::new(async move {
            let reply: GetDataResponse = sent.decode().await?;
            Ok((reply.data.unwrap_or_default(), reply.stat))
        })
    }

    /// Gives the session a new list of servers ("host:port,..."; a chroot
    /// is ignored), as ZooKeeper's `updateServerList`: for instance after
    /// the ensemble's membership changed (`get_config_watched`). The
    /// session may then leave its server for one of the new list, with the
    /// probability that evens out the load over it (so a grown ensemble
    /// gets its share of clients without all of them moving); it keeps
    /// its session and watches, and reports Disconnected then Connected.
    /// Returns whether it leaves.
    pub async fn update_server_list(&self, servers: &str) -> Result<bool, Error> {
        let connect = ConnectString::parse(servers)?;
        let (moved, answer) = oneshot::channel();
        let command = Command::UpdateServerList {
            hosts: connect.hosts,
            moved,
        };
        if self.inner.tx.send(command).is_err() {
            return Err(self.inner.shared.terminal_error(""));
        }
        answer
            .await
            .map_err(|_| self.inner.shared.terminal_error(""))
    }

    // ----- nodes ----------------------------------------------------------

    /// Creates a node and returns its path (for sequential modes, with the
    /// counter the server appended) and its `Stat`. `data` is bytes, or
    /// `None` for null data ([`IntoData`]); `options` is a
    /// [`jute::CreateMode`] or [`CreateOptions`] (ACL, TTL).
    pub fn create(
        &self,
        path: &str,
        data: impl IntoData,
        options: impl Into<CreateOptions>,
    ) -> Call<(String, Stat)> {
        let options = options.into();
        let data = data.into_data();
        let sent = self
            .server_path_for(path, options.mode.is_sequential())
            .and_then(|server_path| options.request(server_path, data))
            .map(|request| self.send(&request, None, path));
        let shared = self.inner.shared.clone();
        Call::new(async move {
            let created: Create2Response = sent?.decode().await?;
            Ok((shared.chroot.strip(&created.path), created.stat))
        })
    }

    /// `root` and every node below it, parents before their children
    /// (breadth first, as ZooKeeper's `ZKUtil.listSubTreeBFS`): what a
    /// recursive delete removes, deepest first.
    pub async fn subtree(&self, root: &str) -> Result<Vec<String>, Error> {
        let mut tree = vec![root.to_owned()];
        let mut next = 0;
        while next < tree.len() {
            let children = self.get_children(&tree[next]).await?;
            let parent = tree[next].clone();
            tree.extend(children.iter().map(|child| child_path(&parent, child)));
            next += 1;
        }
        Ok(tree)
    }

    /// Deletes a node if its version is `version` (`None`: any version).
    pub fn delete(&self, path: &str, version: Option<i32>) -> Call<()> {
        let sent = self.server_path(path).map(|server_path| {
            let request = Request::Delete(DeleteRequest {
                path: server_path,
                version: ops::version(version),
            });
            self.send(&request, None, path)
        });
        Call::new(async move { sent?.ok().await.map(drop) })
    }

    /// The node's `Stat`, or `None` if it does not exist.
    pub fn exists(&self, path: &str) -> Call<Option<Stat>> {
        let sent = self
            .read(path, false)
            .map(|read| self.send(&Request::Exists(read), None, path));
        Call::new(async move { exists_result(sent?).await })
    }

    /// [`Client::exists`], leaving a watch that fires when the node is
    /// created, changed or deleted.
    pub fn exists_watched(&self, path: &str) -> Call<(Option<Stat>, Watch)> {
        let sent = self.read(path, true).map(|read| {
            let (reg, watch) = self.one_shot(&read.path, WatchKind::Exists);
            (self.send(&Request::Exists(read), Some(reg), path), watch)
        });
        Call::new(async move {
            let (sent, watch) = sent?;
            Ok((exists_result(sent).await?, watch))
        })
    }

    /// The node's data (`None` when it holds null data) and `Stat`.
    pub fn get_data(&self, path: &str) -> Call<(Option<Bytes>, Stat)> {
        let sent = self
            .read(path, false)
            .map(|read| self.send(&Request::GetData(read), None, path));
        Call::new(async move {
            let reply: GetDataResponse = sent?.decode().await?;
            Ok((reply.data, reply.stat))
        })
    }

    /// [`Client::get_data`], leaving a watch that fires when the node's
    /// data changes or the node is deleted.
    pub fn get_data_watched(&self, path: &str) -> Call<(Option<Bytes>, Stat, Watch)> {
        let sent = self.read(path, true).map(|read| {
            let (reg, watch) = self.one_shot(&read.path, WatchKind::Data);
            (self.send(&Request::GetData(read), Some(reg), path), watch)
        });
        Call::new(async move {
            let (sent, watch) = sent?;
            let reply: GetDataResponse = sent.decode().await?;
            Ok((reply.data, reply.stat, watch))
        })
    }

    /// The ensemble's membership as the servers publish it in
    /// `/zookeeper/config` (`server.N=...` lines, then `version=`), and its
    /// `Stat`; empty from a standalone server. As in ZooKeeper's
    /// `getConfig`, the path is the server's own, whatever the chroot.
    pub fn get_config(&self) -> Call<(Option<Bytes>, Stat)> {
        let read = PathAndWatch {
            path: CONFIG_NODE.to_owned(),
            watch: false,
        };
        let sent = self.send(&Request::GetData(read), None, CONFIG_NODE);
        Call::new(async move {
            let reply: GetDataResponse = sent.decode().await?;
            Ok((reply.data, reply.stat))
        })
    }

    /// [`Client::get_config`], leaving a watch that fires when the
    /// membership changes.
    pub fn get_config_watched(&self) -> Call<(Option<Bytes>, Stat, Watch)> {
        let read = PathAndWatch {
            path: CONFIG_NODE.to_owned(),
            watch: true,
        };
        let (reg, watch) = self.one_shot(CONFIG_NODE, WatchKind::Data);
        let sent = self.send(&Request::GetData(read), Some(reg), CONFIG_NODE);
        Call::new(async move {
            let reply: GetDataResponse = sent.decode().await?;
            Ok((reply.data, reply.stat, watch))
        })
    }

    /// Replaces the node's data if its version is `version` (`None`: any
    /// version); returns the new `Stat`. `None` writes null data.
    pub fn set_data(&self, path: &str, data: impl IntoData, version: Option<i32>) -> Call<Stat> {
        let data = data.into_data();
        let sent = self.server_path(path).map(|server_path| {
            let request = Request::SetData(SetDataRequest {
                path: Some(server_path),
                data,
                version: ops::version(version),
            });
            self.send(&request, None, path)
        });
        Call::new(async move { Ok(sent?.decode::<StatResponse>().await?.stat) })
    }

    /// The node's ACL and `Stat`.
    pub fn get_acl(&self, path: &str) -> Call<(Vec<Acl>, Stat)> {
        let sent = self.server_path(path).map(|server_path| {
            let request = Request::GetAcl(GetACLRequest { path: server_path });
            self.send(&request, None, path)
        });
        Call::new(async move {
            let reply: GetACLResponse = sent?.decode().await?;
            Ok((reply.acl, reply.stat))
        })
    }

    /// Replaces the node's ACL if its ACL version (`aversion`) is `version`
    /// (`None`: any); returns the new `Stat`.
    pub fn set_acl(&self, path: &str, acl: &[Acl], version: Option<i32>) -> Call<Stat> {
        let sent = self.server_path(path).map(|server_path| {
            let request = Request::SetAcl(SetACLRequest {
                path: Some(server_path),
                acl: acl.to_vec(),
                version: ops::version(version),
            });
            self.send(&request, None, path)
        });
        Call::new(async move { Ok(sent?.decode::<StatResponse>().await?.stat) })
    }

    /// The names (not paths) of the node's children, in no particular
    /// order.
    pub fn get_children(&self, path: &str) -> Call<Vec<String>> {
        let sent = self
            .read(path, false)
            .map(|read| self.send(&Request::GetChildren(read), None, path));
        Call::new(async move { Ok(sent?.decode::<GetChildrenResponse>().await?.children) })
    }

    /// The children's names and the node's `Stat`.
    pub fn get_children_with_stat(&self, path: &str) -> Call<(Vec<String>, Stat)> {
        let sent = self
            .read(path, false)
            .map(|read| self.send(&Request::GetChildren2(read), None, path));
        Call::new(async move {
            let reply: GetChildren2Response = sent?.decode().await?;
            Ok((reply.children, reply.stat))
        })
    }

    /// One page of the node's children: the names after `start_after` in
    /// byte order (from the first when it is empty), at most
    /// `max_children` (the server may answer fewer), with the node's
    /// `Stat` and whether more follow. List a node of millions of children
    /// page by page, passing each page's last name as the next
    /// `start_after`. A Paddock extension: ZooKeeper answers
    /// `Unimplemented` and closes the connection (the session survives).
    pub fn get_children_page(
        &self,
        path: &str,
        start_after: &str,
        max_children: i32,
    ) -> Call<ChildrenPage> {
        let start_after = start_after.to_string();
        let sent = self.read(path, false).map(|read| {
            let request = Request::GetChildrenPage(GetChildrenPageRequest {
                path: read.path,
                watch: read.watch,
                start_after,
                max_children,
            });
            self.send(&request, None, path)
        });
        Call::new(async move {
            let reply: GetChildrenPageResponse = sent?.decode().await?;
            Ok(ChildrenPage {
                children: reply.children,
                stat: reply.stat,
                more: reply.more,
            })
        })
    }

    /// [`Client::get_children_with_stat`], leaving a watch that fires when
    /// a child is created or deleted, or the node is deleted.
    pub fn get_children_watched(&self, path: &str) -> Call<(Vec<String>, Stat, Watch)> {
        let sent = self.read(path, true).map(|read| {
            let (reg, watch) = self.one_shot(&read.path, WatchKind::Child);
            (
                self.send(&Request::GetChildren2(read), Some(reg), path),
                watch,
            )
        });
        Call::new(async move {
            let (sent, watch) = sent?;
            let reply: GetChildren2Response = sent.decode().await?;
            Ok((reply.children, reply.stat, watch))
        })
    }

    /// The number of nodes below `path` (the node itself excluded).
    pub fn get_all_children_number(&self, path: &str) -> Call<i32> {
        let sent = self.server_path(path).map(|server_path| {
            let request =
                Request::GetAllChildrenNumber(GetAllChildrenNumberRequest { path: server_path });
            self.send(&request, None, path)
        });
        Call::new(async move {
            Ok(sent?
                .decode::<GetAllChildrenNumberResponse>()
                .await?
                .total_number)
        })
    }

    /// The paths of this session's ephemeral nodes that start with
    /// `prefix` (a string prefix, "/" for all).
    pub fn get_ephemerals(&self, prefix: &str) -> Call<Vec<String>> {
        let shared = self.inner.shared.clone();
        let sent = crate::path::validate(prefix, true).map(|()| {
            // Under a chroot, "/" means "everything inside it", not every
            // path that merely starts with the chroot's characters.
            let server_prefix = match shared.chroot.root() {
                Some(root) if prefix == "/" => format!("{root}/"),
                _ => shared.chroot.prefix(prefix),
            };
            let request = Request::GetEphemerals(GetEphemeralsRequest {
                prefix: server_prefix,
            });
            self.send(&request, None, prefix)
        });
        Call::new(async move {
            let reply: GetEphemeralsResponse = sent?.decode().await?;
            Ok(reply
                .ephemerals
                .iter()
                .map(|p| shared.chroot.strip(p))
                .collect())
        })
    }

    /// Waits until the server this client is connected to has applied
    /// every write committed before the call, so a read after it sees them.
    pub fn sync(&self, path: &str) -> Call<()> {
        let sent = self.server_path(path).map(|server_path| {
            let request = Request::Sync(SyncRequest {
                path: Some(server_path),
            });
            self.send(&request, None, path)
        });
        Call::new(async move { sent?.ok().await.map(drop) })
    }

    // ----- transactions --------------------------------------------------

    /// Runs `ops` atomically: every op succeeds, or none is applied and
    /// the error is [`Error::Multi`] naming the op that failed and holding
    /// each op's outcome.
    pub fn multi(&self, ops: impl IntoIterator<Item = Op>) -> Call<Vec<OpResult>> {
        let ops: Vec<Op> = ops.into_iter().collect();
        let shared = self.inner.shared.clone();
        let sent = ops
            .iter()
            .map(|op| op.to_wire(&shared.chroot))
            .collect::<Result<Vec<_>, _>>()
            .map(|wire| self.send(&Request::Multi(wire), None, ""));
        Call::new(async move {
            let reply = sent?.reply().await?;
            multi_reply(&ops, reply, &shared.chroot)
        })
    }

    /// A builder for [`Client::multi`].
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction::new(self)
    }

    /// Runs several reads in one round trip. Not atomic: each op succeeds
    /// or fails on its own, and no watches are left.
    pub fn multi_read(
        &self,
        ops: impl IntoIterator<Item = ReadOp>,
    ) -> Call<Vec<Result<ReadResult, Error>>> {
        let ops: Vec<ReadOp> = ops.into_iter().collect();
        let sent = ops
            .iter()
            .map(|op| {
                Ok(match op {
                    ReadOp::GetData(path) => ReadOp::GetData(self.server_path(path)?),
                    ReadOp::GetChildren(path) => ReadOp::GetChildren(self.server_path(path)?),
                })
            })
            .collect::<Result<Vec<_>, Error>>()
            .map(|wire| self.send(&Request::MultiRead(wire), None, ""));
        Call::new(async move {
            let MultiResponse(results) = sent?.decode().await?;
            ops::read_outcome(&ops, results)
        })
    }

    // ----- auth ------------------------------------------------------------

    /// Adds an identity to the session (scheme "digest" with
    /// "user:password", say). It is replayed on every reconnect. A rejected
    /// identity fails with [`Error::AuthFailed`] and, as in ZooKeeper, ends
    /// the session.
    pub fn add_auth(&self, scheme: &str, auth: &[u8]) -> Call<()> {
        let (reply, rx) = oneshot::channel();
        let command = Command::Auth {
            auth: AuthData {
                scheme: scheme.to_owned(),
                auth: Bytes::copy_from_slice(auth),
            },
            reply,
        };
        let sent = self.queue(command, rx, "");
        Call::new(async move { sent.ok().await.map(drop) })
    }

    /// The identities the server has for this session (scheme and user).
    pub fn who_am_i(&self) -> Call<Vec<ClientInfo>> {
        let sent = self.send(&Request::WhoAmI, None, "");
        Call::new(async move { Ok(sent.decode::<WhoAmIResponse>().await?.client_info) })
    }

    // ----- watches -----------------------------------------------------------

    /// Adds a persistent watch at `path`; with `PersistentRecursive`, on
    /// every node below it too. Returns the stream of its events.
    pub fn add_watch(&self, path: &str, mode: AddWatchMode) -> Call<WatchStream> {
        let sent = self.server_path(path).map(|server_path| {
            let (tx, rx) = mpsc::unbounded_channel();
            let kind = match mode {
                AddWatchMode::Persistent => WatchKind::Persistent,
                AddWatchMode::PersistentRecursive => WatchKind::PersistentRecursive,
            };
            let reg = WatchRegistration {
                path: server_path.clone(),
                kind,
                sink: WatchSink::Stream(tx),
            };
            let request = Request::AddWatch(AddWatchRequest {
                path: Some(server_path),
                mode: mode.code(),
            });
            (self.send(&request, Some(reg), path), rx)
        });
        Call::new(async move {
            let (sent, rx) = sent?;
            sent.ok().await?;
            Ok(WatchStream::new(rx))
        })
    }

    /// [`Client::add_watch`] with a flag: every event at `path` (and, if
    /// `recursive`, below it) as a stream.
    pub fn watch_persistent(&self, path: &str, recursive: bool) -> Call<WatchStream> {
        let mode = if recursive {
            AddWatchMode::PersistentRecursive
        } else {
            AddWatchMode::Persistent
        };
        self.add_watch(path, mode)
    }

    /// Removes this session's watches of `watcher_type` at `path` from the
    /// server; the local watchers get a removal event (persistent streams
    /// then end). Fails with [`Error::NoWatcher`] if there is none.
    pub fn remove_watches(&self, path: &str, watcher_type: WatcherType) -> Call<()> {
        let shared = self.inner.shared.clone();
        let sent = self.server_path(path).map(|server_path| {
            let request = Request::RemoveWatches(WatchesRequest {
                path: Some(server_path.clone()),
                watcher_type: watcher_type.code(),
            });
            (self.send(&request, None, path), server_path)
        });
        let path = path.to_owned();
        Call::new(async move {
            let (sent, server_path) = sent?;
            sent.ok().await?;
            lock(&shared.watches).remove(&server_path, watcher_type, &path);
            Ok(())
        })
    }

    /// Whether the server holds a watch of `watcher_type` at `path` for
    /// this session: `Ok` if so, [`Error::NoWatcher`] if not.
    pub fn check_watches(&self, path: &str, watcher_type: WatcherType) -> Call<()> {
        let sent = self.server_path(path).map(|server_path| {
            let request = Request::CheckWatches(WatchesRequest {
                path: Some(server_path),
                watcher_type: watcher_type.code(),
            });
            self.send(&request, None, path)
        });
        Call::new(async move { sent?.ok().await.map(drop) })
    }

    // ----- plumbing ----------------------------------------------------------

    fn server_path(&self, path: &str) -> Result<String, Error> {
        self.server_path_for(path, false)
    }

    fn server_path_for(&self, path: &str, sequential: bool) -> Result<String, Error> {
        self.inner.shared.chroot.server_path(path, sequential)
    }

    fn read(&self, path: &str, watch: bool) -> Result<PathAndWatch, Error> {
        Ok(PathAndWatch {
            path: self.server_path(path)?,
            watch,
        })
    }

    fn one_shot(&self, server_path: &str, kind: WatchKind) -> (WatchRegistration, Watch) {
        let (tx, rx) = oneshot::channel();
        let reg = WatchRegistration {
            path: server_path.to_owned(),
            kind,
            sink: WatchSink::Once(tx),
        };
        (reg, Watch::new(rx, self.inner.shared.clone()))
    }

    /// Encodes and queues a request; this fixes its place in the session's
    /// order.
    fn send(&self, request: &Request, watch: Option<WatchRegistration>, path: &str) -> Sent {
        let op = OpCode::from_code(request.op_code()).expect("the client sends only known opcodes");
        let mut body = BytesMut::with_capacity(body_capacity(request, path));
        request.encode(&mut body);
        let (reply, rx) = oneshot::channel();
        let command = Command::Request {
            op,
            body: body.freeze(),
            watch,
            reply,
        };
        self.queue(command, rx, path)
    }

    fn queue(&self, command: Command, rx: oneshot::Receiver<Reply>, path: &str) -> Sent {
        // If the session task is gone, the command (and its reply sender)
        // is dropped here, and `Sent` reports the session's end.
        let _ = self.inner.tx.send(command);
        Sent {
            rx,
            call: Unanswered::new(self.inner.shared.clone()),
            path: path.to_owned(),
        }
    }
}

/// Bytes around a request's path and data (lengths, version, flags, one
/// ACL) that a body of this size leaves room for.
const REQUEST_FIELDS_BYTES: usize = 64;

/// Room for `request`'s encoding in one allocation, so that encoding it
/// does not grow the buffer. Grown from empty, reallocating was 8% of the
/// load generator's CPU under `paddock bench mix` (setData of 1 KB, read
/// ratio 0), and 0.1% sized ahead; its CPU per request went from
/// 2.18-3.04 µs to 2.07-2.48 (six alternated runs against one server
/// build). Multis and requests with many ACLs may still grow it.
fn body_capacity(request: &Request, path: &str) -> usize {
    let data = match request {
        Request::SetData(req) => req.data.as_ref(),
        Request::Create { req, .. } => req.data.as_ref(),
        Request::CreateTtl(req) => req.data.as_ref(),
        _ => None,
    };
    REQUEST_FIELDS_BYTES + path.len() + data.map_or(0, |data| data.len())
}

/// The body of an OK reply, or the typed error for its code.
fn check(reply: Reply, path: &str) -> Result<Bytes, Error> {
    match reply.header.err {
        0 => Ok(reply.body),
        err => Err(Error::from_code(err, path)),
    }
}

async fn exists_result(sent: Sent) -> Result<Option<Stat>, Error> {
    match sent.decode::<StatResponse>().await {
        Ok(reply) => Ok(Some(reply.stat)),
        Err(e) if e.code() == Some(ErrorCode::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// ZooKeeper reports a failed multi in the body, with err 0 in the header.
/// A non-zero header err is a failure of the request as a whole, unless
/// the body says which op failed.
fn multi_reply(ops: &[Op], reply: Reply, chroot: &Chroot) -> Result<Vec<OpResult>, Error> {
    let err = reply.header.err;
    if err != 0 && reply.body.is_empty() {
        return Err(Error::from_code(err, ""));
    }
    match MultiResponse::from_bytes(reply.body) {
        Ok(MultiResponse(results)) => match ops::multi_outcome(ops, results, chroot) {
            Ok(_) if err != 0 => Err(Error::from_code(err, "")),
            outcome => outcome,
        },
        Err(_) if err != 0 => Err(Error::from_code(err, "")),
        Err(e) => Err(protocol_error("", e)),
    }
}

fn decode<T: Record>(body: Bytes, path: &str) -> Result<T, Error> {
    T::from_bytes(body).map_err(|e| protocol_error(path, e))
}

fn protocol_error(path: &str, e: jute::DecodeError) -> Error {
    Error::Protocol {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}
