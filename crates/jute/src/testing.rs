//! Proptest generators shared by every module's tests, so each record is
//! generated one way everywhere and the `Request` and multi round trips
//! reuse the per-record generators.
//!
//! Multi ops are generated in the canonical form ZooKeeper's decoder
//! produces (see `multi`), since only those survive a round trip unchanged.

use bytes::Bytes;
use proptest::prelude::*;
use proptest::strategy::Union;

use crate::codec::Record;
use crate::multi::{MultiOp, MultiResponse, MultiResult, ReadOp};
use crate::opcode::OpCode;
use crate::request::{Packet, Request};
use crate::requests::*;
use crate::responses::WhoAmIResponse;
use crate::session::{ConnectRequest, ConnectResponse, WatcherEvent};
use crate::types::{Acl, ClientInfo, Id, Stat};

/// Encodes and decodes `v`, panicking (and so failing the test) on error.
pub fn round_trip<T: Record>(v: &T) -> T {
    let bytes = v.to_bytes();
    match T::from_bytes(bytes) {
        Ok(decoded) => decoded,
        Err(e) => panic!("round trip failed to decode: {e}"),
    }
}

pub fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![".{0,12}", "(/[a-z0-9]{1,4}){0,3}"]
}

pub fn arb_strings() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(arb_string(), 0..5)
}

pub fn arb_bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..32).prop_map(Bytes::from)
}

/// Znode data: null now and then, else bytes (empty included).
pub fn arb_data() -> impl Strategy<Value = Option<Bytes>> {
    proptest::option::weighted(0.9, arb_bytes())
}

pub fn arb_stat() -> impl Strategy<Value = Stat> {
    (
        any::<[i64; 4]>(),
        any::<[i32; 3]>(),
        any::<i64>(),
        any::<[i32; 2]>(),
        any::<i64>(),
    )
        .prop_map(|(z, v, owner, n, pzxid)| Stat {
            czxid: z[0],
            mzxid: z[1],
            ctime: z[2],
            mtime: z[3],
            version: v[0],
            cversion: v[1],
            aversion: v[2],
            ephemeral_owner: owner,
            data_length: n[0],
            num_children: n[1],
            pzxid,
        })
}

pub fn arb_acls() -> impl Strategy<Value = Vec<Acl>> {
    proptest::collection::vec(
        (any::<i32>(), arb_string(), arb_string()).prop_map(|(perms, scheme, id)| Acl {
            perms,
            id: Id::new(scheme, id),
        }),
        0..4,
    )
}

pub fn arb_create_request() -> impl Strategy<Value = CreateRequest> {
    (arb_string(), arb_data(), arb_acls(), any::<i32>()).prop_map(|(path, data, acl, flags)| {
        CreateRequest {
            path,
            data,
            acl,
            flags,
        }
    })
}

pub fn arb_create_ttl_request() -> impl Strategy<Value = CreateTTLRequest> {
    (arb_create_request(), any::<i64>()).prop_map(|(c, ttl)| CreateTTLRequest {
        path: c.path,
        data: c.data,
        acl: c.acl,
        flags: c.flags,
        ttl,
    })
}

/// A path, or (`P = Option<String>`) a null one too.
pub fn arb_set_data_request<P: std::fmt::Debug>(
    path: impl Strategy<Value = P>,
) -> impl Strategy<Value = SetDataRequest<P>> {
    (path, arb_data(), any::<i32>()).prop_map(|(path, data, version)| SetDataRequest {
        path,
        data,
        version,
    })
}

pub fn arb_opt_path() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(arb_string())
}

pub fn arb_set_acl_request() -> impl Strategy<Value = SetACLRequest> {
    (arb_opt_path(), arb_acls(), any::<i32>()).prop_map(|(path, acl, version)| SetACLRequest {
        path,
        acl,
        version,
    })
}

pub fn arb_set_watches2() -> impl Strategy<Value = SetWatches2> {
    (
        any::<i64>(),
        arb_strings(),
        arb_strings(),
        arb_strings(),
        arb_strings(),
        arb_strings(),
    )
        .prop_map(|(relative_zxid, d, e, c, p, pr)| SetWatches2 {
            relative_zxid,
            data_watches: d,
            exist_watches: e,
            child_watches: c,
            persistent_watches: p,
            persistent_recursive_watches: pr,
        })
}

pub fn arb_reconfig_request() -> impl Strategy<Value = ReconfigRequest> {
    (
        proptest::option::of(arb_string()),
        proptest::option::of(arb_string()),
        proptest::option::of(arb_string()),
        any::<i64>(),
    )
        .prop_map(|(j, l, n, cur_config_id)| ReconfigRequest {
            joining_servers: j,
            leaving_servers: l,
            new_members: n,
            cur_config_id,
        })
}

