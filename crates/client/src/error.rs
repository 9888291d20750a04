//! What can go wrong, as one enum callers match on.
//!
//! Every ZooKeeper result code has its own variant carrying the path of the
//! operation that got it (the caller's path, without the chroot; empty for
//! operations without one, such as `whoAmI`), so `Display` can say what
//! happened and where, and recipes can branch on `Error::NodeExists { .. }`
//! without decoding numbers. The remaining variants are the client's own:
//! a failed `multi`, a closed client, bad arguments caught before sending,
//! an unreachable ensemble, and a reply that did not decode.

use jute::ErrorCode;

/// An operation's failure. `path` fields are as the caller wrote them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ----- ZooKeeper result codes about a node --------------------------
    /// The node (or, for a create, its parent) does not exist.
    #[error("node {path} does not exist (or, for a create, its parent does not)")]
    NoNode { path: String },
    #[error("node {path} already exists")]
    NodeExists { path: String },
    /// The expected version did not match the node's.
    #[error("version check failed for {path}")]
    BadVersion { path: String },
    #[error("node {path} has children")]
    NotEmpty { path: String },
    /// The session's identities lack the permission the ACL requires.
    #[error("not authorised for {path}")]
    NoAuth { path: String },
    #[error("cannot create {path}: ephemeral nodes cannot have children")]
    NoChildrenForEphemerals { path: String },
    #[error("invalid ACL for {path}")]
    InvalidAcl { path: String },
    #[error("no such watch on {path}")]
    NoWatcher { path: String },
    /// The server rejected the arguments (a bad path, an invalid mode or
    /// TTL, TTL nodes without `extendedTypesEnabled`, ...).
    #[error("bad arguments{}", on(.path))]
    BadArguments { path: String },
    #[error("quota exceeded{}", on(.path))]
    QuotaExceeded { path: String },
    #[error("ephemeral nodes need a global session{}", on(.path))]
    EphemeralOnLocalSession { path: String },

    // ----- ZooKeeper result codes about the session or connection -------
    /// The connection to the server broke before the reply arrived; the
    /// operation may or may not have been applied. The session may still
    /// be alive: the client reconnects on its own.
    #[error("connection to the server lost{}", on(.path))]
    ConnectionLoss { path: String },
    /// The session is gone, with its ephemeral nodes and watches; this
    /// client is finished and every later call fails the same way.
    #[error("session expired{}", on(.path))]
    SessionExpired { path: String },
    #[error("session moved to another server{}", on(.path))]
    SessionMoved { path: String },
    #[error("authentication failed{}", on(.path))]
    AuthFailed { path: String },
    #[error("the server is throttling requests{}", on(.path))]
    Throttled { path: String },
    #[error("operation timed out{}", on(.path))]
    OperationTimeout { path: String },
    #[error("request timed out{}", on(.path))]
    RequestTimeout { path: String },
    #[error("unknown session{}", on(.path))]
    UnknownSession { path: String },
    #[error("the session was closed and requires SASL authentication{}", on(.path))]
    SessionClosedRequireSaslAuth { path: String },
    #[error("the server is read-only{}", on(.path))]
    NotReadOnly { path: String },

    // ----- ZooKeeper result codes about the server ----------------------
    #[error("operation not implemented by the server{}", on(.path))]
    Unimplemented { path: String },
    #[error("the server could not decode the request{}", on(.path))]
    MarshallingError { path: String },
    #[error("system error{}", on(.path))]
    SystemError { path: String },
    /// In a failed `multi`, the code of every op after the one that failed.
    #[error("rolled back: an earlier operation failed{}", on(.path))]
    RuntimeInconsistency { path: String },
    #[error("data inconsistency{}", on(.path))]
    DataInconsistency { path: String },
    #[error("API error{}", on(.path))]
    ApiError { path: String },
    #[error("invalid callback{}", on(.path))]
    InvalidCallback { path: String },
    #[error("no quorum for the new configuration{}", on(.path))]
    NewConfigNoQuorum { path: String },
    #[error("a reconfiguration is in progress{}", on(.path))]
    ReconfigInProgress { path: String },
    #[error("reconfiguration is disabled{}", on(.path))]
    ReconfigDisabled { path: String },
    /// A result code this client does not know.
    #[error("unknown result code {code}{}", on(.path))]
    UnknownCode { code: i32, path: String },

    // ----- the client's own ---------------------------------------------
    /// A `multi` was rolled back: op `failed_index` failed with `error`.
    /// `results` has one entry per op: `Ok` for those before the failure
    /// (they would have succeeded), the failure itself, then
    /// `RuntimeInconsistency` for those after it, as ZooKeeper reports them.
    #[error("multi failed at op {failed_index}: {error}")]
    Multi {
        failed_index: usize,
        error: Box<Error>,
        results: Vec<Result<(), Error>>,
    },
    /// The client was closed (by `close` or by dropping every handle).
    #[error("the client is closed")]
    Closed,
    /// A path the server would reject, caught before sending it.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    #[error("invalid connect string {input:?}: {reason}")]
    InvalidConnectString { input: String, reason: String },
    /// An argument that cannot be sent as given (a TTL without a TTL mode,
    /// say).
    #[error("invalid argument: {reason}")]
    InvalidArgument { reason: String },
    /// No server of the connect string accepted a session in time.
    #[error("could not connect to {servers} within the connect timeout: {last_error}")]
    ConnectTimeout { servers: String, last_error: String },
    /// SASL authentication with `server` failed: the server refused the
    /// login, offers no SASL, or could not prove it knows the password.
    /// The session is finished, as ZooKeeper's client ends in AUTH_FAILED.
    #[error("SASL authentication with {server} failed: {reason}")]
    SaslFailed { server: String, reason: String },
    /// The server's reply did not decode as the operation's reply.
    #[error("undecodable reply from the server{}: {detail}", on(.path))]
    Protocol { path: String, detail: String },
}

