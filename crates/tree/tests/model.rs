//! Random step sequences, each checked against the reference model in the
//! `tree-model` crate: outcomes, watch triggers, paths, data, ACLs and
//! every stat field (including the derived cversion, numChildren and
//! pzxid) after every step, and a snapshot round trip at the end. The
//! `tree_ops` fuzz target drives the same checker with fuzzer input.

use proptest::prelude::*;
use tree::TxnOp;
use tree_model::{Checker, Command, OpSeed, PathSeed, Step, SESSIONS};

fn arb_path() -> impl Strategy<Value = PathSeed> {
    prop_oneof![
        6 => any::<u16>().prop_map(PathSeed::Existing),
        2 => any::<(u16, u8)>().prop_map(|(i, c)| PathSeed::Child(i, c)),
        3 => (
            proptest::bool::weighted(0.95),
            proptest::collection::vec(any::<u8>(), 1..4),
        )
            .prop_map(|(absolute, components)| PathSeed::Fresh {
                absolute,
                components,
            }),
        1 => any::<u8>().prop_map(PathSeed::Special),
    ]
}

fn arb_op() -> impl Strategy<Value = OpSeed> {
    (
        arb_path(),
        proptest::option::weighted(0.8, proptest::collection::vec(any::<u8>(), 0..4)),
        any::<[u8; 5]>(),
    )
        .prop_map(|(path, data, [kind, version, mode, ttl, acl])| OpSeed {
            kind,
            path,
            version,
            data,
            mode,
            ttl,
            acl,
        })
}

/// Sessions are opened twice as often as closed, so that most writes come
/// from a live one.
fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => (any::<u8>(), arb_op()).prop_map(|(session, op)| Step::Write { session, op }),
        3 => (any::<u8>(), proptest::collection::vec(arb_op(), 1..5))
            .prop_map(|(session, ops)| Step::Multi { session, ops }),
        2 => arb_path().prop_map(|path| Step::Read { path }),
        2 => any::<(u8, u16)>()
            .prop_map(|(session, timeout_ms)| Step::OpenSession { session, timeout_ms }),
        1 => any::<u8>().prop_map(|session| Step::CloseSession { session }),
        1 => any::<u16>().prop_map(|ms| Step::Sleep { ms }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tree_agrees_with_model(steps in proptest::collection::vec(arb_step(), 1..40)) {
        let mut checker = Checker::new();
        for step in &steps {
            checker.step(step).map_err(TestCaseError::fail)?;
        }
        checker.check_snapshot().map_err(TestCaseError::fail)?;
    }
}

/// Where a run takes snapshots: after the step at each index (modulo the
/// run's length), a delta, or a new base when the flag is set.
fn arb_cuts() -> impl Strategy<Value = Vec<(u8, bool)>> {
    proptest::collection::vec((any::<u8>(), proptest::bool::weighted(0.2)), 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever the history, the last base and the deltas after it load
    /// as the tree, and fold into a whole snapshot that does: no change
    /// is left out of a delta, and none undone. Some bases are themselves
    /// folded from the base and deltas before them.
    #[test]
    fn a_base_and_its_deltas_load_as_the_tree(
        steps in proptest::collection::vec(arb_step(), 1..60),
        cuts in arb_cuts(),
    ) {
        let mut checker = Checker::new();
        let mut base = checker.take_base();
        let mut deltas = Vec::new();
        for (at, step) in steps.iter().enumerate() {
            checker.step(step).map_err(TestCaseError::fail)?;
            for (cut, new_base) in cuts.iter().filter(|(cut, _)| usize::from(*cut) % steps.len() == at) {
                if *new_base && cut % 2 == 0 {
                    // As a server folds: a delta, then the chain whole.
                    deltas.push(checker.take_delta());
                    base = checker.fold(&base, &deltas).map_err(TestCaseError::fail)?;
                    deltas.clear();
                } else if *new_base {
                    base = checker.take_base();
                    deltas.clear();
                } else {
                    deltas.push(checker.take_delta());
                }
            }
        }
        deltas.push(checker.take_delta());
        checker.check_loads_from(&base, &deltas).map_err(TestCaseError::fail)?;
    }
}

/// Runs fixed commands through the checker, panicking on a disagreement.
fn replay(commands: Vec<Command>) {
    let mut checker = Checker::new();
    for command in commands {
        checker.run(command).unwrap_or_else(|e| panic!("{e}"));
    }
    checker.check_snapshot().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn closing_a_session_deletes_its_ephemerals() {
    let create = TxnOp::Create {
        path: "/a".into(),
        data: None,
        acl: jute::Acl::open_unsafe(),
        mode: jute::CreateMode::Ephemeral,
        ttl_ms: -1,
    };
    replay(vec![
        Command::Write {
            session: SESSIONS[0],
            op: create,
        },
        Command::Write {
            session: SESSIONS[0],
            op: TxnOp::CloseSession,
        },
    ]);
}
