//! Watches against real servers: one-shot watches as futures, persistent
//! and recursive watches as streams, removal and checks.

#[macro_use]
mod common;

use std::time::Duration;

use client::{CreateMode, Error, EventType, KeeperState, WatchStream, WatchedEvent, WatcherType};
use common::{Kind, Server};

const LIMIT: Duration = Duration::from_secs(60);

on_every_server!(one_shot_watches, one_shot_on, LIMIT);
on_every_server!(persistent_watches, persistent_on, LIMIT);
on_every_server!(removing_and_checking_watches, remove_on, LIMIT);

fn is(event: &WatchedEvent, event_type: EventType, path: &str) -> bool {
    event.event_type == event_type
        && event.path == path
        && event.state == KeeperState::SyncConnected
}

/// The next event, which must come soon.
async fn next(stream: &mut WatchStream) -> WatchedEvent {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10 s")
        .expect("the stream is still open")
}

/// No event arrives within a short while (after a round trip that would
/// have carried one).
async fn quiet(stream: &mut WatchStream) {
    let extra = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(extra.is_err(), "unexpected event {extra:?}");
}

async fn one_shot_on(server: &mut Server) {
    let c = server.client().await;
    let other = server.client().await;
    c.create("/w", b"0", CreateMode::Persistent).await.unwrap();

    // Data watch: fires on a change by another session...
    let (data, stat, watch) = c.get_data_watched("/w").await.unwrap();
    assert_eq!((data.as_deref(), stat.version), (Some(&b"0"[..]), 0));
    let (_, _, second) = c.get_data_watched("/w").await.unwrap();
    other.set_data("/w", b"1", None).await.unwrap();
    let event = watch.await.unwrap();
    assert!(is(&event, EventType::NodeDataChanged, "/w"), "{event:?}");
    assert!(event.zxid == -1 || event.zxid > 0);
    // ...to every local watcher of the path...
    assert!(is(&second.await.unwrap(), EventType::NodeDataChanged, "/w"));
    // ...and the event comes before the data that follows the change.
    assert_eq!(c.get_data("/w").await.unwrap().0.as_deref().unwrap(), b"1");

    // Exists watch on a missing node fires on creation.
    let (stat, created) = c.exists_watched("/w/new").await.unwrap();
    assert_eq!(stat, None);
    // Child watch fires when a child appears.
    let (children, _, child_watch) = c.get_children_watched("/w").await.unwrap();
    assert!(children.is_empty());
    other
        .create("/w/new", b"", CreateMode::Persistent)
        .await
        .unwrap();
    assert!(is(
        &created.await.unwrap(),
        EventType::NodeCreated,
        "/w/new"
    ));
    assert!(is(
        &child_watch.await.unwrap(),
        EventType::NodeChildrenChanged,
        "/w"
    ));

    // Exists watch on an existing node fires on deletion; the session's own
    // changes fire its watches too.
    let (stat, deleted) = c.exists_watched("/w/new").await.unwrap();
    assert!(stat.is_some());
    c.delete("/w/new", None).await.unwrap();
    assert!(is(
        &deleted.await.unwrap(),
        EventType::NodeDeleted,
        "/w/new"
    ));

    // A failed read leaves no watch and returns the error.
    assert_eq!(
        c.get_data_watched("/absent").await.unwrap_err(),
        Error::NoNode {
            path: "/absent".into()
        }
    );

    // A watch pending when the session closes resolves with the reason.
    let (_, _, orphan) = c.get_data_watched("/w").await.unwrap();
    c.close().await;
    assert_eq!(orphan.await.unwrap_err(), Error::Closed);
}

