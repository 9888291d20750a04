//! Session life against real servers: connecting, reconnecting after the
//! server restarts (same session, ephemerals, credentials and watches
//! kept) or past one that never answers, requests in flight failing with
//! ConnectionLoss, expiry, close.

mod common;

use std::time::Duration;

use client::{
    perms, Acl, Client, ConnectOptions, CreateMode, CreateOptions, Error, EventType, Id,
    SessionState, StateStream,
};
use common::{bounded, kinds, Proxy, Server};

macro_rules! on_every_server {
    ($name:ident, $body:ident, $limit:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            for kind in kinds() {
                eprintln!("--- {} on {kind:?}", stringify!($name));
                let mut server = Server::start(kind);
                bounded($limit, $body(&mut server)).await;
            }
        }
    };
}

on_every_server!(
    reconnect_after_restart,
    reconnect_on,
    Duration::from_secs(120)
);
on_every_server!(session_expiry, expiry_on, Duration::from_secs(90));
on_every_server!(
    a_server_that_never_answers_does_not_cost_the_session,
    never_answered_on,
    Duration::from_secs(60)
);
on_every_server!(
    missed_changes_fire_after_reconnect,
    missed_changes_on,
    Duration::from_secs(60)
);
on_every_server!(close_and_drop, close_on, Duration::from_secs(60));
on_every_server!(connecting, connecting_on, Duration::from_secs(60));

async fn next_state(states: &mut StateStream) -> SessionState {
    tokio::time::timeout(Duration::from_secs(30), states.next())
        .await
        .expect("a state change within 30 s")
        .expect("the state stream is open")
}

/// The client connects again with session `session_id`, which still owns
/// the ephemeral at `path`.
async fn taken_back(a: &Client, states: &mut StateStream, session_id: i64, path: &str) {
    assert_eq!(next_state(states).await, SessionState::Connected);
    assert_eq!(a.session_id(), session_id, "the same session");
    let ephemeral = a
        .exists(path)
        .await
        .unwrap()
        .expect("the ephemeral survives");
    assert_eq!(ephemeral.ephemeral_owner, session_id);
}

async fn reconnect_on(server: &mut Server) {
    let a = server
        .client_with(
            &server.connect_string(),
            ConnectOptions::new().digest("alice", "secret"),
        )
        .await;
    let session_id = a.session_id();
    let creator_only = vec![Acl {
        perms: perms::ALL,
        id: Id::new("auth", ""),
    }];
    a.create(
        "/secret",
        b"s",
        CreateOptions::new(CreateMode::Persistent).acl(creator_only),
    )
    .await
    .unwrap();
    a.create("/eph", b"", CreateMode::Ephemeral).await.unwrap();
    a.create("/w", b"0", CreateMode::Persistent).await.unwrap();
    a.create("/tree", b"", CreateMode::Persistent)
        .await
        .unwrap();
    let (_, _, data_watch) = a.get_data_watched("/w").await.unwrap();
    let (_, missing_watch) = a.exists_watched("/later").await.unwrap();
    let mut tree = a.watch_persistent("/tree", true).await.unwrap();
    let mut states = a.state_changes();

    // A request the server has received but will never answer: freeze the
    // server, send, then kill it.
    server.pause();
    let in_flight = {
        let a = a.clone();
        tokio::spawn(async move { a.get_data("/w").await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    if in_flight.is_finished() {
        panic!("finished early: {:?}", in_flight.await);
    }
    server.kill();
    assert_eq!(
        in_flight.await.unwrap().unwrap_err(),
        Error::ConnectionLoss { path: "/w".into() }
    );
    assert_eq!(next_state(&mut states).await, SessionState::Disconnected);
    // While disconnected, calls fail fast rather than hang.
    assert!(matches!(
        a.exists("/w").await.unwrap_err(),
        Error::ConnectionLoss { .. }
    ));

    server.restart(Duration::from_millis(200)).await;
    taken_back(&a, &mut states, session_id, "/eph").await;
    // Credentials were replayed on the new connection.
    assert_eq!(
        a.get_data("/secret").await.unwrap().0.as_deref().unwrap(),
        b"s"
    );

    // Watches were re-registered: changes after the reconnect fire them.
    let b = server.client().await;
    b.set_data("/w", b"1", None).await.unwrap();
    let e = data_watch.await.unwrap();
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeDataChanged, "/w")
    );
    b.create("/later", b"", CreateMode::Persistent)
        .await
        .unwrap();
    let e = missing_watch.await.unwrap();
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeCreated, "/later")
    );
    b.create("/tree/x", b"", CreateMode::Persistent)
        .await
        .unwrap();
    let e = tokio::time::timeout(Duration::from_secs(10), tree.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeCreated, "/tree/x")
    );
    assert_eq!(a.state(), SessionState::Connected);
}

async fn missed_changes_on(server: &mut Server) {
    // Cut off from a live server, the client misses changes; setWatches2
    // with the last zxid it saw makes the server fire those watches as
    // soon as the client is back.
    let proxy = Proxy::start(server.port).await;
    let a = server
        .client_with(&proxy.connect_string(), ConnectOptions::new())
        .await;
    a.create("/m", b"0", CreateMode::Persistent).await.unwrap();
    let (_, _, data_watch) = a.get_data_watched("/m").await.unwrap();
    let (_, _, child_watch) = a.get_children_watched("/m").await.unwrap();
    let (_, exist_watch) = a.exists_watched("/m/new").await.unwrap();
    let mut states = a.state_changes();

    proxy.cut();
    assert_eq!(next_state(&mut states).await, SessionState::Disconnected);
    let b = server.client().await;
    b.set_data("/m", b"1", None).await.unwrap();
    b.create("/m/new", b"", CreateMode::Persistent)
        .await
        .unwrap();
    proxy.restore();
    assert_eq!(next_state(&mut states).await, SessionState::Connected);

    let e = data_watch.await.unwrap();
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeDataChanged, "/m")
    );
    let e = child_watch.await.unwrap();
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeChildrenChanged, "/m")
    );
    let e = exist_watch.await.unwrap();
    assert_eq!(
        (e.event_type, e.path.as_str()),
        (EventType::NodeCreated, "/m/new")
    );
    assert_eq!(a.get_data("/m").await.unwrap().0.as_deref().unwrap(), b"1");
}

