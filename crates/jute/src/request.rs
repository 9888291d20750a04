//! One decoded client packet: the opcode from the [`crate::RequestHeader`]
//! chooses the body record.
//!
//! A packet is either a [`Request`] of the session or one that changes who
//! the connection is (`auth`, SASL), which ZooKeeper answers outside its
//! request pipeline; [`Packet`] keeps the two apart, so a server's pipeline
//! never meets the second kind.
//!
//! An opcode we do not know is [`Request::Unknown`], not an error, because
//! ZooKeeper answers it at its xid with `Unimplemented` and keeps the
//! session. A body that does not parse *is* an error; ZooKeeper answers that
//! with `MarshallingError`, and the caller still has the header's xid to do
//! the same.

use bytes::BytesMut;

use crate::codec::{DecodeError, Reader, Record};
use crate::multi::{MultiOp, MultiReadRequest, MultiRequest, ReadOp};
use crate::opcode::OpCode;
use crate::requests::{
    AddWatchRequest, AuthPacket, CheckVersionRequest, CreateRequest, CreateTTLRequest,
    DeleteRequest, GetACLRequest, GetAllChildrenNumberRequest, GetChildrenPageRequest,
    GetEphemeralsRequest, GetSASLRequest, PathAndWatch, ReconfigRequest, SetACLRequest,
    SetDataRequest, SetWatches, SetWatches2, SyncRequest, WatchesRequest,
};

/// A client request body, by opcode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `op` is `Create` (reply [`crate::CreateResponse`]), `Create2` or
    /// `CreateContainer` (reply [`crate::Create2Response`]).
    Create {
        op: OpCode,
        req: CreateRequest,
    },
    CreateTtl(CreateTTLRequest),
    Delete(DeleteRequest),
    Exists(PathAndWatch),
    GetData(PathAndWatch),
    SetData(SetDataRequest<Option<String>>),
    GetAcl(GetACLRequest),
    SetAcl(SetACLRequest),
    GetChildren(PathAndWatch),
    GetChildren2(PathAndWatch),
    GetChildrenPage(GetChildrenPageRequest),
    /// A bare `check` outside a multi. ZooKeeper 3.9 answers it with
    /// `Unimplemented` (its `Request.isValid` leaves it out); the server
    /// should do the same rather than run it.
    Check(CheckVersionRequest),
    Multi(Vec<MultiOp>),
    MultiRead(Vec<ReadOp>),
    Sync(SyncRequest),
    Ping,
    SetWatches(SetWatches),
    SetWatches2(SetWatches2),
    AddWatch(AddWatchRequest),
    RemoveWatches(WatchesRequest),
    CheckWatches(WatchesRequest),
    GetEphemerals(GetEphemeralsRequest),
    GetAllChildrenNumber(GetAllChildrenNumberRequest),
    WhoAmI,
    CloseSession,
    Reconfig(ReconfigRequest),
    /// Any other opcode, including ones ZooKeeper reserves for itself
    /// (`notification`, `createSession`, `deleteContainer`, `error`).
    Unknown(i32),
}

/// A client packet, by opcode: one that changes who the connection is, or
/// a request of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    Auth(AuthPacket),
    Sasl(GetSASLRequest),
    Request(Request),
}

impl Packet {
    /// Decodes the body that followed a request header with opcode `op`.
    /// Bytes after the record are ignored, as ZooKeeper ignores them.
    pub fn decode(op: i32, r: &mut Reader) -> Result<Packet, DecodeError> {
        Ok(match OpCode::from_code(op) {
            Some(OpCode::Auth) => Packet::Auth(AuthPacket::decode(r)?),
            Some(OpCode::Sasl) => Packet::Sasl(GetSASLRequest::decode(r)?),
            code => Packet::Request(Request::decode(op, code, r)?),
        })
    }

    /// The opcode to put in the request header.
    pub fn op_code(&self) -> i32 {
        match self {
            Packet::Auth(_) => OpCode::Auth.code(),
            Packet::Sasl(_) => OpCode::Sasl.code(),
            Packet::Request(request) => request.op_code(),
        }
    }

    /// Encodes the body alone (the header is the caller's: it owns the xid).
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            Packet::Auth(packet) => packet.encode(buf),
            Packet::Sasl(request) => request.encode(buf),
            Packet::Request(request) => request.encode(buf),
        }
    }
}

