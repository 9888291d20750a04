//! SASL DIGEST-MD5 logins against real servers whose users come from a
//! JAAS `Server` section: the identity on the session and in ACLs, the
//! login again after a reconnect, and the refusals that end a client.

mod common;

use std::time::Duration;

use client::{
    perms, Acl, Client, ConnectOptions, CreateMode, CreateOptions, Error, Id, SessionState,
};
use common::{bounded, kinds, Server, SESSION_TIMEOUT};

const JAAS: &str = r#"
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_alice="secret"
    user_bob="hunter2";
};
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_login_survives_a_restart() {
    for kind in kinds() {
        eprintln!("--- on {kind:?}");
        let mut server = Server::start_with_jaas(kind, Some(JAAS));
        bounded(Duration::from_secs(120), login_on(&mut server)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_refusals_end_the_client() {
    for kind in kinds() {
        eprintln!("--- on {kind:?}");
        let with_users = Server::start_with_jaas(kind, Some(JAAS));
        let without = Server::start(kind);
        bounded(Duration::from_secs(60), refusals_on(&with_users, &without)).await;
    }
}

fn alice() -> ConnectOptions {
    ConnectOptions::new().sasl_digest_md5("alice", "secret")
}

async fn login_on(server: &mut Server) {
    let a = server.client_with(&server.connect_string(), alice()).await;
    let ids: Vec<(String, String)> = a
        .who_am_i()
        .await
        .unwrap()
        .into_iter()
        .map(|info| (info.auth_scheme, info.user))
        .collect();
    assert!(
        ids.contains(&("sasl".into(), "alice".into())),
        "identities: {ids:?}"
    );
    let alice_only = vec![Acl {
        perms: perms::ALL,
        id: Id::new("sasl", "alice"),
    }];
    a.create(
        "/alice",
        b"mine",
        CreateOptions::new(CreateMode::Persistent).acl(alice_only),
    )
    .await
    .unwrap();

    let anonymous = server.client().await;
    assert_eq!(
        anonymous.get_data("/alice").await.unwrap_err(),
        Error::NoAuth {
            path: "/alice".into()
        }
    );
    let bob = server
        .client_with(
            &server.connect_string(),
            ConnectOptions::new().sasl_digest_md5("bob", "hunter2"),
        )
        .await;
    assert!(matches!(
        bob.get_data("/alice").await,
        Err(Error::NoAuth { .. })
    ));
    anonymous.close().await;
    bob.close().await;

    // After a restart the session comes back on a new connection, which
    // logs in again before anything else: alice is still alice.
    let mut states = a.state_changes();
    server.restart(Duration::from_millis(200)).await;
    loop {
        let state = tokio::time::timeout(SESSION_TIMEOUT, states.next())
            .await
            .expect("the client reconnects")
            .expect("the state stream is open");
        if state == SessionState::Connected {
            break;
        }
    }
    let (data, _) = a.get_data("/alice").await.unwrap();
    assert_eq!(data.as_deref(), Some(&b"mine"[..]));
    a.close().await;
}

async fn refusals_on(with_users: &Server, without: &Server) {
    let connect = |server: &Server, options: ConnectOptions| {
        let connect_string = server.connect_string();
        async move {
            Client::connect(
                &connect_string,
                options
                    .session_timeout(SESSION_TIMEOUT)
                    .connect_timeout(Duration::from_secs(20)),
            )
            .await
        }
    };
    for (user, password) in [("alice", "wrong"), ("nobody", "x")] {
        let refused = connect(
            with_users,
            ConnectOptions::new().sasl_digest_md5(user, password),
        )
        .await
        .unwrap_err();
        let Error::SaslFailed { reason, .. } = &refused else {
            panic!("{user}: expected SaslFailed, got {refused:?}");
        };
        assert!(reason.contains("refused"), "{user}: {refused}");
        assert_eq!(refused.code(), Some(client::ErrorCode::AuthFailed));
    }
    let no_sasl = connect(without, alice()).await.unwrap_err();
    assert!(
        matches!(&no_sasl, Error::SaslFailed { reason, .. } if reason.contains("offers no SASL")),
        "{no_sasl:?}"
    );
}