/// " for /a", or nothing when the operation has no path.
fn on(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" (path {path})")
    }
}

impl Error {
    /// The typed error for a non-zero ZooKeeper result code.
    pub fn from_code(code: i32, path: impl Into<String>) -> Error {
        let path = path.into();
        let Some(known) = ErrorCode::from_code(code) else {
            return Error::UnknownCode { code, path };
        };
        match known {
            ErrorCode::NoNode => Error::NoNode { path },
            ErrorCode::NodeExists => Error::NodeExists { path },
            ErrorCode::BadVersion => Error::BadVersion { path },
            ErrorCode::NotEmpty => Error::NotEmpty { path },
            ErrorCode::NoAuth => Error::NoAuth { path },
            ErrorCode::NoChildrenForEphemerals => Error::NoChildrenForEphemerals { path },
            ErrorCode::InvalidAcl => Error::InvalidAcl { path },
            ErrorCode::NoWatcher => Error::NoWatcher { path },
            ErrorCode::BadArguments => Error::BadArguments { path },
            ErrorCode::QuotaExceeded => Error::QuotaExceeded { path },
            ErrorCode::EphemeralOnLocalSession => Error::EphemeralOnLocalSession { path },
            ErrorCode::ConnectionLoss => Error::ConnectionLoss { path },
            ErrorCode::SessionExpired => Error::SessionExpired { path },
            ErrorCode::SessionMoved => Error::SessionMoved { path },
            ErrorCode::AuthFailed => Error::AuthFailed { path },
            ErrorCode::Throttled => Error::Throttled { path },
            ErrorCode::OperationTimeout => Error::OperationTimeout { path },
            ErrorCode::RequestTimeout => Error::RequestTimeout { path },
            ErrorCode::UnknownSession => Error::UnknownSession { path },
            ErrorCode::SessionClosedRequireSaslAuth => Error::SessionClosedRequireSaslAuth { path },
            ErrorCode::NotReadOnly => Error::NotReadOnly { path },
            ErrorCode::Unimplemented => Error::Unimplemented { path },
            ErrorCode::MarshallingError => Error::MarshallingError { path },
            ErrorCode::SystemError => Error::SystemError { path },
            ErrorCode::RuntimeInconsistency => Error::RuntimeInconsistency { path },
            ErrorCode::DataInconsistency => Error::DataInconsistency { path },
            ErrorCode::ApiError => Error::ApiError { path },
            ErrorCode::InvalidCallback => Error::InvalidCallback { path },
            ErrorCode::NewConfigNoQuorum => Error::NewConfigNoQuorum { path },
            ErrorCode::ReconfigInProgress => Error::ReconfigInProgress { path },
            ErrorCode::ReconfigDisabled => Error::ReconfigDisabled { path },
            // Code 0 is success; callers never build an error from it, but
            // if one did it must not read as a real failure.
            ErrorCode::Ok => Error::UnknownCode { code, path },
        }
    }

