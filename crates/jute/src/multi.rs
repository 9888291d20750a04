//! `multi` and `multiRead`: a sequence of operations, each behind a
//! [`MultiHeader`], ended by a header with `done` set. Not a Jute vector, so
//! there is no count to forge; every element costs at least a header's nine
//! bytes, which bounds the loop by the frame.
//!
//! ZooKeeper's decoder (`MultiOperationRecord`) does more than parse, and
//! the opcode it settles on decides the result type a client receives, so
//! [`MultiRequest`] repeats its rules:
//! - `create`/`create2`/`createContainer` need valid, non-TTL flags;
//!   container flags turn the op into `createContainer` whatever the header
//!   said.
//! - `createTTL` with flags that are not a TTL mode becomes a plain create
//!   (the TTL is dropped), and container flags again mean `createContainer`.
//! - A write multi holds only writes, a `multiRead` only `getData` and
//!   `getChildren`; anything else is a [`DecodeError`], which ZooKeeper
//!   answers with `MarshallingError`.

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, Reader, Record, WriteExt};
use crate::opcode::OpCode;
use crate::requests::{
    CheckVersionRequest, CreateRequest, CreateTTLRequest, DeleteRequest, PathAndWatch,
    SetDataRequest,
};
use crate::responses::{
    Create2Response, CreateResponse, ErrorResponse, GetChildrenResponse, GetDataResponse,
    StatResponse,
};
use crate::types::{CreateMode, Stat};

/// In front of each element of a multi request or response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiHeader {
    /// An opcode, or -1 for an error result and for the terminator.
    pub op_type: i32,
    pub done: bool,
    /// -1 in requests (ZooKeeper's clients send it so), 0 or the error code
    /// in responses.
    pub err: i32,
}

impl MultiHeader {
    pub const ENCODED_BYTES: usize = 9;

    /// The terminator both directions end with.
    pub const END: MultiHeader = MultiHeader {
        op_type: -1,
        done: true,
        err: -1,
    };

    /// The header in front of a request element.
    pub fn request(op_type: i32) -> Self {
        Self {
            op_type,
            done: false,
            err: -1,
        }
    }
}

impl Record for MultiHeader {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            op_type: r.read_i32()?,
            done: r.read_bool()?,
            err: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.op_type);
        buf.write_bool(self.done);
        buf.write_i32(self.err);
    }
}

/// One operation of a write `multi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    /// `op` is `Create`, `Create2` or `CreateContainer`; it decides whether
    /// the result carries a stat.
    Create {
        op: OpCode,
        req: CreateRequest,
    },
    CreateTtl(CreateTTLRequest),
    Delete(DeleteRequest),
    SetData(SetDataRequest),
    Check(CheckVersionRequest),
}

impl MultiOp {
    /// A create in `mode` as the op a client sends for it: createTTL's
    /// record for the TTL modes, createContainer for a container, and
    /// `plain` (create or create2) otherwise, whose record has no TTL.
    pub fn create_in(mode: CreateMode, plain: OpCode, req: CreateTTLRequest) -> MultiOp {
        if mode.is_ttl() {
            return MultiOp::CreateTtl(req);
        }
        let op = if mode.is_container() {
            OpCode::CreateContainer
        } else {
            plain
        };
        MultiOp::Create {
            op,
            req: CreateRequest {
                path: req.path,
                data: req.data,
                acl: req.acl,
                flags: req.flags,
            },
        }
    }
}

