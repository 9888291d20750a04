//! The JSON lines form of a history: a saved run reads back as it was.

use history::{Action, History, HistoryError, Op, OpId, Outcome, Recorder, Ret};

fn op(path: &str, action: Action) -> Op {
    Op {
        path: path.into(),
        action,
    }
}

/// A history with every kind of operation and outcome.
fn recorded() -> History {
    let recorder = Recorder::new();
    let actions = [
        Action::Create(1),
        Action::Read,
        Action::Write(2),
        Action::Cas {
            expected_version: 1,
            value: 3,
        },
        Action::Delete,
    ];
    let rets = [
        Ret::Done,
        Ret::Data {
            value: 1,
            version: 0,
        },
        Ret::Set { version: 1 },
        Ret::BadVersion,
        Ret::NoNode,
    ];
    for (i, (action, ret)) in actions.into_iter().zip(rets).enumerate() {
        let id = recorder.invoke(u32::try_from(i).unwrap(), op("/a", action));
        let zxid = (i % 2 == 0).then_some(i64::try_from(i).unwrap() << 32);
        recorder.complete(id, Outcome::Returned { ret, zxid });
    }
    let unknown = recorder.invoke(7, op("/b", Action::Write(4)));
    recorder.invoke(8, op("/b", Action::Create(5)));
    recorder.complete(unknown, Outcome::Unknown);
    recorder.invoke(9, op("/b", Action::Read));
    recorder.finish()
}

fn to_text(history: &History) -> String {
    let mut out = Vec::new();
    history.write_jsonl(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn round_trip() {
    let history = recorded();
    let text = to_text(&history);
    let read = History::read_jsonl(text.as_bytes()).unwrap();
    assert_eq!(read, history);
    assert_eq!(to_text(&read), text);
}

#[test]
fn one_event_per_line_in_time_order() {
    let history = recorded();
    let text = to_text(&history);
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // 8 invocations, 6 completions (two operations are still in flight).
    assert_eq!(events.len(), 14);
    let times: Vec<u64> = events.iter().map(|e| e["at"].as_u64().unwrap()).collect();
    assert!(times.is_sorted(), "{times:?}");
    assert_eq!(events[0]["event"], "invoke");
    assert_eq!(events[0]["op"]["action"]["create"], 1);
    let unknown = events
        .iter()
        .find(|e| e["event"] == "complete" && e["outcome"] == "unknown");
    assert!(unknown.is_some(), "{text}");
}

#[test]
fn blank_lines_and_any_order_are_accepted() {
    let history = recorded();
    let text = to_text(&history);
    let mut lines: Vec<&str> = text.lines().collect();
    lines.reverse();
    let shuffled = lines.join("\n\n");
    assert_eq!(History::read_jsonl(shuffled.as_bytes()).unwrap(), history);
}

#[test]
fn malformed_files_are_rejected() {
    let invoke =
        r#"{"event":"invoke","id":0,"client":1,"at":5,"op":{"path":"/a","action":"read"}}"#;
    let complete = r#"{"event":"complete","id":0,"at":9,"outcome":{"returned":{"ret":"no_node","zxid":null}}}"#;
    let early = r#"{"event":"complete","id":0,"at":1,"outcome":"unknown"}"#;
    let read = |lines: &[&str]| History::<Op, Ret>::read_jsonl(lines.join("\n").as_bytes());

    assert!(read(&[invoke, complete]).is_ok());
    assert!(matches!(
        read(&[complete]),
        Err(HistoryError::CompletionWithoutInvocation(OpId(0)))
    ));
    assert!(matches!(
        read(&[invoke, complete, complete]),
        Err(HistoryError::DuplicateCompletion(OpId(0)))
    ));
    assert!(matches!(
        read(&[invoke, invoke]),
        Err(HistoryError::DuplicateId(OpId(0)))
    ));
    assert!(matches!(
        read(&[invoke, early]),
        Err(HistoryError::CompletedBeforeInvoked(OpId(0)))
    ));
    assert!(matches!(
        read(&[invoke, "{not json"]),
        Err(HistoryError::Json { line: 2, .. })
    ));
}
