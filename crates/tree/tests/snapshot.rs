//! Snapshot round trips and corruption detection.

mod common;

use std::io::Cursor;

use common::*;
use jute::{perms, CreateMode, Id};
use tree::{DataTree, SnapshotError, TxnOp, ZnodeRecord};

fn busy_tree() -> Harness {
    let mut h = Harness::new();
    let other = 0x0300_0000_0000_0007;
    h.session(other);
    h.mk("/app", "config");
    h.mk("/app/a", "1");
    h.apply(create("/app/seq-", "", CreateMode::PersistentSequential));
    h.apply(create("/app/e", "", CreateMode::Ephemeral));
    h.apply_as(other, create("/app/f", "", CreateMode::EphemeralSequential));
    h.apply(create("/c", "", CreateMode::Container));
    h.apply(create_ttl("/t", CreateMode::PersistentWithTtl, 60_000));
    h.apply(create_acl(
        "/locked",
        "",
        CreateMode::Persistent,
        vec![
            acl(perms::READ, "digest", "u:h"),
            acl(perms::ALL, "ip", "10.0.0.0/8"),
        ],
    ));
    h.apply(set_data("/app", "config-2", -1));
    h.apply(delete("/app/a", -1));
    h.mk("/zookeeper/quota/app", "");
    h.mk("/zookeeper/quota/app/zookeeper_limits", "count=5");
    h.mk("/zookeeper/quota/app/zookeeper_stats", "");
    h.mk("/app/b", &"x".repeat(100_000));
    h
}

fn round_trip(tree: &DataTree) -> DataTree {
    let mut buf = Vec::new();
    tree.write_snapshot(&mut buf).unwrap();
    DataTree::read_snapshot(&mut Cursor::new(buf)).unwrap()
}

#[test]
fn round_trip_gives_an_equal_tree() {
    let h = busy_tree();
    let loaded = round_trip(&h.tree);
    assert_eq!(loaded, h.tree);
    assert_eq!(loaded.node_count(), h.tree.node_count());
    assert_eq!(
        loaded.approximate_data_bytes(),
        h.tree.approximate_data_bytes()
    );
    assert_eq!(loaded.ephemeral_count(), 2);
    assert_eq!(loaded.session(SESSION), h.tree.session(SESSION));
    assert_eq!(
        loaded.get_children("/app", &[]).unwrap(),
        h.tree.get_children("/app", &[]).unwrap()
    );
    assert_eq!(
        loaded.get_acl("/locked", &[Id::new("super", "")]),
        h.tree.get_acl("/locked", &[Id::new("super", "")])
    );
    assert_eq!(
        loaded.reap_candidates(T0 + 10_000_000, 1),
        h.tree.reap_candidates(T0 + 10_000_000, 1)
    );
    assert_eq!(round_trip(&DataTree::new()), DataTree::new());
}

#[test]
fn a_loaded_tree_applies_like_the_original() {
    // Replicas restored from a snapshot must stay identical to replicas
    // that replayed the log: the indexes and quota paths come back too.
    let mut a = busy_tree();
    let mut b = Harness {
        tree: round_trip(&a.tree),
        zxid: a.zxid,
        time_ms: a.time_ms,
        auth: a.auth.clone(),
        enforce_quota: false,
    };
    for h in [&mut a, &mut b] {
        h.mk("/app/more", "zz");
        h.apply(create("/app/seq-", "", CreateMode::PersistentSequential));
        h.apply(TxnOp::CloseSession);
    }
    assert_eq!(a.tree, b.tree);
    assert!(b.tree.exists("/app/e").is_none());
    let stats = b
        .tree
        .get_data("/zookeeper/quota/app/zookeeper_stats", &[])
        .unwrap()
        .0;
    assert_eq!(
        stats,
        a.tree
            .get_data("/zookeeper/quota/app/zookeeper_stats", &[])
            .unwrap()
            .0
    );
}

#[test]
fn corruption_is_detected() {
    let h = busy_tree();
    let mut buf = Vec::new();
    h.tree.write_snapshot(&mut buf).unwrap();

    let mut flipped = buf.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    assert!(DataTree::read_snapshot(&mut Cursor::new(flipped)).is_err());

    let truncated = &buf[..buf.len() - 1];
    assert!(matches!(
        DataTree::read_snapshot(&mut Cursor::new(truncated)),
        Err(SnapshotError::Io(_))
    ));
    for cut in [0, 4, 12, 30] {
        assert!(DataTree::read_snapshot(&mut Cursor::new(&buf[..cut])).is_err());
    }

    let mut bad_magic = buf.clone();
    bad_magic[0] = b'X';
    assert!(matches!(
        DataTree::read_snapshot(&mut Cursor::new(bad_magic)),
        Err(SnapshotError::BadMagic)
    ));

    let mut bad_crc = buf.clone();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 1;
    assert!(matches!(
        DataTree::read_snapshot(&mut Cursor::new(bad_crc)),
        Err(SnapshotError::Checksum { .. })
    ));
}

