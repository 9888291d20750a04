//! Snapshot files: a small header of raft metadata, then the state
//! machine's own bytes, written and verified by `storage::SnapshotStore`.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::OnceLock;

use bytes::Bytes;
use raft::prelude::{ConfState, Snapshot};
use storage::{SnapshotPieces, SnapshotReader, SnapshotStore};

use crate::arriving::{self, ArrivingSnapshot};
use crate::{Error, Membership};

/// Set in the voters' count when the joint state's fields follow the
/// learners; headers written before joint changes existed never have it.
const JOINT_FIELDS: u32 = 1 << 31;

/// Server ids are few; a greater count can only be damage.
const SERVER_IDS_MAX: u32 = 1024;

/// Where a snapshot sits in the log: it contains every entry up to and
/// including `index` (log index space, which is also zxid space), and the
/// group's membership as of that entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SnapshotMeta {
    pub index: u64,
    pub term: u64,
    pub membership: Membership,
}

impl SnapshotMeta {
    fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(&self.index.to_be_bytes())?;
        out.write_all(&self.term.to_be_bytes())?;
        write_membership(out, &self.membership)
    }

    pub(crate) fn read_from(input: &mut dyn Read) -> Result<Self, Error> {
        let index = u64_from(input)?;
        let term = u64_from(input)?;
        Ok(Self {
            index,
            term,
            membership: read_membership(input)?,
        })
    }

    pub(crate) fn from_raft(snapshot: &Snapshot) -> Self {
        let meta = snapshot.get_metadata();
        Self {
            index: meta.index,
            term: meta.term,
            membership: Membership::from_raft(meta.get_conf_state()),
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
        self.membership.to_raft()
    }
}

/// Writes `m` as a snapshot's or a delta's header holds it: the voters
/// and learners, and the joint state's fields only when it has them.
pub(crate) fn write_membership(out: &mut dyn Write, m: &Membership) -> io::Result<()> {
    let joint = m.is_joint() || !m.learners_next.is_empty() || m.auto_leave;
    let flag = if joint { JOINT_FIELDS } else { 0 };
    write_ids(out, &m.voters, flag)?;
    write_ids(out, &m.learners, 0)?;
    if joint {
        write_ids(out, &m.voters_outgoing, 0)?;
        write_ids(out, &m.learners_next, 0)?;
        out.write_all(&[u8::from(m.auto_leave)])?;
    }
    Ok(())
}

/// Reads what [`write_membership`] wrote.
pub(crate) fn read_membership(input: &mut dyn Read) -> Result<Membership, Error> {
    let (voters, joint) = ids_from(input)?;
    let (learners, _) = ids_from(input)?;
    let mut membership = Membership::new(voters, learners);
    if joint {
        membership.voters_outgoing = ids_from(input)?.0;
        membership.learners_next = ids_from(input)?.0;
        let mut auto_leave = [0u8];
        read_exact(input, &mut auto_leave)?;
        membership.auto_leave = auto_leave[0] != 0;
    }
    Ok(membership)
}

fn write_ids(out: &mut dyn Write, ids: &[u64], flag: u32) -> io::Result<()> {
    out.write_all(&(ids.len() as u32 | flag).to_be_bytes())?;
    for id in ids {
        out.write_all(&id.to_be_bytes())?;
    }
    Ok(())
}

fn read_exact(input: &mut dyn Read, buf: &mut [u8]) -> Result<(), Error> {
    input
        .read_exact(buf)
        .map_err(|e| Error::BadSnapshotHeader(e.to_string()))
}

fn u64_from(input: &mut dyn Read) -> Result<u64, Error> {
    let mut b = [0u8; 8];
    read_exact(input, &mut b)?;
    Ok(u64::from_be_bytes(b))
}

