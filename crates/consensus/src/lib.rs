//! Paddock's replicated log: the glue around raft-rs. Raft itself (election,
//! replication, commit) is the library's; this crate supplies what raft
//! leaves to its user — durable storage, the Ready loop, snapshot metadata.
//!
//! Layout:
//! - `node`: [`Consensus`], the handle, and the thread that alone drives
//!   `RawNode`, sends its messages through a [`Network`] and hands
//!   committed entries to the state machine.
//! - `peers`: [`PeerNetwork`], the [`Network`] of an ensemble: raft's
//!   messages and snapshots to and from the other servers over the
//!   transport, and the state machine's own payloads.
//! - `durable`: the raft log on the write-ahead log, and its recovery.
//! - `fence`: a voter that lost its raft state votes again only in terms
//!   where it cannot have voted before.
//! - `hand_off`: choosing the follower a stopping leader hands over to.
//! - `inbox`: the consensus thread's commands, and what wakes it.
//! - `log_sync`: the log's fdatasync and trimming on a thread of their
//!   own, and the Readies waiting for them.
//! - `membership`: the group's voters and learners, and the raft change
//!   that moves it to another membership.
//! - `log_store`: raft's view of the log: each entry's term and WAL
//!   location, the newest entries cached, older ones read back from disk.
//! - `record`: how raft's entries and hard states are laid in WAL records.
//! - `snapshot`: snapshot files with their raft metadata header.
//! - `delta`: delta snapshot files, for this server's own restart; raft
//!   never sends one.
//! - `arriving`: a snapshot from the leader, readable by the state machine
//!   while its pieces are still being written.
//! - `status`: role, term and indexes published for monitoring.
//! - `transport`: the peer port: raft messages, control messages, snapshot
//!   pieces and application payloads between servers over long-lived TCP
//!   connections.
//!
//! Standalone mode is a group of one voter on this same path, with
//! [`NoPeers`] for its network.

mod arriving;
mod backlog;
mod delta;
mod durable;
mod error;
mod fence;
mod hand_off;
mod histogram;
mod inbox;
mod log_index;
mod log_store;
mod log_sync;
mod membership;
mod node;
mod peers;
mod record;
mod snapshot;
mod status;
mod transport;

pub use arriving::ArrivingSnapshot;
pub use backlog::Unapplied;
pub use delta::{delta_dir, DeltaMeta, Deltas};
pub use durable::{read_stopped_log, RecoveredLog, Restored, StoppedLog};
pub use error::Error;
pub use fence::Control;
pub use hand_off::HandOff;
pub use histogram::{Histogram, HistogramSnapshot};
pub use membership::Membership;
pub use node::{
    Applying, CommittedEntry, Config, Consensus, Network, NoPeers, ReadIndexCallback, SnapshotSent,
    Upstream, UpstreamSender,
};
pub use peers::PeerNetwork;
/// Raft's message, as a [`Network`] carries it.
pub use raft::prelude::{Message, MessageType};
pub use snapshot::{last_snapshot, log_dir, snapshot_dir, SnapshotMeta, Snapshots};
pub use status::{LeaderSeen, Role, Status};
/// A snapshot or delta file's payload, checked as it is read.
pub use storage::SnapshotPieces;
pub use transport::{PeerTls, TransportConfig, FRAME_BYTES_MAX_DEFAULT, QUEUE_FRAMES_MAX_DEFAULT};
