//! Transactions: what the server proposes to the log and every replica
//! applies. A Txn carries everything that is not a pure function of the
//! tree — time, session id, password, the client's auth ids — so applying
//! it is deterministic.
//!
//! Encoding (big-endian, Jute primitives): format version `i32`,
//! `time_ms i64`, `session_id i64`, auth ids (Jute vector of `Id`), from
//! format 3 a flags `i32`, then the op: a tag (ZooKeeper's opcode for the
//! same operation) and its fields. A multi holds a count and its ops;
//! multis do not nest.

use bytes::{Bytes, BytesMut};
use jute::{Acl, CreateMode, DecodeError, ErrorCode, Id, Reader, Record, WriteExt};

use crate::path;

/// Version of the encoding below; bump it with any change. Format 2 added
/// null data (length -1), which format 1 never holds; format 3 added the
/// flags word. Each entry is written in the oldest format that can hold
/// it, so a server of the release before still follows a rolling upgrade
/// until the new feature is used, and refuses an entry it cannot read
/// rather than misread it.
const TXN_FORMAT: i32 = 3;
const TXN_FORMAT_WITH_NULL_DATA: i32 = 2;
const TXN_FORMAT_WITHOUT_NULL_DATA: i32 = 1;
const TXN_FORMATS_READ: std::ops::RangeInclusive<i32> = 1..=TXN_FORMAT;

/// Bits of the flags word (format 3).
mod flag {
    /// [`super::Txn::enforce_quota`].
    pub const ENFORCE_QUOTA: i32 = 1;
    pub const KNOWN: i32 = ENFORCE_QUOTA;
}

/// Op tags, reusing ZooKeeper's opcodes (`ZooDefs.OpCode`).
mod tag {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const SET_ACL: i32 = 7;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const RECONFIG: i32 = 16;
    pub const REAP: i32 = 20; // deleteContainer
    pub const ERROR: i32 = -1;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
}

/// One entry of the replicated log. Its zxid is its log index, passed to
/// [`crate::DataTree::apply`] rather than stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// Wall-clock time the proposing server stamped: becomes ctime/mtime,
    /// and is "now" for TTL expiry in `Reap`.
    pub time_ms: i64,
    /// The session the request came from (the session being created or
    /// closed for session ops; the reaper may use 0).
    pub session_id: i64,
    /// The client's authenticated ids (`ip:<addr>`, `digest:<user:hash>`,
    /// `super:`): ACL checks and `auth`-scheme ACL expansion use these.
    pub auth: Vec<Id>,
    /// The proposing server's `zookeeper.enforceQuota`: a create or
    /// setData past a hard quota limit fails with `QuotaExceeded`. In
    /// ZooKeeper the leader's setting decides; here the proposer's does,
    /// and travels with the entry so every replica decides alike.
    pub enforce_quota: bool,
    pub op: TxnOp,
}

/// The operation of a [`Txn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOp {
    /// Record `Txn::session_id`. Session ids must not look like container
    /// or TTL owners (`i64::MIN`, or top byte `0xff`), as ZooKeeper's
    /// server ids <= 254 guarantee, since ephemerals store the id as owner.
    CreateSession {
        timeout_ms: i32,
        password: Bytes,
    },
    /// Forget `Txn::session_id` and delete its ephemerals in path order.
    CloseSession,
    /// `ttl_ms` is ZooKeeper's request ttl: in `1..=TTL_MAX_MS` for TTL
    /// modes and negative (ZooKeeper sends -1) for every other mode, else
    /// `BadArguments`. Create-with-TTL when extended types are disabled
    /// (`Unimplemented`) is the server's check.
    Create {
        path: String,
        /// `None` is null data.
        data: Option<Bytes>,
        acl: Vec<Acl>,
        mode: CreateMode,
        ttl_ms: i64,
    },
    Delete {
        path: String,
        version: i32,
    },
    SetData {
        path: String,
        /// `None` is null data.
        data: Option<Bytes>,
        version: i32,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    Check {
        path: String,
        version: i32,
    },
    /// Create/Delete/SetData/Check, and Error for an op the server refused
    /// before proposing; all or nothing.
    Multi(Vec<TxnOp>),
    /// The container/TTL reaper's delete (`deleteContainer`).
    Reap {
        path: String,
    },
    /// A change of the ensemble's membership that the leader checked
    /// (ZooKeeper's reconfig): `/zookeeper/config` becomes `members`
    /// (`server.N=...` lines, each ending in a newline) followed by
    /// `version=` and the txn's zxid in hex, with data version -1, as
    /// ZooKeeper's reconfig txn sets it. Its log entry also changes the
    /// raft group.
    Reconfig {
        members: String,
    },
    /// A write the server refused before proposing it (a malformed body, a
    /// mode this configuration disables). Like ZooKeeper's `ErrorTxn` it
    /// changes nothing but still takes a zxid, so the refusal is ordered
    /// with the session's other writes and replies carry that zxid.
    Error {
        code: ErrorCode,
    },
}