impl MultiOp {
    pub fn op_code(&self) -> i32 {
        match self {
            MultiOp::Create { op, .. } => op.code(),
            MultiOp::CreateTtl(_) => OpCode::CreateTtl.code(),
            MultiOp::Delete(_) => OpCode::Delete.code(),
            MultiOp::SetData(_) => OpCode::SetData.code(),
            MultiOp::Check(_) => OpCode::Check.code(),
        }
    }

    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create { req, .. } => &req.path,
            MultiOp::CreateTtl(req) => &req.path,
            MultiOp::Delete(req) => &req.path,
            MultiOp::SetData(req) => &req.path,
            MultiOp::Check(req) => &req.path,
        }
    }

    fn decode_after(header: MultiHeader, r: &mut Reader) -> Result<Self, DecodeError> {
        let op = OpCode::from_code(header.op_type);
        Ok(match op {
            Some(op @ (OpCode::Create | OpCode::Create2 | OpCode::CreateContainer)) => {
                let req = CreateRequest::decode(r)?;
                let mode = match CreateMode::from_flags(req.flags) {
                    Some(mode) if !mode.is_ttl() => mode,
                    _ => {
                        return Err(DecodeError::InvalidValue {
                            field: "multi create flags",
                            value: req.flags.into(),
                        })
                    }
                };
                let op = if mode.is_container() {
                    OpCode::CreateContainer
                } else {
                    op
                };
                MultiOp::Create { op, req }
            }
            Some(OpCode::CreateTtl) => {
                let req = CreateTTLRequest::decode(r)?;
                // Unknown flags pick the op as if persistent, but are kept
                // for the server to reject, as ZooKeeper does.
                let mode = CreateMode::from_flags(req.flags).unwrap_or(CreateMode::Persistent);
                MultiOp::create_in(mode, OpCode::Create, req)
            }
            Some(OpCode::Delete) => MultiOp::Delete(DeleteRequest::decode(r)?),
            Some(OpCode::SetData) => MultiOp::SetData(SetDataRequest::decode(r)?),
            Some(OpCode::Check) => MultiOp::Check(CheckVersionRequest::decode(r)?),
            _ => {
                return Err(DecodeError::InvalidValue {
                    field: "multi op type",
                    value: header.op_type.into(),
                })
            }
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        MultiHeader::request(self.op_code()).encode(buf);
        match self {
            MultiOp::Create { req, .. } => req.encode(buf),
            MultiOp::CreateTtl(req) => req.encode(buf),
            MultiOp::Delete(req) => req.encode(buf),
            MultiOp::SetData(req) => req.encode(buf),
            MultiOp::Check(req) => req.encode(buf),
        }
    }
}

/// One operation of a `multiRead`. The request's watch flag is read and
/// dropped: ZooKeeper never sets watches from a multiRead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOp {
    GetData(String),
    GetChildren(String),
}

impl ReadOp {
    pub fn op_code(&self) -> i32 {
        match self {
            ReadOp::GetData(_) => OpCode::GetData.code(),
            ReadOp::GetChildren(_) => OpCode::GetChildren.code(),
        }
    }

    pub fn path(&self) -> &str {
        match self {
            ReadOp::GetData(path) | ReadOp::GetChildren(path) => path,
        }
    }

    fn decode_after(header: MultiHeader, r: &mut Reader) -> Result<Self, DecodeError> {
        match OpCode::from_code(header.op_type) {
            Some(OpCode::GetData) => Ok(ReadOp::GetData(PathAndWatch::decode(r)?.path)),
            Some(OpCode::GetChildren) => Ok(ReadOp::GetChildren(PathAndWatch::decode(r)?.path)),
            _ => Err(DecodeError::InvalidValue {
                field: "multiRead op type",
                value: header.op_type.into(),
            }),
        }
    }

    fn encode(&self, buf: &mut BytesMut) {
        MultiHeader::request(self.op_code()).encode(buf);
        PathAndWatch {
            path: self.path().to_owned(),
            watch: false,
        }
        .encode(buf);
    }
}

/// Reads elements until the terminating header; its other fields are not
/// checked, as ZooKeeper does not check them.
fn decode_until_done<T>(
    r: &mut Reader,
    mut element: impl FnMut(MultiHeader, &mut Reader) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut items = Vec::new();
    loop {
        let header = MultiHeader::decode(r)?;
        if header.done {
            return Ok(items);
        }
        items.push(element(header, r)?);
    }
}

/// The body of a `multi` request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MultiRequest(pub Vec<MultiOp>);

impl MultiRequest {
    /// Encodes a multi body from borrowed ops, so [`crate::Request`] need
    /// not clone them into a `MultiRequest`.
    pub fn encode_ops(ops: &[MultiOp], buf: &mut BytesMut) {
        for op in ops {
            op.encode(buf);
        }
        MultiHeader::END.encode(buf);
    }
}

impl Record for MultiRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        decode_until_done(r, MultiOp::decode_after).map(Self)
    }

    fn encode(&self, buf: &mut BytesMut) {
        Self::encode_ops(&self.0, buf);
    }
}

/// The body of a `multiRead` request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MultiReadRequest(pub Vec<ReadOp>);

impl MultiReadRequest {
    /// Encodes a multiRead body from borrowed ops.
    pub fn encode_ops(ops: &[ReadOp], buf: &mut BytesMut) {
        for op in ops {
            op.encode(buf);
        }
        MultiHeader::END.encode(buf);
    }
}

impl Record for MultiReadRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        decode_until_done(r, ReadOp::decode_after).map(Self)
    }

    fn encode(&self, buf: &mut BytesMut) {
        Self::encode_ops(&self.0, buf);
    }
}

