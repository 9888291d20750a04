//! The arguments and results of operations that need more than a path:
//! create options, the ops of a `multi` and their results, `multiRead`.
//! Each turns into jute's wire records here, with the chroot applied and
//! the arguments checked, so the client methods stay one line of intent.

use std::time::Duration;

use bytes::Bytes;
use jute::{
    Acl, CheckVersionRequest, CreateMode, CreateRequest, CreateTTLRequest, DeleteRequest, MultiOp,
    MultiResult, OpCode, ReadOp, Request, SetDataRequest, Stat,
};

use crate::client::{Call, Client};
use crate::data::IntoData;
use crate::error::Error;
use crate::path::Chroot;

/// The largest TTL ZooKeeper accepts: its TTL ephemeral-owner encoding
/// keeps 40 bits for it (`EphemeralType.MAX_EXTENDED_SERVER_ID` layout).
pub const MAX_TTL: Duration = Duration::from_millis(0xFF_FFFF_FFFF);

/// How to create a node: its mode, ACL (open to everyone by default, as
/// ZooKeeper's `OPEN_ACL_UNSAFE`) and, for the TTL modes, its time to live.
/// A bare [`CreateMode`] converts into this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateOptions {
    pub mode: CreateMode,
    pub acl: Vec<Acl>,
    /// Required by (and only allowed with) `PersistentWithTtl` and
    /// `PersistentSequentialWithTtl`.
    pub ttl: Option<Duration>,
}

impl CreateOptions {
    pub fn new(mode: CreateMode) -> Self {
        Self {
            mode,
            acl: Acl::open_unsafe(),
            ttl: None,
        }
    }

    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = acl;
        self
    }

    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// The TTL in milliseconds for a TTL mode, `None` otherwise; checks
    /// that TTL and mode go together, as ZooKeeper's client does.
    fn ttl_ms(&self) -> Result<Option<i64>, Error> {
        let invalid = |reason: &str| Error::InvalidArgument {
            reason: reason.to_owned(),
        };
        match (self.mode.is_ttl(), self.ttl) {
            (false, None) => Ok(None),
            (false, Some(_)) => Err(invalid("a TTL needs a TTL create mode")),
            (true, None) => Err(invalid("a TTL create mode needs a TTL")),
            (true, Some(ttl)) if ttl.is_zero() || ttl > MAX_TTL => Err(invalid(
                "a TTL must be more than 0 ms and at most 2^40 - 1 ms",
            )),
            (true, Some(ttl)) => Ok(Some(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))),
        }
    }

    /// The create request: `create2` (so the reply has the stat),
    /// `createContainer` or `createTTL`, whichever the mode needs.
    pub(crate) fn request(
        &self,
        server_path: String,
        data: Option<Bytes>,
    ) -> Result<Request, Error> {
        Ok(match self.wire(server_path, data)? {
            Wire::Ttl(req) => Request::CreateTtl(req),
            Wire::Plain(op, req) => Request::Create { op, req },
        })
    }

    fn multi_op(&self, server_path: String, data: Option<Bytes>) -> Result<MultiOp, Error> {
        Ok(match self.wire(server_path, data)? {
            Wire::Ttl(req) => MultiOp::CreateTtl(req),
            Wire::Plain(op, req) => MultiOp::Create { op, req },
        })
    }

    fn wire(&self, path: String, data: Option<Bytes>) -> Result<Wire, Error> {
        let flags = self.mode.flags();
        let acl = self.acl.clone();
        Ok(match self.ttl_ms()? {
            Some(ttl) => Wire::Ttl(CreateTTLRequest {
                path,
                data,
                acl,
                flags,
                ttl,
            }),
            None => {
                let op = if self.mode.is_container() {
                    OpCode::CreateContainer
                } else {
                    OpCode::Create2
                };
                Wire::Plain(
                    op,
                    CreateRequest {
                        path,
                        data,
                        acl,
                        flags,
                    },
                )
            }
        })
    }
}

