//! Hand-written histories with a known answer, on the znode model and on
//! a plain register, and the budget.

use std::time::Duration;

mod common;

use common::{Register, RegisterOp};
use history::checker::{self, Budget, Exhausted, Verdict};
use history::{
    Action, Completion, History, Node, Op, OpId, Operation, Outcome, Recorder, Ret, ZnodeModel,
};

/// An operation on `/k` that returned `ret` over `[from, to]`.
fn done(client: u32, (from, to): (u64, u64), action: Action, ret: Ret) -> Operation {
    Operation {
        id: OpId(0),
        client,
        op: Op {
            path: "/k".into(),
            action,
        },
        invoked_at: from,
        completion: Some(Completion {
            at: to,
            outcome: Outcome::Returned { ret, zxid: None },
        }),
    }
}

/// An operation on `/k` invoked at `from` whose outcome is unknown.
fn unknown(client: u32, from: u64, action: Action) -> Operation {
    Operation {
        completion: Some(Completion {
            at: from + 1_000,
            outcome: Outcome::Unknown,
        }),
        ..done(client, (from, from), action, Ret::Done)
    }
}

/// The same operation on another path.
fn on(path: &str, op: Operation) -> Operation {
    Operation {
        op: Op {
            path: path.into(),
            ..op.op
        },
        ..op
    }
}

/// A history of `ops`, numbered in the order given.
fn history(ops: Vec<Operation>) -> History {
    let ops = ops
        .into_iter()
        .zip(0..)
        .map(|(op, id)| Operation { id: OpId(id), ..op })
        .collect();
    History::from_ops(ops).expect("a valid history")
}

fn verdict(ops: Vec<Operation>) -> Verdict<ZnodeModel> {
    checker::check(&ZnodeModel, &history(ops), &Budget::default()).verdict
}

fn assert_linearizable(ops: Vec<Operation>) {
    let report = checker::check(&ZnodeModel, &history(ops), &Budget::default());
    assert!(
        matches!(report.verdict, Verdict::Linearizable),
        "expected linearizable, got {report}"
    );
}

fn assert_not_linearizable(ops: Vec<Operation>) {
    let report = checker::check(&ZnodeModel, &history(ops), &Budget::default());
    assert!(
        matches!(report.verdict, Verdict::NotLinearizable(_)),
        "expected not linearizable, got {report}"
    );
}

fn data(value: u64, version: i32) -> Ret {
    Ret::Data { value, version }
}

fn set(version: i32) -> Ret {
    Ret::Set { version }
}

/// `/k` created with value 0 over [0, 10].
fn created() -> Operation {
    done(1, (0, 10), Action::Create(0), Ret::Done)
}

#[test]
fn sequential_session_is_linearizable() {
    assert_linearizable(vec![
        done(1, (0, 10), Action::Read, Ret::NoNode),
        done(1, (20, 30), Action::Create(1), Ret::Done),
        done(1, (40, 50), Action::Write(2), set(1)),
        done(
            1,
            (60, 70),
            Action::Cas {
                expected_version: 1,
                value: 3,
            },
            set(2),
        ),
        done(
            1,
            (80, 90),
            Action::Cas {
                expected_version: 1,
                value: 4,
            },
            Ret::BadVersion,
        ),
        done(
            1,
            (100, 110),
            Action::Cas {
                expected_version: -1,
                value: 5,
            },
            set(3),
        ),
        done(1, (120, 130), Action::Read, data(5, 3)),
        done(1, (140, 150), Action::Create(6), Ret::NodeExists),
        done(1, (160, 170), Action::Delete, Ret::Done),
        done(1, (180, 190), Action::Delete, Ret::NoNode),
        done(1, (200, 210), Action::Write(7), Ret::NoNode),
        done(1, (220, 230), Action::Create(8), Ret::Done),
        done(1, (240, 250), Action::Read, data(8, 0)),
    ]);
}

