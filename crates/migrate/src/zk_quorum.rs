//! ZooKeeper's quorum packets (`zookeeper.jute`'s `QuorumPacket`), which
//! a leader and its learners exchange on the quorum port. Packets follow
//! one another with no length before them: each is its fields back to
//! back (type, zxid, data, auth ids), big-endian with Jute's lengths.

use std::io::{self, Read, Write};

use jute::Id;

use crate::java_io::{JavaIn, JavaOut, ReadError};

/// The packet types of `Leader.java` that an observer sends or reads.
pub mod kind {
    pub const REQUEST: i32 = 1;
    pub const PROPOSAL: i32 = 2;
    pub const ACK: i32 = 3;
    pub const COMMIT: i32 = 4;
    pub const PING: i32 = 5;
    pub const REVALIDATE: i32 = 6;
    pub const SYNC: i32 = 7;
    pub const INFORM: i32 = 8;
    pub const COMMIT_AND_ACTIVATE: i32 = 9;
    pub const NEW_LEADER: i32 = 10;
    pub const UP_TO_DATE: i32 = 12;
    pub const DIFF: i32 = 13;
    pub const TRUNC: i32 = 14;
    pub const SNAP: i32 = 15;
    pub const OBSERVER_INFO: i32 = 16;
    pub const LEADER_INFO: i32 = 17;
    pub const ACK_EPOCH: i32 = 18;
    pub const INFORM_AND_ACTIVATE: i32 = 19;

    /// The name ZooKeeper's own logs give a type.
    pub fn name(kind: i32) -> String {
        let name = match kind {
            REQUEST => "REQUEST",
            PROPOSAL => "PROPOSAL",
            ACK => "ACK",
            COMMIT => "COMMIT",
            PING => "PING",
            REVALIDATE => "REVALIDATE",
            SYNC => "SYNC",
            INFORM => "INFORM",
            COMMIT_AND_ACTIVATE => "COMMITANDACTIVATE",
            NEW_LEADER => "NEWLEADER",
            UP_TO_DATE => "UPTODATE",
            DIFF => "DIFF",
            TRUNC => "TRUNC",
            SNAP => "SNAP",
            OBSERVER_INFO => "OBSERVERINFO",
            LEADER_INFO => "LEADERINFO",
            ACK_EPOCH => "ACKEPOCH",
            INFORM_AND_ACTIVATE => "INFORMANDACTIVATE",
            other => return format!("unknown type {other}"),
        };
        name.to_owned()
    }
}

/// One `QuorumPacket`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumPacket {
    pub kind: i32,
    pub zxid: i64,
    /// `None` is Jute's null buffer, which ZooKeeper tells from an empty
    /// one (a PING reply must carry an empty one).
    pub data: Option<Vec<u8>>,
    /// The auth ids of the client behind a request; a leader sends none.
    pub auth: Vec<Id>,
}

impl QuorumPacket {
    pub fn new(kind: i32, zxid: i64, data: Option<Vec<u8>>) -> Self {
        Self {
            kind,
            zxid,
            data,
            auth: Vec::new(),
        }
    }

    pub fn read<R: Read>(input: &mut JavaIn<R>) -> Result<Self, ReadError> {
        let kind = input.i32("packet type")?;
        let zxid = input.i64("packet zxid")?;
        let data = input.buffer("packet data")?;
        let mut auth = Vec::new();
        for _ in 0..input.count("packet auth ids")?.unwrap_or(0) {
            auth.push(Id {
                scheme: input.string("auth scheme")?,
                id: input.string("auth id")?,
            });
        }
        Ok(Self {
            kind,
            zxid,
            data,
            auth,
        })
    }

    /// Writes the packet in one call, as ZooKeeper flushes each.
    pub fn write<W: Write>(&self, out: &mut W) -> io::Result<()> {
        let mut bytes = JavaOut::new(Vec::new());
        bytes.i32(self.kind)?;
        bytes.i64(self.zxid)?;
        bytes.buffer(self.data.as_deref())?;
        // ZooKeeper writes no ids as a null vector.
        if self.auth.is_empty() {
            bytes.i32(-1)?;
        } else {
            bytes.i32(jute::jute_len(self.auth.len()))?;
            for id in &self.auth {
                bytes.string(&id.scheme)?;
                bytes.string(&id.id)?;
            }
        }
        out.write_all(&bytes.into_inner())?;
        out.flush()
    }
}

/// Big-endian fields as a packet's data.
pub fn fields(write: impl FnOnce(&mut JavaOut<Vec<u8>>) -> io::Result<()>) -> Vec<u8> {
    let mut out = JavaOut::new(Vec::new());
    write(&mut out).expect("writing to a Vec cannot fail");
    out.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_is_twenty_bytes_with_null_data_and_ids() {
        let mut bytes = Vec::new();
        QuorumPacket::new(kind::COMMIT, 0x1_0000_0002, None)
            .write(&mut bytes)
            .unwrap();
        assert_eq!(
            bytes,
            [0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 2, 255, 255, 255, 255, 255, 255, 255, 255]
        );
    }

    #[test]
    fn packets_read_back_one_after_another() {
        let first = QuorumPacket::new(kind::PING, 7, Some(Vec::new()));
        let mut second = QuorumPacket::new(kind::REQUEST, -1, Some(vec![1, 2, 3]));
        second.auth.push(Id {
            scheme: "digest".into(),
            id: "alice:x".into(),
        });
        let mut bytes = Vec::new();
        first.write(&mut bytes).unwrap();
        second.write(&mut bytes).unwrap();
        let mut input = JavaIn::new(&bytes[..]);
        assert_eq!(QuorumPacket::read(&mut input).unwrap(), first);
        assert_eq!(QuorumPacket::read(&mut input).unwrap(), second);
        assert!(QuorumPacket::read(&mut input)
            .unwrap_err()
            .is_end_of_input());
    }
}