impl Request {
    /// Decodes the body of a request with opcode `op` (`code` if known),
    /// neither auth nor SASL.
    fn decode(op: i32, code: Option<OpCode>, r: &mut Reader) -> Result<Request, DecodeError> {
        let Some(code) = code else {
            return Ok(Request::Unknown(op));
        };
        Ok(match code {
            OpCode::Create | OpCode::Create2 | OpCode::CreateContainer => Request::Create {
                op: code,
                req: CreateRequest::decode(r)?,
            },
            OpCode::CreateTtl => Request::CreateTtl(CreateTTLRequest::decode(r)?),
            OpCode::Delete => Request::Delete(DeleteRequest::decode(r)?),
            OpCode::Exists => Request::Exists(PathAndWatch::decode(r)?),
            OpCode::GetData => Request::GetData(PathAndWatch::decode(r)?),
            OpCode::SetData => Request::SetData(SetDataRequest::decode(r)?),
            OpCode::GetAcl => Request::GetAcl(GetACLRequest::decode(r)?),
            OpCode::SetAcl => Request::SetAcl(SetACLRequest::decode(r)?),
            OpCode::GetChildren => Request::GetChildren(PathAndWatch::decode(r)?),
            OpCode::GetChildren2 => Request::GetChildren2(PathAndWatch::decode(r)?),
            OpCode::GetChildrenPage => Request::GetChildrenPage(GetChildrenPageRequest::decode(r)?),
            OpCode::Check => Request::Check(CheckVersionRequest::decode(r)?),
            OpCode::Multi => Request::Multi(MultiRequest::decode(r)?.0),
            OpCode::MultiRead => Request::MultiRead(MultiReadRequest::decode(r)?.0),
            OpCode::Sync => Request::Sync(SyncRequest::decode(r)?),
            OpCode::Ping => Request::Ping,
            OpCode::SetWatches => Request::SetWatches(SetWatches::decode(r)?),
            OpCode::SetWatches2 => Request::SetWatches2(SetWatches2::decode(r)?),
            OpCode::AddWatch => Request::AddWatch(AddWatchRequest::decode(r)?),
            OpCode::RemoveWatches => Request::RemoveWatches(WatchesRequest::decode(r)?),
            OpCode::CheckWatches => Request::CheckWatches(WatchesRequest::decode(r)?),
            OpCode::GetEphemerals => Request::GetEphemerals(GetEphemeralsRequest::decode(r)?),
            OpCode::GetAllChildrenNumber => {
                Request::GetAllChildrenNumber(GetAllChildrenNumberRequest::decode(r)?)
            }
            OpCode::WhoAmI => Request::WhoAmI,
            OpCode::CloseSession => Request::CloseSession,
            OpCode::Reconfig => Request::Reconfig(ReconfigRequest::decode(r)?),
            OpCode::Notification
            | OpCode::DeleteContainer
            | OpCode::CreateSession
            | OpCode::Error
            // `Packet::decode` takes these.
            | OpCode::Auth
            | OpCode::Sasl => Request::Unknown(op),
        })
    }

    /// The opcode to put in the request header.
    pub fn op_code(&self) -> i32 {
        let op = match self {
            Request::Create { op, .. } => *op,
            Request::CreateTtl(_) => OpCode::CreateTtl,
            Request::Delete(_) => OpCode::Delete,
            Request::Exists(_) => OpCode::Exists,
            Request::GetData(_) => OpCode::GetData,
            Request::SetData(_) => OpCode::SetData,
            Request::GetAcl(_) => OpCode::GetAcl,
            Request::SetAcl(_) => OpCode::SetAcl,
            Request::GetChildren(_) => OpCode::GetChildren,
            Request::GetChildren2(_) => OpCode::GetChildren2,
            Request::GetChildrenPage(_) => OpCode::GetChildrenPage,
            Request::Check(_) => OpCode::Check,
            Request::Multi(_) => OpCode::Multi,
            Request::MultiRead(_) => OpCode::MultiRead,
            Request::Sync(_) => OpCode::Sync,
            Request::Ping => OpCode::Ping,
            Request::SetWatches(_) => OpCode::SetWatches,
            Request::SetWatches2(_) => OpCode::SetWatches2,
            Request::AddWatch(_) => OpCode::AddWatch,
            Request::RemoveWatches(_) => OpCode::RemoveWatches,
            Request::CheckWatches(_) => OpCode::CheckWatches,
            Request::GetEphemerals(_) => OpCode::GetEphemerals,
            Request::GetAllChildrenNumber(_) => OpCode::GetAllChildrenNumber,
            Request::WhoAmI => OpCode::WhoAmI,
            Request::CloseSession => OpCode::CloseSession,
            Request::Reconfig(_) => OpCode::Reconfig,
            Request::Unknown(code) => return *code,
        };
        op.code()
    }