#[test]
fn stale_read_after_completed_write() {
    let ops = vec![
        created(),
        done(1, (20, 30), Action::Write(1), set(1)),
        done(2, (40, 50), Action::Read, data(0, 0)),
    ];
    let Verdict::NotLinearizable(counterexample) = verdict(ops) else {
        panic!("a stale read must not be linearizable");
    };
    assert_eq!(counterexample.key, "/k");
    let prefix: Vec<OpId> = counterexample.prefix.iter().map(|op| op.id).collect();
    assert_eq!(prefix, [OpId(0), OpId(1)]);
    assert_eq!(
        counterexample.state,
        Some(Node {
            value: 1,
            version: 1
        })
    );
    assert_eq!(counterexample.stuck.id, OpId(2));
    let candidates: Vec<OpId> = counterexample.candidates.iter().map(|op| op.id).collect();
    assert_eq!(candidates, [OpId(2)]);
    let shown = counterexample.to_string();
    assert!(
        shown.starts_with("key \"/k\" is not linearizable"),
        "{shown}"
    );
    assert!(
        shown.contains("state after it: Some(Node { value: 1, version: 1 })"),
        "{shown}"
    );
}

#[test]
fn read_concurrent_with_write_may_see_either_value() {
    for seen in [data(0, 0), data(1, 1)] {
        assert_linearizable(vec![
            created(),
            done(1, (20, 50), Action::Write(1), set(1)),
            done(2, (30, 40), Action::Read, seen),
        ]);
    }
}

#[test]
fn lost_acknowledged_write() {
    // Both writes were acknowledged as version 1: one of them was lost.
    assert_not_linearizable(vec![
        created(),
        done(1, (20, 30), Action::Write(1), set(1)),
        done(2, (40, 50), Action::Write(2), set(1)),
        done(1, (60, 70), Action::Read, data(2, 1)),
    ]);
}

#[test]
fn two_cas_with_the_same_expected_version_both_succeeding() {
    assert_not_linearizable(vec![
        created(),
        done(
            1,
            (20, 40),
            Action::Cas {
                expected_version: 0,
                value: 1,
            },
            set(1),
        ),
        done(
            2,
            (25, 45),
            Action::Cas {
                expected_version: 0,
                value: 2,
            },
            set(1),
        ),
    ]);
}

#[test]
fn concurrent_cas_with_the_same_expected_version_one_failing() {
    assert_linearizable(vec![
        created(),
        done(
            1,
            (20, 40),
            Action::Cas {
                expected_version: 0,
                value: 1,
            },
            Ret::BadVersion,
        ),
        done(
            2,
            (25, 45),
            Action::Cas {
                expected_version: 0,
                value: 2,
            },
            set(1),
        ),
    ]);
}

#[test]
fn read_of_a_value_never_written() {
    assert_not_linearizable(vec![
        created(),
        done(1, (20, 30), Action::Write(1), set(1)),
        done(2, (15, 40), Action::Read, data(9, 1)),
    ]);
}

#[test]
fn create_succeeding_twice_without_delete() {
    assert_not_linearizable(vec![
        done(1, (0, 10), Action::Create(1), Ret::Done),
        done(2, (20, 30), Action::Create(2), Ret::Done),
    ]);
    // Concurrency does not excuse it.
    assert_not_linearizable(vec![
        done(1, (0, 30), Action::Create(1), Ret::Done),
        done(2, (10, 20), Action::Create(2), Ret::Done),
    ]);
}

#[test]
fn create_delete_create_is_linearizable() {
    assert_linearizable(vec![
        done(1, (0, 10), Action::Create(1), Ret::Done),
        done(2, (5, 30), Action::Delete, Ret::Done),
        done(3, (20, 40), Action::Create(2), Ret::Done),
        done(1, (50, 60), Action::Read, data(2, 0)),
    ]);
}

#[test]
fn concurrent_writes_may_be_ordered_either_way() {
    // Client 1's write took effect second in one history, first in the
    // other; the later read and the returned versions agree either way.
    for (first, second, read) in [(set(2), set(1), data(1, 2)), (set(1), set(2), data(2, 2))] {
        assert_linearizable(vec![
            created(),
            done(1, (20, 40), Action::Write(1), first),
            done(2, (25, 45), Action::Write(2), second),
            done(3, (50, 60), Action::Read, read),
        ]);
    }
}

#[test]
fn unknown_write_whose_value_is_later_read() {
    assert_linearizable(vec![
        created(),
        unknown(1, 20, Action::Write(5)),
        done(2, (100, 110), Action::Read, data(5, 1)),
    ]);
}

