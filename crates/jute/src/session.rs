//! The records that frame a conversation rather than an operation: the
//! connect handshake, the header in front of every request and reply, and
//! the watch event pushed without a request.
//!
//! They live apart from the operation records because the server reads them
//! before it knows (or without needing) the operation, and because the
//! handshake carries ZooKeeper's one optional field: `readOnly`, which
//! clients from 3.3 and earlier leave off entirely.

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, Reader, Record, WriteExt};

/// The first frame a client sends on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    pub timeout_ms: i32,
    /// 0 asks for a new session; anything else re-attaches to one.
    pub session_id: i64,
    pub password: Bytes,
    /// `None` when the client omitted the trailing byte. ZooKeeper then
    /// treats the client as "old" and must also leave the byte off its
    /// [`ConnectResponse`], or the client would misread the next frame.
    pub read_only: Option<bool>,
}

impl Record for ConnectRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            protocol_version: r.read_i32()?,
            last_zxid_seen: r.read_i64()?,
            timeout_ms: r.read_i32()?,
            session_id: r.read_i64()?,
            password: r.read_buffer_or_empty()?,
            read_only: read_trailing_bool(r)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.protocol_version);
        buf.write_i64(self.last_zxid_seen);
        buf.write_i32(self.timeout_ms);
        buf.write_i64(self.session_id);
        buf.write_buffer(&self.password);
        if let Some(read_only) = self.read_only {
            buf.write_bool(read_only);
        }
    }
}

/// The server's answer to a [`ConnectRequest`]. A session id of 0 (with an
/// all-zero password) tells the client its session has expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub password: Bytes,
    /// Written only when `Some`: mirror the request's `read_only.is_some()`.
    pub read_only: Option<bool>,
}

impl Record for ConnectResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            protocol_version: r.read_i32()?,
            timeout_ms: r.read_i32()?,
            session_id: r.read_i64()?,
            password: r.read_buffer_or_empty()?,
            read_only: read_trailing_bool(r)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.protocol_version);
        buf.write_i32(self.timeout_ms);
        buf.write_i64(self.session_id);
        buf.write_buffer(&self.password);
        if let Some(read_only) = self.read_only {
            buf.write_bool(read_only);
        }
    }
}

/// ZooKeeper decides whether `readOnly` is present by trying to read it, so
/// presence means "at least one byte left in the frame"; anything after it
/// is ignored, as Java ignores it.
fn read_trailing_bool(r: &mut Reader) -> Result<Option<bool>, DecodeError> {
    if r.is_empty() {
        Ok(None)
    } else {
        r.read_bool().map(Some)
    }
}

/// In front of every request after the handshake. `op` is kept raw so an
/// unknown opcode can still be answered (with `Unimplemented`) at its xid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    pub xid: i32,
    pub op: i32,
}

impl RequestHeader {
    pub const ENCODED_BYTES: usize = 8;
}

impl Record for RequestHeader {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            xid: r.read_i32()?,
            op: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.xid);
        buf.write_i32(self.op);
    }
}

/// In front of every reply and watch event. `err` is a raw result code (see
/// [`crate::ErrorCode`]); when it is not 0 ZooKeeper sends no body for most
/// operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
}

impl ReplyHeader {
    pub const ENCODED_BYTES: usize = 16;
}

impl Record for ReplyHeader {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            xid: r.read_i32()?,
            zxid: r.read_i64()?,
            err: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.xid);
        buf.write_i64(self.zxid);
        buf.write_i32(self.err);
    }
}

/// A watch firing, sent after a [`ReplyHeader`] with xid -1. Codes are raw
/// (see [`crate::EventType`], [`crate::KeeperState`]) so that a future
/// client of ours can read events from newer servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherEvent {
    pub event_type: i32,
    pub state: i32,
    pub path: String,
}