/// The outcome of one operation of a `multi` or `multiRead`.
///
/// In a failed `multi` every element is `Error`: 0 for the ops before the
/// failure, the failure's code, then `RuntimeInconsistency` for the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// For a `create` op.
    Create {
        path: String,
    },
    /// For `create2`, `createContainer` and `createTTL` ops: all are
    /// answered with header type `create2` (15).
    Create2 {
        path: String,
        stat: Stat,
    },
    Delete,
    SetData {
        stat: Stat,
    },
    Check,
    /// Header type -1 with `err` in both the header and the body.
    Error {
        err: i32,
    },
    GetData {
        /// `None` when the znode holds null data.
        data: Option<Bytes>,
        stat: Stat,
    },
    GetChildren {
        children: Vec<String>,
    },
}

impl MultiResult {
    /// The `type` of this result's [`MultiHeader`].
    pub fn op_type(&self) -> i32 {
        match self {
            MultiResult::Create { .. } => OpCode::Create.code(),
            MultiResult::Create2 { .. } => OpCode::Create2.code(),
            MultiResult::Delete => OpCode::Delete.code(),
            MultiResult::SetData { .. } => OpCode::SetData.code(),
            MultiResult::Check => OpCode::Check.code(),
            MultiResult::Error { .. } => OpCode::Error.code(),
            MultiResult::GetData { .. } => OpCode::GetData.code(),
            MultiResult::GetChildren { .. } => OpCode::GetChildren.code(),
        }
    }

    fn decode_after(header: MultiHeader, r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(match OpCode::from_code(header.op_type) {
            Some(OpCode::Create) => MultiResult::Create {
                path: CreateResponse::decode(r)?.path,
            },
            Some(OpCode::Create2) => {
                let rsp = Create2Response::decode(r)?;
                MultiResult::Create2 {
                    path: rsp.path,
                    stat: rsp.stat,
                }
            }
            Some(OpCode::Delete) => MultiResult::Delete,
            Some(OpCode::SetData) => MultiResult::SetData {
                stat: StatResponse::decode(r)?.stat,
            },
            Some(OpCode::Check) => MultiResult::Check,
            // The body, not the header, is authoritative, as in ZooKeeper.
            Some(OpCode::Error) => MultiResult::Error {
                err: ErrorResponse::decode(r)?.err,
            },
            Some(OpCode::GetData) => {
                let rsp = GetDataResponse::decode(r)?;
                MultiResult::GetData {
                    data: rsp.data,
                    stat: rsp.stat,
                }
            }
            Some(OpCode::GetChildren) => MultiResult::GetChildren {
                children: GetChildrenResponse::decode(r)?.children,
            },
            _ => {
                return Err(DecodeError::InvalidValue {
                    field: "multi result type",
                    value: header.op_type.into(),
                })
            }
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        let err = match self {
            MultiResult::Error { err } => *err,
            _ => 0,
        };
        MultiHeader {
            op_type: self.op_type(),
            done: false,
            err,
        }
        .encode(buf);
        match self {
            MultiResult::Create { path } => buf.write_string(path),
            MultiResult::Create2 { path, stat } => {
                buf.write_string(path);
                stat.encode(buf);
            }
            MultiResult::Delete | MultiResult::Check => {}
            MultiResult::SetData { stat } => stat.encode(buf),
            MultiResult::Error { err } => buf.write_i32(*err),
            MultiResult::GetData { data, stat } => {
                buf.write_opt_buffer(data.as_deref());
                stat.encode(buf);
            }
            MultiResult::GetChildren { children } => buf.write_string_vec(children),
        }
    }
}

/// The reply body of both `multi` and `multiRead`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MultiResponse(pub Vec<MultiResult>);

impl Record for MultiResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        decode_until_done(r, MultiResult::decode_after).map(Self)
    }

