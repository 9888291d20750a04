//! Histories generated from a sequential execution of the znode model, so
//! linearizable by construction: each operation's interval is placed
//! around the point at which it took effect. Corrupting one read to a
//! value no operation wrote must make them not linearizable. And small
//! histories of any kind, on which the checker must agree with a brute
//! force search.

use std::collections::BTreeMap;
use std::time::Instant;

mod common;

use common::{Register, RegisterOp};
use history::checker::{self, Budget, Verdict};
use history::{
    Action, Completion, History, Model, Node, Op, OpId, Operation, Outcome, Ret, ZnodeModel,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Generated values stay below this, so it was never written.
const NEVER_WRITTEN: u64 = 1 << 40;

/// How a generated operation ends.
#[derive(Clone, Copy, Debug)]
enum Fate {
    Returned,
    /// Took effect, but the client learned nothing.
    Unknown,
    /// Took effect after the client gave up on it.
    Late,
    /// Took effect; still in flight when the history was taken.
    InFlight,
    /// Never took effect; the client learned nothing.
    Lost,
}

/// One operation of a generated execution.
#[derive(Clone, Debug)]
struct Step<O> {
    client: u32,
    op: O,
    /// When it took effect, if it did.
    effect_at: u64,
    invoked_at: u64,
    completed_at: u64,
    fate: Fate,
}

/// Runs `steps` in order of `effect_at` with `apply`, which returns what
/// an operation returned, skipping the lost ones; records the history.
fn execute<O, R>(mut steps: Vec<Step<O>>, mut apply: impl FnMut(&O) -> R) -> History<O, R> {
    steps.sort_by_key(|step| step.effect_at);
    let ops = steps
        .into_iter()
        .zip(0u64..)
        .map(|(step, id)| {
            let ret = (!matches!(step.fate, Fate::Lost)).then(|| apply(&step.op));
            let completed_at = match step.fate {
                Fate::Late => step.invoked_at + (step.effect_at - step.invoked_at) / 2,
                _ => step.completed_at,
            };
            let outcome = match (step.fate, ret) {
                (Fate::Returned, Some(ret)) => Outcome::Returned {
                    ret,
                    zxid: Some(i64::try_from(id).unwrap()),
                },
                _ => Outcome::Unknown,
            };
            Operation {
                id: OpId(id),
                client: step.client,
                op: step.op,
                invoked_at: step.invoked_at,
                completion: (!matches!(step.fate, Fate::InFlight)).then_some(Completion {
                    at: completed_at,
                    outcome,
                }),
            }
        })
        .collect();
    History::from_ops(ops).expect("generated histories are valid")
}

/// [`execute`] on znodes.
fn execute_on_znodes(steps: Vec<Step<Op>>) -> History {
    let mut nodes: BTreeMap<String, Option<Node>> = BTreeMap::new();
    execute(steps, |op| {
        let node = nodes.entry(op.path.clone()).or_default();
        let (next, ret) = op.action.apply(*node);
        *node = next;
        ret
    })
}

/// The `i`-th operation of a generated execution takes effect at
/// 1000 + 100 i, within an interval reaching `lead` before and `lag` after.
fn step<O>(i: u64, client: u32, op: O, (lead, lag): (u64, u64), fate: Fate) -> Step<O> {
    let effect_at = 1000 + 100 * i;
    Step {
        client,
        op,
        effect_at,
        invoked_at: effect_at - lead,
        completed_at: effect_at + lag,
        fate,
    }
}

/// Makes the first definite read of `history` return a value never
/// written; returns the read's id and path.
fn corrupt_a_read(history: &History) -> Option<(History, OpId, String)> {
    let mut ops = history.ops().to_vec();
    let read = ops
        .iter_mut()
        .find(|op| op.op.action == Action::Read && op.ret().is_some())?;
    let (id, path) = (read.id, read.op.path.clone());
    if let Some(Completion {
        outcome: Outcome::Returned { ret, .. },
        ..
    }) = &mut read.completion
    {
        *ret = Ret::Data {
            value: NEVER_WRITTEN,
            version: 0,
        };
    }
    Some((History::from_ops(ops).unwrap(), id, path))
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => Just(Action::Read),
        2 => (0..20u64).prop_map(Action::Write),
        2 => (-1..4i32, 0..20u64).prop_map(|(expected_version, value)| Action::Cas {
            expected_version,
            value
        }),
        2 => (0..20u64).prop_map(Action::Create),
        1 => Just(Action::Delete),
    ]
}

/// How operations end, with `returned` in 4 + `returned` ending well.
fn fate(returned: u32) -> impl Strategy<Value = Fate> {
    prop_oneof![
        returned => Just(Fate::Returned),
        1 => Just(Fate::Unknown),
        1 => Just(Fate::Late),
        1 => Just(Fate::InFlight),
        1 => Just(Fate::Lost),
    ]
}

