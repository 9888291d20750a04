//! Operations against real servers: CRUD and `Stat`, errors, node kinds,
//! multi, pipelining, chroot, auth and ACLs. Each test runs on every
//! available server kind (see `common`).

#[macro_use]
mod common;

use std::time::Duration;

use client::{
    perms, Acl, ClientInfo, ConnectOptions, CreateMode, CreateOptions, Error, Id, Op, OpResult,
    ReadOp, ReadResult, SessionState, WatcherType,
};
use common::{join_all, Kind, Server};

const LIMIT: Duration = Duration::from_secs(90);

on_every_server!(crud_and_stat, crud_and_stat_on, LIMIT);
on_every_server!(errors_are_typed, errors_on, LIMIT);
on_every_server!(sequential_ephemeral_container_ttl, node_kinds_on, LIMIT);
on_every_server!(multi_and_multi_read, multi_on, LIMIT);
on_every_server!(pipelining, pipelining_on, LIMIT);
on_every_server!(chroot, chroot_on, LIMIT);
on_every_server!(digest_auth_and_acl, auth_on, LIMIT);
on_every_server!(null_data_is_not_empty, null_data_on, LIMIT);
on_every_server!(children_page_by_page, children_pages_on, LIMIT);

/// Paddock's paginated listing walks every child once, in byte order, with
/// pages bounded by count and by bytes, while getChildren still answers
/// them all in one reply; ZooKeeper does not know the request.
async fn children_pages_on(server: &mut Server) {
    let c = server.client().await;
    c.create("/big", b"", CreateMode::Persistent).await.unwrap();
    if server.kind == Kind::ZooKeeper {
        let refused = c.get_children_page("/big", "", 10).await;
        assert!(
            matches!(refused, Err(Error::Unimplemented { .. })),
            "{refused:?}"
        );
        return;
    }
    // 200-byte names: 3,000 of them are about 600 KiB, more than the
    // server puts in one page whatever the count asked for.
    let names: Vec<String> = (0..3000)
        .map(|i| format!("{i:05}-{}", "x".repeat(194)))
        .collect();
    let creates = names
        .iter()
        .map(|name| c.create(&format!("/big/{name}"), b"", CreateMode::Persistent))
        .collect();
    for created in join_all(creates).await {
        created.unwrap();
    }
    for max_children in [700, i32::MAX] {
        let mut listed = Vec::new();
        let mut after = String::new();
        let mut pages = 0;
        loop {
            let page = c
                .get_children_page("/big", &after, max_children)
                .await
                .unwrap();
            assert_eq!(page.stat.num_children, 3000);
            assert!(page.children.len() <= max_children as usize);
            pages += 1;
            listed.extend(page.children.iter().cloned());
            if !page.more {
                break;
            }
            after = page.children.last().unwrap().clone();
        }
        assert_eq!(listed, names, "every child once, in order");
        assert!(pages >= 3, "{max_children} a page: {pages} pages");
    }
    let all = c.get_children("/big").await.unwrap();
    assert_eq!(all.len(), 3000, "getChildren answers in one reply");
    assert!(matches!(
        c.get_children_page("/big", "", 0).await,
        Err(Error::BadArguments { .. })
    ));
    assert!(matches!(
        c.get_children_page("/none", "", 5).await,
        Err(Error::NoNode { .. })
    ));
}

/// ZooKeeper stores null data as null (dataLength 0) and answers it as
/// null, apart from empty data, through every path that carries data.
async fn null_data_on(server: &mut Server) {
    let c = server.client().await;
    let (_, created) = c.create("/n", None, CreateMode::Persistent).await.unwrap();
    assert_eq!(created.data_length, 0);
    c.create("/e", b"", CreateMode::Persistent).await.unwrap();
    assert_eq!(c.get_data("/n").await.unwrap().0, None);
    assert_eq!(c.get_data("/e").await.unwrap().0.as_deref(), Some(&b""[..]));

    c.set_data("/e", None, None).await.unwrap();
    c.set_data("/n", b"", None).await.unwrap();
    let (data, stat) = c.get_data("/e").await.unwrap();
    assert_eq!((data, stat.version, stat.data_length), (None, 1, 0));
    assert_eq!(c.get_data("/n").await.unwrap().0.as_deref(), Some(&b""[..]));

    c.multi([
        Op::create("/m", None, CreateMode::Persistent),
        Op::set_data("/n", None, None),
    ])
    .await
    .unwrap();
    let reads = c
        .multi_read([ReadOp::GetData("/m".into()), ReadOp::GetData("/e".into())])
        .await
        .unwrap();
    for read in reads {
        assert!(
            matches!(read, Ok(ReadResult::Data { data: None, .. })),
            "{read:?}"
        );
    }
    assert_eq!(c.get_data("/n").await.unwrap().0, None);
}