impl TxnOp {
    /// Shows `visit` the paths it looks up, for [`crate::Lookups`]: its
    /// znode's, and its parent's for a create or a delete.
    pub(crate) fn looked_up(&self, visit: &mut impl FnMut(&str)) {
        match self {
            TxnOp::Create { path, .. } | TxnOp::Delete { path, .. } | TxnOp::Reap { path } => {
                visit(path);
                if let Some(parent) = path::parent_of(path) {
                    visit(parent);
                }
            }
            TxnOp::SetData { path, .. }
            | TxnOp::SetAcl { path, .. }
            | TxnOp::Check { path, .. } => visit(path),
            TxnOp::Multi(ops) => ops.iter().for_each(|op| op.looked_up(visit)),
            TxnOp::CreateSession { .. }
            | TxnOp::CloseSession
            | TxnOp::Reconfig { .. }
            | TxnOp::Error { .. } => {}
        }
    }

    fn has_null_data(&self) -> bool {
        match self {
            TxnOp::Create { data, .. } | TxnOp::SetData { data, .. } => data.is_none(),
            TxnOp::Multi(ops) => ops.iter().any(TxnOp::has_null_data),
            _ => false,
        }
    }
}

impl Txn {
    /// The encoded entry, in a buffer of its exact size: encoding a
    /// setData's value into a buffer that grew as it went, then copying it
    /// out, took 3% of a standalone server's CPU under writes.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut buf = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut buf);
        buf.into()
    }

    /// The bytes `encode` writes.
    pub fn encoded_len(&self) -> usize {
        let flags = if self.format() >= TXN_FORMAT { 4 } else { 0 };
        let auth: usize = self.auth.iter().map(id_len).sum();
        4 + 8 + 8 + 4 + auth + flags + op_len(&self.op)
    }

    /// The oldest format that holds this txn.
    fn format(&self) -> i32 {
        if self.enforce_quota {
            TXN_FORMAT
        } else if self.op.has_null_data() {
            TXN_FORMAT_WITH_NULL_DATA
        } else {
            TXN_FORMAT_WITHOUT_NULL_DATA
        }
    }

    pub fn encode(&self, buf: &mut BytesMut) {
        let flags = if self.enforce_quota {
            flag::ENFORCE_QUOTA
        } else {
            0
        };
        let format = self.format();
        buf.write_i32(format);
        buf.write_i64(self.time_ms);
        buf.write_i64(self.session_id);
        buf.write_i32(jute::jute_len(self.auth.len()));
        for id in &self.auth {
            id.encode(buf);
        }
        if format >= TXN_FORMAT {
            buf.write_i32(flags);
        }
        encode_op(&self.op, buf);
    }

    /// Decodes a whole entry; trailing bytes are an error, as they would
    /// mean writer and reader disagree on the format.
    pub fn decode(bytes: Bytes) -> Result<Txn, DecodeError> {
        let mut r = Reader::new(bytes);
        let format = r.read_i32()?;
        if !TXN_FORMATS_READ.contains(&format) {
            return Err(DecodeError::InvalidValue {
                field: "txn format",
                value: i64::from(format),
            });
        }
        let time_ms = r.read_i64()?;
        let session_id = r.read_i64()?;
        // An Id is at least two 4-byte string lengths.
        let auth = r.read_vec(8, Id::decode)?;
        let flags = if format >= TXN_FORMAT {
            r.read_i32()?
        } else {
            0
        };
        if flags & !flag::KNOWN != 0 {
            return Err(DecodeError::InvalidValue {
                field: "txn flags",
                value: i64::from(flags),
            });
        }
        let op = decode_op(&mut r, true)?;
        if !r.is_empty() {
            return Err(DecodeError::InvalidValue {
                field: "txn trailing bytes",
                value: r.remaining() as i64,
            });
        }
        Ok(Txn {
            time_ms,
            session_id,
            auth,
            enforce_quota: flags & flag::ENFORCE_QUOTA != 0,
            op,
        })
    }
}

