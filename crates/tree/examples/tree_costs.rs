//! What the tree itself costs, with no server around it: the in-process
//! figures quoted in `nodes.rs` and `snapshot.rs` come from here.
//!
//! ```text
//! cargo run --release -p tree --example tree_costs -- ZNODES OPS [PER_PARENT]
//! ```
//!
//! Creates ZNODES znodes of 128 bytes (all under one parent, or
//! PER_PARENT to a parent), then applies OPS setData (also while a
//! clone shares the tree, as a snapshot does) and OPS getData to random
//! ones, creates OPS more and deletes them, counts the znodes below
//! their top (getAllChildrenNumber), writes a snapshot to memory and
//! loads it back, then folds it with a delta of OPS more sets and loads
//! the two merged, and prints the time of each per operation and the
//! resident memory. It allocates with jemalloc, as the server does.

use std::time::{Duration, Instant};

use bytes::Bytes;
use jute::{Acl, CreateMode, ErrorCode};
use tree::{DataTree, Lookups, Txn, TxnOp};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const VALUE_BYTES: usize = 128;
/// The session every txn comes from: a tree takes writes only from live
/// sessions.
const SESSION: i64 = 0x100;

/// Txns prefetched together, as the server's apply loop does.
const PREFETCH_GROUP: usize = 32;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|arg| arg.parse().expect("arguments: ZNODES OPS [PER_PARENT]"))
        .collect();
    let (znodes, ops) = match args[..] {
        [znodes, ops, ..] => (znodes, ops),
        _ => panic!("arguments: ZNODES OPS [PER_PARENT]"),
    };
    let layout = Layout {
        per_parent: args.get(2).copied(),
    };
    let mut tree = Applier::new();
    let started = Instant::now();
    tree.create_all(znodes, &layout);
    report("create", started.elapsed(), znodes);
    println!("resident after the creates: {} MB", resident_mb());

    let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut random_paths = || -> Vec<String> {
        (0..ops)
            .map(|_| layout.path(random.below(znodes)))
            .collect()
    };
    let paths = random_paths();
    let started = Instant::now();
    tree.set_all(&paths);
    report("setData", started.elapsed(), ops);
    let label = format!("setData, prefetched {PREFETCH_GROUP} at a time");
    let paths_set = random_paths();
    tree.time_prefetched(&label, || set_data_txns(&paths_set));
    // As while a snapshot is written: every write copies what it changes
    // of what the clone shares.
    let snapshot = tree.tree.clone();
    let paths_set = random_paths();
    let label = format!("{label}, under a clone");
    tree.time_prefetched(&label, || set_data_txns(&paths_set));
    drop(snapshot);
    // New znodes among the others: the trie has the size the creates
    // above gave it.
    tree.create("/more".into(), None);
    let label = format!("create, prefetched {PREFETCH_GROUP} at a time");
    tree.time_prefetched(&label, || more_txns(ops, create_more));
    // Deleted again, so that the snapshot below holds ZNODES.
    let label = format!("delete, prefetched {PREFETCH_GROUP} at a time");
    tree.time_prefetched(&label, || more_txns(ops, delete_more));
    tree.apply(delete_more("/more".into()));
    let started = Instant::now();
    // As the server reads: the node, whose data is encoded from it.
    for path in &paths {
        tree.tree.get_data_node(path, &[]).expect("a created znode");
    }
    report("getData", started.elapsed(), ops);
    let started = Instant::now();
    let counted = tree.tree.all_children_number("/costs", &[]);
    report(
        "getAllChildrenNumber of /costs, a znode",
        started.elapsed(),
        znodes,
    );
    assert_eq!(counted, Ok(layout.below_costs(znodes)));

    // Serialising alone first: the write into memory below also grows
    // and faults in its buffer, which can cost as much again.
    let started = Instant::now();
    tree.tree
        .write_snapshot(&mut std::io::sink())
        .expect("writing nowhere");
    report(
        "snapshot write, a znode, serialising only",
        started.elapsed(),
        znodes,
    );

    let mut image = Vec::new();
    let started = Instant::now();
    tree.tree
        .write_snapshot(&mut image)
        .expect("writing to memory");
    report("snapshot write, a znode", started.elapsed(), znodes);
    let resident_before = resident_mb();
    let started = Instant::now();
    let loaded = DataTree::read_snapshot(&mut &image[..]).expect("the snapshot just written");
    report("snapshot load, a znode", started.elapsed(), znodes);
    println!(
        "resident taken by the loaded copy: {} MB",
        resident_mb() - resident_before
    );
    drop(loaded);

    // A delta of OPS sets, then the snapshot above and it folded into one
    // whole snapshot, as a server takes a whole snapshot of a large tree.
    tree.tree.track_changes();
    let paths_set = random_paths();
    tree.set_all(&paths_set);
    let changes = tree.tree.take_changes().expect("tracked");
    let mut delta = Vec::new();
    tree.tree
        .write_delta(&changes, &mut delta)
        .expect("writing to memory");
    let started = Instant::now();
    tree::fold_deltas(
        &mut &image[..],
        vec![&mut &delta[..]],
        tree.tree.snapshot_node_count(),
        &mut std::io::sink(),
    )
    .expect("folding the snapshot and delta just written");
    report(
        "snapshot fold with a delta, a znode",
        started.elapsed(),
        znodes,
    );
    let started = Instant::now();
    let loaded = DataTree::read_snapshot_and_deltas(&mut &image[..], vec![&mut &delta[..]])
        .expect("the snapshot and delta just written");
    report(
        "snapshot load with a delta, a znode",
        started.elapsed(),
        znodes,
    );
    drop(loaded);
}

