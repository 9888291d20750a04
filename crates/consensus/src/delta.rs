//! Delta snapshot files: what changed since the snapshot before, kept
//! beside the snapshots for this server's own restart. Raft never sees
//! them: the log is compacted only to a whole snapshot, so a follower is
//! sent a whole one and the log after it, and a restart whose deltas turn
//! out damaged falls back to the snapshot and replays the log.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use storage::{SnapshotPieces, SnapshotStore};

use crate::snapshot::{read_membership, write_membership};
use crate::{Error, Membership, SnapshotMeta};

/// Where a delta sits: the log index and term it holds everything up to,
/// the whole snapshot it builds on, the snapshot or delta before it,
/// whose changes it does not repeat, and the group's membership as of
/// its index, which raft restarts with when the delta is loaded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeltaMeta {
    pub index: u64,
    pub term: u64,
    pub base: u64,
    pub previous: u64,
    pub membership: Membership,
}

/// The first bytes of a delta. Deltas written before their header held
/// the membership begin with their index, whose high bytes are zero, so a
/// restart refuses them and goes on from the snapshot and the log.
const FORMAT: [u8; 4] = *b"PDd2";

const POSITION_BYTES: usize = 32;

impl DeltaMeta {
    /// A whole snapshot's place at this delta's index, for a snapshot
    /// written whole where a delta was due.
    pub fn as_whole(&self) -> SnapshotMeta {
        SnapshotMeta {
            index: self.index,
            term: self.term,
            membership: self.membership.clone(),
        }
    }

    fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(&FORMAT)?;
        for field in [self.index, self.term, self.base, self.previous] {
            out.write_all(&field.to_be_bytes())?;
        }
        write_membership(out, &self.membership)
    }

    fn read_from(input: &mut dyn Read) -> Result<Self, Error> {
        let header_error =
            |e: io::Error| Error::BadSnapshotHeader(format!("a delta's header: {e}"));
        let mut format = [0u8; FORMAT.len()];
        input.read_exact(&mut format).map_err(header_error)?;
        if format != FORMAT {
            return Err(Error::BadSnapshotHeader(format!(
                "a delta begins with {format:02x?}, not the {FORMAT:02x?} of this version's deltas"
            )));
        }
        let mut bytes = [0u8; POSITION_BYTES];
        input.read_exact(&mut bytes).map_err(header_error)?;
        let field = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        Ok(DeltaMeta {
            index: field(0),
            term: field(8),
            base: field(16),
            previous: field(24),
            membership: read_membership(input)?,
        })
    }
}

/// Where a server keeps its deltas under its `dataDir`.
pub fn delta_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("version-paddock").join("deltas")
}

/// The delta directory.
pub struct Deltas {
    store: SnapshotStore,
}

impl Deltas {
    pub fn open(dir: &Path) -> Result<Self, Error> {
        Ok(Deltas {
            store: SnapshotStore::open(dir)?,
        })
    }

    /// Writes a delta: `meta`, then whatever `body` writes. Durable when
    /// this returns.
    pub fn save(
        &self,
        meta: &DeltaMeta,
        body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), Error> {
        self.store.save(meta.index, usize::MAX, |out| {
            meta.write_to(out)?;
            body(out)
        })?;
        Ok(())
    }

    /// The deltas that build on the snapshot at `base`, oldest first, each
    /// the delta of the one before: their headers, and readers of the rest
    /// checked as they are read (see [`crate::Snapshots::checked_as_read`]).
    /// The chain ends at the first delta that does not follow on, or whose
    /// header cannot be read.
    pub fn chain(&self, base: u64) -> Result<Vec<(DeltaMeta, SnapshotPieces)>, Error> {
        let mut indices = self.store.newest_first()?;
        indices.retain(|&index| index > base);
        indices.reverse();
        let mut chain = Vec::new();
        let mut previous = base;
        for index in indices {
            let Ok(mut pieces) = self.store.pieces(index) else {
                break;
            };
            match DeltaMeta::read_from(&mut pieces) {
                Ok(meta) if meta.base == base && meta.previous == previous => {
                    previous = meta.index;
                    chain.push((meta, pieces));
                }
                _ => break,
            }
        }
        Ok(chain)
    }

    /// Removes every delta but those after the snapshot at `base` up to
    /// `last`: the chain a server goes on from. Those before are held by
    /// the snapshot, and those after were not loaded (one was damaged, or
    /// did not follow on), so that no later delta is taken to follow them.
    pub fn keep_only_chain(&self, base: u64, last: u64) {
        self.store.remove_if(|index| index <= base || index > last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn save(deltas: &Deltas, index: u64, base: u64, previous: u64) {
        let meta = DeltaMeta {
            index,
            term: 1,
            base,
            previous,
            membership: Membership::new(vec![1, 2, 3], vec![4]),
        };
        deltas
            .save(&meta, |out| out.write_all(&index.to_be_bytes()))
            .unwrap();
    }

    fn chain_of(deltas: &Deltas, base: u64) -> Vec<(u64, u64)> {
        deltas
            .chain(base)
            .unwrap()
            .into_iter()
            .map(|(meta, mut rest)| {
                let mut body = Vec::new();
                rest.read_to_end(&mut body).unwrap();
                assert_eq!(body, meta.index.to_be_bytes());
                (meta.index, meta.previous)
            })
            .collect()
    }

    #[test]
    fn a_chain_follows_its_base_and_stops_where_a_delta_does_not_follow_on() {
        let dir = tempfile::tempdir().unwrap();
        let deltas = Deltas::open(dir.path()).unwrap();
        save(&deltas, 5, 1, 1);
        save(&deltas, 20, 10, 10);
        save(&deltas, 30, 10, 20);
        save(&deltas, 50, 10, 40);
        save(&deltas, 60, 10, 50);
        assert_eq!(chain_of(&deltas, 10), [(20, 10), (30, 20)]);
        assert_eq!(chain_of(&deltas, 1), [(5, 1)]);
        assert!(chain_of(&deltas, 60).is_empty());

        deltas.keep_only_chain(10, 30);
        assert_eq!(chain_of(&deltas, 10), [(20, 10), (30, 20)]);
        assert!(chain_of(&deltas, 1).is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        deltas.keep_only_chain(30, 30);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_header_holds_the_membership_joint_state_and_all() {
        let mut joint = Membership::new(vec![1, 2, 4], vec![5]);
        joint.voters_outgoing = vec![1, 2, 3];
        joint.learners_next = vec![3];
        joint.auto_leave = true;
        for membership in [Membership::new(vec![7], vec![]), joint] {
            let meta = DeltaMeta {
                index: 90,
                term: 3,
                base: 40,
                previous: 60,
                membership,
            };
            let mut bytes = Vec::new();
            meta.write_to(&mut bytes).unwrap();
            assert_eq!(DeltaMeta::read_from(&mut bytes.as_slice()).unwrap(), meta);
        }
    }

    #[test]
    fn a_delta_of_the_format_before_ends_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let deltas = Deltas::open(dir.path()).unwrap();
        save(&deltas, 20, 10, 10);
        let store = SnapshotStore::open(dir.path()).unwrap();
        store
            .save(30, usize::MAX, |out| {
                for field in [30u64, 1, 10, 20] {
                    out.write_all(&field.to_be_bytes())?;
                }
                out.write_all(&30u64.to_be_bytes())
            })
            .unwrap();
        assert_eq!(chain_of(&deltas, 10), [(20, 10)]);
    }
}