fn encode_op(op: &TxnOp, buf: &mut BytesMut) {
    match op {
        TxnOp::CreateSession {
            timeout_ms,
            password,
        } => {
            buf.write_i32(tag::CREATE_SESSION);
            buf.write_i32(*timeout_ms);
            buf.write_buffer(password);
        }
        TxnOp::CloseSession => buf.write_i32(tag::CLOSE_SESSION),
        TxnOp::Create {
            path,
            data,
            acl,
            mode,
            ttl_ms,
        } => {
            buf.write_i32(tag::CREATE);
            buf.write_string(path);
            buf.write_opt_buffer(data.as_deref());
            Acl::encode_vec(acl, buf);
            buf.write_i32(mode.flags());
            buf.write_i64(*ttl_ms);
        }
        TxnOp::Delete { path, version } => {
            buf.write_i32(tag::DELETE);
            buf.write_string(path);
            buf.write_i32(*version);
        }
        TxnOp::SetData {
            path,
            data,
            version,
        } => {
            buf.write_i32(tag::SET_DATA);
            buf.write_string(path);
            buf.write_opt_buffer(data.as_deref());
            buf.write_i32(*version);
        }
        TxnOp::SetAcl { path, acl, version } => {
            buf.write_i32(tag::SET_ACL);
            buf.write_string(path);
            Acl::encode_vec(acl, buf);
            buf.write_i32(*version);
        }
        TxnOp::Check { path, version } => {
            buf.write_i32(tag::CHECK);
            buf.write_string(path);
            buf.write_i32(*version);
        }
        TxnOp::Multi(ops) => {
            buf.write_i32(tag::MULTI);
            buf.write_i32(jute::jute_len(ops.len()));
            for op in ops {
                encode_op(op, buf);
            }
        }
        TxnOp::Reap { path } => {
            buf.write_i32(tag::REAP);
            buf.write_string(path);
        }
        TxnOp::Reconfig { members } => {
            buf.write_i32(tag::RECONFIG);
            buf.write_string(members);
        }
        TxnOp::Error { code } => {
            buf.write_i32(tag::ERROR);
            buf.write_i32(code.code());
        }
    }
}

/// The bytes `encode_op` writes for `op`.
fn op_len(op: &TxnOp) -> usize {
    const TAG: usize = 4;
    let string = |s: &str| 4 + s.len();
    let data = |d: &Option<Bytes>| 4 + d.as_ref().map_or(0, Bytes::len);
    let acl = |acl: &[Acl]| 4 + acl.iter().map(|a| 4 + id_len(&a.id)).sum::<usize>();
    TAG + match op {
        TxnOp::CreateSession { password, .. } => 4 + 4 + password.len(),
        TxnOp::CloseSession => 0,
        TxnOp::Create {
            path,
            data: d,
            acl: a,
            ..
        } => string(path) + data(d) + acl(a) + 4 + 8,
        TxnOp::Delete { path, .. } | TxnOp::Check { path, .. } => string(path) + 4,
        TxnOp::SetData { path, data: d, .. } => string(path) + data(d) + 4,
        TxnOp::SetAcl { path, acl: a, .. } => string(path) + acl(a) + 4,
        TxnOp::Multi(ops) => 4 + ops.iter().map(op_len).sum::<usize>(),
        TxnOp::Reap { path } => string(path),
        TxnOp::Reconfig { members } => string(members),
        TxnOp::Error { .. } => 4,
    }
}

fn id_len(id: &Id) -> usize {
    4 + id.scheme.len() + 4 + id.id.len()
}

