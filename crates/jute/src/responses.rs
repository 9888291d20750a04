//! The body records of replies, one per record of `zookeeper.jute`.
//!
//! A reply body follows a [`crate::ReplyHeader`] whose `err` is 0; on any
//! other code ZooKeeper sends the header alone (see
//! [`crate::encode_reply_header`]). Decoding is here for tests and for a
//! client of our own, not because the server reads these.

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, Reader, Record, WriteExt};
use crate::types::{Acl, ClientInfo, Stat};

/// The reply to `create`: the created path, which differs from the
/// requested one for sequential nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateResponse {
    pub path: String,
}

impl Record for CreateResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_string()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
    }
}

/// The reply to `create2`, `createContainer` and `createTTL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Create2Response {
    pub path: String,
    pub stat: Stat,
}

impl Record for Create2Response {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_string()?,
            stat: Stat::decode(r)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string(&self.path);
        self.stat.encode(buf);
    }
}

/// A reply that is just the node's [`Stat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatResponse {
    pub stat: Stat,
}

pub type ExistsResponse = StatResponse;
pub type SetDataResponse = StatResponse;
pub type SetACLResponse = StatResponse;

impl Record for StatResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            stat: Stat::decode(r)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        self.stat.encode(buf);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetDataResponse {
    /// `None` when the znode holds null data.
    pub data: Option<Bytes>,
    pub stat: Stat,
}

impl GetDataResponse {
    /// The body `encode` writes, from parts the caller only borrows: a
    /// server encodes a znode's data where it lies, without a copy or a
    /// count of its own.
    pub fn encode_parts(buf: &mut BytesMut, data: Option<&[u8]>, stat: &Stat) {
        buf.write_opt_buffer(data);
        stat.encode(buf);
    }
}

impl Record for GetDataResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            data: r.read_buffer()?,
            stat: Stat::decode(r)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        Self::encode_parts(buf, self.data.as_deref(), &self.stat);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetACLResponse {
    pub acl: Vec<Acl>,
    pub stat: Stat,
}

impl Record for GetACLResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            acl: Acl::decode_vec(r)?,
            stat: Stat::decode(r)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        Acl::encode_vec(&self.acl, buf);
        self.stat.encode(buf);
    }
}

/// Child names, not paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetChildrenResponse {
    pub children: Vec<String>,
}

impl Record for GetChildrenResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            children: r.read_string_vec()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string_vec(&self.children);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetChildren2Response {
    pub children: Vec<String>,
    pub stat: Stat,
}

impl Record for GetChildren2Response {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            children: r.read_string_vec()?,
            stat: Stat::decode(r)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string_vec(&self.children);
        self.stat.encode(buf);
    }
}

/// One page of children, the parent's stat, and whether children follow
/// the last one in this page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetChildrenPageResponse {
    pub children: Vec<String>,
    pub stat: Stat,
    pub more: bool,
}

impl Record for GetChildrenPageResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            children: r.read_string_vec()?,
            stat: Stat::decode(r)?,
            more: r.read_bool()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string_vec(&self.children);
        self.stat.encode(buf);
        buf.write_bool(self.more);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    /// The request's path, null when it was null.
    pub path: Option<String>,
}

impl Record for SyncResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            path: r.read_opt_string()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_opt_string(self.path.as_deref());
    }
}

/// Full paths of the session's ephemeral nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetEphemeralsResponse {
    pub ephemerals: Vec<String>,
}

impl Record for GetEphemeralsResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            ephemerals: r.read_string_vec()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_string_vec(&self.ephemerals);
    }
}

/// Number of descendants of a node, the node itself excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetAllChildrenNumberResponse {
    pub total_number: i32,
}

impl Record for GetAllChildrenNumberResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            total_number: r.read_i32()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.total_number);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhoAmIResponse {
    pub client_info: Vec<ClientInfo>,
}

impl Record for WhoAmIResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            client_info: r.read_vec(ClientInfo::MIN_ENCODED_BYTES, ClientInfo::decode)?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(crate::codec::jute_len(self.client_info.len()));
        for info in &self.client_info {
            info.encode(buf);
        }
    }
}

/// One step of a SASL exchange from the server. `None` is a real case:
/// ZooKeeper sends a null token (length -1) when the mechanism has nothing
/// more to say and when authentication failed, and clients tell that apart
/// from an empty challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetSASLResponse {
    pub token: Option<Bytes>,
}

impl Record for SetSASLResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            token: r.read_buffer()?,
        })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_opt_buffer(self.token.as_deref());
    }
}

/// A failed operation inside a multi; never a reply on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorResponse {
    pub err: i32,
}

impl Record for ErrorResponse {
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self { err: r.read_i32()? })
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.write_i32(self.err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn path_and_stat_responses_round_trip(path in arb_string(), stat in arb_stat()) {
            let v = CreateResponse { path: path.clone() };
            prop_assert_eq!(round_trip(&v), v);
            let v = Create2Response { path: path.clone(), stat };
            prop_assert_eq!(round_trip(&v), v);
            let v = StatResponse { stat };
            prop_assert_eq!(round_trip(&v), v);
            let v = SyncResponse { path: Some(path) };
            prop_assert_eq!(round_trip(&v), v);
            let v = SyncResponse { path: None };
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn data_responses_round_trip(data in arb_data(), stat in arb_stat(), acl in arb_acls()) {
            let v = GetDataResponse { data: data.clone(), stat };
            prop_assert_eq!(round_trip(&v), v);
            let v = GetACLResponse { acl, stat };
            prop_assert_eq!(round_trip(&v), v);
            let v = SetSASLResponse { token: data };
            prop_assert_eq!(round_trip(&v), v);
            let v = SetSASLResponse { token: None };
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn list_responses_round_trip(names in arb_strings(), stat in arb_stat(), n: i32) {
            let v = GetChildrenResponse { children: names.clone() };
            prop_assert_eq!(round_trip(&v), v);
            let v = GetChildren2Response { children: names.clone(), stat };
            prop_assert_eq!(round_trip(&v), v);
            let v = GetChildrenPageResponse { children: names.clone(), stat, more: n % 2 == 0 };
            prop_assert_eq!(round_trip(&v), v);
            let v = GetEphemeralsResponse { ephemerals: names };
            prop_assert_eq!(round_trip(&v), v);
            let v = GetAllChildrenNumberResponse { total_number: n };
            prop_assert_eq!(round_trip(&v), v);
            let v = ErrorResponse { err: n };
            prop_assert_eq!(round_trip(&v), v);
        }

        #[test]
        fn who_am_i_round_trips(v in arb_who_am_i()) {
            prop_assert_eq!(round_trip(&v), v);
        }
    }

    #[test]
    fn forged_client_info_count_is_rejected() {
        let mut buf = BytesMut::new();
        buf.write_i32(2);
        buf.write_string("ip");
        buf.write_string("127.0.0.1");
        assert!(WhoAmIResponse::from_bytes(buf.freeze()).is_err());
    }

    #[test]
    fn truncated_stat_is_rejected() {
        let mut buf = BytesMut::new();
        buf.write_buffer(b"data");
        buf.write_i64(1);
        assert!(matches!(
            GetDataResponse::from_bytes(buf.freeze()),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
