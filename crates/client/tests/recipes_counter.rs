//! The shared counter and the watched value against real servers.

#[macro_use]
mod common;

use std::time::Duration;

use client::recipes::{ConfigValue, Counter, ValueChanges};
use client::{Bytes, ConnectOptions, CreateMode, Error, SessionState};
use common::{join_all, Proxy, Server};

// In a module so that `cargo test recipes` selects them.
mod recipes {
    use super::*;
    on_every_server!(counter_sums_concurrent_adds_exactly, counter_on);
    on_every_server!(config_value_reports_every_change, config_on);
}

async fn counter_on(server: &mut Server) {
    const ADDERS: usize = 4;
    const ADDS: usize = 10;
    let path = "/counters/hits";
    let observer = server.client().await;
    let counter = Counter::new(&observer, path);
    assert_eq!(counter.get().await.unwrap(), 0, "a missing counter is 0");

    let mut adders = Vec::new();
    for _ in 0..ADDERS {
        let c = server.client().await;
        adders.push(async move {
            let counter = Counter::new(&c, path);
            let mut seen = Vec::new();
            for _ in 0..ADDS {
                seen.push(counter.add(1).await.unwrap());
            }
            c.close().await;
            seen
        });
    }
    let mut seen: Vec<i64> = join_all(adders).await.into_iter().flatten().collect();
    seen.sort();
    let total = (ADDERS * ADDS) as i64;
    // Every add applied to the value it read: each result exactly once.
    assert_eq!(seen, (1..=total).collect::<Vec<_>>());
    assert_eq!(counter.get().await.unwrap(), total);

    assert_eq!(counter.add(-total - 5).await.unwrap(), -5);
    counter.set(7).await.unwrap();
    assert_eq!(counter.get().await.unwrap(), 7);
    assert_eq!(
        observer.get_data(path).await.unwrap().0.as_deref().unwrap(),
        b"7"
    );
    assert!(matches!(
        counter.add(i64::MAX).await.unwrap_err(),
        Error::InvalidArgument { .. }
    ));
    observer
        .create("/counters/text", b"seven", CreateMode::Persistent)
        .await
        .unwrap();
    assert!(matches!(
        Counter::new(&observer, "/counters/text").get().await,
        Err(Error::InvalidArgument { .. })
    ));
}

async fn next_value(changes: &mut ValueChanges) -> Option<Bytes> {
    tokio::time::timeout(Duration::from_secs(10), changes.next())
        .await
        .expect("a change in time")
        .unwrap()
}

async fn config_on(server: &mut Server) {
    let path = "/config/app/limit";
    // The follower reaches the server through a proxy, to be cut off.
    let proxy = Proxy::start(server.port).await;
    let follower = server
        .client_with(&proxy.connect_string(), ConnectOptions::new())
        .await;
    let writer = server.client().await;
    let ours = ConfigValue::new(&writer, path);
    let theirs = ConfigValue::new(&follower, path);
    let mut changes = theirs.changes();
    assert_eq!(next_value(&mut changes).await, None);
    assert_eq!(theirs.get().await.unwrap(), None);

    for value in ["v1", "v2", "v3", "v4", "v4"] {
        ours.set(value.as_bytes()).await.unwrap();
        assert_eq!(
            next_value(&mut changes).await.as_deref(),
            Some(value.as_bytes()),
            "a write of the same bytes is a change too"
        );
    }
    ours.delete().await.unwrap();
    assert_eq!(next_value(&mut changes).await, None);
    ours.set(b"v5").await.unwrap();
    assert_eq!(next_value(&mut changes).await.as_deref(), Some(&b"v5"[..]));

    // A change made while the follower is disconnected reaches it when it
    // is back.
    let mut states = follower.state_changes();
    proxy.cut();
    assert_eq!(states.next().await, Some(SessionState::Disconnected));
    ours.set(b"v6").await.unwrap();
    proxy.restore();
    assert_eq!(next_value(&mut changes).await.as_deref(), Some(&b"v6"[..]));
    assert_eq!(theirs.get().await.unwrap().as_deref(), Some(&b"v6"[..]));
    let quiet = tokio::time::timeout(Duration::from_millis(300), changes.next()).await;
    assert!(quiet.is_err(), "no change, no report: {quiet:?}");
}