    /// Encodes the body alone (the header is the caller's: it owns the xid).
    /// `Ping`, `WhoAmI`, `CloseSession` and `Unknown` have empty bodies.
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            Request::Create { req, .. } => req.encode(buf),
            Request::CreateTtl(req) => req.encode(buf),
            Request::Delete(req) => req.encode(buf),
            Request::Exists(req)
            | Request::GetData(req)
            | Request::GetChildren(req)
            | Request::GetChildren2(req) => req.encode(buf),
            Request::GetChildrenPage(req) => req.encode(buf),
            Request::SetData(req) => req.encode(buf),
            Request::GetAcl(req) => req.encode(buf),
            Request::SetAcl(req) => req.encode(buf),
            Request::Check(req) => req.encode(buf),
            Request::Multi(ops) => MultiRequest::encode_ops(ops, buf),
            Request::MultiRead(ops) => MultiReadRequest::encode_ops(ops, buf),
            Request::Sync(req) => req.encode(buf),
            Request::SetWatches(req) => req.encode(buf),
            Request::SetWatches2(req) => req.encode(buf),
            Request::AddWatch(req) => req.encode(buf),
            Request::RemoveWatches(req) | Request::CheckWatches(req) => req.encode(buf),
            Request::GetEphemerals(req) => req.encode(buf),
            Request::GetAllChildrenNumber(req) => req.encode(buf),
            Request::Reconfig(req) => req.encode(buf),
            Request::Ping | Request::WhoAmI | Request::CloseSession | Request::Unknown(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::WriteExt;
    use crate::testing::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    fn decode(op: i32, body: Bytes) -> Result<Request, DecodeError> {
        match Packet::decode(op, &mut Reader::new(body))? {
            Packet::Request(request) => Ok(request),
            packet => panic!("{op} decoded as {packet:?}"),
        }
    }

    fn decode_packet(op: i32, body: Bytes) -> Result<Packet, DecodeError> {
        Packet::decode(op, &mut Reader::new(body))
    }

    #[test]
    fn unknown_opcodes_are_not_errors() {
        for op in [10, 23, 99, 108, 0, 20, -10, -1, i32::MIN, i32::MAX] {
            assert_eq!(decode(op, Bytes::new()), Ok(Request::Unknown(op)));
        }
    }

    #[test]
    fn empty_bodies() {
        assert_eq!(decode(11, Bytes::new()), Ok(Request::Ping));
        assert_eq!(decode(107, Bytes::new()), Ok(Request::WhoAmI));
        assert_eq!(decode(-11, Bytes::new()), Ok(Request::CloseSession));
        // Trailing bytes are ignored, not an error.
        assert_eq!(
            decode(11, Bytes::from_static(b"anything")),
            Ok(Request::Ping)
        );
    }

    #[test]
    fn trailing_bytes_after_a_record_are_ignored() {
        let mut buf = BytesMut::new();
        buf.write_string("/a");
        buf.write_bool(true);
        buf.write_i64(12345);
        assert_eq!(
            decode(4, buf.freeze()),
            Ok(Request::GetData(PathAndWatch {
                path: "/a".into(),
                watch: true
            }))
        );
    }

    #[test]
    fn forged_lengths_are_errors() {
        // Path length beyond the frame.
        let mut buf = BytesMut::new();
        buf.write_i32(100);
        buf.extend_from_slice(b"/a");
        assert!(matches!(
            decode(3, buf.freeze()),
            Err(DecodeError::LengthBeyondFrame { .. })
        ));
        // Negative path length other than null.
        let mut buf = BytesMut::new();
        buf.write_i32(-100);
        assert_eq!(
            decode(2, buf.freeze()),
            Err(DecodeError::NegativeLength(-100))
        );
        // Forged child-watch count.
        let mut buf = BytesMut::new();
        buf.write_i64(0);
        buf.write_i32(0);
        buf.write_i32(0);
        buf.write_i32(0x7fff_ffff);
        assert!(decode(101, buf.freeze()).is_err());
        // Missing body.
        assert!(matches!(
            decode(1, Bytes::new()),
            Err(DecodeError::Truncated { .. })
        ));
    }

    proptest! {
        #[test]
        fn packets_round_trip(packet in arb_packet()) {
            let mut buf = BytesMut::new();
            packet.encode(&mut buf);
            let decoded = Packet::decode(packet.op_code(), &mut Reader::new(buf.freeze()));
            prop_assert_eq!(decoded, Ok(packet));
        }

        #[test]
        fn random_bodies_never_panic(
            op in prop_oneof![-12i32..=23, 99i32..=108, any::<i32>()],
            body in proptest::collection::vec(any::<u8>(), 0..128),
        ) {
            let _ = decode_packet(op, Bytes::from(body));
        }

        #[test]
        fn random_bodies_for_every_opcode_never_panic(
            body in proptest::collection::vec(any::<u8>(), 0..96),
        ) {
            let body = Bytes::from(body);
            for op in (-12..=23).chain(99..=108) {
                if let Ok(packet) = decode_packet(op, body.clone()) {
                    // Whatever decodes must re-encode to itself, except the
                    // one lossy case documented in `multi`.
                    if reencodes_unchanged(&packet) {
                        let mut buf = BytesMut::new();
                        packet.encode(&mut buf);
                        prop_assert_eq!(decode_packet(packet.op_code(), buf.freeze()), Ok(packet));
                    }
                }
            }
        }
    }

    /// A `createTTL` multi op with invalid flags decodes as a plain create
    /// that keeps them, and a plain create with invalid flags is rejected.
    fn reencodes_unchanged(packet: &Packet) -> bool {
        match packet {
            Packet::Request(Request::Multi(ops)) => ops.iter().all(|op| match op {
                MultiOp::Create { req, .. } => crate::CreateMode::from_flags(req.flags).is_some(),
                _ => true,
            }),
            _ => true,
        }
    }
}
