//! Recording from many threads at once.

use std::sync::Arc;
use std::thread;

use history::{Action, Op, OpId, Outcome, Recorder, Ret};

fn read() -> Op {
    Op {
        path: "/k".into(),
        action: Action::Read,
    }
}

#[test]
fn concurrent_clients_get_distinct_ids_and_ordered_stamps() {
    let recorder = Arc::new(Recorder::new());
    let threads: Vec<_> = (0..8)
        .map(|client| {
            let recorder = Arc::clone(&recorder);
            thread::spawn(move || {
                for _ in 0..100 {
                    let id = recorder.invoke(client, read());
                    recorder.complete(
                        id,
                        Outcome::Returned {
                            ret: Ret::NoNode,
                            zxid: None,
                        },
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let history = recorder.finish();
    let ops = history.ops();
    assert_eq!(ops.len(), 800);
    let mut ids: Vec<OpId> = ops.iter().map(|op| op.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 800);
    for op in ops {
        assert!(op.returned_at().unwrap() >= op.invoked_at);
    }
    // Ids follow invocation times.
    assert!(ops.windows(2).all(|w| w[0].id < w[1].id));
}

#[test]
fn finish_is_a_snapshot_with_ops_in_flight_unknown() {
    let recorder = Recorder::new();
    let done = recorder.invoke(1, read());
    let in_flight = recorder.invoke(2, read());
    recorder.complete(
        done,
        Outcome::Returned {
            ret: Ret::NoNode,
            zxid: Some(3),
        },
    );
    let before = recorder.finish();
    assert_eq!(before.ops()[1].completion, None);
    assert_eq!(before.ops()[1].ret(), None);
    assert_eq!(before.ops()[0].zxid(), Some(3));

    recorder.complete(in_flight, Outcome::Unknown);
    let after = recorder.finish();
    assert_eq!(after.ops()[1].ret(), None);
    assert!(after.ops()[1].completion.is_some());
}

#[test]
#[should_panic(expected = "completed twice")]
fn completing_twice_is_a_harness_bug() {
    let recorder = Recorder::new();
    let id = recorder.invoke(1, read());
    recorder.complete(id, Outcome::Unknown);
    recorder.complete(id, Outcome::Unknown);
}

#[test]
#[should_panic(expected = "not invoked")]
fn completing_an_id_never_handed_out_is_a_harness_bug() {
    let recorder = Recorder::new();
    recorder.complete(OpId(0), Outcome::Unknown);
}