/// A list of server ids, and whether its count carried `JOINT_FIELDS`.
fn ids_from(input: &mut dyn Read) -> Result<(Vec<u64>, bool), Error> {
    let mut b = [0u8; 4];
    read_exact(input, &mut b)?;
    let raw = u32::from_be_bytes(b);
    let count = raw & !JOINT_FIELDS;
    if count > SERVER_IDS_MAX {
        return Err(Error::BadSnapshotHeader(format!("{count} server ids")));
    }
    let ids = (0..count)
        .map(|_| u64_from(input))
        .collect::<Result<_, _>>()?;
    Ok((ids, raw & JOINT_FIELDS != 0))
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

/// Reads each snapshot arriving from the leader while it arrives.
type ArrivalReader = Box<dyn Fn(ArrivingSnapshot) + Send + Sync>;

/// The snapshot directory.
pub struct Snapshots {
    store: SnapshotStore,
    arrival_reader: OnceLock<ArrivalReader>,
}

impl Snapshots {
    pub fn open(dir: &Path) -> Result<Self, Error> {
        Ok(Self {
            store: SnapshotStore::open(dir)?,
            arrival_reader: OnceLock::new(),
        })
    }

    /// From now on every snapshot [`Self::install`] writes is also given to
    /// `reader` as it arrives. `reader` is called when the first piece
    /// comes, and must return at once (reading on a thread of its own);
    /// while it reads more slowly than the disk is written, the transfer
    /// waits. Set once: later calls are ignored.
    pub fn read_arrivals(&self, reader: impl Fn(ArrivingSnapshot) + Send + Sync + 'static) {
        let _ = self.arrival_reader.set(Box::new(reader));
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

    /// The newest snapshot's index and all its bytes (metadata header
    /// included), in the pieces they are sent to a follower in, checked as
    /// they are read: a damaged file ends in an error, never in its last
    /// piece.
    pub fn latest_raw(&self) -> Result<Option<(u64, SnapshotPieces)>, Error> {
        Ok(self.store.latest_pieces()?)
    }

    /// Writes a snapshot received from the leader: the chunks `latest_raw`
    /// gave there, in order, until `None`. A channel that closes before
    /// `None` is an interrupted transfer, and nothing is kept. The header
    /// is checked against `index` before the snapshot counts. Each chunk
    /// written is handed on to the reader of arrivals, if there is one.
    pub fn install(
        &self,
        index: u64,
        retain: usize,
        chunks: std::sync::mpsc::Receiver<Option<impl AsRef<[u8]> + Into<Bytes>>>,
    ) -> Result<(), Error> {
        let mut tee = self.arrival_reader.get().map(|reader| {
            let (tee, arriving) = arriving::tee(index);
            reader(arriving);
            tee
        });
        self.write_arrival(index, retain, chunks, tee.as_mut())?;
        if let Some(tee) = tee {
            tee.durable();
        }
        Ok(())
    }

    fn write_arrival(
        &self,
        index: u64,
        retain: usize,
        chunks: std::sync::mpsc::Receiver<Option<impl AsRef<[u8]> + Into<Bytes>>>,
        mut tee: Option<&mut arriving::Tee>,
    ) -> Result<(), Error> {
        let uncached = tee.is_some();
        let mut header_checked = false;
        let mut head = Vec::new();
        let write = |out: &mut dyn Write| {
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
                    head.extend_from_slice(chunk.as_ref());
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
                out.write_all(chunk.as_ref())?;
                if let Some(tee) = tee.as_deref_mut() {
                    tee.piece(chunk.into());
                }
            }
            if header_checked {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "snapshot too short",
                ))
            }
        };
        // Read as it arrives, the file is not read back: copying it into
        // the page cache as well was 42% of a catching-up follower's CPU.
        if uncached {
            self.store.save_uncached(index, retain, write)?;
        } else {
            self.store.save(index, retain, write)?;
        }
        Ok(())
    }

    /// The newest valid snapshot: its metadata and a reader positioned at
    /// the state machine's bytes.
    pub fn latest(&self) -> Result<Option<(SnapshotMeta, SnapshotReader)>, Error> {
        let Some((_, reader)) = self.store.latest()? else {
            return Ok(None);
        };
        Self::with_meta(reader).map(Some)
    }

    /// The valid snapshot at `index`, as [`Self::latest`] gives it, or
    /// `Ok(None)` if there is none. A snapshot raft has just installed may
    /// no longer be the newest: the leader can send a newer one right
    /// after it.
    pub fn at(&self, index: u64) -> Result<Option<(SnapshotMeta, SnapshotReader)>, Error> {
        let Some(reader) = self.store.at(index)? else {
            return Ok(None);
        };
        Self::with_meta(reader).map(Some)
    }

    /// The indices of the snapshots there are, newest first: the order a
    /// restart tries them in with [`Self::checked_as_read`].
    pub fn newest_first(&self) -> Result<Vec<u64>, Error> {
        Ok(self.store.newest_first()?)
    }

    /// The snapshot at `index`: its metadata, and a reader of the state
    /// machine's bytes that checks the file as it reads it, so that a
    /// restart reads it once. Unlike [`Self::latest`], the snapshot is not
    /// verified first: it is whole and undamaged only once the reader
    /// reached its end without an error (a read of 0 bytes), and the
    /// caller keeps nothing it built from it before then.
    pub fn checked_as_read(&self, index: u64) -> Result<(SnapshotMeta, SnapshotPieces), Error> {
        Self::with_meta(self.store.pieces(index)?)
    }

    /// The file the snapshot at `index` is kept in, for messages.
    pub fn path_of(&self, index: u64) -> std::path::PathBuf {
        self.store.path_of(index)
    }

    fn with_meta<R: Read>(mut reader: R) -> Result<(SnapshotMeta, R), Error> {
        let meta = SnapshotMeta::read_from(&mut reader)?;
        Ok((meta, reader))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(meta: &SnapshotMeta) -> Vec<u8> {
        let mut bytes = Vec::new();
        meta.write_to(&mut bytes).unwrap();
        let header = bytes.clone();
        bytes.extend_from_slice(b"tree");
        let mut input = &bytes[..];
        assert_eq!(&SnapshotMeta::read_from(&mut input).unwrap(), meta);
        assert_eq!(input, b"tree");
        header
    }

    #[test]
    fn header_round_trips() {
        let meta = SnapshotMeta {
            index: 42,
            term: 7,
            membership: Membership::new(vec![1, 2, 3], vec![9]),
        };
        let header = round_trip(&meta);
        // As written before joint changes: index, term, two id lists.
        assert_eq!(header.len(), 8 + 8 + 4 + 3 * 8 + 4 + 8);
    }

    /// A snapshot file as a leader sends it: its header, then `body`.
    fn sent_file(meta: &SnapshotMeta, body: &[u8]) -> Vec<u8> {
        let mut file = Vec::new();
        meta.write_to(&mut file).unwrap();
        file.extend_from_slice(body);
        file
    }

    /// What [`install_read`] did.
    struct Installed {
        installed: Result<(), Error>,
        snapshots: Snapshots,
        read: io::Result<(SnapshotMeta, Vec<u8>)>,
        _dir: tempfile::TempDir,
    }

    /// Installs `file` in pieces of `piece_bytes`, ending it unless
    /// `interrupted`; the reader of arrivals reads all it can.
    fn install_read(file: &[u8], piece_bytes: usize, interrupted: bool) -> Installed {
        let dir = tempfile::tempdir().unwrap();
        let snapshots = Snapshots::open(dir.path()).unwrap();
        let (read_tx, read_rx) = std::sync::mpsc::channel();
        snapshots.read_arrivals(move |mut arriving| {
            let read_tx = read_tx.clone();
            std::thread::spawn(move || {
                let read = (|| {
                    let meta = arriving.read_meta().map_err(io::Error::other)?;
                    let mut body = Vec::new();
                    arriving.read_to_end(&mut body)?;
                    Ok((meta, body))
                })();
                read_tx.send(read).unwrap();
            });
        });
        let (chunks_tx, chunks) = std::sync::mpsc::channel();
        for piece in file.chunks(piece_bytes) {
            chunks_tx.send(Some(piece.to_vec())).unwrap();
        }
        if !interrupted {
            chunks_tx.send(None).unwrap();
        }
        drop(chunks_tx);
        let installed = snapshots.install(42, 2, chunks);
        Installed {
            installed,
            snapshots,
            read: read_rx.recv().unwrap(),
            _dir: dir,
        }
    }

    #[test]
    fn a_snapshot_installed_is_read_as_it_arrives_and_kept_the_same() {
        let meta = SnapshotMeta {
            index: 42,
            term: 3,
            membership: Membership::new(vec![1, 2, 3], vec![]),
        };
        let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let Installed {
            installed,
            snapshots,
            read,
            _dir,
        } = install_read(&sent_file(&meta, &body), 1 << 20, false);
        installed.unwrap();
        let (read_meta, read_body) = read.unwrap();
        assert_eq!(read_meta, meta);
        assert!(read_body == body, "the reader read other bytes");
        let (kept_meta, mut kept) = snapshots.at(42).unwrap().expect("kept");
        let mut kept_body = Vec::new();
        kept.read_to_end(&mut kept_body).unwrap();
        assert_eq!(kept_meta, meta);
        assert!(kept_body == body, "the file holds other bytes");
    }

    #[test]
    fn a_transfer_given_up_fails_its_reader_and_keeps_nothing() {
        let meta = SnapshotMeta {
            index: 42,
            term: 3,
            membership: Membership::new(vec![1], vec![]),
        };
        let given_up = install_read(&sent_file(&meta, b"the whole tree"), 7, true);
        assert!(given_up.installed.is_err());
        assert!(
            given_up.read.is_err(),
            "the reader of a transfer given up succeeded"
        );
        assert!(given_up.snapshots.at(42).unwrap().is_none());
    }

    #[test]
    fn a_joint_membership_round_trips() {
        round_trip(&SnapshotMeta {
            index: 42,
            term: 7,
            membership: Membership {
                voters: vec![1, 2, 4],
                learners: vec![],
                voters_outgoing: vec![1, 2, 3],
                learners_next: vec![3],
                auto_leave: true,
            },
        });
    }
}
