//! The data records every layer shares: `Stat`, `Id`, `ACL`, node kinds.

use bytes::BytesMut;

use crate::codec::{DecodeError, Reader, Record, WriteExt};

/// A znode's metadata, exactly as ZooKeeper's `Stat` record.
///
/// `czxid`, `mzxid` and `pzxid` live in zxid space, which in Paddock is the
/// replicated log's index space. Times are milliseconds since the epoch as
/// stamped by the proposing server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
    pub pzxid: i64,
}

impl Stat {
    /// Bytes of one encoded `Stat`.
    pub const ENCODED_BYTES: usize = 68;
}

impl Record for Stat {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            czxid: r.read_i64()?,
            mzxid: r.read_i64()?,
            ctime: r.read_i64()?,
            mtime: r.read_i64()?,
            version: r.read_i32()?,
            cversion: r.read_i32()?,
            aversion: r.read_i32()?,
            ephemeral_owner: r.read_i64()?,
            data_length: r.read_i32()?,
            num_children: r.read_i32()?,
            pzxid: r.read_i64()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i64(self.czxid);
        buf.write_i64(self.mzxid);
        buf.write_i64(self.ctime);
        buf.write_i64(self.mtime);
        buf.write_i32(self.version);
        buf.write_i32(self.cversion);
        buf.write_i32(self.aversion);
        buf.write_i64(self.ephemeral_owner);
        buf.write_i32(self.data_length);
        buf.write_i32(self.num_children);
        buf.write_i64(self.pzxid);
    }
}

/// An identity: `scheme` (world, auth, digest, ip, sasl, super) and id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id {
    pub scheme: String,
    pub id: String,
}

impl Id {
    pub fn new(scheme: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    /// `world:anyone`, the identity everybody has.
    pub fn anyone() -> Self {
        Self::new("world", "anyone")
    }
}

impl Record for Id {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            scheme: r.read_string()?,
            id: r.read_string()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.scheme);
        buf.write_string(&self.id);
    }
}

/// Permission bits of an ACL entry, as ZooKeeper's `ZooDefs.Perms`.
pub mod perms {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

/// One ACL entry: the permissions granted to an identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Acl {
    pub perms: i32,
    pub id: Id,
}

impl Acl {
    /// Bytes of the smallest encoded ACL (perms and two empty strings).
    pub const MIN_ENCODED_BYTES: usize = 12;

    /// `OPEN_ACL_UNSAFE`: everything for everyone.
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl {
            perms: perms::ALL,
            id: Id::anyone(),
        }]
    }

    /// `READ_ACL_UNSAFE`: read for everyone.
    pub fn read_unsafe() -> Vec<Acl> {
        vec![Acl {
            perms: perms::READ,
            id: Id::anyone(),
        }]
    }

    pub fn decode_vec(r: &mut Reader) -> Result<Vec<Acl>, DecodeError> {
        r.read_vec(Self::MIN_ENCODED_BYTES, Acl::decode)
    }

    pub fn encode_vec(acls: &[Acl], buf: &mut BytesMut) {
        buf.write_i32(crate::codec::jute_len(acls.len()));
        for acl in acls {
            acl.encode(buf);
        }
    }
}

impl Record for Acl {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            perms: r.read_i32()?,
            id: Id::decode(r)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.perms);
        self.id.encode(buf);
    }
}

/// One identity a session holds, as `whoAmI` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientInfo {
    pub auth_scheme: String,
    pub user: String,
}

impl ClientInfo {
    /// Bytes of the smallest encoded `ClientInfo` (two empty strings).
    pub const MIN_ENCODED_BYTES: usize = 8;
}

impl Record for ClientInfo {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            auth_scheme: r.read_string()?,
            user: r.read_string()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.auth_scheme);
        buf.write_string(&self.user);
    }
}

/// The kind of znode a create asks for, with ZooKeeper's flag values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    Persistent,
    Ephemeral,
    PersistentSequential,
    EphemeralSequential,
    Container,
    PersistentWithTtl,
    PersistentSequentialWithTtl,
}

impl CreateMode {
    pub fn from_flags(flags: i32) -> Option<Self> {
        Some(match flags {
            0 => Self::Persistent,
            1 => Self::Ephemeral,
            2 => Self::PersistentSequential,
            3 => Self::EphemeralSequential,
            4 => Self::Container,
            5 => Self::PersistentWithTtl,
            6 => Self::PersistentSequentialWithTtl,
            _ => return None,
        })
    }

    pub fn flags(self) -> i32 {
        match self {
            Self::Persistent => 0,
            Self::Ephemeral => 1,
            Self::PersistentSequential => 2,
            Self::EphemeralSequential => 3,
            Self::Container => 4,
            Self::PersistentWithTtl => 5,
            Self::PersistentSequentialWithTtl => 6,
        }
    }

    pub fn is_ephemeral(self) -> bool {
        matches!(self, Self::Ephemeral | Self::EphemeralSequential)
    }

    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            Self::PersistentSequential
                | Self::EphemeralSequential
                | Self::PersistentSequentialWithTtl
        )
    }

    pub fn is_container(self) -> bool {
        self == Self::Container
    }

    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            Self::PersistentWithTtl | Self::PersistentSequentialWithTtl
        )
    }
}

/// Watch event types (`Watcher.Event.EventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    None = -1,
    NodeCreated = 1,
    NodeDeleted = 2,
    NodeDataChanged = 3,
    NodeChildrenChanged = 4,
    DataWatchRemoved = 5,
    ChildWatchRemoved = 6,
    PersistentWatchRemoved = 7,
}

/// Connection states carried in watch events (`Watcher.Event.KeeperState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeeperState {
    Disconnected = 0,
    SyncConnected = 3,
    AuthFailed = 4,
    ConnectedReadOnly = 5,
    SaslAuthenticated = 6,
    Expired = -112,
    Closed = 7,
}

impl EventType {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<Self> {
        Some(match code {
            -1 => Self::None,
            1 => Self::NodeCreated,
            2 => Self::NodeDeleted,
            3 => Self::NodeDataChanged,
            4 => Self::NodeChildrenChanged,
            5 => Self::DataWatchRemoved,
            6 => Self::ChildWatchRemoved,
            7 => Self::PersistentWatchRemoved,
            _ => return None,
        })
    }
}

impl KeeperState {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<Self> {
        Some(match code {
            0 => Self::Disconnected,
            3 => Self::SyncConnected,
            4 => Self::AuthFailed,
            5 => Self::ConnectedReadOnly,
            6 => Self::SaslAuthenticated,
            -112 => Self::Expired,
            7 => Self::Closed,
            _ => return None,
        })
    }
}

/// Which watches `checkWatches` / `removeWatches` name
/// (`Watcher.WatcherType`). Carried as a raw `i32` in the records so that an
/// unknown value reaches the server, which answers it as ZooKeeper does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatcherType {
    Children = 1,
    Data = 2,
    Any = 3,
    Persistent = 4,
    PersistentRecursive = 5,
}

impl WatcherType {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<Self> {
        Some(match code {
            1 => Self::Children,
            2 => Self::Data,
            3 => Self::Any,
            4 => Self::Persistent,
            5 => Self::PersistentRecursive,
            _ => return None,
        })
    }
}

/// The kind of watch `addWatch` installs (`AddWatchMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddWatchMode {
    Persistent = 0,
    PersistentRecursive = 1,
}

impl AddWatchMode {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<Self> {
        Some(match code {
            0 => Self::Persistent,
            1 => Self::PersistentRecursive,
            _ => return None,
        })
    }
}