/// Executions on up to three paths, intervals reaching up to 300 either
/// side of the point of effect, so up to about six operations overlap.
fn execution() -> impl Strategy<Value = History> {
    let step_ = (0..5u32, 0..3u8, action(), 0..300u64, 0..300u64, fate(16));
    prop::collection::vec(step_, 1..60).prop_map(|steps| {
        let steps = steps
            .into_iter()
            .zip(0..)
            .map(|((client, path, action, lead, lag, fate), i)| {
                let op = Op {
                    path: format!("/k{path}"),
                    action,
                };
                step(i, client, op, (lead, lag), fate)
            })
            .collect();
        execute_on_znodes(steps)
    })
}

proptest! {
    #[test]
    fn sequential_executions_are_linearizable(history in execution()) {
        let report = checker::check(&ZnodeModel, &history, &Budget::default());
        prop_assert!(matches!(report.verdict, Verdict::Linearizable), "{}", report);
    }

    #[test]
    fn a_read_of_a_value_never_written_is_caught(history in execution()) {
        let corrupted = corrupt_a_read(&history);
        prop_assume!(corrupted.is_some());
        let (corrupted, read, path) = corrupted.unwrap();
        let report = checker::check(&ZnodeModel, &corrupted, &Budget::default());
        let Verdict::NotLinearizable(counterexample) = report.verdict else {
            panic!("not caught: {report}");
        };
        prop_assert_eq!(&counterexample.key, &path);
        prop_assert!(counterexample.prefix.iter().all(|op| op.id != read));
        prop_assert!(counterexample.candidates.iter().any(|op| op.id == counterexample.stuck.id));
    }
}

/// What the fault-injection harness produces on one busy znode: `clients`
/// clients each issuing one operation at a time, unique values, compare-
/// and-sets that mostly expect the version they last saw, and 3% of
/// operations of unknown outcome, half of which took effect before the
/// client gave up and half never; with `late`, one in 400 more takes
/// effect only after its client gave up.
fn busy_znode(seed: u64, ops: usize, clients: u32, late: bool) -> History {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut free_at = vec![0u64; clients as usize];
    let mut steps = Vec::with_capacity(ops);
    for _ in 0..ops {
        let (client, start) = (0..clients)
            .map(|c| (c, free_at[c as usize]))
            .min_by_key(|&(_, at)| at)
            .unwrap();
        let invoked_at = start + rng.gen_range(0..50_000);
        let completed_at = invoked_at + rng.gen_range(100_000..2_000_000);
        free_at[client as usize] = completed_at;
        let (fate, effect_at) = match rng.gen_range(0..400) {
            0..=5 => (Fate::Unknown, rng.gen_range(invoked_at..=completed_at)),
            6..=11 => (Fate::Lost, completed_at),
            12 if late => (Fate::Late, completed_at + rng.gen_range(0..5_000_000)),
            _ => (Fate::Returned, rng.gen_range(invoked_at..=completed_at)),
        };
        let op = Op {
            path: "/busy".into(),
            action: Action::Read,
        };
        steps.push(Step {
            client,
            op,
            effect_at,
            invoked_at,
            completed_at,
            fate,
        });
    }
    // Choose each action knowing the state it will take effect in, as a
    // client that read before writing would.
    steps.sort_by_key(|step| step.effect_at);
    let mut node: Option<Node> = None;
    for (step, value) in steps.iter_mut().zip(0..) {
        step.op.action = match (node, rng.gen_range(0..100)) {
            (None, 0..=69) => Action::Create(value),
            (_, 0..=39) => Action::Read,
            (_, 40..=64) => Action::Write(value),
            (Some(n), 65..=79) => Action::Cas {
                expected_version: if rng.gen_bool(0.7) {
                    n.version
                } else {
                    n.version - 1
                },
                value,
            },
            (_, 80..=89) => Action::Create(value),
            _ => Action::Delete,
        };
        if !matches!(step.fate, Fate::Lost) {
            node = step.op.action.apply(node).0;
        }
    }
    execute_on_znodes(steps)
}

/// The performance target: each of these checks in well under a second
/// in release mode. Run with `--release --nocapture` to see the times.
#[test]
fn two_thousand_ops_from_ten_clients_on_one_znode() {
    for (seed, late) in [(0, false), (1, false), (2, true)] {
        let history = busy_znode(seed, 2_000, 10, late);
        let started = Instant::now();
        let report = checker::check(&ZnodeModel, &history, &Budget::default());
        eprintln!("seed {seed}: {report} in {:?}", started.elapsed());
        assert!(matches!(report.verdict, Verdict::Linearizable), "{report}");

        let (corrupted, _, _) = corrupt_a_read(&history).expect("there are reads");
        let report = checker::check(&ZnodeModel, &corrupted, &Budget::default());
        assert!(
            matches!(report.verdict, Verdict::NotLinearizable(_)),
            "{report}"
        );
    }
}

