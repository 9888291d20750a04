//! Whole reply frames, built on jute's frame encoders.

use bytes::{Bytes, BytesMut};
use jute::{ErrorCode, KeeperState, Record, ReplyHeader, WatcherEvent};

use crate::shared::WatchEvent;

/// A frame with `body` after the header.
pub fn with_body(xid: i32, zxid: i64, body: &impl Record) -> Bytes {
    error_with_body(xid, zxid, ErrorCode::Ok, body)
}

/// A frame with an error code and still a body: ZooKeeper's answer to a
/// failed SASL exchange carries a null token.
pub fn error_with_body(xid: i32, zxid: i64, err: ErrorCode, body: &impl Record) -> Bytes {
    let mut buf = BytesMut::new();
    let header = ReplyHeader {
        xid,
        zxid,
        err: err.code(),
    };
    jute::encode_reply(&mut buf, &header, Some(body));
    buf.freeze()
}

/// A frame that is only a header: an error, or a reply without a body.
pub fn header_only(xid: i32, zxid: i64, err: ErrorCode) -> Bytes {
    let mut buf = BytesMut::new();
    let header = ReplyHeader {
        xid,
        zxid,
        err: err.code(),
    };
    jute::encode_reply_header(&mut buf, &header);
    buf.freeze()
}

/// Appends a watch notification, in the state of a connected client.
pub fn event(out: &mut BytesMut, event: &WatchEvent) {
    let body = WatcherEvent {
        event_type: event.event as i32,
        state: KeeperState::SyncConnected as i32,
        path: event.path.clone(),
    };
    jute::encode_watcher_event(out, event.zxid, &body);
}

/// A frame without a reply header (the connect response).
pub fn bare(body: &impl Record) -> Bytes {
    let mut buf = BytesMut::new();
    jute::encode_frame(&mut buf, |buf| body.encode(buf));
    buf.freeze()
}
