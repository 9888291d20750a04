//! Request type codes (`ZooDefs.OpCode`).

/// A request's operation. Unknown codes are not decode errors: the server
/// answers them with `Unimplemented`, as ZooKeeper does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpCode {
    Notification = 0,
    Create = 1,
    Delete = 2,
    Exists = 3,
    GetData = 4,
    SetData = 5,
    GetAcl = 6,
    SetAcl = 7,
    GetChildren = 8,
    Sync = 9,
    Ping = 11,
    GetChildren2 = 12,
    Check = 13,
    Multi = 14,
    Create2 = 15,
    Reconfig = 16,
    CheckWatches = 17,
    RemoveWatches = 18,
    CreateContainer = 19,
    DeleteContainer = 20,
    CreateTtl = 21,
    MultiRead = 22,
    Auth = 100,
    SetWatches = 101,
    Sasl = 102,
    GetEphemerals = 103,
    GetAllChildrenNumber = 104,
    SetWatches2 = 105,
    AddWatch = 106,
    WhoAmI = 107,
    /// Paddock's extension: one page of a znode's children
    /// ([`crate::GetChildrenPageRequest`]). No ZooKeeper release uses 1000,
    /// nor does ClickHouse Keeper (its own are 500-503 and 997).
    GetChildrenPage = 1000,
    CreateSession = -10,
    CloseSession = -11,
    Error = -1,
}

impl OpCode {
    pub fn code(self) -> i32 {
        self as i32
    }

    /// Whether a client's request of this type changes the tree: ZooKeeper's
    /// prep stage makes it a txn, ordered through the log, even when its
    /// body cannot be read (then an error txn).
    pub fn is_write(self) -> bool {
        use OpCode::*;
        matches!(
            self,
            Create
                | Create2
                | CreateContainer
                | CreateTtl
                | Delete
                | SetData
                | SetAcl
                | Multi
                | Reconfig
        )
    }

    pub fn from_code(code: i32) -> Option<Self> {
        use OpCode::*;
        Some(match code {
            0 => Notification,
            1 => Create,
            2 => Delete,
            3 => Exists,
            4 => GetData,
            5 => SetData,
            6 => GetAcl,
            7 => SetAcl,
            8 => GetChildren,
            9 => Sync,
            11 => Ping,
            12 => GetChildren2,
            13 => Check,
            14 => Multi,
            15 => Create2,
            16 => Reconfig,
            17 => CheckWatches,
            18 => RemoveWatches,
            19 => CreateContainer,
            20 => DeleteContainer,
            21 => CreateTtl,
            22 => MultiRead,
            100 => Auth,
            101 => SetWatches,
            102 => Sasl,
            103 => GetEphemerals,
            104 => GetAllChildrenNumber,
            105 => SetWatches2,
            106 => AddWatch,
            107 => WhoAmI,
            1000 => GetChildrenPage,
            -10 => CreateSession,
            -11 => CloseSession,
            -1 => Error,
            _ => return None,
        })
    }
}

/// Reserved xids in reply headers.
pub mod xid {
    /// A watch event.
    pub const NOTIFICATION: i32 = -1;
    /// A ping and its reply.
    pub const PING: i32 = -2;
    /// An `auth` packet and its reply.
    pub const AUTH: i32 = -4;
    /// `setWatches` / `setWatches2`.
    pub const SET_WATCHES: i32 = -8;
}
