//! Per-session guarantees: zxids never go backwards, replies come in
//! order.

use history::session::{self, Violation};
use history::{Action, Completion, History, Op, OpId, Operation, Outcome, Ret};

/// A read by `client` over `[from, to]` whose reply carried `zxid`.
fn read(id: u64, client: u32, (from, to): (u64, u64), zxid: Option<i64>) -> Operation {
    Operation {
        id: OpId(id),
        client,
        op: Op {
            path: "/k".into(),
            action: Action::Read,
        },
        invoked_at: from,
        completion: Some(Completion {
            at: to,
            outcome: Outcome::Returned {
                ret: Ret::NoNode,
                zxid,
            },
        }),
    }
}

fn unknown(op: Operation) -> Operation {
    let mut op = op;
    op.completion.as_mut().unwrap().outcome = Outcome::Unknown;
    op
}

fn ids(violation: &Violation<Op, Ret>) -> (u32, OpId, OpId) {
    match violation {
        Violation::ZxidWentBackwards {
            client,
            earlier,
            later,
        }
        | Violation::Overtaken {
            client,
            earlier,
            later,
        } => (*client, earlier.id, later.id),
    }
}

#[test]
fn monotonic_sessions_pass() {
    let history = History::from_ops(vec![
        read(0, 1, (0, 10), Some(5)),
        read(1, 1, (20, 30), Some(5)),
        read(2, 1, (40, 50), Some(9)),
        // Another session may be behind this one.
        read(3, 2, (45, 55), Some(3)),
        // Zxids are optional; unknown outcomes carry none.
        read(4, 1, (60, 70), None),
        unknown(read(5, 1, (80, 90), Some(1))),
        read(6, 1, (100, 110), Some(9)),
    ])
    .unwrap();
    assert_eq!(session::check(&history), []);
}

#[test]
fn zxid_going_backwards_is_reported() {
    let history = History::from_ops(vec![
        read(0, 1, (0, 10), Some(5)),
        read(1, 1, (20, 30), Some(8)),
        read(2, 1, (40, 50), Some(6)),
        read(3, 1, (60, 70), Some(7)),
        read(4, 1, (80, 90), Some(8)),
    ])
    .unwrap();
    let violations = session::check(&history);
    let found: Vec<_> = violations.iter().map(ids).collect();
    assert_eq!(found, [(1, OpId(1), OpId(2)), (1, OpId(1), OpId(3))]);
    assert!(matches!(violations[0], Violation::ZxidWentBackwards { .. }));
    let shown = violations[0].to_string();
    assert!(
        shown.contains("zxid go backwards") && shown.contains("#2"),
        "{shown}"
    );
}

#[test]
fn reply_overtaking_an_earlier_request_is_reported() {
    // Pipelined: #1 sent after #0 but answered first.
    let history = History::from_ops(vec![
        read(0, 1, (0, 50), Some(5)),
        read(1, 1, (10, 40), Some(5)),
        read(2, 1, (20, 60), Some(5)),
        // Gave up: no reply to order.
        unknown(read(3, 1, (30, 35), None)),
    ])
    .unwrap();
    let violations = session::check(&history);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(matches!(violations[0], Violation::Overtaken { .. }));
    assert_eq!(ids(&violations[0]), (1, OpId(0), OpId(1)));
}