async fn never_answered_on(server: &mut Server) {
    // An attempt to reconnect reaches something that takes the connection
    // and never answers; the next attempt must come while the session
    // lives (10 s), not once that one has waited the whole timeout out.
    let proxy = Proxy::start(server.port).await;
    let a = server
        .client_with(&proxy.connect_string(), ConnectOptions::new())
        .await;
    let session_id = a.session_id();
    a.create("/held", b"", CreateMode::Ephemeral).await.unwrap();
    let mut states = a.state_changes();

    proxy.stall();
    assert_eq!(next_state(&mut states).await, SessionState::Disconnected);
    // The attempts of the first round are under way, and unanswered.
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.restore();
    taken_back(&a, &mut states, session_id, "/held").await;
}

async fn expiry_on(server: &mut Server) {
    // The client reaches the server through a proxy the test can cut, with
    // a short session timeout: cut for longer than the timeout, the server
    // expires the session; restored, the client learns it on reconnecting.
    let proxy = Proxy::start(server.port).await;
    let a = Client::connect(
        &proxy.connect_string(),
        ConnectOptions::new().session_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    assert_eq!(a.session_timeout(), Duration::from_secs(1));
    a.create("/eph", b"", CreateMode::Ephemeral).await.unwrap();
    a.create("/w", b"", CreateMode::Persistent).await.unwrap();
    let (_, _, watch) = a.get_data_watched("/w").await.unwrap();
    let mut stream = a.watch_persistent("/w", false).await.unwrap();
    let mut states = a.state_changes();

    proxy.cut();
    assert_eq!(next_state(&mut states).await, SessionState::Disconnected);
    let observer = server.client().await;
    let mut expired = false;
    for _ in 0..200 {
        if observer.exists("/eph").await.unwrap().is_none() {
            expired = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        expired,
        "the server expires a session it does not hear from"
    );
    assert_eq!(
        a.state(),
        SessionState::Disconnected,
        "only the server can say"
    );
    proxy.restore();

    assert_eq!(next_state(&mut states).await, SessionState::Expired);
    assert_eq!(a.state(), SessionState::Expired);
    assert_eq!(states.next().await, None, "expiry is final");
    assert_eq!(
        a.get_data("/w").await.unwrap_err(),
        Error::SessionExpired { path: "/w".into() }
    );
    assert!(matches!(
        watch.await.unwrap_err(),
        Error::SessionExpired { .. }
    ));
    assert_eq!(stream.next().await, None);

    // Resuming the dead session is refused the same way.
    let err = Client::connect(
        &server.connect_string(),
        ConnectOptions::new().resume_session(a.session_id(), a.session_password()),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::SessionExpired { .. }), "{err}");
}

async fn close_on(server: &mut Server) {
    let observer = server.client().await;

    let a = server.client().await;
    a.create("/closed", b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    let mut states = a.state_changes();
    a.close().await;
    assert_eq!(next_state(&mut states).await, SessionState::Closed);
    assert_eq!(states.next().await, None);
    assert_eq!(observer.exists("/closed").await.unwrap(), None);
    assert_eq!(a.get_data("/").await.unwrap_err(), Error::Closed);
    a.close().await; // a second close is harmless

    // Dropping the last handle closes the session too.
    let b = server.client().await;
    let b2 = b.clone();
    b.create("/dropped", b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    drop(b);
    assert!(
        observer.exists("/dropped").await.unwrap().is_some(),
        "a clone still holds it"
    );
    drop(b2);
    let mut gone = false;
    for _ in 0..100 {
        if observer.exists("/dropped").await.unwrap().is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "dropping every handle closes the session");
}

async fn connecting_on(server: &mut Server) {
    // A dead server in the list is skipped.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let both = format!("127.0.0.1:{dead_port},{}", server.connect_string());
    for _ in 0..3 {
        let c = server.client_with(&both, ConnectOptions::new()).await;
        c.exists("/").await.unwrap();
        c.close().await;
    }
    // Pings keep an idle session alive well past its timeout.
    let idle = Client::connect(
        &server.connect_string(),
        ConnectOptions::new().session_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    idle.create("/idle", b"", CreateMode::Ephemeral)
        .await
        .unwrap();
    let mut states = idle.state_changes();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let quiet = tokio::time::timeout(Duration::ZERO, states.next()).await;
    assert!(quiet.is_err(), "no state change while idle: {quiet:?}");
    assert!(idle.exists("/idle").await.unwrap().is_some());
    idle.close().await;

    // The server grants a timeout within its bounds (max 10 s here).
    let c = Client::connect(
        &server.connect_string(),
        ConnectOptions::new().session_timeout(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    assert_eq!(c.session_timeout(), Duration::from_secs(10));
    c.close().await;

    let err = Client::connect(
        &format!("127.0.0.1:{dead_port}"),
        ConnectOptions::new().connect_timeout(Duration::from_millis(500)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::ConnectTimeout { .. }), "{err}");
    let err = Client::connect("127.0.0.1:1/bad/", ConnectOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConnectString { .. }), "{err}");
}
