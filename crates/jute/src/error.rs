//! ZooKeeper's result codes (`KeeperException.Code`), carried in reply
//! headers and multi results.

/// A ZooKeeper result code. `Ok` is a code too: multi results and reply
/// headers carry it the same way as failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    Ok = 0,
    SystemError = -1,
    RuntimeInconsistency = -2,
    DataInconsistency = -3,
    ConnectionLoss = -4,
    MarshallingError = -5,
    Unimplemented = -6,
    OperationTimeout = -7,
    BadArguments = -8,
    UnknownSession = -12,
    NewConfigNoQuorum = -13,
    ReconfigInProgress = -14,
    ApiError = -100,
    NoNode = -101,
    NoAuth = -102,
    BadVersion = -103,
    NoChildrenForEphemerals = -108,
    NodeExists = -110,
    NotEmpty = -111,
    SessionExpired = -112,
    InvalidCallback = -113,
    InvalidAcl = -114,
    AuthFailed = -115,
    SessionMoved = -118,
    NotReadOnly = -119,
    EphemeralOnLocalSession = -120,
    NoWatcher = -121,
    RequestTimeout = -122,
    ReconfigDisabled = -123,
    SessionClosedRequireSaslAuth = -124,
    QuotaExceeded = -125,
    Throttled = -127,
}

impl ErrorCode {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<Self> {
        use ErrorCode::*;
        Some(match code {
            0 => Ok,
            -1 => SystemError,
            -2 => RuntimeInconsistency,
            -3 => DataInconsistency,
            -4 => ConnectionLoss,
            -5 => MarshallingError,
            -6 => Unimplemented,
            -7 => OperationTimeout,
            -8 => BadArguments,
            -12 => UnknownSession,
            -13 => NewConfigNoQuorum,
            -14 => ReconfigInProgress,
            -100 => ApiError,
            -101 => NoNode,
            -102 => NoAuth,
            -103 => BadVersion,
            -108 => NoChildrenForEphemerals,
            -110 => NodeExists,
            -111 => NotEmpty,
            -112 => SessionExpired,
            -113 => InvalidCallback,
            -114 => InvalidAcl,
            -115 => AuthFailed,
            -118 => SessionMoved,
            -119 => NotReadOnly,
            -120 => EphemeralOnLocalSession,
            -121 => NoWatcher,
            -122 => RequestTimeout,
            -123 => ReconfigDisabled,
            -124 => SessionClosedRequireSaslAuth,
            -125 => QuotaExceeded,
            -127 => Throttled,
            _ => return None,
        })
    }

    pub fn is_ok(self) -> bool {
        self == ErrorCode::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in -200..=10 {
            if let Some(e) = ErrorCode::from_code(code) {
                assert_eq!(e.code(), code);
            }
        }
        assert_eq!(ErrorCode::from_code(-101), Some(ErrorCode::NoNode));
    }
}