    /// The ZooKeeper result code behind this error, if it is one. A failed
    /// `multi` reports the code of the op that failed.
    pub fn code(&self) -> Option<ErrorCode> {
        use Error::*;
        Some(match self {
            NoNode { .. } => ErrorCode::NoNode,
            NodeExists { .. } => ErrorCode::NodeExists,
            BadVersion { .. } => ErrorCode::BadVersion,
            NotEmpty { .. } => ErrorCode::NotEmpty,
            NoAuth { .. } => ErrorCode::NoAuth,
            NoChildrenForEphemerals { .. } => ErrorCode::NoChildrenForEphemerals,
            InvalidAcl { .. } => ErrorCode::InvalidAcl,
            NoWatcher { .. } => ErrorCode::NoWatcher,
            BadArguments { .. } => ErrorCode::BadArguments,
            QuotaExceeded { .. } => ErrorCode::QuotaExceeded,
            EphemeralOnLocalSession { .. } => ErrorCode::EphemeralOnLocalSession,
            ConnectionLoss { .. } => ErrorCode::ConnectionLoss,
            SessionExpired { .. } => ErrorCode::SessionExpired,
            SessionMoved { .. } => ErrorCode::SessionMoved,
            AuthFailed { .. } => ErrorCode::AuthFailed,
            Throttled { .. } => ErrorCode::Throttled,
            OperationTimeout { .. } => ErrorCode::OperationTimeout,
            RequestTimeout { .. } => ErrorCode::RequestTimeout,
            UnknownSession { .. } => ErrorCode::UnknownSession,
            SessionClosedRequireSaslAuth { .. } => ErrorCode::SessionClosedRequireSaslAuth,
            NotReadOnly { .. } => ErrorCode::NotReadOnly,
            Unimplemented { .. } => ErrorCode::Unimplemented,
            MarshallingError { .. } => ErrorCode::MarshallingError,
            SystemError { .. } => ErrorCode::SystemError,
            RuntimeInconsistency { .. } => ErrorCode::RuntimeInconsistency,
            DataInconsistency { .. } => ErrorCode::DataInconsistency,
            ApiError { .. } => ErrorCode::ApiError,
            InvalidCallback { .. } => ErrorCode::InvalidCallback,
            NewConfigNoQuorum { .. } => ErrorCode::NewConfigNoQuorum,
            ReconfigInProgress { .. } => ErrorCode::ReconfigInProgress,
            ReconfigDisabled { .. } => ErrorCode::ReconfigDisabled,
            SaslFailed { .. } => ErrorCode::AuthFailed,
            Multi { error, .. } => return error.code(),
            UnknownCode { .. }
            | Closed
            | InvalidPath { .. }
            | InvalidConnectString { .. }
            | InvalidArgument { .. }
            | ConnectTimeout { .. }
            | Protocol { .. } => return None,
        })
    }

    /// The path the error is about, when it is about one.
    pub fn path(&self) -> Option<&str> {
        use Error::*;
        let path = match self {
            NoNode { path }
            | NodeExists { path }
            | BadVersion { path }
            | NotEmpty { path }
            | NoAuth { path }
            | NoChildrenForEphemerals { path }
            | InvalidAcl { path }
            | NoWatcher { path }
            | BadArguments { path }
            | QuotaExceeded { path }
            | EphemeralOnLocalSession { path }
            | ConnectionLoss { path }
            | SessionExpired { path }
            | SessionMoved { path }
            | AuthFailed { path }
            | Throttled { path }
            | OperationTimeout { path }
            | RequestTimeout { path }
            | UnknownSession { path }
            | SessionClosedRequireSaslAuth { path }
            | NotReadOnly { path }
            | Unimplemented { path }
            | MarshallingError { path }
            | SystemError { path }
            | RuntimeInconsistency { path }
            | DataInconsistency { path }
            | ApiError { path }
            | InvalidCallback { path }
            | NewConfigNoQuorum { path }
            | ReconfigInProgress { path }
            | ReconfigDisabled { path }
            | UnknownCode { path, .. }
            | InvalidPath { path, .. }
            | Protocol { path, .. } => path,
            Multi { error, .. } => return error.path(),
            Closed
            | InvalidConnectString { .. }
            | InvalidArgument { .. }
            | ConnectTimeout { .. }
            | SaslFailed { .. } => return None,
        };
        (!path.is_empty()).then_some(path.as_str())
    }

    /// True for the one error after which retrying the same call on the
    /// same client can succeed: the connection broke, the session did not.
    pub fn is_connection_loss(&self) -> bool {
        matches!(self, Error::ConnectionLoss { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_back_to_itself() {
        for code in -200..=0 {
            if let Some(known) = ErrorCode::from_code(code) {
                if known.is_ok() {
                    continue;
                }
                let err = Error::from_code(code, "/a");
                assert_eq!(err.code(), Some(known), "{err}");
                assert_eq!(err.path(), Some("/a"));
            }
        }
        assert_eq!(
            Error::from_code(-999, "/x"),
            Error::UnknownCode {
                code: -999,
                path: "/x".into()
            }
        );
    }

    #[test]
    fn display_names_the_path() {
        assert_eq!(
            Error::from_code(-101, "/a/b").to_string(),
            "node /a/b does not exist (or, for a create, its parent does not)"
        );
        assert_eq!(
            Error::from_code(-4, "/a").to_string(),
            "connection to the server lost (path /a)"
        );
        assert_eq!(Error::from_code(-112, "").to_string(), "session expired");
        let multi = Error::Multi {
            failed_index: 1,
            error: Box::new(Error::from_code(-103, "/v")),
            results: vec![Ok(()), Err(Error::from_code(-103, "/v"))],
        };
        assert_eq!(
            multi.to_string(),
            "multi failed at op 1: version check failed for /v"
        );
        assert_eq!(multi.code(), Some(ErrorCode::BadVersion));
        assert_eq!(multi.path(), Some("/v"));
    }
}