/// Whether some order of `history`'s operations, all on one key, explains
/// every definite return and respects real time, found by trying them
/// all. Operations of unknown outcome may be left out.
fn brute_force<M: Model>(model: &M, history: &History<M::Op, M::Ret>) -> bool {
    fn extend<M: Model>(
        model: &M,
        ops: &[Operation<M::Op, M::Ret>],
        used: &mut [bool],
        state: M::State,
    ) -> bool {
        let pending = |used: &[bool], i: usize| !used[i] && ops[i].returned_at().is_some();
        if !(0..ops.len()).any(|i| pending(used, i)) {
            return true;
        }
        for i in 0..ops.len() {
            let must_wait = (0..ops.len())
                .any(|j| pending(used, j) && ops[j].returned_at().unwrap() < ops[i].invoked_at);
            if used[i] || must_wait {
                continue;
            }
            let Some(next) = model.step(&state, &ops[i].op, ops[i].ret()) else {
                continue;
            };
            used[i] = true;
            if extend(model, ops, used, next) {
                return true;
            }
            used[i] = false;
        }
        false
    }
    let ops = history.ops();
    extend(model, ops, &mut vec![false; ops.len()], model.init())
}

/// Whether the checker's verdict on `history` is `expected`.
fn agrees<M: Model>(model: &M, history: &History<M::Op, M::Ret>) -> Result<(), TestCaseError> {
    let report = checker::check(model, history, &Budget::default());
    let linearizable = match report.verdict {
        Verdict::Linearizable => true,
        Verdict::NotLinearizable(_) => false,
        Verdict::Unknown { .. } => panic!("a tiny history exhausted the budget: {report}"),
    };
    prop_assert_eq!(linearizable, brute_force(model, history), "{}", report);
    Ok(())
}

/// Replaces the definite return of operation `at`, if it has one.
fn replace_return<O: Clone, R: Clone>(
    history: History<O, R>,
    at: prop::sample::Index,
    ret: R,
) -> History<O, R> {
    let mut ops = history.ops().to_vec();
    if let Some(Completion {
        outcome: Outcome::Returned { ret: old, .. },
        ..
    }) = &mut at.get_mut(&mut ops).completion
    {
        *old = ret;
    }
    History::from_ops(ops).unwrap()
}

/// Up to ten operations on one znode with values from a tiny range, so
/// that identical operations are common, a fifth of unknown outcome; half
/// of the histories have one return replaced by an arbitrary one.
fn small_znode_history() -> impl Strategy<Value = History> {
    let ret = prop_oneof![
        (0..3u64, 0..3i32).prop_map(|(value, version)| Ret::Data { value, version }),
        (0..3i32).prop_map(|version| Ret::Set { version }),
        Just(Ret::Done),
        Just(Ret::NoNode),
        Just(Ret::NodeExists),
        Just(Ret::BadVersion),
    ];
    let action = prop_oneof![
        Just(Action::Read),
        (0..3u64).prop_map(Action::Write),
        (-1..2i32, 0..3u64).prop_map(|(expected_version, value)| Action::Cas {
            expected_version,
            value
        }),
        (0..3u64).prop_map(Action::Create),
        Just(Action::Delete),
    ];
    let steps = prop::collection::vec((action, 0..300u64, 0..300u64, fate(4)), 1..11);
    (steps, any::<prop::sample::Index>(), prop::option::of(ret)).prop_map(|(steps, at, ret)| {
        let steps = steps
            .into_iter()
            .zip(0..)
            .map(|((action, lead, lag, fate), i)| {
                let op = Op {
                    path: "/k".into(),
                    action,
                };
                step(i, 0, op, (lead, lag), fate)
            })
            .collect();
        let history = execute_on_znodes(steps);
        match ret {
            Some(ret) => replace_return(history, at, ret),
            None => history,
        }
    })
}

/// The same for a plain register, whose writes, unlike setData, do not
/// tell their order by a version.
fn small_register_history() -> impl Strategy<Value = History<RegisterOp, Option<u8>>> {
    let op = prop_oneof![Just(RegisterOp::Read), (0..3u8).prop_map(RegisterOp::Write)];
    let steps = prop::collection::vec((op, 0..300u64, 0..300u64, fate(4)), 1..11);
    let seen = prop::option::of(0..3u8);
    (steps, any::<prop::sample::Index>(), prop::option::of(seen)).prop_map(|(steps, at, ret)| {
        let steps = steps
            .into_iter()
            .zip(0..)
            .map(|((op, lead, lag, fate), i)| step(i, 0, op, (lead, lag), fate))
            .collect();
        let mut value = 0;
        let history = execute(steps, |op| match op {
            RegisterOp::Read => Some(value),
            RegisterOp::Write(written) => {
                value = *written;
                None
            }
        });
        match ret {
            Some(ret) => replace_return(history, at, ret),
            None => history,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]

    #[test]
    fn agrees_with_brute_force_on_znodes(history in small_znode_history()) {
        agrees(&ZnodeModel, &history)?;
    }

    #[test]
    fn agrees_with_brute_force_on_a_register(history in small_register_history()) {
        agrees(&Register, &history)?;
    }
}