enum Wire {
    Ttl(CreateTTLRequest),
    Plain(OpCode, CreateRequest),
}

impl From<CreateMode> for CreateOptions {
    fn from(mode: CreateMode) -> Self {
        CreateOptions::new(mode)
    }
}

/// ZooKeeper's "any version" for `None`.
pub(crate) fn version(version: Option<i32>) -> i32 {
    version.unwrap_or(-1)
}

/// One operation of a `multi` transaction. Versions of `None` match any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
        /// `None` is null data.
        data: Option<Bytes>,
        options: CreateOptions,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    SetData {
        path: String,
        /// `None` is null data.
        data: Option<Bytes>,
        version: Option<i32>,
    },
    /// Fails the transaction unless the node's version is `version`.
    Check {
        path: String,
        version: i32,
    },
}

impl Op {
    pub fn create(path: &str, data: impl IntoData, options: impl Into<CreateOptions>) -> Op {
        Op::Create {
            path: path.to_owned(),
            data: data.into_data(),
            options: options.into(),
        }
    }

    pub fn delete(path: &str, version: Option<i32>) -> Op {
        Op::Delete {
            path: path.to_owned(),
            version,
        }
    }

    pub fn set_data(path: &str, data: impl IntoData, version: Option<i32>) -> Op {
        Op::SetData {
            path: path.to_owned(),
            data: data.into_data(),
            version,
        }
    }

    pub fn check(path: &str, version: i32) -> Op {
        Op::Check {
            path: path.to_owned(),
            version,
        }
    }

    /// The path as the caller wrote it.
    pub fn path(&self) -> &str {
        match self {
            Op::Create { path, .. }
            | Op::Delete { path, .. }
            | Op::SetData { path, .. }
            | Op::Check { path, .. } => path,
        }
    }

    pub(crate) fn to_wire(&self, chroot: &Chroot) -> Result<MultiOp, Error> {
        Ok(match self {
            Op::Create {
                path,
                data,
                options,
            } => {
                let server_path = chroot.server_path(path, options.mode.is_sequential())?;
                options.multi_op(server_path, data.clone())?
            }
            Op::Delete { path, version: v } => MultiOp::Delete(DeleteRequest {
                path: chroot.server_path(path, false)?,
                version: version(*v),
            }),
            Op::SetData {
                path,
                data,
                version: v,
            } => MultiOp::SetData(SetDataRequest {
                path: chroot.server_path(path, false)?,
                data: data.clone(),
                version: version(*v),
            }),
            Op::Check { path, version } => MultiOp::Check(CheckVersionRequest {
                path: chroot.server_path(path, false)?,
                version: *version,
            }),
        })
    }
}

/// The result of one op of a successful `multi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// The created path (differs from the requested one for sequential
    /// nodes), without the chroot. The stat is there for containers and
    /// TTL nodes only: ZooKeeper answers a plain create inside a multi
    /// without one, even when asked with `create2`.
    Create {
        path: String,
        stat: Option<Stat>,
    },
    Delete,
    SetData {
        stat: Stat,
    },
    Check,
}

/// The result of one op of a `multiRead`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResult {
    /// `data` is `None` when the node holds null data.
    Data {
        data: Option<Bytes>,
        stat: Stat,
    },
    Children {
        children: Vec<String>,
    },
}