/// `top_level` is false inside a multi, where another multi is refused so
/// that a forged entry cannot recurse without bound.
fn decode_op(r: &mut Reader, top_level: bool) -> Result<TxnOp, DecodeError> {
    let tag = r.read_i32()?;
    Ok(match tag {
        tag::CREATE_SESSION => TxnOp::CreateSession {
            timeout_ms: r.read_i32()?,
            password: r.read_buffer_or_empty()?,
        },
        tag::CLOSE_SESSION => TxnOp::CloseSession,
        tag::CREATE => {
            let path = r.read_string()?;
            let data = r.read_buffer()?;
            let acl = Acl::decode_vec(r)?;
            let flags = r.read_i32()?;
            let mode = CreateMode::from_flags(flags).ok_or(DecodeError::InvalidValue {
                field: "create mode",
                value: i64::from(flags),
            })?;
            TxnOp::Create {
                path,
                data,
                acl,
                mode,
                ttl_ms: r.read_i64()?,
            }
        }
        tag::DELETE => TxnOp::Delete {
            path: r.read_string()?,
            version: r.read_i32()?,
        },
        tag::SET_DATA => TxnOp::SetData {
            path: r.read_string()?,
            data: r.read_buffer()?,
            version: r.read_i32()?,
        },
        tag::SET_ACL => TxnOp::SetAcl {
            path: r.read_string()?,
            acl: Acl::decode_vec(r)?,
            version: r.read_i32()?,
        },
        tag::CHECK => TxnOp::Check {
            path: r.read_string()?,
            version: r.read_i32()?,
        },
        tag::MULTI if top_level => {
            // The smallest op is a close-session tag: 4 bytes.
            TxnOp::Multi(r.read_vec(4, |r| decode_op(r, false))?)
        }
        tag::REAP => TxnOp::Reap {
            path: r.read_string()?,
        },
        tag::RECONFIG if top_level => TxnOp::Reconfig {
            members: r.read_string()?,
        },
        tag::ERROR => {
            let code = r.read_i32()?;
            TxnOp::Error {
                code: ErrorCode::from_code(code).ok_or(DecodeError::InvalidValue {
                    field: "error txn code",
                    value: i64::from(code),
                })?,
            }
        }
        other => {
            return Err(DecodeError::InvalidValue {
                field: "txn op",
                value: i64::from(other),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_bytes() -> impl Strategy<Value = Bytes> {
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(Bytes::from)
    }

    fn arb_data() -> impl Strategy<Value = Option<Bytes>> {
        proptest::option::of(arb_bytes())
    }

    fn arb_id() -> impl Strategy<Value = Id> {
        ("[a-z]{0,6}", "\\PC{0,8}").prop_map(|(s, i)| Id::new(s, i))
    }

    fn arb_acl() -> impl Strategy<Value = Vec<Acl>> {
        proptest::collection::vec(
            (any::<i32>(), arb_id()).prop_map(|(perms, id)| Acl { perms, id }),
            0..3,
        )
    }

    fn arb_mode() -> impl Strategy<Value = CreateMode> {
        (0..7).prop_map(|f| CreateMode::from_flags(f).unwrap())
    }

    fn arb_leaf_op() -> impl Strategy<Value = TxnOp> {
        let path = "\\PC{0,12}";
        prop_oneof![
            (any::<i32>(), arb_bytes()).prop_map(|(timeout_ms, password)| {
                TxnOp::CreateSession {
                    timeout_ms,
                    password,
                }
            }),
            Just(TxnOp::CloseSession),
            (path, arb_data(), arb_acl(), arb_mode(), any::<i64>()).prop_map(
                |(path, data, acl, mode, ttl_ms)| TxnOp::Create {
                    path,
                    data,
                    acl,
                    mode,
                    ttl_ms
                }
            ),
            (path, any::<i32>()).prop_map(|(path, version)| TxnOp::Delete { path, version }),
            (path, arb_data(), any::<i32>()).prop_map(|(path, data, version)| {
                TxnOp::SetData {
                    path,
                    data,
                    version,
                }
            }),
            (path, arb_acl(), any::<i32>()).prop_map(|(path, acl, version)| TxnOp::SetAcl {
                path,
                acl,
                version
            }),
            (path, any::<i32>()).prop_map(|(path, version)| TxnOp::Check { path, version }),
            path.prop_map(|path| TxnOp::Reap { path }),
            Just(TxnOp::Error {
                code: ErrorCode::MarshallingError
            }),
        ]
    }

    fn arb_op() -> impl Strategy<Value = TxnOp> {
        prop_oneof![
            4 => arb_leaf_op(),
            1 => proptest::collection::vec(arb_leaf_op(), 0..5).prop_map(TxnOp::Multi),
            1 => "(server\\.[0-9]=[a-z0-9:;.]{0,20}\n){0,3}"
                .prop_map(|members| TxnOp::Reconfig { members }),
        ]
    }

    fn arb_txn() -> impl Strategy<Value = Txn> {
        (
            any::<i64>(),
            any::<i64>(),
            proptest::collection::vec(arb_id(), 0..3),
            any::<bool>(),
            arb_op(),
        )
            .prop_map(|(time_ms, session_id, auth, enforce_quota, op)| Txn {
                time_ms,
                session_id,
                auth,
                enforce_quota,
                op,
            })
    }

    proptest! {
        #[test]
        fn round_trip(txn in arb_txn()) {
            let bytes = Bytes::from(txn.to_vec());
            prop_assert_eq!(bytes.len(), txn.encoded_len());
            prop_assert_eq!(Txn::decode(bytes.clone()).unwrap(), txn);
            // Every strict prefix is an error, never a panic or a success.
            for cut in 0..bytes.len() {
                prop_assert!(Txn::decode(bytes.slice(..cut)).is_err());
            }
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Txn::decode(Bytes::from(bytes));
        }
    }

    #[test]
    fn each_entry_is_written_in_the_oldest_format_that_holds_it() {
        let set = |data, enforce_quota| Txn {
            time_ms: 1,
            session_id: 2,
            auth: vec![],
            enforce_quota,
            op: TxnOp::Multi(vec![TxnOp::SetData {
                path: "/a".into(),
                data,
                version: -1,
            }]),
        };
        let format = |txn: &Txn| {
            let mut buf = BytesMut::new();
            txn.encode(&mut buf);
            i32::from_be_bytes(buf[..4].try_into().unwrap())
        };
        assert_eq!(format(&set(None, false)), 2);
        assert_eq!(format(&set(Some(Bytes::new()), false)), 1);
        assert_eq!(format(&set(Some(Bytes::new()), true)), 3);
        assert_eq!(format(&set(None, true)), 3);
    }

    #[test]
    fn unknown_flags_are_refused() {
        let txn = Txn {
            time_ms: 1,
            session_id: 2,
            auth: vec![],
            enforce_quota: true,
            op: TxnOp::CloseSession,
        };
        let mut buf = BytesMut::new();
        txn.encode(&mut buf);
        // format, time, session, auth count, then the flags word.
        let flags_at = 4 + 8 + 8 + 4;
        buf[flags_at..flags_at + 4].copy_from_slice(&3i32.to_be_bytes());
        assert!(Txn::decode(buf.freeze()).is_err());
    }

    #[test]
    fn format_1_entries_are_still_read() {
        let txn = Txn {
            time_ms: 1,
            session_id: 2,
            auth: vec![],
            enforce_quota: false,
            op: TxnOp::SetData {
                path: "/a".into(),
                data: Some(Bytes::from_static(b"x")),
                version: -1,
            },
        };
        let mut buf = BytesMut::new();
        txn.encode(&mut buf);
        buf[..4].copy_from_slice(&1i32.to_be_bytes());
        assert_eq!(Txn::decode(buf.freeze()).unwrap(), txn);
    }

    #[test]
    fn nested_multi_and_trailing_bytes_are_rejected() {
        let txn = Txn {
            time_ms: 1,
            session_id: 2,
            auth: vec![],
            enforce_quota: false,
            op: TxnOp::Multi(vec![TxnOp::Multi(vec![])]),
        };
        let mut buf = BytesMut::new();
        txn.encode(&mut buf);
        assert!(Txn::decode(buf.freeze()).is_err());

        let txn = Txn {
            time_ms: 1,
            session_id: 2,
            auth: vec![],
            enforce_quota: false,
            op: TxnOp::CloseSession,
        };
        let mut buf = BytesMut::new();
        txn.encode(&mut buf);
        buf.write_i32(0);
        assert!(matches!(
            Txn::decode(buf.freeze()),
            Err(DecodeError::InvalidValue {
                field: "txn trailing bytes",
                ..
            })
        ));
    }
}
