//! Replicated session state: what `createSession` records and
//! `closeSession` removes. Liveness (pings, expiry) is the server's job;
//! the tree only knows which sessions exist.

use bytes::Bytes;

/// One session as the tree records it. The server chooses the id,
/// timeout and password before proposing `TxnOp::CreateSession`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The negotiated timeout.
    pub timeout_ms: i32,
    /// The password a client presents to reattach to the session.
    pub password: Bytes,
}