#[test]
fn write_never_completed_whose_value_is_later_read() {
    let in_flight = Operation {
        completion: None,
        ..unknown(1, 20, Action::Write(5))
    };
    assert_linearizable(vec![
        created(),
        in_flight,
        done(2, (100, 110), Action::Read, data(5, 1)),
    ]);
}

#[test]
fn unknown_write_never_observed() {
    assert_linearizable(vec![
        created(),
        unknown(1, 20, Action::Write(5)),
        done(2, (100, 110), Action::Read, data(0, 0)),
        done(2, (120, 130), Action::Write(6), set(1)),
        done(2, (140, 150), Action::Read, data(6, 1)),
    ]);
}

#[test]
fn unknown_write_cannot_take_effect_before_its_invocation() {
    assert_not_linearizable(vec![
        created(),
        done(2, (20, 30), Action::Read, data(5, 1)),
        unknown(1, 40, Action::Write(5)),
    ]);
}

#[test]
fn unknown_write_observed_late_after_unobserved_ones() {
    // Thirty unknown writes that never happened are pending when a read
    // needs the thirty-first: the search must not try subsets of them.
    let mut ops = vec![created()];
    ops.extend(
        (0..30).map(|i| unknown(1 + i, 20 + u64::from(i), Action::Write(100 + u64::from(i)))),
    );
    ops.push(unknown(99, 60, Action::Write(7)));
    ops.push(done(2, (100, 110), Action::Read, data(7, 1)));
    ops.push(done(
        2,
        (120, 130),
        Action::Cas {
            expected_version: 1,
            value: 8,
        },
        set(2),
    ));
    let report = checker::check(&ZnodeModel, &history(ops), &Budget::default());
    assert!(matches!(report.verdict, Verdict::Linearizable), "{report}");
    assert!(report.steps < 10_000, "{} steps", report.steps);
}

#[test]
fn a_run_of_unknown_writes_observed_together() {
    // The read sees three unknown writes, in an order other than their
    // invocations', among unknown writes that never happened.
    let mut ops = vec![created()];
    ops.extend((0..10).map(|i| unknown(10 + i, 15, Action::Write(100 + u64::from(i)))));
    ops.extend([
        unknown(1, 20, Action::Write(1)),
        unknown(2, 21, Action::Write(2)),
        unknown(3, 22, Action::Write(3)),
        done(4, (100, 110), Action::Read, data(1, 3)),
    ]);
    assert_linearizable(ops);
}

#[test]
fn unknown_read_and_failed_cas_need_not_be_placed() {
    assert_linearizable(vec![
        created(),
        unknown(1, 20, Action::Read),
        unknown(
            2,
            20,
            Action::Cas {
                expected_version: 7,
                value: 9,
            },
        ),
        done(3, (30, 40), Action::Read, data(0, 0)),
    ]);
}

#[test]
fn keys_are_checked_separately_and_the_bad_one_is_named() {
    let history = history(vec![
        on("/a", created()),
        on("/b", created()),
        on("/a", done(1, (20, 30), Action::Write(1), set(1))),
        on("/b", done(2, (20, 30), Action::Write(1), set(1))),
        on("/a", done(3, (40, 50), Action::Read, data(1, 1))),
        on("/b", done(3, (40, 50), Action::Read, data(0, 0))),
    ]);
    let report = checker::check(&ZnodeModel, &history, &Budget::default());
    assert_eq!((report.ops, report.keys), (6, 2));
    let Verdict::NotLinearizable(counterexample) = report.verdict else {
        panic!("/b has a stale read");
    };
    assert_eq!(counterexample.key, "/b");
    assert!(counterexample.prefix.iter().all(|op| op.op.path == "/b"));
}

