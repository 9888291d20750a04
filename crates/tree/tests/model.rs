//! Random op sequences against a naive reference model (a `BTreeMap` of
//! paths), checking results, paths, data, versions and the stat fields
//! ZooKeeper derives (cversion, numChildren, pzxid) after every step.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::*;
use jute::{CreateMode, ErrorCode, Stat};
use proptest::prelude::*;
use tree::{Outcome, TxnOp};

#[derive(Debug, Clone, PartialEq)]
struct MNode {
    data: Vec<u8>,
    version: i32,
    creates: i32,
    ephemeral: bool,
    czxid: i64,
    mzxid: i64,
    pzxid: i64,
}

#[derive(Debug, Clone)]
struct Model {
    nodes: BTreeMap<String, MNode>,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "",
    }
}

impl Model {
    fn new() -> Self {
        let mut nodes = BTreeMap::new();
        for p in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
            nodes.insert(
                p.to_string(),
                MNode {
                    data: vec![],
                    version: 0,
                    creates: 0,
                    ephemeral: false,
                    czxid: 0,
                    mzxid: 0,
                    pzxid: 0,
                },
            );
        }
        Model { nodes }
    }

    fn children(&self, path: &str) -> usize {
        self.nodes
            .keys()
            .filter(|k| k.as_str() != "/" && parent(k) == path)
            .count()
    }

    fn version_ok(current: i32, expected: i32) -> Result<(), ErrorCode> {
        if expected == -1 || expected == current {
            Ok(())
        } else {
            Err(ErrorCode::BadVersion)
        }
    }

    fn op(&mut self, zxid: i64, op: &MOp) -> Result<(), ErrorCode> {
        match op {
            MOp::Create {
                path,
                data,
                sequential,
                ephemeral,
            } => {
                let p = parent(path).to_string();
                let parent_node = self.nodes.get(&p).ok_or(ErrorCode::NoNode)?;
                let path = if *sequential {
                    format!("{path}{:010}", parent_node.creates)
                } else {
                    path.clone()
                };
                if self.nodes.contains_key(&path) {
                    return Err(ErrorCode::NodeExists);
                }
                if parent_node.ephemeral {
                    return Err(ErrorCode::NoChildrenForEphemerals);
                }
                let parent_node = self.nodes.get_mut(&p).unwrap();
                parent_node.creates += 1;
                parent_node.pzxid = zxid;
                self.nodes.insert(
                    path,
                    MNode {
                        data: data.clone(),
                        version: 0,
                        creates: 0,
                        ephemeral: *ephemeral,
                        czxid: zxid,
                        mzxid: zxid,
                        pzxid: zxid,
                    },
                );
                Ok(())
            }
            MOp::Delete { path, version } => {
                if !self.nodes.contains_key(parent(path)) {
                    return Err(ErrorCode::NoNode);
                }
                let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
                Self::version_ok(node.version, *version)?;
                if self.children(path) > 0 {
                    return Err(ErrorCode::NotEmpty);
                }
                self.nodes.remove(path);
                self.nodes.get_mut(parent(path)).unwrap().pzxid = zxid;
                Ok(())
            }
            MOp::SetData {
                path,
                data,
                version,
            } => {
                let node = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
                Self::version_ok(node.version, *version)?;
                node.version += 1;
                node.data = data.clone();
                node.mzxid = zxid;
                Ok(())
            }
            MOp::Check { path, version } => {
                let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
                Self::version_ok(node.version, *version)
            }
        }
    }

    fn close_session(&mut self, zxid: i64) {
        let doomed: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.ephemeral)
            .map(|(k, _)| k.clone())
            .collect();
        for p in doomed {
            self.nodes.remove(&p);
            self.nodes.get_mut(parent(&p)).unwrap().pzxid = zxid;
        }
    }

    fn expected_stat(&self, path: &str) -> (Vec<u8>, i32, i32, i32, i64, i64, i64) {
        let n = &self.nodes[path];
        let kids = self.children(path) as i32;
        (
            n.data.clone(),
            n.version,
            n.creates * 2 - kids,
            kids,
            n.czxid,
            n.mzxid,
            n.pzxid,
        )
    }
}

