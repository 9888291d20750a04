//! Apache ZooKeeper's snapshot files (`version-2/snapshot.<zxid in hex>`,
//! optionally `.gz` or `.snappy`), read and written.
//!
//! Layout (`FileSnap`, `SerializeUtils.serializeSnapshot`,
//! `DataTree.serialize`), big-endian, Jute's lengths:
//!
//! ```text
//! header: magic "ZKSN", version 2, dbid i64
//! sessions: count i32, (id i64, timeout i32)*
//! ACL cache: count i32, (id i64, acl vector: count i32, (perms i32, scheme, id)*)*
//! nodes, each parent before its children, the root's path "":
//!   (path, data buffer, acl id i64 (-1: open to all),
//!    czxid, mzxid, ctime, mtime i64, version, cversion, aversion i32,
//!    ephemeralOwner, pzxid i64)*
//! the path "/" (end of nodes)
//! seal: Adler-32 of every byte before it as i64, the string "/"
//! since 3.6, optional: digest (zxid i64, version i32, digest i64), seal
//! ```
//!
//! The zxid a snapshot is "at" is in its file name: ZooKeeper replays the
//! log from the next one (the snapshot may hold some later changes too).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use jute::{Acl, Id};
use tree::{DataTree, StatPersisted};

use crate::compression::{self, Compression};
use crate::error::MigrateError;
use crate::java_io::{read_file_header, JavaIn, JavaOut, ReadError};
use crate::zk_tree::{ZkNode, ZkTree};

/// `FileSnap.SNAP_MAGIC`.
const SNAP_MAGIC: &[u8; 4] = b"ZKSN";
/// `FileSnap.VERSION`.
const SNAP_VERSION: i32 = 2;
/// `ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID`.
const OPEN_UNSAFE_ACL_ID: i64 = -1;
/// The path that ends the nodes, and each seal.
const END_PATH: &str = "/";
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// A snapshot file and the zxid its name gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    pub path: PathBuf,
    pub zxid: i64,
}

/// What reading a snapshot file found.
#[derive(Debug)]
pub enum Snapshot {
    Whole(ZkTree),
    /// The server stopped while writing it: ZooKeeper passes over such a
    /// file to the snapshot before it.
    Unfinished,
}

/// Reads the snapshot `file`: its tree and sessions, or that it was never
/// finished. Unfinished is what ZooKeeper judges so: a plain file whose
/// last bytes are not the seal's end mark (`SnapStream.isValidSnapshot`),
/// or any file whose stream ends before its seal (its load fails with an
/// end of file, and ZooKeeper tries the next snapshot). Every other damage
/// is an error naming the file and the offset (in the uncompressed
/// stream).
pub fn read(file: &SnapshotFile) -> Result<Snapshot, MigrateError> {
    let damaged = |source: ReadError| MigrateError::DamagedSnapshot {
        file: file.path.clone(),
        source,
    };
    let io_error = |source| MigrateError::Io {
        path: file.path.clone(),
        source,
    };
    let mut opened = crate::error::open(&file.path)?;
    let compression = Compression::of(&file.path);
    if compression == Compression::None && !ends_in_end_mark(&mut opened).map_err(io_error)? {
        return Ok(Snapshot::Unfinished);
    }
    let stream = match compression::reader(
        compression,
        BufReader::with_capacity(READ_BUFFER_BYTES, opened),
    ) {
        Ok(stream) => stream,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Snapshot::Unfinished),
        Err(e) => return Err(io_error(e)),
    };
    let mut input = JavaIn::new(BufReader::with_capacity(READ_BUFFER_BYTES, stream));
    match read_stream(&mut input) {
        Ok(tree) => Ok(Snapshot::Whole(tree)),
        Err(e) if e.is_end_of_input() => Ok(Snapshot::Unfinished),
        Err(e) => Err(damaged(e)),
    }
}

/// `SnapStream.isValidCheckedStream`: at least 10 bytes, the last five
/// the string "/" that ends the seal.
fn ends_in_end_mark(file: &mut File) -> io::Result<bool> {
    const MIN_BYTES: u64 = 10;
    const MARK: [u8; 5] = [0, 0, 0, 1, b'/'];
    if file.metadata()?.len() < MIN_BYTES {
        return Ok(false);
    }
    let mut last = [0u8; MARK.len()];
    file.seek(SeekFrom::End(-(MARK.len() as i64)))?;
    file.read_exact(&mut last)?;
    file.rewind()?;
    Ok(last == MARK)
}

fn read_stream<R: Read>(input: &mut JavaIn<R>) -> Result<ZkTree, ReadError> {
    read_file_header(input, SNAP_MAGIC, SNAP_VERSION)?;
    let tree = read_tree(input)?;
    check_seal(input)?;
    read_trailer(input)?;
    Ok(tree)
}

