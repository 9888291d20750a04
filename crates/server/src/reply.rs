//! Whole reply frames, built on jute's frame encoders.

use bytes::{Bytes, BytesMut};
use jute::{
    ErrorCode, GetDataResponse, KeeperState, Record, ReplyHeader, Stat, WatcherEvent, WriteExt,
};
use tree::{Children, SharedNode};

use crate::shared::WatchEvent;

/// Room a reply starts with: its length, header, a stat and 160 bytes of
/// data, so the usual reply is encoded without growing its buffer (which
/// from empty reallocates at each doubling).
const REPLY_BYTES_TYPICAL: usize = 256;

/// A frame's length and a reply header.
const HEADER_FRAME_BYTES: usize = 4 + 16;

/// A `Stat` on the wire: six i64 fields and five i32.
const STAT_BYTES: usize = 6 * 8 + 5 * 4;

/// A reply on its way to the connection's writer: a whole frame, or a
/// getData answer that still holds the znode (the version read) and is
/// encoded straight into the writer's buffer. A value is then copied once
/// on its way to the socket rather than twice, and never under the
/// published lock (at saturation with 1 KB values, that copy into its own
/// frame was 3.4% of a server's samples, made while holding the lock).
pub enum Reply {
    Frame(Bytes),
    Data {
        xid: i32,
        zxid: i64,
        node: SharedNode,
        /// The node's stat as the client sees it, taken when it was read.
        stat: Stat,
    },
}

impl Reply {
    /// The bytes it takes on the wire.
    pub fn wire_len(&self) -> usize {
        match self {
            Reply::Frame(frame) => frame.len(),
            Reply::Data { node, .. } => HEADER_FRAME_BYTES + 4 + node.data_len() + STAT_BYTES,
        }
    }

    /// Appends it to `out`: for getData, the frame of its
    /// `GetDataResponse`.
    pub fn put(&self, out: &mut BytesMut) {
        match self {
            Reply::Frame(frame) => out.extend_from_slice(frame),
            Reply::Data {
                xid,
                zxid,
                node,
                stat,
            } => {
                let header = ReplyHeader {
                    xid: *xid,
                    zxid: *zxid,
                    err: ErrorCode::Ok.code(),
                };
                jute::encode_frame(out, |out| {
                    header.encode(out);
                    GetDataResponse::encode_parts(out, node.data(), stat);
                });
            }
        }
    }
}

/// A frame with `body` after the header.
pub fn with_body(xid: i32, zxid: i64, body: &impl Record) -> Bytes {
    error_with_body(xid, zxid, ErrorCode::Ok, body)
}

/// A frame with an error code and still a body: ZooKeeper's answer to a
/// failed SASL exchange carries a null token.
pub fn error_with_body(xid: i32, zxid: i64, err: ErrorCode, body: &impl Record) -> Bytes {
    let mut buf = BytesMut::with_capacity(REPLY_BYTES_TYPICAL);
    let header = ReplyHeader {
        xid,
        zxid,
        err: err.code(),
    };
    jute::encode_reply(&mut buf, &header, Some(body));
    buf.freeze()
}

/// getChildren's reply (getChildren2's with `stat`), written straight from
/// the set of names: the same bytes as `with_body` of the response record,
/// without a `String` per child first.
pub fn children(xid: i32, zxid: i64, names: &Children, stat: Option<&Stat>) -> Bytes {
    let names_bytes: usize = names.iter().map(|name| 4 + name.len()).sum();
    let mut buf = BytesMut::with_capacity(64 + names_bytes);
    let header = ReplyHeader {
        xid,
        zxid,
        err: ErrorCode::Ok.code(),
    };
    jute::encode_frame(&mut buf, |buf| {
        header.encode(buf);
        buf.write_i32(jute::jute_len(names.len()));
        for name in names.iter() {
            buf.write_string(name);
        }
        if let Some(stat) = stat {
            stat.encode(buf);
        }
    });
    buf.freeze()
}

/// A frame that is only a header: an error, or a reply without a body.
pub fn header_only(xid: i32, zxid: i64, err: ErrorCode) -> Bytes {
    let mut buf = BytesMut::with_capacity(HEADER_FRAME_BYTES);
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

#[cfg(test)]
mod tests {
    use super::*;
    use jute::{GetChildren2Response, GetChildrenResponse};
    use tree::{AclList, StatPersisted};

    #[test]
    fn a_children_reply_is_the_response_record_of_the_same_names() {
        let paths = ["b", "a", "node-0000000001", "é"].map(|name| format!("/parent/{name}"));
        let names = Children::from_paths(paths.iter().map(String::as_str));
        let sorted: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let stat = Stat {
            czxid: 3,
            num_children: 4,
            ..Stat::default()
        };
        assert_eq!(
            children(7, 9, &names, None),
            with_body(
                7,
                9,
                &GetChildrenResponse {
                    children: sorted.clone()
                }
            )
        );
        assert_eq!(
            children(7, 9, &names, Some(&stat)),
            with_body(
                7,
                9,
                &GetChildren2Response {
                    children: sorted,
                    stat
                }
            )
        );
        assert_eq!(
            children(1, 2, &Children::default(), None),
            with_body(1, 2, &GetChildrenResponse { children: vec![] })
        );
    }

    #[test]
    fn a_data_reply_put_in_place_is_the_frame_of_its_record_and_as_long_as_it_says() {
        let stat = Stat {
            mzxid: 5,
            data_length: 3,
            ..Stat::default()
        };
        for data in [None, Some(Bytes::new()), Some(Bytes::from_static(b"abc"))] {
            let data_copy = data.as_deref().map(Box::from);
            let node = tree::Node::new(data_copy, AclList::default(), StatPersisted::default());
            let frame = with_body(7, 9, &GetDataResponse { data, stat });
            let reply = Reply::Data {
                xid: 7,
                zxid: 9,
                node: SharedNode::new(node),
                stat,
            };
            let mut out = BytesMut::from(&b"before"[..]);
            reply.put(&mut out);
            assert_eq!(&out[..6], b"before");
            assert_eq!(&out[6..], &frame[..]);
            assert_eq!(reply.wire_len(), frame.len());
        }
    }
}
