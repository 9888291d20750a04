//! ZooKeeper's Jute wire format, as spoken by every ZooKeeper client.
//!
//! Paddock must be indistinguishable from ZooKeeper 3.9 on the client port,
//! so this crate follows `zookeeper.jute` and the Java code around it
//! (connect handshake, multi, framing) byte for byte, including the quirks.
//! Every input is treated as hostile: no length or count a peer sends is
//! trusted before it has been checked against the bytes actually present.
//!
//! Layout:
//! - `codec`: primitives (integers, buffers, strings, vectors) and the
//!   [`Record`] trait; every length a peer sends is checked before use.
//! - `types`: `Stat`, `Id`, `Acl`, `ClientInfo`, `CreateMode`, event,
//!   watcher and watch-mode codes.
//! - `error`: result codes.
//! - `opcode`: request type codes and reserved xids.
//! - `session`: the connect handshake, request/reply headers, watch events.
//! - `requests`: request body records.
//! - `responses`: reply body records.
//! - `multi`: `multi` / `multiRead` requests and their responses.
//! - `request`: [`Request`], a request body decoded by opcode.
//! - `frame`: length-prefixed frames, four-letter words, reply framing.
//! - `stats_track`: the text of quota nodes, which clients and servers
//!   both read and write.
//!
//! This crate does no I/O and imports nothing else of Paddock's.

mod codec;
mod error;
mod frame;
mod multi;
mod opcode;
mod request;
mod requests;
mod responses;
mod session;
mod stats_track;
mod types;

#[cfg(test)]
mod testing;

pub use codec::{jute_len, DecodeError, PathField, Reader, Record, WriteExt};
pub use error::ErrorCode;
pub use frame::{
    decode_frame, encode_frame, encode_reply, encode_reply_header, encode_watcher_event,
    four_letter_word, FrameError, DEFAULT_MAX_FRAME_BYTES, FOUR_LETTER_WORDS, TELNET_CLOSE,
};
pub use multi::{
    MultiHeader, MultiOp, MultiReadRequest, MultiRequest, MultiResponse, MultiResult, ReadOp,
};
pub use opcode::{xid, OpCode};
pub use request::{Packet, Request};
pub use requests::{
    AddWatchRequest, AuthPacket, CheckVersionRequest, CheckWatchesRequest, CreateRequest,
    CreateTTLRequest, DeleteRequest, ExistsRequest, GetACLRequest, GetAllChildrenNumberRequest,
    GetChildren2Request, GetChildrenPageRequest, GetChildrenRequest, GetDataRequest,
    GetEphemeralsRequest, GetSASLRequest, PathAndWatch, ReconfigRequest, RemoveWatchesRequest,
    SetACLRequest, SetDataRequest, SetWatches, SetWatches2, SyncRequest, WatchesRequest,
};
pub use responses::{
    Create2Response, CreateResponse, ErrorResponse, ExistsResponse, GetACLResponse,
    GetAllChildrenNumberResponse, GetChildren2Response, GetChildrenPageResponse,
    GetChildrenResponse, GetDataResponse, GetEphemeralsResponse, SetACLResponse, SetDataResponse,
    SetSASLResponse, StatResponse, SyncResponse, WhoAmIResponse,
};
pub use session::{ConnectRequest, ConnectResponse, ReplyHeader, RequestHeader, WatcherEvent};
pub use stats_track::{key as quota_key, StatsTrack};
pub use types::{
    perms, Acl, AddWatchMode, ClientInfo, CreateMode, EventType, Id, KeeperState, Stat, WatcherType,
};