pub fn arb_connect_request() -> impl Strategy<Value = ConnectRequest> {
    (
        any::<(i32, i64, i32, i64)>(),
        arb_bytes(),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(
            |((pv, zxid, timeout, session), password, read_only)| ConnectRequest {
                protocol_version: pv,
                last_zxid_seen: zxid,
                timeout_ms: timeout,
                session_id: session,
                password,
                read_only,
            },
        )
}

pub fn arb_connect_response() -> impl Strategy<Value = ConnectResponse> {
    (
        any::<(i32, i32, i64)>(),
        arb_bytes(),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(
            |((pv, timeout, session), password, read_only)| ConnectResponse {
                protocol_version: pv,
                timeout_ms: timeout,
                session_id: session,
                password,
                read_only,
            },
        )
}

pub fn arb_watcher_event() -> impl Strategy<Value = WatcherEvent> {
    (any::<i32>(), any::<i32>(), arb_string()).prop_map(|(event_type, state, path)| WatcherEvent {
        event_type,
        state,
        path,
    })
}

pub fn arb_who_am_i() -> impl Strategy<Value = WhoAmIResponse> {
    proptest::collection::vec(
        (arb_string(), arb_string())
            .prop_map(|(auth_scheme, user)| ClientInfo { auth_scheme, user }),
        0..4,
    )
    .prop_map(|client_info| WhoAmIResponse { client_info })
}

fn path_and_watch() -> impl Strategy<Value = PathAndWatch> {
    (arb_string(), any::<bool>()).prop_map(|(path, watch)| PathAndWatch { path, watch })
}

fn path_and_i32() -> impl Strategy<Value = (String, i32)> {
    (arb_string(), any::<i32>())
}

/// Write ops as ZooKeeper's decoder leaves them: plain creates have valid,
/// non-TTL flags and container flags imply `createContainer`; TTL creates
/// have TTL flags.
pub fn arb_multi_op() -> BoxedStrategy<MultiOp> {
    let create_op = prop_oneof![
        Just(OpCode::Create),
        Just(OpCode::Create2),
        Just(OpCode::CreateContainer)
    ];
    Union::new(vec![
        (create_op, arb_create_request(), 0..=4i32)
            .prop_map(|(op, mut req, flags)| {
                req.flags = flags;
                let op = if flags == 4 {
                    OpCode::CreateContainer
                } else {
                    op
                };
                MultiOp::Create { op, req }
            })
            .boxed(),
        (arb_create_ttl_request(), 5..=6i32)
            .prop_map(|(mut req, flags)| {
                req.flags = flags;
                MultiOp::CreateTtl(req)
            })
            .boxed(),
        path_and_i32()
            .prop_map(|(path, version)| MultiOp::Delete(DeleteRequest { path, version }))
            .boxed(),
        arb_set_data_request(arb_string())
            .prop_map(MultiOp::SetData)
            .boxed(),
        path_and_i32()
            .prop_map(|(path, version)| MultiOp::Check(CheckVersionRequest { path, version }))
            .boxed(),
    ])
    .boxed()
}

pub fn arb_read_op() -> impl Strategy<Value = ReadOp> {
    prop_oneof![
        arb_string().prop_map(ReadOp::GetData),
        arb_string().prop_map(ReadOp::GetChildren),
    ]
}

pub fn arb_multi_result() -> BoxedStrategy<MultiResult> {
    Union::new(vec![
        arb_string()
            .prop_map(|path| MultiResult::Create { path })
            .boxed(),
        (arb_string(), arb_stat())
            .prop_map(|(path, stat)| MultiResult::Create2 { path, stat })
            .boxed(),
        Just(MultiResult::Delete).boxed(),
        arb_stat()
            .prop_map(|stat| MultiResult::SetData { stat })
            .boxed(),
        Just(MultiResult::Check).boxed(),
        any::<i32>()
            .prop_map(|err| MultiResult::Error { err })
            .boxed(),
        (arb_data(), arb_stat())
            .prop_map(|(data, stat)| MultiResult::GetData { data, stat })
            .boxed(),
        arb_strings()
            .prop_map(|children| MultiResult::GetChildren { children })
            .boxed(),
    ])
    .boxed()
}

pub fn arb_multi_response() -> impl Strategy<Value = MultiResponse> {
    proptest::collection::vec(arb_multi_result(), 0..6).prop_map(MultiResponse)
}

/// Opcodes that decode as [`Request::Unknown`].
fn unknown_op() -> impl Strategy<Value = i32> {
    prop_oneof![Just(0), Just(20), Just(-10), Just(-1), any::<i32>()].prop_filter(
        "a code Packet::decode would decode as something else",
        |code| {
            matches!(
                OpCode::from_code(*code),
                None | Some(
                    OpCode::Notification
                        | OpCode::DeleteContainer
                        | OpCode::CreateSession
                        | OpCode::Error
                )
            )
        },
    )
}

pub fn arb_request() -> BoxedStrategy<Request> {
    let create_op = prop_oneof![
        Just(OpCode::Create),
        Just(OpCode::Create2),
        Just(OpCode::CreateContainer)
    ];
    let path = arb_string;
    Union::new(vec![
        (create_op, arb_create_request())
            .prop_map(|(op, req)| Request::Create { op, req })
            .boxed(),
        arb_create_ttl_request()
            .prop_map(Request::CreateTtl)
            .boxed(),
        path_and_i32()
            .prop_map(|(path, version)| Request::Delete(DeleteRequest { path, version }))
            .boxed(),
        path_and_watch().prop_map(Request::Exists).boxed(),
        path_and_watch().prop_map(Request::GetData).boxed(),
        arb_set_data_request(arb_opt_path())
            .prop_map(Request::SetData)
            .boxed(),
        path()
            .prop_map(|path| Request::GetAcl(GetACLRequest { path }))
            .boxed(),
        arb_set_acl_request().prop_map(Request::SetAcl).boxed(),
        path_and_watch().prop_map(Request::GetChildren).boxed(),
        path_and_watch().prop_map(Request::GetChildren2).boxed(),
        (path_and_watch(), arb_string(), any::<i32>())
            .prop_map(|(read, start_after, max_children)| {
                Request::GetChildrenPage(GetChildrenPageRequest {
                    path: read.path,
                    watch: read.watch,
                    start_after,
                    max_children,
                })
            })
            .boxed(),
        path_and_i32()
            .prop_map(|(path, version)| Request::Check(CheckVersionRequest { path, version }))
            .boxed(),
        proptest::collection::vec(arb_multi_op(), 0..5)
            .prop_map(Request::Multi)
            .boxed(),
        proptest::collection::vec(arb_read_op(), 0..5)
            .prop_map(Request::MultiRead)
            .boxed(),
        arb_opt_path()
            .prop_map(|path| Request::Sync(SyncRequest { path }))
            .boxed(),
        Just(Request::Ping).boxed(),
        arb_set_watches2()
            .prop_map(|w| {
                Request::SetWatches(SetWatches {
                    relative_zxid: w.relative_zxid,
                    data_watches: w.data_watches,
                    exist_watches: w.exist_watches,
                    child_watches: w.child_watches,
                })
            })
            .boxed(),
        arb_set_watches2().prop_map(Request::SetWatches2).boxed(),
        (arb_opt_path(), any::<i32>())
            .prop_map(|(path, mode)| Request::AddWatch(AddWatchRequest { path, mode }))
            .boxed(),
        (arb_opt_path(), any::<i32>())
            .prop_map(|(path, watcher_type)| {
                Request::RemoveWatches(WatchesRequest { path, watcher_type })
            })
            .boxed(),
        (arb_opt_path(), any::<i32>())
            .prop_map(|(path, watcher_type)| {
                Request::CheckWatches(WatchesRequest { path, watcher_type })
            })
            .boxed(),
        path()
            .prop_map(|prefix| Request::GetEphemerals(GetEphemeralsRequest { prefix }))
            .boxed(),
        path()
            .prop_map(|path| Request::GetAllChildrenNumber(GetAllChildrenNumberRequest { path }))
            .boxed(),
        Just(Request::WhoAmI).boxed(),
        Just(Request::CloseSession).boxed(),
        arb_reconfig_request().prop_map(Request::Reconfig).boxed(),
        unknown_op().prop_map(Request::Unknown).boxed(),
    ])
    .boxed()
}

pub fn arb_packet() -> BoxedStrategy<Packet> {
    prop_oneof![
        (any::<i32>(), arb_string(), arb_data()).prop_map(|(auth_type, scheme, auth)| {
            Packet::Auth(AuthPacket {
                auth_type,
                scheme,
                auth,
            })
        }),
        proptest::option::of(arb_bytes()).prop_map(|token| Packet::Sasl(GetSASLRequest { token })),
        arb_request().prop_map(Packet::Request),
    ]
    .boxed()
}