/// `SerializeUtils.deserializeSnapshot`: the sessions, the ACL cache and
/// the nodes up to the path "/". A file holds this between its header and
/// its seal; a leader sends it bare to a learner it syncs by SNAP.
pub(crate) fn read_tree<R: Read>(input: &mut JavaIn<R>) -> Result<ZkTree, ReadError> {
    let mut tree = ZkTree::default();
    let sessions = input.required_count("session count")?;
    for _ in 0..sessions {
        let id = input.i64("session id")?;
        let timeout = input.i32("session timeout")?;
        tree.add_session(id, timeout);
    }
    let acls = read_acl_cache(input)?;
    read_nodes(input, &acls, &mut tree)?;
    Ok(tree)
}

/// A sealed section after the tree: the digest (3.6+: zxid i64,
/// version i32, digest i64) or the last zxid (3.9: i64), each then a seal
/// (i64 and the string "/").
const SEAL_BYTES: usize = 8 + 4 + 1;
const DIGEST_SECTION_BYTES: usize = 8 + 4 + 8 + SEAL_BYTES;
const LAST_ZXID_SECTION_BYTES: usize = 8 + SEAL_BYTES;

/// The optional sections after the tree, told apart by their length, as
/// their order depends on the writer's settings: none, the digest, the
/// digest and the last zxid, or (3.9 with digests off) the last zxid
/// alone. Each seal is checked; the values are not used (ZooKeeper, too,
/// takes the zxid from the file name).
fn read_trailer<R: Read>(input: &mut JavaIn<R>) -> Result<(), ReadError> {
    let (offset, checksum) = (input.offset(), input.checksum());
    let both = DIGEST_SECTION_BYTES + LAST_ZXID_SECTION_BYTES;
    let rest = input.rest(both as u64 + 1)?;
    let mut t = JavaIn::continuing(&rest[..], checksum, offset);
    let (digest, last_zxid) = match rest.len() {
        0 => (false, false),
        DIGEST_SECTION_BYTES => (true, false),
        LAST_ZXID_SECTION_BYTES => (false, true),
        n if n == both => (true, true),
        n => {
            return Err(input.invalid(
                "trailer",
                offset,
                format!("{n} bytes after the tree, which fit no digest ({DIGEST_SECTION_BYTES} bytes) or last-zxid ({LAST_ZXID_SECTION_BYTES}) section"),
            ))
        }
    };
    if digest {
        t.i64("digest zxid")?;
        t.i32("digest version")?;
        t.i64("digest")?;
        check_seal(&mut t)?;
    }
    if last_zxid {
        t.i64("last zxid")?;
        check_seal(&mut t)?;
    }
    Ok(())
}

/// `ReferenceCountedACLCache.deserialize`.
fn read_acl_cache<R: Read>(input: &mut JavaIn<R>) -> Result<HashMap<i64, Arc<[Acl]>>, ReadError> {
    let count = input.required_count("ACL cache size")?;
    let mut acls = HashMap::new();
    for _ in 0..count {
        let id = input.i64("ACL id")?;
        let len = input.required_count("ACL count")?;
        let mut list = Vec::new();
        for _ in 0..len {
            list.push(Acl {
                perms: input.i32("ACL perms")?,
                id: Id {
                    scheme: input.string("ACL scheme")?,
                    id: input.string("ACL id")?,
                },
            });
        }
        acls.insert(id, Arc::from(list));
    }
    Ok(acls)
}

/// `DataTree.deserialize`'s loop: nodes until the path "/".
fn read_nodes<R: Read>(
    input: &mut JavaIn<R>,
    acls: &HashMap<i64, Arc<[Acl]>>,
    tree: &mut ZkTree,
) -> Result<(), ReadError> {
    let open: Arc<[Acl]> = Arc::from(Acl::open_unsafe());
    loop {
        let at = input.offset();
        let path = input.string("node path")?;
        if path == END_PATH {
            return Ok(());
        }
        let data = input.buffer("node data")?.map(Bytes::from);
        let acl_at = input.offset();
        let acl_id = input.i64("node ACL id")?;
        let acl = match acl_id {
            OPEN_UNSAFE_ACL_ID => open.clone(),
            id => acls.get(&id).cloned().ok_or_else(|| {
                input.invalid(
                    "node ACL id",
                    acl_at,
                    format!("{id} is not in the snapshot's ACL cache"),
                )
            })?,
        };
        let stat = read_stat(input)?;
        let node = ZkNode {
            data,
            acl,
            stat,
            children: Default::default(),
        };
        tree.add_loaded(path, node)
            .map_err(|reason| input.invalid("node", at, reason))?;
    }
}

