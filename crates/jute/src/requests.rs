//! The body records of client requests, one per record of `zookeeper.jute`.
//!
//! Each is a plain struct so the server can match on [`crate::Request`] and
//! own the fields it needs. Records that ZooKeeper defines several times
//! with the same fields (`ExistsRequest`, `GetDataRequest`, ...) share one
//! struct here, with the Java names kept as aliases for readers of the spec.
//!
//! Nulls: znode data keeps its nullness, because ZooKeeper stores a null
//! buffer as null and answers it as null (Kafka reads a null
//! `/latest_producer_id_block` as "no block yet"); so does
//! [`ReconfigRequest`], where null means "not specified". A null path is a
//! decode error ([`Reader::read_path`]), as ZooKeeper's handlers dereference
//! it, except in the records of setData, setACL, sync, addWatch and
//! removeWatches/checkWatches, whose handlers answer it otherwise: those keep
//! it as `None` for the server to answer. Other nulls decode as empty, which
//! is how ZooKeeper's own handlers end up treating them, unless a field says
//! otherwise.

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, PathField, Reader, Record, WriteExt};
use crate::types::Acl;

/// `create`, `create2` and `createContainer` all carry this record; the
/// opcode alone says which reply the client expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    pub path: String,
    /// `None` is null data, kept apart from empty.
    pub data: Option<Bytes>,
    pub acl: Vec<Acl>,
    /// Raw [`crate::CreateMode`] flags: an invalid value is the server's
    /// `BadArguments`, not a reason to drop the connection.
    pub flags: i32,
}

impl Record for CreateRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_path()?,
            data: r.read_buffer()?,
            acl: Acl::decode_vec(r)?,
            flags: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
        buf.write_opt_buffer(self.data.as_deref());
        Acl::encode_vec(&self.acl, buf);
        buf.write_i32(self.flags);
    }
}

/// `createTTL`: a create plus the node's time to live in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTTLRequest {
    pub path: String,
    /// `None` is null data, kept apart from empty.
    pub data: Option<Bytes>,
    pub acl: Vec<Acl>,
    pub flags: i32,
    pub ttl: i64,
}

impl Record for CreateTTLRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_path()?,
            data: r.read_buffer()?,
            acl: Acl::decode_vec(r)?,
            flags: r.read_i32()?,
            ttl: r.read_i64()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
        buf.write_opt_buffer(self.data.as_deref());
        Acl::encode_vec(&self.acl, buf);
        buf.write_i32(self.flags);
        buf.write_i64(self.ttl);
    }
}

/// `delete`; a version of -1 matches any version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRequest {
    pub path: String,
    pub version: i32,
}

impl Record for DeleteRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_path()?,
            version: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
        buf.write_i32(self.version);
    }
}

/// A read that may leave a watch behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathAndWatch {
    pub path: String,
    pub watch: bool,
}

pub type ExistsRequest = PathAndWatch;
pub type GetDataRequest = PathAndWatch;
pub type GetChildrenRequest = PathAndWatch;
pub type GetChildren2Request = PathAndWatch;

/// Paddock's paginated getChildren: the children after `start_after` in
/// byte order (from the first when it is empty), at most `max_children`
/// of them. The server may answer fewer to keep the reply small; the
/// response says whether more follow. A watch is the getChildren one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetChildrenPageRequest {
    pub path: String,
    pub watch: bool,
    pub start_after: String,
    pub max_children: i32,
}

impl Record for GetChildrenPageRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_path()?,
            watch: r.read_bool()?,
            start_after: r.read_string()?,
            max_children: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
        buf.write_bool(self.watch);
        buf.write_string(&self.start_after);
        buf.write_i32(self.max_children);
    }
}

impl Record for PathAndWatch {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_path()?,
            watch: r.read_bool()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
        buf.write_bool(self.watch);
    }
}

/// `setData`. The path is `Option<String>` in the request on its own,
/// whose null path ZooKeeper answers with BadArguments, and `String` (the
/// default) inside a multi, where a null path is a marshalling error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDataRequest<P = String> {
    pub path: P,
    /// `None` is null data, kept apart from empty.
    pub data: Option<Bytes>,
    pub version: i32,
}