/// Hands out at most `step` bytes a read, as a pipe or socket may.
struct Trickle<'a> {
    bytes: &'a [u8],
    step: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(out.len()).min(self.bytes.len());
        out[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// Fields split across reads, and data larger than one chunk of the
/// reader (1 MB, over several), load as they were written.
#[test]
fn a_snapshot_arriving_in_pieces_loads_whole() {
    let mut h = busy_tree();
    h.mk("/big", &"y".repeat(1 << 20));
    let mut buf = Vec::new();
    h.tree.write_snapshot(&mut buf).unwrap();
    for step in [1, 7, 4096, usize::MAX] {
        let loaded = DataTree::read_snapshot(&mut Trickle { bytes: &buf, step }).unwrap();
        assert_eq!(loaded, h.tree, "read {step} bytes at a time");
    }
}

/// What a migration reads out of a tree and builds a tree from.
fn records_of(tree: &DataTree) -> (Vec<(i64, tree::SessionInfo)>, Vec<ZnodeRecord>) {
    let sessions = tree.sessions().map(|(id, s)| (id, s.clone())).collect();
    let znodes = tree
        .znodes_parent_first()
        .map(|(path, node)| ZnodeRecord {
            path: path.to_owned(),
            data: node.data().map(bytes::Bytes::copy_from_slice),
            acl: node.acl.to_vec(),
            stat: node.stat,
        })
        .collect();
    (sessions, znodes)
}

#[test]
fn a_tree_rebuilt_from_its_records_is_equal() {
    let h = busy_tree();
    let (sessions, znodes) = records_of(&h.tree);
    let mut seen = std::collections::HashSet::new();
    for record in &znodes {
        if record.path != "/" {
            let parent = &record.path[..record.path.rfind('/').unwrap().max(1)];
            assert!(
                seen.contains(parent),
                "{} came before its parent",
                record.path
            );
        }
        seen.insert(record.path.clone());
    }
    let rebuilt = DataTree::from_records(sessions.clone(), znodes.clone()).unwrap();
    assert_eq!(records_of(&rebuilt), (sessions, znodes));
    assert_eq!(rebuilt.node_count(), h.tree.node_count());
    assert_eq!(rebuilt.ephemeral_count(), h.tree.ephemeral_count());
    assert_eq!(
        rebuilt.get_ephemerals(SESSION, "/"),
        h.tree.get_ephemerals(SESSION, "/")
    );
    // Its indexes (containers, TTLs, quota paths) are the applied tree's:
    // the two differ only in the approximate data size, which ZooKeeper,
    // too, counts afresh on load (a quota's stats are rewritten in place
    // without counting them, so the applied tree's has drifted).
    assert_eq!(round_trip(&rebuilt), rebuilt);
    assert_eq!(
        rebuilt.reap_candidates(i64::MAX, 0),
        h.tree.reap_candidates(i64::MAX, 0)
    );
    let fresh = DataTree::new();
    let (sessions, znodes) = records_of(&fresh);
    let rebuilt = DataTree::from_records(sessions, znodes).unwrap();
    assert_eq!(rebuilt, fresh);
}

#[test]
fn a_rebuilt_tree_recounts_its_quotas_and_gains_a_config_node() {
    let mut h = busy_tree();
    let (sessions, mut znodes) = records_of(&h.tree);
    znodes.retain(|r| r.path != "/zookeeper/config");
    for r in &mut znodes {
        if r.path == "/zookeeper/quota/app/zookeeper_stats" {
            r.data = Some("count=0,bytes=0".into());
        }
    }
    let mut rebuilt = DataTree::from_records(sessions, znodes).unwrap();
    assert_eq!(records_of(&rebuilt), records_of(&h.tree));
    // The quota is registered: a create below /app is counted.
    h.mk("/app/counted", "four");
    let mut again = Harness::new();
    std::mem::swap(&mut again.tree, &mut rebuilt);
    again.session(0x0300_0000_0000_0007);
    again.mk("/app/counted", "four");
    let stats = "/zookeeper/quota/app/zookeeper_stats";
    assert_eq!(
        again.tree.get_data(stats, &[]).unwrap().0,
        h.tree.get_data(stats, &[]).unwrap().0
    );
}

#[test]
fn records_without_a_parent_or_root_are_refused() {
    let h = busy_tree();
    let (sessions, znodes) = records_of(&h.tree);
    let orphaned: Vec<_> = znodes
        .iter()
        .filter(|r| r.path != "/app")
        .cloned()
        .collect();
    let err = DataTree::from_records(sessions.clone(), orphaned).unwrap_err();
    assert!(err.to_string().contains("\"/app\""), "{err}");
    let rootless: Vec<_> = znodes.into_iter().filter(|r| r.path != "/").collect();
    assert!(DataTree::from_records(sessions, rootless).is_err());
}
