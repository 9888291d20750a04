//! Multi: all or nothing, ops see each other, ZooKeeper's failure results.

mod common;

use common::*;
use jute::{CreateMode, ErrorCode, EventType};
use tree::{Outcome, TxnOp};

#[test]
fn ops_see_earlier_ops_and_share_zxid_and_time() {
    // PrepRequestProcessor multi (pending change records), DataTree.processTxn
    let mut h = Harness::new();
    let applied = h.apply(TxnOp::Multi(vec![
        create("/m", "p", CreateMode::Persistent),
        create("/m/s-", "", CreateMode::PersistentSequential),
        create("/m/s-", "", CreateMode::PersistentSequential),
        set_data("/m", "pp", 0),
        check("/m", 1),
        delete("/m/s-0000000000", 0),
    ]));
    let Outcome::Multi(results) = &applied.outcome else {
        panic!("{:?}", applied.outcome)
    };
    assert_eq!(applied.outcome.reply_err(), ErrorCode::Ok);
    assert_eq!(applied.outcome.multi_error(), None);
    let zxid = h.zxid;
    match &results[..] {
        [Ok(Outcome::Created { path: p0, stat: s0 }), Ok(Outcome::Created { path: p1, .. }), Ok(Outcome::Created { path: p2, .. }), Ok(Outcome::SetData { stat }), Ok(Outcome::Checked), Ok(Outcome::Deleted)] =>
        {
            assert_eq!(p0, "/m");
            assert_eq!((s0.czxid, s0.ctime), (zxid, h.time_ms));
            assert_eq!(p1, "/m/s-0000000000");
            assert_eq!(p2, "/m/s-0000000001");
            // The stat after this op, inside the multi.
            assert_eq!((stat.version, stat.num_children, stat.mzxid), (1, 2, zxid));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        events(&applied),
        vec![
            ("/m".into(), EventType::NodeCreated),
            ("/".into(), EventType::NodeChildrenChanged),
            ("/m/s-0000000000".into(), EventType::NodeCreated),
            ("/m".into(), EventType::NodeChildrenChanged),
            ("/m/s-0000000001".into(), EventType::NodeCreated),
            ("/m".into(), EventType::NodeChildrenChanged),
            ("/m".into(), EventType::NodeDataChanged),
            ("/m/s-0000000000".into(), EventType::NodeDeleted),
            ("/m".into(), EventType::NodeChildrenChanged),
        ]
    );
    assert_eq!(
        h.tree.get_children("/m", &[]).unwrap().0,
        vec!["s-0000000001"]
    );
}

#[test]
fn failure_applies_nothing_and_reports_like_zookeeper() {
    // DataTree.processTxn multi: OK before, the error, then
    // RUNTIMEINCONSISTENCY; FinalRequestProcessor leaves the header err 0
    let mut h = Harness::new();
    h.mk("/a", "");
    let before = h.tree.clone();
    let applied = h.apply(TxnOp::Multi(vec![
        create("/a/x", "", CreateMode::Persistent),
        set_data("/a", "new", -1),
        delete("/a/missing", -1),
        create("/a/y", "", CreateMode::Persistent),
        check("/a", 7),
    ]));
    assert_eq!(
        applied.outcome,
        Outcome::Multi(vec![
            Err(ErrorCode::Ok),
            Err(ErrorCode::Ok),
            Err(ErrorCode::NoNode),
            Err(ErrorCode::RuntimeInconsistency),
            Err(ErrorCode::RuntimeInconsistency),
        ])
    );
    assert_eq!(applied.outcome.reply_err(), ErrorCode::Ok);
    assert_eq!(applied.outcome.multi_error(), Some(ErrorCode::NoNode));
    assert!(applied.triggers.is_empty());
    assert_eq!(h.tree, before, "nothing applied");
    // Sequence numbers are untouched by the rolled-back creates.
    let out = h.apply(create("/a/s-", "", CreateMode::PersistentSequential));
    assert!(matches!(out.outcome, Outcome::Created { ref path, .. } if path == "/a/s-0000000000"));
}

/// An op the server refused before proposing (a TTL create with extended
/// types off, say) fails the multi at that op, as the `ErrorTxn` ZooKeeper's
/// prep stage logs in its place does.
#[test]
fn an_op_refused_before_proposing_fails_the_multi_at_its_place() {
    let mut h = Harness::new();
    let before = h.tree.clone();
    let applied = h.apply(TxnOp::Multi(vec![
        create("/a", "", CreateMode::Persistent),
        TxnOp::Error {
            code: ErrorCode::Unimplemented,
        },
        create("/b", "", CreateMode::Persistent),
    ]));
    assert_eq!(
        applied.outcome,
        Outcome::Multi(vec![
            Err(ErrorCode::Ok),
            Err(ErrorCode::Unimplemented),
            Err(ErrorCode::RuntimeInconsistency),
        ])
    );
    assert_eq!(h.tree, before, "nothing applied");
}

#[test]
fn failure_on_first_and_last_op() {
    let mut h = Harness::new();
    let out = h.apply(TxnOp::Multi(vec![
        check("/nope", -1),
        create("/b", "", CreateMode::Persistent),
    ]));
    assert_eq!(
        out.outcome,
        Outcome::Multi(vec![
            Err(ErrorCode::NoNode),
            Err(ErrorCode::RuntimeInconsistency)
        ])
    );
    let out = h.apply(TxnOp::Multi(vec![
        create("/b", "", CreateMode::Persistent),
        create("/b", "", CreateMode::Persistent),
    ]));
    assert_eq!(
        out.outcome,
        Outcome::Multi(vec![Err(ErrorCode::Ok), Err(ErrorCode::NodeExists)])
    );
    assert!(h.tree.exists("/b").is_none());
}

#[test]
fn empty_and_malformed_multis() {
    let mut h = Harness::new();
    assert_eq!(
        h.apply(TxnOp::Multi(vec![])).outcome,
        Outcome::Multi(vec![])
    );
    for bad in [
        TxnOp::CloseSession,
        TxnOp::Multi(vec![]),
        set_acl("/", jute::Acl::open_unsafe(), -1),
        TxnOp::Reap { path: "/x".into() },
    ] {
        let out = h.apply(TxnOp::Multi(vec![
            create("/z", "", CreateMode::Persistent),
            bad,
        ]));
        assert_eq!(out.outcome, Outcome::Failed(ErrorCode::MarshallingError));
        assert_eq!(out.outcome.reply_err(), ErrorCode::MarshallingError);
    }
    assert!(h.tree.exists("/z").is_none());
}

#[test]
fn ephemeral_in_multi_is_closed_with_session() {
    let mut h = Harness::new();
    let out = h.apply(TxnOp::Multi(vec![
        create("/e", "", CreateMode::Ephemeral),
        create("/p", "", CreateMode::Persistent),
    ]));
    assert!(matches!(out.outcome, Outcome::Multi(ref r) if r.iter().all(Result::is_ok)));
    assert_eq!(h.tree.get_ephemerals(SESSION, ""), vec!["/e"]);
    h.apply(TxnOp::CloseSession);
    assert!(h.tree.exists("/e").is_none());
    assert!(h.tree.exists("/p").is_some());
}