async fn crud_and_stat_on(server: &mut Server) {
    let c = server.client().await;
    assert_eq!(c.state(), SessionState::Connected);
    assert_ne!(c.session_id(), 0);

    let (path, created) = c
        .create("/a", b"hello", CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(path, "/a");
    assert_eq!(created.version, 0);
    assert_eq!(created.data_length, 5);
    assert_eq!(created.num_children, 0);
    assert_eq!(created.ephemeral_owner, 0);
    assert!(created.czxid > 0);
    assert_eq!(created.czxid, created.mzxid);
    assert_eq!(created.czxid, created.pzxid);

    let (data, stat) = c.get_data("/a").await.unwrap();
    assert_eq!(data.as_deref(), Some(&b"hello"[..]));
    assert_eq!(stat, created);
    assert_eq!(c.exists("/a").await.unwrap(), Some(created));
    assert_eq!(c.exists("/nope").await.unwrap(), None);

    let changed = c.set_data("/a", b"world!", Some(0)).await.unwrap();
    assert_eq!(changed.version, 1);
    assert_eq!(changed.data_length, 6);
    assert!(changed.mzxid > created.mzxid);
    assert_eq!(changed.czxid, created.czxid);
    let changed = c.set_data("/a", b"any", None).await.unwrap();
    assert_eq!(changed.version, 2);

    let (child, _) = c.create("/a/b", b"", CreateMode::Persistent).await.unwrap();
    assert_eq!(child, "/a/b");
    assert_eq!(c.get_children("/a").await.unwrap(), ["b"]);
    let (children, parent) = c.get_children_with_stat("/a").await.unwrap();
    assert_eq!(children, ["b"]);
    assert_eq!(parent.num_children, 1);
    assert_eq!(parent.cversion, 1);
    assert_eq!(c.get_all_children_number("/a").await.unwrap(), 1);

    let (acl, stat) = c.get_acl("/a").await.unwrap();
    assert_eq!(acl, Acl::open_unsafe());
    assert_eq!(stat.aversion, 0);
    let mut acl = Acl::read_unsafe();
    acl[0].perms = perms::READ | perms::WRITE | perms::DELETE | perms::ADMIN;
    let stat = c.set_acl("/a", &acl, Some(0)).await.unwrap();
    assert_eq!(stat.aversion, 1);
    assert_eq!(c.get_acl("/a").await.unwrap().0, acl);

    c.delete("/a/b", Some(0)).await.unwrap();
    c.delete("/a", None).await.unwrap();
    assert_eq!(c.exists("/a").await.unwrap(), None);
    c.sync("/").await.unwrap();
    assert!(c.last_zxid_seen() >= changed.mzxid);
    c.close().await;
    assert_eq!(c.state(), SessionState::Closed);
}

async fn errors_on(server: &mut Server) {
    let c = server.client().await;
    let err = c
        .create("/x/y", b"", CreateMode::Persistent)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::NoNode {
            path: "/x/y".into()
        }
    );
    assert!(err.to_string().contains("/x/y"), "{err}");

    c.create("/e", b"", CreateMode::Persistent).await.unwrap();
    let err = c
        .create("/e", b"", CreateMode::Persistent)
        .await
        .unwrap_err();
    assert_eq!(err, Error::NodeExists { path: "/e".into() });
    assert_eq!(err.to_string(), "node /e already exists");

    let err = c.set_data("/e", b"", Some(7)).await.unwrap_err();
    assert_eq!(err, Error::BadVersion { path: "/e".into() });
    let err = c.delete("/e", Some(7)).await.unwrap_err();
    assert!(matches!(err, Error::BadVersion { .. }), "{err}");

    c.create("/e/child", b"", CreateMode::Persistent)
        .await
        .unwrap();
    let err = c.delete("/e", None).await.unwrap_err();
    assert_eq!(err, Error::NotEmpty { path: "/e".into() });
    assert_eq!(
        c.delete("/missing", None).await.unwrap_err(),
        Error::NoNode {
            path: "/missing".into()
        }
    );
    assert!(matches!(
        c.get_data("/missing").await.unwrap_err(),
        Error::NoNode { .. }
    ));

    c.create("/eph", b"", CreateMode::Ephemeral).await.unwrap();
    let err = c
        .create("/eph/c", b"", CreateMode::Persistent)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::NoChildrenForEphemerals {
            path: "/eph/c".into()
        }
    );

    let err = c.set_acl("/e", &[], None).await.unwrap_err();
    assert_eq!(err, Error::InvalidAcl { path: "/e".into() });
    let err = c.check_watches("/e", WatcherType::Data).await.unwrap_err();
    assert_eq!(err, Error::NoWatcher { path: "/e".into() });

    // Caught by the client before anything is sent.
    for bad in ["e", "/e/", "/e//x", "/e/./x", ""] {
        let err = c.get_data(bad).await.unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}: {err}");
    }
    let err = c
        .create("/t", b"", CreateMode::PersistentWithTtl)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    let err = c
        .create(
            "/t",
            b"",
            CreateOptions::new(CreateMode::Persistent).ttl(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");

    // The session is unharmed by any of that.
    assert!(c.exists("/e").await.unwrap().is_some());
    c.close().await;
    assert_eq!(c.exists("/e").await.unwrap_err(), Error::Closed);
}

async fn node_kinds_on(server: &mut Server) {
    let c = server.client().await;
    let other = server.client().await;
    c.create("/q", b"", CreateMode::Persistent).await.unwrap();
    for i in 0..3 {
        let (path, _) = c
            .create("/q/n-", b"", CreateMode::PersistentSequential)
            .await
            .unwrap();
        assert_eq!(path, format!("/q/n-{i:010}"));
    }
    let (eseq, stat) = c
        .create("/q/e-", b"", CreateMode::EphemeralSequential)
        .await
        .unwrap();
    assert_eq!(eseq, "/q/e-0000000003");
    assert_eq!(stat.ephemeral_owner, c.session_id());
    let (eph, stat) = c.create("/eph", b"x", CreateMode::Ephemeral).await.unwrap();
    assert_eq!(stat.ephemeral_owner, c.session_id());
    // A sequential path may end in '/': the counter is the whole name.
    let (bare, _) = c
        .create("/q/", b"", CreateMode::PersistentSequential)
        .await
        .unwrap();
    assert_eq!(bare, "/q/0000000004");

    let mut ephemerals = c.get_ephemerals("/").await.unwrap();
    ephemerals.sort();
    assert_eq!(ephemerals, [eph.clone(), eseq.clone()]);
    assert_eq!(c.get_ephemerals("/q").await.unwrap(), vec![eseq.clone()]);
    assert!(other.get_ephemerals("/").await.unwrap().is_empty());

    let (container, stat) = c.create("/box", b"", CreateMode::Container).await.unwrap();
    assert_eq!(container, "/box");
    assert_eq!(stat.version, 0);
    let ttl = CreateOptions::new(CreateMode::PersistentWithTtl).ttl(Duration::from_secs(60));
    let (path, stat) = c.create("/ttl", b"t", ttl).await.unwrap();
    assert_eq!(path, "/ttl");
    assert_eq!(stat.data_length, 1);
    let ttl_seq =
        CreateOptions::new(CreateMode::PersistentSequentialWithTtl).ttl(Duration::from_secs(60));
    let (path, _) = c.create("/q/t-", b"", ttl_seq).await.unwrap();
    assert_eq!(path, "/q/t-0000000005");

    // Closing the session removes its ephemerals, and only those.
    c.close().await;
    assert_eq!(other.exists(&eph).await.unwrap(), None);
    assert_eq!(other.exists(&eseq).await.unwrap(), None);
    assert!(other.exists("/q/n-0000000000").await.unwrap().is_some());
    assert!(other.exists("/ttl").await.unwrap().is_some());
}

async fn multi_on(server: &mut Server) {
    let c = server.client().await;
    let results = c
        .transaction()
        .create("/m", b"0", CreateMode::Persistent)
        .create("/m/s-", b"", CreateMode::PersistentSequential)
        .set_data("/m", b"1", Some(0))
        .check("/m", 1)
        .commit()
        .await
        .unwrap();
    assert_eq!(results.len(), 4);
    let OpResult::Create { path, stat } = &results[0] else {
        panic!("{results:?}")
    };
    assert_eq!(path, "/m");
    // ZooKeeper answers a plain create in a multi without its stat.
    assert_eq!(*stat, None);
    assert!(matches!(&results[1], OpResult::Create { path, .. } if path == "/m/s-0000000000"));
    assert!(matches!(&results[2], OpResult::SetData { stat } if stat.version == 1));
    assert_eq!(results[3], OpResult::Check);

    // A failure rolls everything back and says which op failed.
    let err = c
        .multi([
            Op::create("/m/new", b"", CreateMode::Persistent),
            Op::check("/m", 99),
            Op::delete("/m", None),
        ])
        .await
        .unwrap_err();
    let Error::Multi {
        failed_index,
        error,
        results,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*failed_index, 1);
    assert_eq!(**error, Error::BadVersion { path: "/m".into() });
    assert_eq!(
        results,
        &[
            Ok(()),
            Err(Error::BadVersion { path: "/m".into() }),
            Err(Error::RuntimeInconsistency { path: "/m".into() }),
        ]
    );
    assert_eq!(
        err.to_string(),
        "multi failed at op 1: version check failed for /m"
    );
    assert_eq!(c.exists("/m/new").await.unwrap(), None);

    let err = c
        .multi([
            Op::delete("/m/s-0000000000", None),
            Op::delete("/m/absent", None),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Multi { failed_index: 1, error, .. } if matches!(**error, Error::NoNode { .. })),
        "{err:?}"
    );
    assert!(c.exists("/m/s-0000000000").await.unwrap().is_some());
    assert_eq!(c.multi([]).await.unwrap(), []);

    let reads = c
        .multi_read([
            ReadOp::GetData("/m".into()),
            ReadOp::GetChildren("/m".into()),
            ReadOp::GetData("/absent".into()),
        ])
        .await
        .unwrap();
    assert!(
        matches!(&reads[0], Ok(ReadResult::Data { data, stat }) if data.as_deref() == Some(b"1") && stat.version == 1)
    );
    assert_eq!(
        reads[1],
        Ok(ReadResult::Children {
            children: vec!["s-0000000000".into()]
        })
    );
    assert_eq!(
        reads[2],
        Err(Error::NoNode {
            path: "/absent".into()
        })
    );

    // Containers and TTL nodes are answered with their stat.
    let ttl = CreateOptions::new(CreateMode::PersistentWithTtl).ttl(Duration::from_secs(60));
    let results = c
        .multi([
            Op::create("/m/box", b"", CreateMode::Container),
            Op::create("/m/ttl", b"", ttl),
        ])
        .await
        .unwrap();
    for (result, expected) in results.iter().zip(["/m/box", "/m/ttl"]) {
        let OpResult::Create { path, stat } = result else {
            panic!("{results:?}")
        };
        assert_eq!(path, expected);
        assert!(stat.is_some_and(|s| s.czxid > 0), "{results:?}");
    }
}

async fn pipelining_on(server: &mut Server) {
    const N: usize = 1000;
    let c = server.client().await;
    c.create("/p", b"", CreateMode::Persistent).await.unwrap();

    // 1,000 creates in flight at once: each must get its own reply, and
    // the sequence numbers show the server saw them in the order the
    // methods were called.
    let data: Vec<String> = (0..N).map(|i| i.to_string()).collect();
    let creates = data
        .iter()
        .map(|d| c.create("/p/n-", d.as_bytes(), CreateMode::PersistentSequential))
        .collect();
    for (i, result) in join_all(creates).await.into_iter().enumerate() {
        let (path, stat) = result.unwrap();
        assert_eq!(path, format!("/p/n-{i:010}"));
        assert_eq!(stat.data_length as usize, data[i].len());
    }

    // Version-checked writes succeed only if applied in the order the
    // methods were called, which is the order that counts even when the
    // calls are awaited the other way round.
    let mut writes: Vec<_> = data
        .iter()
        .enumerate()
        .map(|(i, d)| (i, c.set_data("/p", d.as_bytes(), Some(i as i32))))
        .collect();
    while let Some((i, call)) = writes.pop() {
        assert_eq!(call.await.unwrap().version, i as i32 + 1);
    }

    // Reads from several tasks sharing the session, interleaved.
    let mut tasks = Vec::new();
    for t in 0..4 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let reads = (t..N)
                .step_by(4)
                .map(|i| {
                    let c = c.clone();
                    async move { (i, c.get_data(&format!("/p/n-{i:010}")).await) }
                })
                .collect();
            for (i, result) in join_all(reads).await {
                assert_eq!(result.unwrap().0.unwrap(), i.to_string().as_bytes());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(c.get_children("/p").await.unwrap().len(), N);
    assert_eq!(c.get_all_children_number("/p").await.unwrap(), N as i32);
}

async fn chroot_on(server: &mut Server) {
    let root = server.client().await;
    root.create("/app", b"", CreateMode::Persistent)
        .await
        .unwrap();
    let c = server
        .client_with(
            &format!("{}/app", server.connect_string()),
            ConnectOptions::new(),
        )
        .await;
    assert_eq!(c.chroot(), Some("/app"));

    let (path, _) = c.create("/a", b"1", CreateMode::Persistent).await.unwrap();
    assert_eq!(path, "/a");
    assert_eq!(
        root.get_data("/app/a").await.unwrap().0.as_deref().unwrap(),
        b"1"
    );
    let (seq, _) = c
        .create("/s-", b"", CreateMode::PersistentSequential)
        .await
        .unwrap();
    assert_eq!(seq, "/s-0000000001");
    let mut children = c.get_children("/").await.unwrap();
    children.sort();
    assert_eq!(children, ["a", "s-0000000001"]);
    assert!(c.exists("/").await.unwrap().is_some());
    assert_eq!(
        c.get_data("/nope").await.unwrap_err(),
        Error::NoNode {
            path: "/nope".into()
        }
    );

    // Watch events come back without the chroot.
    let (_, _, watch) = c.get_data_watched("/a").await.unwrap();
    let mut below = c.watch_persistent("/", true).await.unwrap();
    root.set_data("/app/a", b"2", None).await.unwrap();
    assert_eq!(watch.await.unwrap().path, "/a");
    assert_eq!(below.next().await.unwrap().path, "/a");
    root.create("/app/a/b", b"", CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(below.next().await.unwrap().path, "/a/b");

    let results = c
        .multi([Op::create("/m", b"", CreateMode::Persistent)])
        .await
        .unwrap();
    assert!(matches!(&results[0], OpResult::Create { path, .. } if path == "/m"));
    c.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    assert_eq!(c.get_ephemerals("/").await.unwrap(), ["/e"]);
    let reads = c.multi_read([ReadOp::GetData("/a".into())]).await.unwrap();
    assert!(
        matches!(&reads[0], Ok(ReadResult::Data { data, .. }) if data.as_deref() == Some(b"2"))
    );
    c.sync("/a").await.unwrap();
    c.delete("/a/b", None).await.unwrap();
    assert_eq!(root.exists("/app/a/b").await.unwrap(), None);
}

async fn auth_on(server: &mut Server) {
    let alice = server
        .client_with(
            &server.connect_string(),
            ConnectOptions::new().digest("alice", "secret"),
        )
        .await;
    let me = alice.who_am_i().await.unwrap();
    assert!(
        me.contains(&ClientInfo {
            auth_scheme: "digest".into(),
            user: "alice".into()
        }),
        "{me:?}"
    );
    // "auth" grants the creator's authenticated identities.
    let creator_only = vec![Acl {
        perms: perms::ALL,
        id: Id::new("auth", ""),
    }];
    alice
        .create(
            "/secret",
            b"s",
            CreateOptions::new(CreateMode::Persistent).acl(creator_only),
        )
        .await
        .unwrap();
    let (acl, _) = alice.get_acl("/secret").await.unwrap();
    assert_eq!(acl.len(), 1);
    assert_eq!(acl[0].id.scheme, "digest");
    assert!(acl[0].id.id.starts_with("alice:"), "{acl:?}");
    let (data, _) = alice.get_data("/secret").await.unwrap();
    assert_eq!(data.as_deref(), Some(&b"s"[..]));

    let anonymous = server.client().await;
    assert_eq!(
        anonymous.get_data("/secret").await.unwrap_err(),
        Error::NoAuth {
            path: "/secret".into()
        }
    );
    assert!(matches!(
        anonymous.set_data("/secret", b"x", None).await.unwrap_err(),
        Error::NoAuth { .. }
    ));
    anonymous
        .add_auth("digest", b"mallory:guess")
        .await
        .unwrap();
    assert!(matches!(
        anonymous.get_data("/secret").await.unwrap_err(),
        Error::NoAuth { .. }
    ));
    anonymous.add_auth("digest", b"alice:secret").await.unwrap();
    let (data, _) = anonymous.get_data("/secret").await.unwrap();
    assert_eq!(data.as_deref(), Some(&b"s"[..]));
    let me = anonymous.who_am_i().await.unwrap();
    assert!(me.iter().any(|i| i.user == "mallory") && me.iter().any(|i| i.user == "alice"));
}