impl Record for WatcherEvent {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            event_type: r.read_i32()?,
            state: r.read_i32()?,
            // State-change events (expired, disconnected) carry a null path.
            path: r.read_opt_string()?.unwrap_or_default(),
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.event_type);
        buf.write_i32(self.state);
        buf.write_string(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use proptest::prelude::*;

    /// A 3.9 client's handshake for a new session, byte by byte.
    fn connect_bytes(read_only: Option<u8>) -> Vec<u8> {
        let mut v = vec![
            0, 0, 0, 0, // protocolVersion
            0, 0, 0, 0, 0, 0, 0, 0x2a, // lastZxidSeen = 42
            0, 0, 0x75, 0x30, // timeOut = 30000
            0, 0, 0, 0, 0, 0, 0, 0, // sessionId = 0
            0, 0, 0, 16, // passwd length
        ];
        v.extend_from_slice(&[0; 16]);
        v.extend(read_only);
        v
    }

    #[test]
    fn connect_request_with_read_only_byte() {
        let req = ConnectRequest::from_bytes(Bytes::from(connect_bytes(Some(1)))).unwrap();
        assert_eq!(req.protocol_version, 0);
        assert_eq!(req.last_zxid_seen, 42);
        assert_eq!(req.timeout_ms, 30_000);
        assert_eq!(req.session_id, 0);
        assert_eq!(req.password, Bytes::from_static(&[0; 16]));
        assert_eq!(req.read_only, Some(true));
        assert_eq!(req.to_bytes(), Bytes::from(connect_bytes(Some(1))));
    }

    #[test]
    fn connect_request_from_old_client_without_read_only_byte() {
        let req = ConnectRequest::from_bytes(Bytes::from(connect_bytes(None))).unwrap();
        assert_eq!(req.read_only, None);
        assert_eq!(req.timeout_ms, 30_000);
        // Re-encoding must not invent the byte.
        assert_eq!(req.to_bytes(), Bytes::from(connect_bytes(None)));
    }

    #[test]
    fn connect_request_ignores_bytes_after_read_only() {
        let mut v = connect_bytes(Some(0));
        v.extend_from_slice(b"junk");
        let req = ConnectRequest::from_bytes(Bytes::from(v)).unwrap();
        assert_eq!(req.read_only, Some(false));
    }

    #[test]
    fn connect_request_with_forged_password_length() {
        let mut v = connect_bytes(None);
        v[24..28].copy_from_slice(&1000i32.to_be_bytes());
        assert!(matches!(
            ConnectRequest::from_bytes(Bytes::from(v)),
            Err(DecodeError::LengthBeyondFrame { .. })
        ));
        let mut v = connect_bytes(None);
        v[24..28].copy_from_slice(&(-2i32).to_be_bytes());
        assert_eq!(
            ConnectRequest::from_bytes(Bytes::from(v)),
            Err(DecodeError::NegativeLength(-2))
        );
    }

    #[test]
    fn connect_response_omits_read_only_for_old_clients() {
        let mut rsp = ConnectResponse {
            protocol_version: 0,
            timeout_ms: 4000,
            session_id: 0x0100_0000_0000_0001,
            password: Bytes::from_static(&[7; 16]),
            read_only: None,
        };
        assert_eq!(rsp.to_bytes().len(), 4 + 4 + 8 + 4 + 16);
        rsp.read_only = Some(false);
        let bytes = rsp.to_bytes();
        assert_eq!(bytes.len(), 4 + 4 + 8 + 4 + 16 + 1);
        assert_eq!(bytes[bytes.len() - 1], 0);
    }

    proptest! {
        #[test]
        fn connect_request_round_trips(v in arb_connect_request()) {
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn connect_response_round_trips(v in arb_connect_response()) {
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn headers_round_trip(xid: i32, op: i32, zxid: i64, err: i32) {
            let h = RequestHeader { xid, op };
            prop_assert_eq!(round_trip(&h), h);
            let h = ReplyHeader { xid, zxid, err };
            prop_assert_eq!(round_trip(&h), h);
        }

        #[test]
        fn watcher_event_round_trips(v in arb_watcher_event()) {
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let bytes = Bytes::from(bytes);
            let _ = ConnectRequest::from_bytes(bytes.clone());
            let _ = ConnectResponse::from_bytes(bytes.clone());
            let _ = ReplyHeader::from_bytes(bytes.clone());
            let _ = WatcherEvent::from_bytes(bytes);
        }
    }
}