async fn persistent_on(server: &mut Server) {
    let c = server.client().await;
    let other = server.client().await;
    // The recursive watch comes from its own session: ZooKeeper before 3.9
    // keeps one watch mode per path and session, the last one added.
    let c2 = server.client().await;
    c.create("/pw", b"", CreateMode::Persistent).await.unwrap();
    let mut node = c.watch_persistent("/pw", false).await.unwrap();
    let mut tree = c2.watch_persistent("/pw", true).await.unwrap();

    other
        .create("/pw/a", b"", CreateMode::Persistent)
        .await
        .unwrap();
    other.set_data("/pw", b"x", None).await.unwrap();
    other.set_data("/pw/a", b"y", None).await.unwrap();
    other
        .create("/pw/a/deep", b"", CreateMode::Persistent)
        .await
        .unwrap();
    other.delete("/pw/a/deep", None).await.unwrap();
    other.delete("/pw/a", None).await.unwrap();

    // A persistent watch sees its node's events, in order, and keeps
    // firing (unlike a one-shot watch).
    let e = next(&mut node).await;
    assert!(is(&e, EventType::NodeChildrenChanged, "/pw"), "{e:?}");
    let e = next(&mut node).await;
    assert!(is(&e, EventType::NodeDataChanged, "/pw"), "{e:?}");
    let e = next(&mut node).await;
    assert!(is(&e, EventType::NodeChildrenChanged, "/pw"), "{e:?}");

    // A recursive one sees every node below, without children-changed.
    let expected = [
        (EventType::NodeCreated, "/pw/a"),
        (EventType::NodeDataChanged, "/pw"),
        (EventType::NodeDataChanged, "/pw/a"),
        (EventType::NodeCreated, "/pw/a/deep"),
        (EventType::NodeDeleted, "/pw/a/deep"),
        (EventType::NodeDeleted, "/pw/a"),
    ];
    for (event_type, path) in expected {
        let e = next(&mut tree).await;
        assert!(
            is(&e, event_type, path),
            "expected {event_type:?} {path}, got {e:?}"
        );
    }
    c.sync("/").await.unwrap();
    c2.sync("/").await.unwrap();
    quiet(&mut node).await;
    quiet(&mut tree).await;

    // Two streams on the same path each get every event.
    let mut twin = c.watch_persistent("/pw", false).await.unwrap();
    other.set_data("/pw", b"z", None).await.unwrap();
    assert!(is(
        &next(&mut node).await,
        EventType::NodeDataChanged,
        "/pw"
    ));
    assert!(is(
        &next(&mut twin).await,
        EventType::NodeDataChanged,
        "/pw"
    ));
    assert!(is(
        &next(&mut tree).await,
        EventType::NodeDataChanged,
        "/pw"
    ));

    // Streams end with the session.
    c.close().await;
    c2.close().await;
    assert_eq!(node.next().await, None);
    assert_eq!(tree.next().await, None);
}

async fn remove_on(server: &mut Server) {
    let c = server.client().await;
    let other = server.client().await;
    c.create("/r", b"", CreateMode::Persistent).await.unwrap();

    let (_, _, data_watch) = c.get_data_watched("/r").await.unwrap();
    let (_, _, child_watch) = c.get_children_watched("/r").await.unwrap();
    c.check_watches("/r", WatcherType::Data).await.unwrap();
    c.check_watches("/r", WatcherType::Children).await.unwrap();
    c.remove_watches("/r", WatcherType::Data).await.unwrap();
    let removed = data_watch.await.unwrap();
    assert!(
        is(&removed, EventType::DataWatchRemoved, "/r"),
        "{removed:?}"
    );
    assert!(matches!(
        c.check_watches("/r", WatcherType::Data).await.unwrap_err(),
        Error::NoWatcher { .. }
    ));
    // The child watch is untouched.
    other
        .create("/r/c", b"", CreateMode::Persistent)
        .await
        .unwrap();
    assert!(is(
        &child_watch.await.unwrap(),
        EventType::NodeChildrenChanged,
        "/r"
    ));

    c.create("/rr", b"", CreateMode::Persistent).await.unwrap();
    let mut stream = c.watch_persistent("/r", false).await.unwrap();
    let mut recursive = c.watch_persistent("/rr", true).await.unwrap();
    match c.check_watches("/r", WatcherType::Persistent).await {
        Err(Error::MarshallingError { .. }) if server.kind == Kind::ZooKeeper => {
            eprintln!(
                "note: this ZooKeeper predates the persistent watcher types of \
                 checkWatches/removeWatches (3.9); removing with Any instead"
            );
            for (path, watch) in [("/r", &mut stream), ("/rr", &mut recursive)] {
                c.remove_watches(path, WatcherType::Any).await.unwrap();
                assert!(is(
                    &next(watch).await,
                    EventType::PersistentWatchRemoved,
                    path
                ));
                assert_eq!(watch.next().await, None);
            }
            return;
        }
        other => other.unwrap(),
    }
    c.check_watches("/rr", WatcherType::PersistentRecursive)
        .await
        .unwrap();
    // A persistent watch is not a recursive one, and the other way round.
    assert!(matches!(
        c.check_watches("/r", WatcherType::PersistentRecursive)
            .await
            .unwrap_err(),
        Error::NoWatcher { .. }
    ));
    c.remove_watches("/r", WatcherType::Persistent)
        .await
        .unwrap();
    assert!(is(
        &next(&mut stream).await,
        EventType::PersistentWatchRemoved,
        "/r"
    ));
    assert_eq!(stream.next().await, None);
    other.set_data("/r/c", b"1", None).await.unwrap();
    other
        .create("/rr/c", b"", CreateMode::Persistent)
        .await
        .unwrap();
    assert!(is(
        &next(&mut recursive).await,
        EventType::NodeCreated,
        "/rr/c"
    ));
    c.remove_watches("/rr", WatcherType::Any).await.unwrap();
    assert!(is(
        &next(&mut recursive).await,
        EventType::PersistentWatchRemoved,
        "/rr"
    ));
    assert_eq!(recursive.next().await, None);
    assert!(matches!(
        c.remove_watches("/rr", WatcherType::Any).await.unwrap_err(),
        Error::NoWatcher { .. }
    ));
}