/// Turns a `multi` reply into per-op results, or the failure ZooKeeper
/// reports: the first op whose result is an error (the ops before it say
/// 0, those after it `RuntimeInconsistency`).
pub(crate) fn multi_outcome(
    ops: &[Op],
    results: Vec<MultiResult>,
    chroot: &Chroot,
) -> Result<Vec<OpResult>, Error> {
    let path_of = |i: usize| ops.get(i).map(Op::path).unwrap_or_default();
    let failed = results
        .iter()
        .position(|r| matches!(r, MultiResult::Error { err } if *err != 0));
    if let Some(failed_index) = failed {
        let results: Vec<Result<(), Error>> = results
            .iter()
            .enumerate()
            .map(|(i, r)| match r {
                MultiResult::Error { err } if *err != 0 => Err(Error::from_code(*err, path_of(i))),
                _ => Ok(()),
            })
            .collect();
        let error = match &results[failed_index] {
            Err(e) => e.clone(),
            Ok(()) => unreachable!("the failed index holds an error"),
        };
        return Err(Error::Multi {
            failed_index,
            error: Box::new(error),
            results,
        });
    }
    if results.len() != ops.len() {
        return Err(Error::Protocol {
            path: String::new(),
            detail: format!("{} results for {} ops", results.len(), ops.len()),
        });
    }
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            Ok(match r {
                MultiResult::Create2 { path, stat } => OpResult::Create {
                    path: chroot.strip(&path),
                    stat: Some(stat),
                },
                MultiResult::Create { path } => OpResult::Create {
                    path: chroot.strip(&path),
                    stat: None,
                },
                MultiResult::Delete => OpResult::Delete,
                MultiResult::SetData { stat } => OpResult::SetData { stat },
                MultiResult::Check => OpResult::Check,
                other => {
                    return Err(Error::Protocol {
                        path: path_of(i).to_owned(),
                        detail: format!("unexpected multi result {other:?}"),
                    })
                }
            })
        })
        .collect()
}

/// Turns a `multiRead` reply into per-op results; each op succeeds or
/// fails on its own.
pub(crate) fn read_outcome(
    ops: &[ReadOp],
    results: Vec<MultiResult>,
) -> Result<Vec<Result<ReadResult, Error>>, Error> {
    if results.len() != ops.len() {
        return Err(Error::Protocol {
            path: String::new(),
            detail: format!("{} results for {} read ops", results.len(), ops.len()),
        });
    }
    results
        .into_iter()
        .zip(ops)
        .map(|(r, op)| {
            Ok(match r {
                MultiResult::GetData { data, stat } => Ok(ReadResult::Data { data, stat }),
                MultiResult::GetChildren { children } => Ok(ReadResult::Children { children }),
                MultiResult::Error { err } => Err(Error::from_code(err, op.path())),
                other => {
                    return Err(Error::Protocol {
                        path: op.path().to_owned(),
                        detail: format!("unexpected multiRead result {other:?}"),
                    })
                }
            })
        })
        .collect()
}

/// A `multi` built step by step; nothing is sent before
/// [`Transaction::commit`].
///
/// ```no_run
/// # async fn demo(client: &client::Client) -> Result<(), client::Error> {
/// use client::CreateMode;
/// client
///     .transaction()
///     .check("/config", 3)
///     .set_data("/config", b"v2", None)
///     .create("/config/log-", b"", CreateMode::PersistentSequential)
///     .commit()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a transaction does nothing until committed"]
pub struct Transaction<'a> {
    client: &'a Client,
    ops: Vec<Op>,
}

impl<'a> Transaction<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        Self {
            client,
            ops: Vec::new(),
        }
    }

    pub fn op(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    pub fn create(
        self,
        path: &str,
        data: impl IntoData,
        options: impl Into<CreateOptions>,
    ) -> Self {
        self.op(Op::create(path, data, options))
    }

    pub fn delete(self, path: &str, version: Option<i32>) -> Self {
        self.op(Op::delete(path, version))
    }

    pub fn set_data(self, path: &str, data: impl IntoData, version: Option<i32>) -> Self {
        self.op(Op::set_data(path, data, version))
    }

    pub fn check(self, path: &str, version: i32) -> Self {
        self.op(Op::check(path, version))
    }

    /// Sends the ops to run atomically: all succeed, or none is applied
    /// and the result is [`Error::Multi`].
    pub fn commit(self) -> Call<Vec<OpResult>> {
        self.client.multi(self.ops)
    }
}