    fn encode(&self, buf: &mut BytesMut) {
        for result in &self.0 {
            result.encode(buf);
        }
        MultiHeader::END.encode(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::types::Acl;
    use proptest::prelude::*;

    fn create(flags: i32) -> CreateRequest {
        CreateRequest {
            path: "/a".into(),
            data: Some(Bytes::from_static(b"x")),
            acl: Acl::open_unsafe(),
            flags,
        }
    }

    /// A multi request body from (op type, encoded record) pairs.
    fn ops_bytes(elements: &[(i32, Bytes)]) -> Bytes {
        let mut buf = BytesMut::new();
        for (op_type, body) in elements {
            MultiHeader::request(*op_type).encode(&mut buf);
            buf.extend_from_slice(body);
        }
        MultiHeader::END.encode(&mut buf);
        buf.freeze()
    }

    #[test]
    fn request_bytes_match_zookeeper() {
        let req = MultiRequest(vec![MultiOp::Check(CheckVersionRequest {
            path: "/a".into(),
            version: 3,
        })]);
        let expected: &[u8] = &[
            0, 0, 0, 13, 0, 0xff, 0xff, 0xff, 0xff, // header: check, not done, err -1
            0, 0, 0, 2, b'/', b'a', 0, 0, 0, 3, // CheckVersionRequest
            0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff, // terminator
        ];
        assert_eq!(&req.to_bytes()[..], expected);
    }

    #[test]
    fn response_bytes_match_zookeeper() {
        let rsp = MultiResponse(vec![MultiResult::Delete, MultiResult::Error { err: -101 }]);
        let expected: &[u8] = &[
            0, 0, 0, 2, 0, 0, 0, 0, 0, // delete, err 0, no body
            0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0x9b, // error header, err -101
            0xff, 0xff, 0xff, 0x9b, // ErrorResponse
            0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff, // terminator
        ];
        assert_eq!(&rsp.to_bytes()[..], expected);
        assert_eq!(MultiResponse::from_bytes(rsp.to_bytes()).unwrap(), rsp);
    }

    #[test]
    fn container_flags_make_a_create_container() {
        let bytes = ops_bytes(&[(1, create(4).to_bytes())]);
        let ops = MultiRequest::from_bytes(bytes).unwrap().0;
        assert_eq!(
            ops,
            vec![MultiOp::Create {
                op: OpCode::CreateContainer,
                req: create(4)
            }]
        );
    }

    #[test]
    fn invalid_or_ttl_flags_in_plain_create_are_rejected() {
        for flags in [5, 6, 7, -1] {
            let bytes = ops_bytes(&[(15, create(flags).to_bytes())]);
            assert!(matches!(
                MultiRequest::from_bytes(bytes),
                Err(DecodeError::InvalidValue { .. })
            ));
        }
    }

    #[test]
    fn create_ttl_without_ttl_mode_becomes_create() {
        let ttl_req = |flags| CreateTTLRequest {
            path: "/t".into(),
            data: None,
            acl: vec![],
            flags,
            ttl: 500,
        };
        let bytes = ops_bytes(&[
            (21, ttl_req(0).to_bytes()),
            (21, ttl_req(4).to_bytes()),
            (21, ttl_req(5).to_bytes()),
            (21, ttl_req(99).to_bytes()),
        ]);
        let ops = MultiRequest::from_bytes(bytes).unwrap().0;
        let ops: Vec<i32> = ops.iter().map(MultiOp::op_code).collect();
        assert_eq!(ops, vec![1, 19, 21, 1]);
    }

    #[test]
    fn reads_and_writes_do_not_mix() {
        let get_data = PathAndWatch {
            path: "/a".into(),
            watch: true,
        };
        let read = ops_bytes(&[(4, get_data.to_bytes())]);
        assert!(MultiRequest::from_bytes(read.clone()).is_err());
        assert_eq!(
            MultiReadRequest::from_bytes(read).unwrap().0,
            vec![ReadOp::GetData("/a".into())]
        );

        let delete = DeleteRequest {
            path: "/a".into(),
            version: -1,
        };
        let write = ops_bytes(&[(2, delete.to_bytes())]);
        assert!(MultiReadRequest::from_bytes(write).is_err());
    }

    #[test]
    fn missing_terminator_is_truncation() {
        let mut buf = BytesMut::new();
        MultiHeader::request(2).encode(&mut buf);
        DeleteRequest {
            path: "/a".into(),
            version: -1,
        }
        .encode(&mut buf);
        assert!(matches!(
            MultiRequest::from_bytes(buf.freeze()),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn unknown_result_type_is_rejected() {
        let mut buf = BytesMut::new();
        MultiHeader {
            op_type: 9,
            done: false,
            err: 0,
        }
        .encode(&mut buf);
        MultiHeader::END.encode(&mut buf);
        assert!(MultiResponse::from_bytes(buf.freeze()).is_err());
    }

    proptest! {
        #[test]
        fn multi_request_round_trips(ops in proptest::collection::vec(arb_multi_op(), 0..6)) {
            let v = MultiRequest(ops);
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn multi_read_request_round_trips(ops in proptest::collection::vec(arb_read_op(), 0..6)) {
            let v = MultiReadRequest(ops);
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn multi_response_round_trips(v in arb_multi_response()) {
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let bytes = Bytes::from(bytes);
            let _ = MultiRequest::from_bytes(bytes.clone());
            let _ = MultiReadRequest::from_bytes(bytes.clone());
            let _ = MultiResponse::from_bytes(bytes);
        }
    }
}