impl<P: PathField> Record for SetDataRequest<P> {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: P::read(r)?,
            data: r.read_buffer()?,
            version: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        self.path.write(buf);
        buf.write_opt_buffer(self.data.as_deref());
        buf.write_i32(self.version);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetACLRequest {
    pub path: String,
}

impl Record for GetACLRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_path()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetACLRequest {
    /// `None` when null: ZooKeeper answers BadArguments.
    pub path: Option<String>,
    pub acl: Vec<Acl>,
    /// Expected `aversion`; -1 matches any.
    pub version: i32,
}

impl Record for SetACLRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_opt_string()?,
            acl: Acl::decode_vec(r)?,
            version: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_opt_string(self.path.as_deref());
        Acl::encode_vec(&self.acl, buf);
        buf.write_i32(self.version);
    }
}

/// A version check; meaningful only inside a multi.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckVersionRequest {
    pub path: String,
    pub version: i32,
}

impl Record for CheckVersionRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_path()?,
            version: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
        buf.write_i32(self.version);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest {
    /// `None` when null: ZooKeeper syncs all the same and echoes it.
    pub path: Option<String>,
}

impl Record for SyncRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_opt_string()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_opt_string(self.path.as_deref());
    }
}

/// `addAuthInfo`, sent with xid -4. `auth_type` is always 0 from real
/// clients and ignored by ZooKeeper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthPacket {
    pub auth_type: i32,
    pub scheme: String,
    /// `None` when null: ZooKeeper's digest provider fails on it, its ip
    /// provider ignores it.
    pub auth: Option<Bytes>,
}

impl Record for AuthPacket {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            auth_type: r.read_i32()?,
            scheme: r.read_string()?,
            auth: r.read_buffer()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.auth_type);
        buf.write_string(&self.scheme);
        buf.write_opt_buffer(self.auth.as_deref());
    }
}

/// Re-registration of one-shot watches after a reconnect, sent with xid -8.
/// The server fires at once any watch whose node changed after
/// `relative_zxid`. ZooKeeper looks every path of these lists up, so a null
/// list or path is a decode error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetWatches {
    pub relative_zxid: i64,
    pub data_watches: Vec<String>,
    pub exist_watches: Vec<String>,
    pub child_watches: Vec<String>,
}

impl Record for SetWatches {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            relative_zxid: r.read_i64()?,
            data_watches: r.read_path_vec()?,
            exist_watches: r.read_path_vec()?,
            child_watches: r.read_path_vec()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i64(self.relative_zxid);
        buf.write_string_vec(&self.data_watches);
        buf.write_string_vec(&self.exist_watches);
        buf.write_string_vec(&self.child_watches);
    }
}

/// [`SetWatches`] plus the persistent watches added in 3.6.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetWatches2 {
    pub relative_zxid: i64,
    pub data_watches: Vec<String>,
    pub exist_watches: Vec<String>,
    pub child_watches: Vec<String>,
    pub persistent_watches: Vec<String>,
    pub persistent_recursive_watches: Vec<String>,
}

impl Record for SetWatches2 {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            relative_zxid: r.read_i64()?,
            data_watches: r.read_path_vec()?,
            exist_watches: r.read_path_vec()?,
            child_watches: r.read_path_vec()?,
            persistent_watches: read_persistent_paths(r)?,
            persistent_recursive_watches: read_persistent_paths(r)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i64(self.relative_zxid);
        buf.write_string_vec(&self.data_watches);
        buf.write_string_vec(&self.exist_watches);
        buf.write_string_vec(&self.child_watches);
        buf.write_string_vec(&self.persistent_watches);
        buf.write_string_vec(&self.persistent_recursive_watches);
    }
}

/// A persistent watch list of `setWatches2`: a null list is a decode error,
/// as for the others, but ZooKeeper files a null path's watch under a null
/// key, which no event names, so a null path is dropped.
fn read_persistent_paths(r: &mut Reader) -> Result<Vec<String>, DecodeError> {
    let paths = r
        .read_opt_vec(4, Reader::read_opt_string)?
        .ok_or(DecodeError::UnexpectedNull("path list"))?;
    Ok(paths.into_iter().flatten().collect())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddWatchRequest {
    /// `None` when null: ZooKeeper keeps a watch no event ever names.
    pub path: Option<String>,
    /// Raw [`crate::AddWatchMode`].
    pub mode: i32,
}

impl Record for AddWatchRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_opt_string()?,
            mode: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_opt_string(self.path.as_deref());
        buf.write_i32(self.mode);
    }
}

/// `checkWatches` and `removeWatches` share this shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchesRequest {
    /// `None` when null: ZooKeeper finds no watch to remove there, and
    /// fails to check one.
    pub path: Option<String>,
    /// Raw [`crate::WatcherType`].
    pub watcher_type: i32,
}

pub type RemoveWatchesRequest = WatchesRequest;
pub type CheckWatchesRequest = WatchesRequest;