struct Layout {
    per_parent: Option<u64>,
}

impl Layout {
    fn parent(&self, i: u64) -> Option<String> {
        self.per_parent.map(|n| format!("/costs/p{:06}", i / n))
    }

    /// The znodes under `/costs` once `znodes` are created.
    fn below_costs(&self, znodes: u64) -> i32 {
        let parents = self.per_parent.map_or(0, |n| znodes.div_ceil(n));
        (znodes + parents) as i32
    }

    fn path(&self, i: u64) -> String {
        match self.parent(i) {
            Some(parent) => format!("{parent}/n{i:010}"),
            None => format!("/costs/n{i:010}"),
        }
    }
}

struct Applier {
    tree: DataTree,
    zxid: i64,
}

impl Applier {
    fn new() -> Self {
        let mut applier = Applier {
            tree: DataTree::new(),
            zxid: 0,
        };
        applier.apply(TxnOp::CreateSession {
            timeout_ms: 30_000,
            password: Bytes::new(),
        });
        applier.create("/costs".into(), None);
        applier
    }

    fn apply(&mut self, op: TxnOp) {
        self.apply_txn(&txn_of(op));
    }

    fn apply_txn(&mut self, txn: &Txn) {
        self.zxid += 1;
        let applied = self.tree.apply(self.zxid, txn);
        assert_eq!(applied.outcome.reply_err(), ErrorCode::Ok, "{txn:?}");
    }

    fn create(&mut self, path: String, data: Option<Bytes>) {
        self.apply(create_op(path, data));
    }

    fn create_all(&mut self, znodes: u64, layout: &Layout) {
        let value = Bytes::from(vec![b'x'; VALUE_BYTES]);
        for i in 0..znodes {
            if let Some(n) = layout.per_parent {
                if i % n == 0 {
                    self.create(layout.parent(i).expect("a layout with parents"), None);
                }
            }
            self.create(layout.path(i), Some(value.clone()));
        }
    }

    fn set_all(&mut self, paths: &[String]) {
        for txn in set_data_txns(paths) {
            self.apply_txn(&txn);
        }
    }

    /// As a server applies a batch: [`PREFETCH_GROUP`] txns decoded, their
    /// znodes prefetched together, then applied; reports the time a txn,
    /// from their making (as `set_all` is timed).
    fn time_prefetched(&mut self, label: &str, make: impl FnOnce() -> Vec<Txn>) {
        let started = Instant::now();
        let txns = make();
        for chunk in txns.chunks(PREFETCH_GROUP) {
            let mut lookups = Lookups::default();
            chunk.iter().for_each(|txn| lookups.add_txn(txn));
            self.tree.prefetch(&lookups);
            for txn in chunk {
                self.apply_txn(txn);
            }
        }
        report(label, started.elapsed(), txns.len() as u64);
    }
}

fn txn_of(op: TxnOp) -> Txn {
    Txn {
        time_ms: 1,
        session_id: SESSION,
        auth: vec![],
        enforce_quota: false,
        op,
    }
}

/// `op` on each of `count` znodes under `/more`.
fn more_txns(count: u64, op: impl Fn(String) -> TxnOp) -> Vec<Txn> {
    (0..count)
        .map(|i| txn_of(op(format!("/more/n{i:010}"))))
        .collect()
}

fn create_more(path: String) -> TxnOp {
    create_op(path, Some(Bytes::from_static(&[b'z'; VALUE_BYTES])))
}

/// A persistent, open znode.
fn create_op(path: String, data: Option<Bytes>) -> TxnOp {
    TxnOp::Create {
        path,
        data,
        acl: Acl::open_unsafe(),
        mode: CreateMode::Persistent,
        ttl_ms: -1,
    }
}

fn delete_more(path: String) -> TxnOp {
    TxnOp::Delete { path, version: -1 }
}

fn set_data_txns(paths: &[String]) -> Vec<Txn> {
    let value = Bytes::from(vec![b'y'; VALUE_BYTES]);
    let set = |path: &String| {
        txn_of(TxnOp::SetData {
            path: path.clone(),
            data: Some(value.clone()),
            version: -1,
        })
    };
    paths.iter().map(set).collect()
}

fn report(what: &str, elapsed: Duration, count: u64) {
    let per_op_ns = elapsed.as_nanos() as f64 / count.max(1) as f64;
    println!("{what}: {per_op_ns:.0} ns");
}

fn resident_mb() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    pages * 4096 / 1_000_000
}

/// Deterministic picks, so runs of different builds touch the same znodes.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}