/// `StatPersisted`, in `zookeeper.jute`'s order.
fn read_stat<R: Read>(input: &mut JavaIn<R>) -> Result<StatPersisted, ReadError> {
    let czxid = input.i64("czxid")?;
    let mzxid = input.i64("mzxid")?;
    let ctime = input.i64("ctime")?;
    let mtime = input.i64("mtime")?;
    let version = input.i32("version")?;
    let cversion = input.i32("cversion")?;
    let aversion = input.i32("aversion")?;
    let ephemeral_owner = input.i64("ephemeralOwner")?;
    let pzxid = input.i64("pzxid")?;
    Ok(StatPersisted {
        czxid,
        mzxid,
        pzxid,
        ctime,
        mtime,
        version,
        cversion,
        aversion,
        ephemeral_owner,
    })
}

/// `SnapStream.checkSealIntegrity`: the Adler-32 so far, then "/".
fn check_seal<R: Read>(input: &mut JavaIn<R>) -> Result<(), ReadError> {
    let computed = input.checksum();
    let at = input.offset();
    let stored = input.i64("checksum")?;
    let end = input.string("checksum's end mark")?;
    if stored != i64::from(computed) {
        return Err(input.invalid(
            "checksum",
            at,
            format!("stored {stored:#x}, computed {computed:#x}: the snapshot is damaged"),
        ));
    }
    if end != END_PATH {
        return Err(input.invalid(
            "checksum's end mark",
            at + 8,
            format!("{end:?} where \"/\" belongs"),
        ));
    }
    Ok(())
}

/// Writes `tree` as the snapshot `dir/snapshot.<zxid in hex>`, as
/// ZooKeeper writes one with digests off, uncompressed; durable when
/// this returns. Sessions keep their timeouts (ZooKeeper's snapshot has
/// no passwords: it derives them from the id).
pub fn write(tree: &DataTree, zxid: i64, dir: &Path) -> Result<PathBuf, MigrateError> {
    let path = dir.join(format!("snapshot.{zxid:x}"));
    let io_error = |source| MigrateError::Io {
        path: path.clone(),
        source,
    };
    let file = File::create_new(&path).map_err(io_error)?;
    let file = write_to(tree, BufWriter::with_capacity(READ_BUFFER_BYTES, file))
        .map_err(io_error)?
        .into_inner()
        .map_err(|e| io_error(e.into_error()))?;
    file.sync_all().map_err(io_error)?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error)?;
    Ok(path)
}

/// Writes `tree` to `writer` as ZooKeeper's snapshot file holds it
/// (uncompressed, no digest section), and hands the writer back.
pub fn write_to<W: Write>(tree: &DataTree, writer: W) -> io::Result<W> {
    let mut out = JavaOut::new(writer);
    write_stream(tree, &mut out)?;
    Ok(out.into_inner())
}

