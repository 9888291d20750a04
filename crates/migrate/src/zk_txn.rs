//! Apache ZooKeeper's logged transactions (`zookeeper.jute`'s `txn`
//! module): what `SerializeUtils.deserializeTxn` makes of one log entry.
//! A logged txn is a result: names chosen, versions counted, ACLs already
//! checked by the leader. Bytes after the record (3.6's tree digest) are
//! not read.

use bytes::Bytes;
use jute::{Acl, DecodeError, OpCode, Reader, Record};

/// `TxnHeader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnHeader {
    pub client_id: i64,
    pub cxid: i32,
    pub zxid: i64,
    pub time_ms: i64,
    pub op: i32,
}

/// A create of any kind: the owner says which (a session, 0, a container
/// or TTL encoding), as `DataTree.processTxn` passes it to `createNode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTxn {
    /// Which create it was (create, create2, createContainer, createTTL):
    /// ZooKeeper's replay treats a plain create apart.
    pub op: i32,
    pub path: String,
    pub data: Option<Bytes>,
    pub acl: Vec<Acl>,
    pub owner: ZkOwner,
    /// The parent's stored cversion after this create; -1 in logs from
    /// before ZooKeeper 3.3 (`CreateTxnV0`), meaning one more than now.
    pub parent_cversion: i32,
}

/// Whose a created node is, before the session id is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZkOwner {
    /// `ephemeral=false`: persistent.
    Persistent,
    /// `ephemeral=true`: the header's client (session).
    Session,
    /// A container node.
    Container,
    /// A TTL node, TTL in milliseconds.
    Ttl(i64),
}

/// One transaction as `DataTree.processTxn` and
/// `FileTxnSnapLog.processTransaction` see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZkTxn {
    CreateSession {
        timeout_ms: i32,
    },
    /// The session's ephemerals go with it. Since 3.6 the leader may also
    /// list them (`CloseSessionTxn`, when `closeSessionTxn.enabled`), but
    /// whether that body is there is a server setting, not in the file, so
    /// it is not read: the session's ephemerals are known from the tree.
    CloseSession,
    Create(CreateTxn),
    Delete {
        path: String,
    },
    /// setData, and reconfig (which sets `/zookeeper/config`).
    SetData {
        path: String,
        data: Option<Bytes>,
        version: i32,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    /// A failed request: nothing to do.
    Error {
        code: i32,
    },
    /// A multi's check: nothing to change.
    Check {
        path: String,
        version: i32,
    },
    Multi(Vec<ZkTxn>),
}

/// One entry of a log: its header and transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedTxn {
    pub header: TxnHeader,
    pub txn: ZkTxn,
}

impl LoggedTxn {
    /// `SerializeUtils.deserializeTxn`.
    pub fn decode(bytes: Bytes) -> Result<LoggedTxn, DecodeError> {
        let mut r = Reader::new(bytes);
        let header = TxnHeader {
            client_id: r.read_i64()?,
            cxid: r.read_i32()?,
            zxid: r.read_i64()?,
            time_ms: r.read_i64()?,
            op: r.read_i32()?,
        };
        let txn = decode_txn(header.op, &mut r)?;
        Ok(LoggedTxn { header, txn })
    }
}

fn invalid_op(op: i32) -> DecodeError {
    DecodeError::InvalidValue {
        field: "txn type",
        value: op.into(),
    }
}

fn decode_txn(op: i32, r: &mut Reader) -> Result<ZkTxn, DecodeError> {
    let code = OpCode::from_code(op).ok_or_else(|| invalid_op(op))?;
    Ok(match code {
        OpCode::CreateSession => ZkTxn::CreateSession {
            timeout_ms: r.read_i32()?,
        },
        OpCode::CloseSession => ZkTxn::CloseSession,
        OpCode::Create | OpCode::Create2 => ZkTxn::Create(decode_create(op, r)?),
        OpCode::CreateContainer => ZkTxn::Create(decode_create_as(op, r, ZkOwner::Container)?),
        OpCode::CreateTtl => {
            let mut create = decode_create_as(op, r, ZkOwner::Persistent)?;
            create.owner = ZkOwner::Ttl(r.read_i64()?);
            ZkTxn::Create(create)
        }
        OpCode::Delete | OpCode::DeleteContainer => ZkTxn::Delete {
            path: r.read_string()?,
        },
        OpCode::SetData | OpCode::Reconfig => ZkTxn::SetData {
            path: r.read_string()?,
            data: r.read_buffer()?,
            version: r.read_i32()?,
        },
        OpCode::SetAcl => ZkTxn::SetAcl {
            path: r.read_string()?,
            acl: read_acl(r)?,
            version: r.read_i32()?,
        },
        OpCode::Error => ZkTxn::Error {
            code: r.read_i32()?,
        },
        OpCode::Check => ZkTxn::Check {
            path: r.read_string()?,
            version: r.read_i32()?,
        },
        OpCode::Multi => ZkTxn::Multi(decode_multi(r)?),
        _ => return Err(invalid_op(op)),
    })
}

fn read_acl(r: &mut Reader) -> Result<Vec<Acl>, DecodeError> {
    r.read_vec(Acl::MIN_ENCODED_BYTES, Acl::decode)
}

/// `CreateTxn` (path, data, acl, ephemeral, parentCVersion), or
/// `CreateTxnV0` without the last field.
fn decode_create(op: i32, r: &mut Reader) -> Result<CreateTxn, DecodeError> {
    let path = r.read_string()?;
    let data = r.read_buffer()?;
    let acl = read_acl(r)?;
    let owner = if r.read_bool()? {
        ZkOwner::Session
    } else {
        ZkOwner::Persistent
    };
    let parent_cversion = if r.is_empty() { -1 } else { r.read_i32()? };
    Ok(CreateTxn {
        op,
        path,
        data,
        acl,
        owner,
        parent_cversion,
    })
}

/// `CreateContainerTxn` and the first fields of `CreateTTLTxn`: path,
/// data, acl, parentCVersion.
fn decode_create_as(op: i32, r: &mut Reader, owner: ZkOwner) -> Result<CreateTxn, DecodeError> {
    Ok(CreateTxn {
        op,
        path: r.read_string()?,
        data: r.read_buffer()?,
        acl: read_acl(r)?,
        owner,
        parent_cversion: r.read_i32()?,
    })
}

/// `MultiTxn`: a vector of `Txn { int type; buffer data }`, each data the
/// record of its type.
fn decode_multi(r: &mut Reader) -> Result<Vec<ZkTxn>, DecodeError> {
    r.read_vec(8, |r| {
        let op = r.read_i32()?;
        let data = r.read_buffer_or_empty()?;
        if op == OpCode::Multi.code() {
            return Err(invalid_op(op));
        }
        decode_txn(op, &mut Reader::new(data))
    })
}