impl Record for WatchesRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_opt_string()?,
            watcher_type: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_opt_string(self.path.as_deref());
        buf.write_i32(self.watcher_type);
    }
}

/// The session's ephemeral nodes under `prefix` ("/" or empty for all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetEphemeralsRequest {
    pub prefix: String,
}

impl Record for GetEphemeralsRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            prefix: r.read_string()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.prefix);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetAllChildrenNumberRequest {
    pub path: String,
}

impl Record for GetAllChildrenNumberRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_path()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
    }
}

/// One step of a SASL exchange from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetSASLRequest {
    /// `None` when null: ZooKeeper takes the token's length before
    /// anything else and closes the connection unanswered on a null one.
    pub token: Option<Bytes>,
}

impl Record for GetSASLRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            token: r.read_buffer()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_opt_buffer(self.token.as_deref());
    }
}

/// Dynamic reconfiguration. Null and empty differ here: ZooKeeper takes
/// `new_members` when it is non-null and only then ignores the incremental
/// lists, so all three keep their nullness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconfigRequest {
    pub joining_servers: Option<String>,
    pub leaving_servers: Option<String>,
    pub new_members: Option<String>,
    /// -1 means "whatever the current config is".
    pub cur_config_id: i64,
}

impl Record for ReconfigRequest {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            joining_servers: r.read_opt_string()?,
            leaving_servers: r.read_opt_string()?,
            new_members: r.read_opt_string()?,
            cur_config_id: r.read_i64()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_opt_string(self.joining_servers.as_deref());
        buf.write_opt_string(self.leaving_servers.as_deref());
        buf.write_opt_string(self.new_members.as_deref());
        buf.write_i64(self.cur_config_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn create_round_trips(v in arb_create_request()) {
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn create_ttl_round_trips(v in arb_create_ttl_request()) {
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn small_records_round_trip(path in arb_string(), n: i32, b: bool) {
            let v = DeleteRequest { path: path.clone(), version: n };
            prop_assert_eq!(round_trip(&v), v);
            let v = PathAndWatch { path: path.clone(), watch: b };
            prop_assert_eq!(round_trip(&v), v);
            let v = GetACLRequest { path: path.clone() };
            prop_assert_eq!(round_trip(&v), v);
            let v = CheckVersionRequest { path: path.clone(), version: n };
            prop_assert_eq!(round_trip(&v), v);
            for path in [Some(path.clone()), None] {
                let v = SyncRequest { path: path.clone() };
                prop_assert_eq!(round_trip(&v), v);
                let v = AddWatchRequest { path: path.clone(), mode: n };
                prop_assert_eq!(round_trip(&v), v);
                let v = WatchesRequest { path, watcher_type: n };
                prop_assert_eq!(round_trip(&v), v);
            }
            let v = GetEphemeralsRequest { prefix: path.clone() };
            prop_assert_eq!(round_trip(&v), v);
            let v = GetAllChildrenNumberRequest { path: path.clone() };
            prop_assert_eq!(round_trip(&v), v);
            let v = GetSASLRequest { token: Some(Bytes::from(path.clone().into_bytes())) };
            prop_assert_eq!(round_trip(&v), v);
            let v = GetSASLRequest { token: None };
            prop_assert_eq!(round_trip(&v), v);
            let v = AuthPacket { auth_type: n, scheme: path.clone(), auth: Some(Bytes::from(path.into_bytes())) };
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn set_data_round_trips(v in arb_set_data_request(arb_opt_path())) {
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn set_acl_round_trips(v in arb_set_acl_request()) {
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn set_watches_round_trip(v in arb_set_watches2()) {
            prop_assert_eq!(round_trip(&v), v.clone());
            let v1 = SetWatches {
                relative_zxid: v.relative_zxid,
                data_watches: v.data_watches,
                exist_watches: v.exist_watches,
                child_watches: v.child_watches,
            };
            prop_assert_eq!(round_trip(&v1), v1);
        }

        #[test]
        fn reconfig_round_trips(v in arb_reconfig_request()) {
            prop_assert_eq!(round_trip(&v), v);
        }
    }

    #[test]
    fn forged_acl_count_is_rejected() {
        let mut buf = BytesMut::new();
        buf.write_string("/a");
        buf.write_buffer(b"x");
        buf.write_i32(i32::MAX); // ACL count
        buf.write_i32(0);
        assert!(matches!(
            CreateRequest::from_bytes(buf.freeze()),
            Err(DecodeError::LengthBeyondFrame { .. })
        ));

        // A count below -1 is an empty list, as in ZooKeeper.
        let mut buf = BytesMut::new();
        buf.write_string("/a");
        buf.write_i32(-5); // ACL count
        buf.write_i32(3);
        let req = SetACLRequest::from_bytes(buf.freeze()).unwrap();
        assert_eq!((req.acl, req.version), (vec![], 3));
    }

    #[test]
    fn forged_watch_list_count_is_rejected() {
        let mut buf = BytesMut::new();
        buf.write_i64(0);
        buf.write_i32(3);
        buf.write_string("/a");
        buf.write_i32(1 << 28);
        assert!(SetWatches::from_bytes(buf.freeze()).is_err());
    }

    #[test]
    fn set_watches_refuse_null_lists_and_paths_but_persistent_paths() {
        let body = |lists: [Option<&[Option<&str>]>; 5]| {
            let mut buf = BytesMut::new();
            buf.write_i64(0);
            for list in lists {
                match list {
                    None => buf.write_i32(-1),
                    Some(paths) => {
                        buf.write_i32(paths.len() as i32);
                        for path in paths {
                            buf.write_opt_string(*path);
                        }
                    }
                }
            }
            buf.freeze()
        };
        let (empty, null): (&[Option<&str>], &[Option<&str>]) = (&[], &[None]);
        for at in 0..5 {
            let mut lists = [Some(empty); 5];
            lists[at] = None;
            assert!(
                SetWatches2::from_bytes(body(lists)).is_err(),
                "null list {at}"
            );
            lists[at] = Some(null);
            assert_eq!(
                SetWatches2::from_bytes(body(lists)).is_ok(),
                at >= 3,
                "null path {at}"
            );
        }
        let lists = [
            Some(empty),
            Some(empty),
            Some(empty),
            Some(&[None, Some("/a")]),
            None,
        ];
        assert!(SetWatches2::from_bytes(body(lists)).is_err());
        let lists = [
            Some(empty),
            Some(empty),
            Some(empty),
            Some(&[None, Some("/a")]),
            Some(null),
        ];
        let req = SetWatches2::from_bytes(body(lists)).unwrap();
        assert_eq!(req.persistent_watches, ["/a"]);
        assert!(req.persistent_recursive_watches.is_empty());
    }

    #[test]
    fn null_data_stays_null_and_a_null_acl_list_reads_as_empty() {
        let mut buf = BytesMut::new();
        buf.write_string("/a");
        buf.write_opt_buffer(None);
        buf.write_i32(-1); // null ACL list
        buf.write_i32(0);
        let req = CreateRequest::from_bytes(buf.freeze()).unwrap();
        assert_eq!(req.path, "/a");
        assert_eq!(req.data, None);
        assert!(req.acl.is_empty());
        assert_eq!(
            &req.to_bytes()[6..10],
            &[0xff; 4],
            "null data is written back as -1"
        );

        let empty = SetDataRequest {
            path: "/a".to_string(),
            data: Some(Bytes::new()),
            version: -1,
        };
        assert_eq!(&empty.to_bytes()[6..10], &[0; 4], "empty data is length 0");
        assert_eq!(round_trip(&empty), empty);
    }

    #[test]
    fn a_null_path_is_a_decode_error() {
        let mut buf = BytesMut::new();
        buf.write_opt_string(None);
        buf.write_bool(false);
        assert_eq!(
            PathAndWatch::from_bytes(buf.freeze()),
            Err(DecodeError::UnexpectedNull("path"))
        );
    }

    #[test]
    fn a_null_set_data_path_is_kept_on_its_own_and_refused_in_a_multi() {
        let mut buf = BytesMut::new();
        buf.write_opt_string(None);
        buf.write_buffer(b"x");
        buf.write_i32(-1);
        let bytes = buf.freeze();
        let alone = SetDataRequest::<Option<String>>::from_bytes(bytes.clone()).unwrap();
        assert_eq!(alone.path, None);
        assert_eq!(alone.to_bytes(), bytes);
        assert_eq!(
            SetDataRequest::<String>::from_bytes(bytes),
            Err(DecodeError::UnexpectedNull("path"))
        );
    }

    #[test]
    fn reconfig_keeps_nulls() {
        let v = ReconfigRequest {
            joining_servers: None,
            leaving_servers: Some(String::new()),
            new_members: None,
            cur_config_id: -1,
        };
        let bytes = v.to_bytes();
        assert_eq!(&bytes[..8], &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(ReconfigRequest::from_bytes(bytes).unwrap(), v);
    }
}
