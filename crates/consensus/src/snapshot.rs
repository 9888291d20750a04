//! Snapshot files: a small header of raft metadata, then the state
//! machine's own bytes, written and verified by `storage::SnapshotStore`.

use std::io::{self, Read, Write};
use std::path::Path;

use raft::prelude::{ConfState, Snapshot};
use storage::{SnapshotReader, SnapshotStore};

use crate::Error;

/// Where a snapshot sits in the log: it contains every entry up to and
/// including `index` (log index space, which is also zxid space).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SnapshotMeta {
    pub index: u64,
    pub term: u64,
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
}

impl SnapshotMeta {
    fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(&self.index.to_be_bytes())?;
        out.write_all(&self.term.to_be_bytes())?;
        for ids in [&self.voters, &self.learners] {
            out.write_all(&(ids.len() as u32).to_be_bytes())?;
            for id in ids {
                out.write_all(&id.to_be_bytes())?;
            }
        }
        Ok(())
    }

    fn read_from(input: &mut dyn Read) -> Result<Self, Error> {
        fn u64_from(input: &mut dyn Read) -> Result<u64, Error> {
            let mut b = [0u8; 8];
            input
                .read_exact(&mut b)
                .map_err(|e| Error::BadSnapshotHeader(e.to_string()))?;
            Ok(u64::from_be_bytes(b))
        }
        fn ids_from(input: &mut dyn Read) -> Result<Vec<u64>, Error> {
            let mut b = [0u8; 4];
            input
                .read_exact(&mut b)
                .map_err(|e| Error::BadSnapshotHeader(e.to_string()))?;
            let count = u32::from_be_bytes(b);
            // Server ids are few; a huge count can only be damage.
            if count > 1024 {
                return Err(Error::BadSnapshotHeader(format!("{count} server ids")));
            }
            (0..count).map(|_| u64_from(input)).collect()
        }
        Ok(Self {
            index: u64_from(input)?,
            term: u64_from(input)?,
            voters: ids_from(input)?,
            learners: ids_from(input)?,
        })
    }

    pub(crate) fn from_raft(snapshot: &Snapshot) -> Self {
        let meta = snapshot.get_metadata();
        let conf = meta.get_conf_state();
        Self {
            index: meta.index,
            term: meta.term,
            voters: conf.voters.clone(),
            learners: conf.learners.clone(),
        }
    }

    pub(crate) fn to_raft(&self) -> Snapshot {
        let mut snapshot = Snapshot::default();
        let meta = snapshot.mut_metadata();
        meta.index = self.index;
        meta.term = self.term;
        meta.set_conf_state(self.conf_state());
        snapshot
    }

    /// The membership the snapshot holds, as raft takes it.
    pub(crate) fn conf_state(&self) -> ConfState {
        ConfState::from((self.voters.clone(), self.learners.clone()))
    }
}

/// Where a server keeps its snapshots under its `dataDir`.
pub fn snapshot_dir(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("version-paddock").join("snapshots")
}

/// The newest snapshot under `data_dir`: the log index it is at and when
/// it was written.
pub fn last_snapshot(data_dir: &Path) -> Option<(u64, std::time::SystemTime)> {
    storage::newest_snapshot_in(&snapshot_dir(data_dir))
}

/// Where a server keeps its log under its `dataLogDir`.
pub fn log_dir(data_log_dir: &Path) -> std::path::PathBuf {
    data_log_dir.join("version-paddock").join("log")
}

/// The snapshot directory.
pub struct Snapshots {
    store: SnapshotStore,
}

impl Snapshots {
    pub fn open(dir: &Path) -> Result<Self, Error> {
        Ok(Self {
            store: SnapshotStore::open(dir)?,
        })
    }

    /// Writes a snapshot: `meta`, then whatever `body` writes. Durable when
    /// this returns; then only the newest `retain` snapshots are kept.
    pub fn save(
        &self,
        meta: &SnapshotMeta,
        retain: usize,
        body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), Error> {
        self.store.save(meta.index, retain, |out| {
            meta.write_to(out)?;
            body(out)
        })?;
        Ok(())
    }

    /// The newest valid snapshot's index and all its bytes (metadata header
    /// included), as they are sent to a follower.
    pub fn latest_raw(&self) -> Result<Option<(u64, SnapshotReader)>, Error> {
        Ok(self.store.latest()?)
    }

    /// Writes a snapshot received from the leader: the chunks `latest_raw`
    /// gave there, in order, until `None`. A channel that closes before
    /// `None` is an interrupted transfer, and nothing is kept. The header
    /// is checked against `index` before the snapshot counts.
    pub fn install(
        &self,
        index: u64,
        retain: usize,
        chunks: std::sync::mpsc::Receiver<Option<bytes::Bytes>>,
    ) -> Result<(), Error> {
        let mut header_checked = false;
        let mut head = Vec::new();
        self.store.save(index, retain, |out| {
            loop {
                let chunk = chunks.recv().map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "snapshot transfer interrupted",
                    )
                })?;
                let Some(chunk) = chunk else {
                    break;
                };
                if !header_checked {
                    head.extend_from_slice(&chunk);
                    if head.len() >= 16 {
                        let meta_index = u64::from_be_bytes(head[..8].try_into().expect("8 bytes"));
                        if meta_index != index {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("snapshot announced at {index} holds {meta_index}"),
                            ));
                        }
                        header_checked = true;
                    }
                }
                out.write_all(&chunk)?;
            }
            if header_checked {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "snapshot too short",
                ))
            }
        })?;
        Ok(())
    }

    /// The newest valid snapshot: its metadata and a reader positioned at
    /// the state machine's bytes.
    pub fn latest(&self) -> Result<Option<(SnapshotMeta, SnapshotReader)>, Error> {
        let Some((_, mut reader)) = self.store.latest()? else {
            return Ok(None);
        };
        let meta = SnapshotMeta::read_from(&mut reader)?;
        Ok(Some((meta, reader)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let meta = SnapshotMeta {
            index: 42,
            term: 7,
            voters: vec![1, 2, 3],
            learners: vec![9],
        };
        let mut bytes = Vec::new();
        meta.write_to(&mut bytes).unwrap();
        bytes.extend_from_slice(b"tree");
        let mut input = &bytes[..];
        assert_eq!(SnapshotMeta::read_from(&mut input).unwrap(), meta);
        assert_eq!(input, b"tree");
    }
}