fn write_stream<W: Write>(tree: &DataTree, out: &mut JavaOut<W>) -> io::Result<()> {
    out.i32(i32::from_be_bytes(*SNAP_MAGIC))?;
    out.i32(SNAP_VERSION)?;
    out.i64(0)?;
    let sessions: Vec<_> = tree.sessions().collect();
    out.i32(jute::jute_len(sessions.len()))?;
    for (id, session) in sessions {
        out.i64(id)?;
        out.i32(session.timeout_ms)?;
    }
    // Every distinct ACL list once, numbered in order of first use.
    let mut ids: HashMap<&[Acl], i64> = HashMap::new();
    let mut lists: Vec<&[Acl]> = Vec::new();
    for (_, node) in tree.znodes_parent_first() {
        ids.entry(&node.acl[..]).or_insert_with(|| {
            lists.push(&node.acl[..]);
            lists.len() as i64
        });
    }
    out.i32(jute::jute_len(lists.len()))?;
    for (n, list) in lists.iter().enumerate() {
        out.i64(n as i64 + 1)?;
        out.i32(jute::jute_len(list.len()))?;
        for acl in list.iter() {
            out.i32(acl.perms)?;
            out.string(&acl.id.scheme)?;
            out.string(&acl.id.id)?;
        }
    }
    for (path, node) in tree.znodes_parent_first() {
        out.string(if path == "/" { "" } else { path })?;
        out.buffer(node.data())?;
        out.i64(ids[&node.acl[..]])?;
        let s = &node.stat;
        for v in [s.czxid, s.mzxid, s.ctime, s.mtime] {
            out.i64(v)?;
        }
        for v in [s.version, s.cversion, s.aversion] {
            out.i32(v)?;
        }
        out.i64(s.ephemeral_owner)?;
        out.i64(s.pzxid)?;
    }
    out.string(END_PATH)?;
    let checksum = out.checksum();
    out.i64(i64::from(checksum))?;
    out.string(END_PATH)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot with the sections after the tree that `sections` says.
    fn with_trailer(digest: bool, last_zxid: bool) -> Vec<u8> {
        let mut out = JavaOut::new(Vec::new());
        write_stream(&DataTree::new(), &mut out).unwrap();
        if digest {
            out.i64(5).unwrap();
            out.i32(2).unwrap();
            out.i64(0x1234).unwrap();
            let sum = out.checksum();
            out.i64(i64::from(sum)).unwrap();
            out.string(END_PATH).unwrap();
        }
        if last_zxid {
            out.i64(5).unwrap();
            let sum = out.checksum();
            out.i64(i64::from(sum)).unwrap();
            out.string(END_PATH).unwrap();
        }
        out.into_inner()
    }

    #[test]
    fn every_trailer_zookeeper_writes_is_read_and_its_seal_checked() {
        for (digest, last_zxid) in [(false, false), (true, false), (false, true), (true, true)] {
            let bytes = with_trailer(digest, last_zxid);
            let tree = read_stream(&mut JavaIn::new(&bytes[..])).unwrap();
            let (sessions, znodes) = tree.into_records();
            assert_eq!(
                DataTree::from_records(sessions, znodes).unwrap(),
                DataTree::new()
            );
            if digest || last_zxid {
                let mut damaged = bytes.clone();
                let at = damaged.len() - 6;
                damaged[at] ^= 1;
                let err = read_stream(&mut JavaIn::new(&damaged[..])).unwrap_err();
                assert!(err.to_string().contains("checksum"), "{err}");
            }
        }
        let mut extra = with_trailer(true, false);
        extra.push(0);
        let err = read_stream(&mut JavaIn::new(&extra[..])).unwrap_err();
        assert!(err.to_string().contains("34 bytes after the tree"), "{err}");
    }

    #[test]
    fn a_written_snapshot_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let tree = DataTree::new();
        let path = write(&tree, 0x1_0000_0005, dir.path()).unwrap();
        assert_eq!(path.file_name().unwrap(), "snapshot.100000005");
        let loaded = read(&SnapshotFile {
            path: path.clone(),
            zxid: 0x1_0000_0005,
        })
        .unwrap();
        let Snapshot::Whole(loaded) = loaded else {
            panic!("a whole snapshot read as unfinished")
        };
        let (sessions, znodes) = loaded.into_records();
        let rebuilt = DataTree::from_records(sessions, znodes).unwrap();
        assert_eq!(rebuilt, tree);

        // One byte changed anywhere is found by the seal.
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        let err = read(&SnapshotFile { path, zxid: 1 })
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("snapshot.100000005") && err.contains("offset"),
            "{err}"
        );
    }

    /// A snapshot of a new tree (the root and /zookeeper's nodes), cut
    /// after `keep` of its bytes, in a file named with `suffix` and
    /// compressed as the suffix says.
    fn cut_snapshot(dir: &Path, suffix: &str, keep: impl Fn(usize) -> usize) -> SnapshotFile {
        let mut out = JavaOut::new(Vec::new());
        write_stream(&DataTree::new(), &mut out).unwrap();
        let plain = out.into_inner();
        let mut bytes = match suffix {
            ".gz" => {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), Default::default());
                gz.write_all(&plain).unwrap();
                gz.finish().unwrap()
            }
            _ => plain,
        };
        bytes.truncate(keep(bytes.len()));
        let path = dir.join(format!("snapshot.7{suffix}"));
        std::fs::write(&path, bytes).unwrap();
        SnapshotFile { path, zxid: 7 }
    }

    #[test]
    fn a_snapshot_cut_short_is_unfinished_as_zookeeper_judges_it() {
        let dir = tempfile::tempdir().unwrap();
        for suffix in ["", ".gz"] {
            let whole = cut_snapshot(dir.path(), suffix, |len| len);
            assert!(matches!(read(&whole), Ok(Snapshot::Whole(_))), "{suffix}");
            for keep in [|_| 0, |_| 5, |len| len / 2, |len| len - 1] {
                let cut = cut_snapshot(dir.path(), suffix, keep);
                let found = read(&cut);
                assert!(
                    matches!(found, Ok(Snapshot::Unfinished)),
                    "{suffix}: {found:?}"
                );
            }
        }
    }

    #[test]
    fn a_finished_snapshot_that_fails_its_seal_is_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let file = cut_snapshot(dir.path(), "", |len| len);
        let mut bytes = std::fs::read(&file.path).unwrap();
        let seal = bytes.len() - 6;
        bytes[seal] ^= 1;
        std::fs::write(&file.path, bytes).unwrap();
        let err = read(&file).unwrap_err().to_string();
        assert!(
            err.contains("checksum") && err.contains("move this file aside"),
            "{err}"
        );
    }
}