#[test]
fn generic_checker_on_a_plain_register() {
    let recorder = Recorder::default();
    let write = recorder.invoke(1, RegisterOp::Write(1));
    let read = recorder.invoke(2, RegisterOp::Read);
    recorder.complete(
        read,
        Outcome::Returned {
            ret: Some(0),
            zxid: None,
        },
    );
    recorder.complete(
        write,
        Outcome::Returned {
            ret: None,
            zxid: None,
        },
    );
    let concurrent = recorder.finish();
    let report = checker::check(&Register, &concurrent, &Budget::default());
    assert!(matches!(report.verdict, Verdict::Linearizable), "{report}");

    let stale = recorder.invoke(2, RegisterOp::Read);
    recorder.complete(
        stale,
        Outcome::Returned {
            ret: Some(0),
            zxid: None,
        },
    );
    let report = checker::check(&Register, &recorder.finish(), &Budget::default());
    assert!(
        matches!(report.verdict, Verdict::NotLinearizable(_)),
        "{report}"
    );
}

/// Ten concurrent writes, then a read of a value none wrote: refuting
/// it means trying the writes' orders.
fn expensive_refutation() -> History<RegisterOp, Option<u8>> {
    let ops = (0..10)
        .map(|i| (RegisterOp::Write(i + 1), (10, 100), None))
        .chain([(RegisterOp::Read, (200, 210), Some(99))])
        .zip(0..)
        .map(|((op, (from, to), ret), id)| Operation {
            id: OpId(id),
            client: u32::try_from(id).unwrap(),
            op,
            invoked_at: from,
            completion: Some(Completion {
                at: to,
                outcome: Outcome::Returned { ret, zxid: None },
            }),
        })
        .collect();
    History::from_ops(ops).unwrap()
}

#[test]
fn budget_exhausted_is_reported_as_unknown() {
    let history = expensive_refutation();

    let steps = Budget {
        max_steps: 50,
        timeout: None,
    };
    let report = checker::check(&Register, &history, &steps);
    assert!(
        matches!(
            report.verdict,
            Verdict::Unknown {
                reason: Exhausted::Steps,
                ..
            }
        ),
        "{report}"
    );
    assert_eq!(report.steps, 50);

    let deadline = Budget {
        max_steps: u64::MAX,
        timeout: Some(Duration::ZERO),
    };
    let report = checker::check(&Register, &history, &deadline);
    assert!(
        matches!(
            report.verdict,
            Verdict::Unknown {
                reason: Exhausted::Deadline,
                ..
            }
        ),
        "{report}"
    );

    let report = checker::check(&Register, &history, &Budget::default());
    assert!(
        matches!(report.verdict, Verdict::NotLinearizable(_)),
        "{report}"
    );
    assert!(report.steps > 50);
}

/// `/k` created, then a write of 5 whose client gave up at 30 but which
/// took effect only between two later reads.
fn write_taking_effect_after_its_client_gave_up() -> Vec<Operation> {
    let mut write = unknown(1, 20, Action::Write(5));
    write.completion.as_mut().unwrap().at = 30;
    vec![
        created(),
        write,
        done(2, (100, 110), Action::Read, data(0, 0)),
        done(2, (200, 210), Action::Read, data(5, 1)),
    ]
}

#[test]
fn unknown_write_taking_effect_after_its_client_gave_up() {
    assert_linearizable(write_taking_effect_after_its_client_gave_up());
}

#[test]
fn budget_exhausted_after_the_timely_search_reports_its_counterexample() {
    // A read of a value never written, after the late write: the search
    // assuming unknown operations took effect before their clients gave
    // up refutes first, then the search without that assumption does.
    let mut ops = write_taking_effect_after_its_client_gave_up();
    ops.push(done(3, (300, 310), Action::Read, data(9, 1)));
    let history = history(ops);
    let full = checker::check(&ZnodeModel, &history, &Budget::default());
    assert!(
        matches!(full.verdict, Verdict::NotLinearizable(_)),
        "{full}"
    );

    let with_timely = (1..full.steps).find_map(|max_steps| {
        let budget = Budget {
            max_steps,
            timeout: None,
        };
        match checker::check(&ZnodeModel, &history, &budget).verdict {
            Verdict::Unknown {
                timely: Some(counterexample),
                ..
            } => Some(counterexample),
            _ => None,
        }
    });
    let counterexample = with_timely.expect("some budget ends between the two searches");
    // Without the late write, the read of 5 cannot be explained.
    assert_eq!(counterexample.stuck.id, OpId(3));
    let prefix: Vec<OpId> = counterexample.prefix.iter().map(|op| op.id).collect();
    assert_eq!(prefix, [OpId(0), OpId(2)]);
}