#[derive(Debug, Clone)]
enum MOp {
    Create {
        path: String,
        data: Vec<u8>,
        sequential: bool,
        ephemeral: bool,
    },
    Delete {
        path: String,
        version: i32,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    Check {
        path: String,
        version: i32,
    },
}

impl MOp {
    fn to_txn(&self) -> TxnOp {
        match self {
            MOp::Create {
                path,
                data,
                sequential,
                ephemeral,
            } => {
                let mode = match (sequential, ephemeral) {
                    (false, false) => CreateMode::Persistent,
                    (true, false) => CreateMode::PersistentSequential,
                    (false, true) => CreateMode::Ephemeral,
                    (true, true) => CreateMode::EphemeralSequential,
                };
                TxnOp::Create {
                    path: path.clone(),
                    data: Bytes::from(data.clone()),
                    acl: jute::Acl::open_unsafe(),
                    mode,
                    ttl_ms: -1,
                }
            }
            MOp::Delete { path, version } => delete(path, *version),
            MOp::SetData {
                path,
                data,
                version,
            } => TxnOp::SetData {
                path: path.clone(),
                data: Bytes::from(data.clone()),
                version: *version,
            },
            MOp::Check { path, version } => check(path, *version),
        }
    }
}

/// An op whose path and version are chosen against the current model.
#[derive(Debug, Clone)]
struct Seed {
    kind: u8,
    /// Either a fresh path from a small alphabet or an existing one.
    fresh: Vec<u8>,
    pick_existing: bool,
    pick: usize,
    version_kind: u8,
    data: Vec<u8>,
    flags: u8,
}

fn arb_seed() -> impl Strategy<Value = Seed> {
    (
        0u8..4,
        proptest::collection::vec(0u8..3, 1..4),
        any::<bool>(),
        any::<usize>(),
        0u8..3,
        proptest::collection::vec(any::<u8>(), 0..4),
        0u8..4,
    )
        .prop_map(
            |(kind, fresh, pick_existing, pick, version_kind, data, flags)| Seed {
                kind,
                fresh,
                pick_existing,
                pick,
                version_kind,
                data,
                flags,
            },
        )
}

fn realize(seed: &Seed, model: &Model) -> MOp {
    let user_paths: Vec<&String> = model
        .nodes
        .keys()
        .filter(|k| k.as_str() != "/" && !k.starts_with("/zookeeper"))
        .collect();
    let path = if seed.pick_existing && !user_paths.is_empty() {
        user_paths[seed.pick % user_paths.len()].clone()
    } else {
        seed.fresh
            .iter()
            .map(|c| format!("/{}", (b'a' + c) as char))
            .collect()
    };
    let current = model.nodes.get(&path).map_or(0, |n| n.version);
    let version = match seed.version_kind {
        0 => -1,
        1 => current,
        _ => current + 1,
    };
    match seed.kind {
        0 => MOp::Create {
            path,
            data: seed.data.clone(),
            sequential: seed.flags & 1 != 0,
            ephemeral: seed.flags & 2 != 0,
        },
        1 => MOp::Delete { path, version },
        2 => MOp::SetData {
            path,
            data: seed.data.clone(),
            version,
        },
        _ => MOp::Check { path, version },
    }
}

#[derive(Debug, Clone)]
enum Step {
    Single(Seed),
    Multi(Vec<Seed>),
    Reconnect,
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => arb_seed().prop_map(Step::Single),
        3 => proptest::collection::vec(arb_seed(), 0..4).prop_map(Step::Multi),
        1 => Just(Step::Reconnect),
    ]
}

fn assert_same(h: &Harness, model: &Model) -> Result<(), TestCaseError> {
    let mut tree_paths = Vec::new();
    let mut stack = vec!["/".to_string()];
    while let Some(p) = stack.pop() {
        let (kids, _) = h.tree.get_children(&p, &[]).unwrap();
        for k in kids {
            stack.push(if p == "/" {
                format!("/{k}")
            } else {
                format!("{p}/{k}")
            });
        }
        tree_paths.push(p);
    }
    tree_paths.sort();
    let model_paths: Vec<String> = model.nodes.keys().cloned().collect();
    prop_assert_eq!(&tree_paths, &model_paths);
    for p in &model_paths {
        let (data, stat): (Bytes, Stat) = h.tree.get_data(p, &[]).unwrap();
        let got = (
            data.to_vec(),
            stat.version,
            stat.cversion,
            stat.num_children,
            stat.czxid,
            stat.mzxid,
            stat.pzxid,
        );
        prop_assert_eq!(got, model.expected_stat(p), "path {}", p);
    }
    prop_assert_eq!(h.tree.node_count(), model.nodes.len() + 1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tree_agrees_with_model(steps in proptest::collection::vec(arb_step(), 1..40)) {
        let mut h = Harness::new();
        let mut model = Model::new();
        for step in &steps {
            match step {
                Step::Single(seed) => {
                    let op = realize(seed, &model);
                    let expected = model.op(h.zxid + 1, &op);
                    let got = h.apply(op.to_txn()).outcome;
                    match expected {
                        Ok(()) => prop_assert!(!matches!(got, Outcome::Failed(_)), "{:?} -> {:?}", op, got),
                        Err(code) => prop_assert_eq!(got, Outcome::Failed(code), "{:?}", op),
                    }
                }
                Step::Multi(seeds) => {
                    let mut scratch = model.clone();
                    let mut ops = Vec::new();
                    let mut failed = None;
                    for (i, seed) in seeds.iter().enumerate() {
                        // Later ops are chosen against the model as the
                        // earlier ops left it, as a client would.
                        let op = realize(seed, &scratch);
                        if failed.is_none() {
                            if let Err(code) = scratch.op(h.zxid + 1, &op) {
                                failed = Some((i, code));
                            }
                        }
                        ops.push(op);
                    }
                    let got = h.apply(TxnOp::Multi(ops.iter().map(MOp::to_txn).collect())).outcome;
                    let Outcome::Multi(results) = got else {
                        return Err(TestCaseError::fail(format!("{got:?}")));
                    };
                    match failed {
                        None => {
                            prop_assert!(results.iter().all(Result::is_ok), "{:?}", results);
                            model = scratch;
                        }
                        Some((at, code)) => {
                            prop_assert_eq!(&results[at], &Err(code));
                            prop_assert!(results[..at].iter().all(|r| *r == Err(ErrorCode::Ok)));
                            prop_assert!(results[at + 1..]
                                .iter()
                                .all(|r| *r == Err(ErrorCode::RuntimeInconsistency)));
                        }
                    }
                }
                Step::Reconnect => {
                    h.apply(TxnOp::CloseSession);
                    model.close_session(h.zxid);
                    h.session(SESSION);
                }
            }
            assert_same(&h, &model)?;
        }
        // Whatever the history, a snapshot restores an equal tree.
        let mut buf = Vec::new();
        h.tree.write_snapshot(&mut buf).unwrap();
        let loaded = tree::DataTree::read_snapshot(&mut std::io::Cursor::new(buf)).unwrap();
        prop_assert_eq!(loaded, h.tree);
    }
}
