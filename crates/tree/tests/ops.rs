//! Operation-by-operation behaviour: Stat fields, errors and their order,
//! watch triggers. Each test names the ZooKeeper source it follows.

mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use jute::{perms, Acl, CreateMode, ErrorCode, EventType, Id, Stat};
use tree::{DataTree, Outcome, Txn, TxnOp};

#[test]
fn fresh_tree_matches_a_standalone_server() {
    // DataTree constructor, addConfigNode, DataNode.copyStat
    let tree = DataTree::new();
    let root = tree.exists("/").unwrap();
    assert_eq!(
        root,
        Stat {
            cversion: -1, // stored cversion 0, one child
            num_children: 1,
            ..Stat::default()
        }
    );
    let zk = tree.exists("/zookeeper").unwrap();
    assert_eq!((zk.cversion, zk.num_children), (-2, 2));
    let config = tree.exists("/zookeeper/config").unwrap();
    assert_eq!(config.aversion, -1, "setACL(config, READ_ACL_UNSAFE, -1)");
    assert_eq!(
        tree.get_acl("/zookeeper/config", &[]).unwrap().0,
        Acl::read_unsafe()
    );
    assert_eq!(tree.get_acl("/", &[]).unwrap().0, Acl::open_unsafe());
    assert!(tree.exists("/zookeeper/quota").is_some());
    assert_eq!(tree.node_count(), 5, "ZooKeeper counts the root twice");
    assert_eq!(tree.approximate_data_bytes(), 44);
    assert_eq!(tree.all_children_number("/", &[]), Ok(3));
    assert_eq!(tree.all_children_number("/zookeeper", &[]), Ok(2));
    assert_eq!(
        tree.get_children("/", &[]).unwrap().0,
        vec!["zookeeper".to_string()]
    );
}

#[test]
fn an_ensemble_s_config_is_installed_as_zookeeper_installs_it() {
    // ZKDatabase.initConfigInZKDatabase: version -1, mzxid the config's version
    let mut tree = DataTree::new();
    let text = "server.1=127.0.0.1:2888:3888:participant\nversion=100000000";
    tree.install_config(Bytes::from(text), 0x1_0000_0000);
    let (data, stat) = tree.get_data("/zookeeper/config", &[]).unwrap();
    assert_eq!(data.as_deref(), Some(text.as_bytes()));
    assert_eq!(
        (stat.version, stat.mzxid, stat.data_length),
        (-1, 0x1_0000_0000, text.len() as i32)
    );
    assert_eq!(stat.aversion, -1, "the ACL is untouched");
    assert_eq!(tree.approximate_data_bytes(), 44 + text.len() as u64);
    tree.install_config(Bytes::from_static(b"version=0"), 0);
    assert_eq!(tree.approximate_data_bytes(), 44 + 9);
    tree.forget_config();
    assert_eq!(
        tree.exists("/zookeeper/config"),
        DataTree::new().exists("/zookeeper/config"),
        "as a fresh tree has it"
    );
    assert_eq!(tree.approximate_data_bytes(), 44);
}

#[test]
fn a_reconfig_versions_the_config_by_its_zxid_and_fires_its_watch() {
    // PrepRequestProcessor's reconfig: a setData of the config node with
    // version -1, whose text ends in version=<zxid in hex>.
    let mut h = Harness::new();
    let members = "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n";
    let applied = h.apply(TxnOp::Reconfig {
        members: members.into(),
    });
    let zxid = h.stat("/zookeeper/config").mzxid;
    let text = format!("{members}version={zxid:x}");
    let Outcome::Reconfigured { config, stat } = applied.outcome.clone() else {
        panic!("{:?}", applied.outcome);
    };
    assert_eq!(config, text.as_bytes());
    assert_eq!(
        (stat.version, stat.mzxid, stat.data_length),
        (-1, zxid, text.len() as i32)
    );
    assert_eq!(
        events(&applied),
        [("/zookeeper/config".into(), EventType::NodeDataChanged)]
    );
    let (data, _) = h.tree.get_data("/zookeeper/config", &[]).unwrap();
    assert_eq!(data.unwrap(), text.as_bytes());
}

#[test]
fn create_sets_every_stat_field() {
    // DataTree.createStat, DataTree.createNode, DataNode.copyStat
    let mut h = Harness::new();
    let applied = h.apply(create("/a", "hello", CreateMode::Persistent));
    let t = T0 + 20;
    assert_eq!(
        applied.outcome,
        Outcome::Created {
            path: "/a".into(),
            stat: Stat {
                czxid: 2,
                mzxid: 2,
                ctime: t,
                mtime: t,
                version: 0,
                cversion: 0,
                aversion: 0,
                ephemeral_owner: 0,
                data_length: 5,
                num_children: 0,
                pzxid: 2,
            }
        }
    );
    assert_eq!(
        events(&applied),
        vec![
            ("/a".into(), EventType::NodeCreated),
            ("/".into(), EventType::NodeChildrenChanged)
        ]
    );
    // The parent: cversion and pzxid move, mzxid and version do not.
    let root = h.stat("/");
    assert_eq!((root.cversion, root.pzxid, root.num_children), (0, 2, 2));
    assert_eq!((root.mzxid, root.version), (0, 0));

    h.mk("/a/b", "");
    let a = h.stat("/a");
    assert_eq!((a.cversion, a.pzxid, a.num_children, a.mzxid), (1, 3, 1, 2));
    assert_eq!(h.tree.get_data("/a", &[]).unwrap().0.unwrap(), "hello");
}

/// A txn's data is a slice of its whole committed entry; the znode keeps
/// a copy of the data alone, not the entry (path, ACL, the rest of a
/// multi) for as long as it lives.
#[test]
fn a_znode_keeps_its_data_not_the_entry_it_came_in() {
    let mut h = Harness::new();
    for op in [
        create("/a", "x".repeat(128).as_str(), CreateMode::Persistent),
        set_data("/a", "y".repeat(128).as_str(), -1),
    ] {
        let txn = Txn {
            time_ms: T0,
            session_id: SESSION,
            auth: vec![],
            enforce_quota: false,
            op,
        };
        let mut encoded = BytesMut::new();
        txn.encode(&mut encoded);
        let entry = encoded.freeze();
        h.zxid += 1;
        h.tree.apply(h.zxid, &Txn::decode(entry.clone()).unwrap());
        let data = h.tree.get_data("/a", &[]).unwrap().0.unwrap();
        assert_eq!(data.len(), 128);
        assert!(!entry.as_ptr_range().contains(&data.as_ptr()));
    }
}

/// ZooKeeper keeps a null buffer null (`DataNode.data == null`) and
/// counts it as length 0; Kafka reads a null `/latest_producer_id_block`
/// as "no block yet" and cannot parse an empty one.
#[test]
fn null_data_stays_apart_from_empty() {
    let mut h = Harness::new();
    let null_create = |path: &str| TxnOp::Create {
        path: path.into(),
        data: None,
        acl: Acl::open_unsafe(),
        mode: CreateMode::Persistent,
        ttl_ms: -1,
    };
    let null_set = |path: &str| TxnOp::SetData {
        path: path.into(),
        data: None,
        version: -1,
    };
    h.apply(null_create("/n"));
    h.mk("/e", "");
    assert_eq!(h.tree.get_data("/n", &[]).unwrap().0, None);
    assert_eq!(h.tree.get_data("/e", &[]).unwrap().0, Some(Bytes::new()));
    assert_eq!((h.stat("/n").data_length, h.stat("/e").data_length), (0, 0));

    h.apply(set_data("/n", "", -1));
    assert_eq!(h.tree.get_data("/n", &[]).unwrap().0, Some(Bytes::new()));
    h.apply(null_set("/n"));
    assert_eq!(h.tree.get_data("/n", &[]).unwrap().0, None);
    assert_eq!(h.stat("/n").version, 2);

    h.apply(TxnOp::Multi(vec![null_create("/m"), null_set("/e")]));
    assert_eq!(h.tree.get_data("/m", &[]).unwrap().0, None);
    assert_eq!(h.tree.get_data("/e", &[]).unwrap().0, None);

    let mut snapshot = Vec::new();
    h.tree.write_snapshot(&mut snapshot).unwrap();
    let loaded = DataTree::read_snapshot(&mut std::io::Cursor::new(snapshot)).unwrap();
    assert_eq!(loaded.get_data("/n", &[]).unwrap().0, None);
    assert_eq!(loaded.get_data("/", &[]).unwrap().0, Some(Bytes::new()));
    assert_eq!(loaded, h.tree);
}

#[test]
fn create_errors_in_zookeeper_order() {
    // PrepRequestProcessor.pRequest2TxnCreate
    let mut h = Harness::new();
    h.mk("/a", "");
    let p = CreateMode::Persistent;
    assert_eq!(h.err(create("/a", "", p)), ErrorCode::NodeExists);
    assert_eq!(h.err(create("/", "", p)), ErrorCode::NodeExists);
    assert_eq!(h.err(create("/x/y", "", p)), ErrorCode::NoNode);
    assert_eq!(h.err(create("noslash", "", p)), ErrorCode::BadArguments);
    assert_eq!(h.err(create("", "", p)), ErrorCode::BadArguments);
    assert_eq!(h.err(create("/a\0", "", p)), ErrorCode::BadArguments);
    // The full path check comes after the parent lookup...
    assert_eq!(h.err(create("/x/", "", p)), ErrorCode::NoNode);
    assert_eq!(h.err(create("/a/", "", p)), ErrorCode::BadArguments);
    assert_eq!(h.err(create("/a/.", "", p)), ErrorCode::BadArguments);
    // ...and the ACL check before it.
    assert_eq!(
        h.err(create_acl("/x/", "", p, vec![])),
        ErrorCode::InvalidAcl
    );
    // A sequential name makes a trailing slash valid.
    let out = h.apply(create("/a/", "", CreateMode::PersistentSequential));
    assert!(matches!(out.outcome, Outcome::Created { ref path, .. } if path == "/a/0000000000"));
}

#[test]
fn sequence_numbers_count_creates_only() {
    // PrepRequestProcessor: path + String.format("%010d", parentCVersion);
    // DataNode.copyStat: clients see cversion * 2 - numChildren
    let mut h = Harness::new();
    h.mk("/q", "");
    let seq = CreateMode::PersistentSequential;
    let name = |h: &mut Harness| match h.apply(create("/q/n-", "", seq)).outcome {
        Outcome::Created { path, .. } => path,
        other => panic!("{other:?}"),
    };
    assert_eq!(name(&mut h), "/q/n-0000000000");
    assert_eq!(name(&mut h), "/q/n-0000000001");
    assert_eq!(
        h.apply(delete("/q/n-0000000000", -1)).outcome,
        Outcome::Deleted
    );
    h.mk("/q/plain", "");
    assert_eq!(name(&mut h), "/q/n-0000000003");
    let q = h.stat("/q");
    // 4 creates, 1 delete.
    assert_eq!((q.cversion, q.num_children), (5, 3));
}

#[test]
fn delete_updates_parent_and_checks() {
    // PrepRequestProcessor delete, DataTree.deleteNode
    let mut h = Harness::new();
    h.mk("/a", "");
    h.mk("/a/b", "xyz");
    assert_eq!(h.err(delete("/a", -1)), ErrorCode::NotEmpty);
    assert_eq!(h.err(delete("/a/b", 3)), ErrorCode::BadVersion);
    assert_eq!(h.err(delete("/a/c", -1)), ErrorCode::NoNode);
    assert_eq!(h.err(delete("/x/c", -1)), ErrorCode::NoNode);
    assert_eq!(
        h.err(delete("/a/b/", -1)),
        ErrorCode::NoNode,
        "no full path check"
    );
    assert_eq!(h.err(delete("a", -1)), ErrorCode::BadArguments);
    for special in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
        assert_eq!(
            h.err(delete(special, -1)),
            ErrorCode::BadArguments,
            "{special}"
        );
    }
    let approx = h.tree.approximate_data_bytes();
    let applied = h.apply(delete("/a/b", 0));
    assert_eq!(applied.outcome, Outcome::Deleted);
    assert_eq!(
        events(&applied),
        vec![
            ("/a/b".into(), EventType::NodeDeleted),
            ("/a".into(), EventType::NodeChildrenChanged)
        ]
    );
    let a = h.stat("/a");
    assert_eq!((a.cversion, a.num_children, a.pzxid), (2, 0, h.zxid));
    assert_eq!(h.tree.approximate_data_bytes(), approx - 4 - 3);
    assert!(h.tree.exists("/a/b").is_none());
    assert_eq!(h.apply(delete("/a", -1)).outcome, Outcome::Deleted);
    let root = h.stat("/");
    assert_eq!(root.pzxid, h.zxid);
}

#[test]
fn set_data_stat_and_checks() {
    // PrepRequestProcessor setData, DataTree.setData
    let mut h = Harness::new();
    h.mk("/a", "1");
    let created = h.stat("/a");
    let applied = h.apply(set_data("/a", "22", 0));
    let Outcome::SetData { stat } = applied.outcome else {
        panic!("{:?}", applied.outcome)
    };
    assert_eq!(
        stat,
        Stat {
            mzxid: h.zxid,
            mtime: h.time_ms,
            version: 1,
            data_length: 2,
            ..created
        }
    );
    assert_eq!(
        events(&applied),
        vec![("/a".into(), EventType::NodeDataChanged)]
    );
    assert_eq!(h.err(set_data("/a", "", 0)), ErrorCode::BadVersion);
    assert_eq!(h.err(set_data("/b", "", -1)), ErrorCode::NoNode);
    assert_eq!(h.err(set_data("/a/", "", -1)), ErrorCode::BadArguments);
    let Outcome::SetData { stat } = h.apply(set_data("/a", "", -1)).outcome else {
        panic!()
    };
    assert_eq!(stat.version, 2);
}

#[test]
fn set_acl_stat_and_checks() {
    // PrepRequestProcessor setACL, DataTree.setACL
    let mut h = Harness::new();
    h.mk("/a", "");
    let before = h.stat("/a");
    let read_only = vec![acl(perms::READ | perms::ADMIN, "world", "anyone")];
    let applied = h.apply(set_acl("/a", read_only.clone(), 0));
    assert_eq!(
        applied.outcome,
        Outcome::SetAcl {
            stat: Stat {
                aversion: 1,
                ..before
            }
        }
    );
    assert!(applied.triggers.is_empty(), "setACL fires no watch");
    assert_eq!(h.tree.get_acl("/a", &[]).unwrap().0, read_only);
    assert_eq!(
        h.err(set_acl("/a", Acl::open_unsafe(), 0)),
        ErrorCode::BadVersion
    );
    assert_eq!(h.err(set_data("/a", "x", -1)), ErrorCode::NoAuth);
    // The new ACL is checked before the node is looked up.
    assert_eq!(h.err(set_acl("/nope", vec![], -1)), ErrorCode::InvalidAcl);
    assert_eq!(
        h.err(set_acl("/nope", Acl::open_unsafe(), -1)),
        ErrorCode::NoNode
    );
    h.mk("/b", "");
    h.apply(set_acl("/b", Acl::read_unsafe(), -1));
    assert_eq!(
        h.err(set_acl("/b", Acl::open_unsafe(), -1)),
        ErrorCode::NoAuth
    );
}

#[test]
fn check_op() {
    // PrepRequestProcessor check
    let mut h = Harness::new();
    h.mk("/a", "");
    assert_eq!(h.apply(check("/a", 0)).outcome, Outcome::Checked);
    assert_eq!(h.apply(check("/a", -1)).outcome, Outcome::Checked);
    assert_eq!(h.err(check("/a", 1)), ErrorCode::BadVersion);
    assert_eq!(h.err(check("/b", 0)), ErrorCode::NoNode);
    assert_eq!(h.err(check("/a/", 0)), ErrorCode::BadArguments);
    h.apply(set_acl(
        "/a",
        vec![acl(perms::WRITE, "world", "anyone")],
        -1,
    ));
    assert_eq!(h.err(check("/a", 0)), ErrorCode::NoAuth, "check needs READ");
}

#[test]
fn permissions_per_op() {
    // PrepRequestProcessor: CREATE and DELETE on the parent, WRITE for
    // setData, ADMIN for setACL
    let mut h = Harness::new();
    let everything_but = |p: i32| vec![acl(perms::ALL & !p, "world", "anyone")];
    h.apply(create_acl(
        "/nc",
        "",
        CreateMode::Persistent,
        everything_but(perms::CREATE),
    ));
    assert_eq!(
        h.err(create("/nc/x", "", CreateMode::Persistent)),
        ErrorCode::NoAuth
    );

    h.mk("/nd", "");
    h.mk("/nd/x", "");
    h.apply(set_acl("/nd", everything_but(perms::DELETE), -1));
    assert_eq!(h.err(delete("/nd/x", -1)), ErrorCode::NoAuth);
    // Deleting a node needs nothing on the node itself.
    h.mk("/ok", "");
    h.apply(create_acl(
        "/ok/x",
        "",
        CreateMode::Persistent,
        vec![acl(0, "world", "anyone")],
    ));
    assert_eq!(h.apply(delete("/ok/x", -1)).outcome, Outcome::Deleted);

    h.apply(create_acl(
        "/nw",
        "",
        CreateMode::Persistent,
        everything_but(perms::WRITE),
    ));
    assert_eq!(h.err(set_data("/nw", "", -1)), ErrorCode::NoAuth);
    h.apply(create_acl(
        "/na",
        "",
        CreateMode::Persistent,
        everything_but(perms::ADMIN),
    ));
    assert_eq!(
        h.err(set_acl("/na", Acl::open_unsafe(), -1)),
        ErrorCode::NoAuth
    );

    // super passes everything.
    let sup = vec![Id::new("super", "")];
    let out = h.apply_full(SESSION, sup, set_acl("/na", Acl::open_unsafe(), -1));
    assert!(matches!(out.outcome, Outcome::SetAcl { .. }));
}

#[test]
fn each_permission_is_checked_on_its_own() {
    // ZooKeeper 3.9.4's AdminServer: an entry granting READ to one id and
    // one granting the rest to another add up only for whoever has both.
    let mut h = Harness::new();
    let reader = Id::new("digest", "r:x");
    let writer = Id::new("digest", "w:x");
    h.apply(create_acl(
        "/guarded",
        "",
        CreateMode::Persistent,
        vec![
            acl(perms::READ, "digest", "r:x"),
            acl(perms::ALL & !perms::READ, "digest", "w:x"),
        ],
    ));
    let permits = |ids: &[Id]| h.tree.permits_each("/guarded", perms::ALL, ids);
    assert_eq!(permits(std::slice::from_ref(&reader)), Some(false));
    assert_eq!(permits(std::slice::from_ref(&writer)), Some(false));
    assert_eq!(permits(&[reader, writer]), Some(true));
    assert_eq!(permits(&[Id::new("super", "")]), Some(true));
    assert_eq!(h.tree.permits_each("/missing", perms::ALL, &[]), None);
}

#[test]
fn digest_and_auth_scheme_acls() {
    // PrepRequestProcessor.fixupACL, DigestAuthenticationProvider.matches
    let mut h = Harness::new();
    let alice = Id::new("digest", "alice:hash=");
    let me = vec![Id::new("ip", "10.0.0.1"), alice.clone()];
    let out = h.apply_full(
        SESSION,
        me.clone(),
        create_acl(
            "/mine",
            "s",
            CreateMode::Persistent,
            vec![acl(perms::ALL, "auth", "")],
        ),
    );
    assert!(matches!(out.outcome, Outcome::Created { .. }));
    let (stored, _) = h.tree.get_acl("/mine", &me).unwrap();
    assert_eq!(
        stored,
        vec![Acl {
            perms: perms::ALL,
            id: alice.clone()
        }]
    );
    // Nobody else may read; the hash is hidden from those without ADMIN.
    assert_eq!(h.tree.get_data("/mine", &[]), Err(ErrorCode::NoAuth));
    assert_eq!(h.tree.get_data("/mine", &me).unwrap().0.unwrap(), "s");
    assert_eq!(h.tree.get_acl("/mine", &[]), Err(ErrorCode::NoAuth));
    h.apply_full(
        SESSION,
        me.clone(),
        set_acl(
            "/mine",
            vec![
                Acl {
                    perms: perms::ALL,
                    id: alice.clone(),
                },
                acl(perms::READ, "world", "anyone"),
            ],
            -1,
        ),
    );
    let (seen, _) = h.tree.get_acl("/mine", &[]).unwrap();
    assert_eq!(seen[0].id, Id::new("digest", "alice:x"));
    assert_eq!(h.tree.get_acl("/mine", &me).unwrap().0[0].id, alice);
    // "auth" with no authenticated id is invalid.
    assert_eq!(
        h.err(create_acl(
            "/x",
            "",
            CreateMode::Persistent,
            vec![acl(perms::ALL, "auth", "")]
        )),
        ErrorCode::InvalidAcl
    );
    assert_eq!(
        h.err(create_acl(
            "/x",
            "",
            CreateMode::Persistent,
            vec![acl(1, "digest", "bad")]
        )),
        ErrorCode::InvalidAcl
    );
}

#[test]
fn ip_acls() {
    // IPAuthenticationProvider.matches
    let mut h = Harness::new();
    h.apply(create_acl(
        "/lan",
        "",
        CreateMode::Persistent,
        vec![acl(perms::ALL, "ip", "192.168.0.0/16")],
    ));
    assert!(h
        .tree
        .get_data("/lan", &[Id::new("ip", "192.168.7.9")])
        .is_ok());
    assert_eq!(
        h.tree.get_data("/lan", &[Id::new("ip", "10.0.0.1")]),
        Err(ErrorCode::NoAuth)
    );
    assert_eq!(
        h.err(create_acl(
            "/x",
            "",
            CreateMode::Persistent,
            vec![acl(1, "ip", "1.2.3.4/40")]
        )),
        ErrorCode::InvalidAcl
    );
}

#[test]
fn reads_check_acls() {
    // FinalRequestProcessor: NoNode first, then READ
    let mut h = Harness::new();
    h.apply(create_acl(
        "/secret",
        "x",
        CreateMode::Persistent,
        vec![acl(perms::WRITE, "world", "anyone")],
    ));
    h.mk("/secret2", "");
    assert_eq!(h.tree.get_data("/none", &[]), Err(ErrorCode::NoNode));
    assert_eq!(h.tree.get_data("/secret", &[]), Err(ErrorCode::NoAuth));
    assert_eq!(h.tree.get_children("/secret", &[]), Err(ErrorCode::NoAuth));
    assert_eq!(
        h.tree.all_children_number("/secret", &[]),
        Err(ErrorCode::NoAuth)
    );
    assert_eq!(
        h.tree.exists_checked("/secret", &[]),
        Err(ErrorCode::NoAuth)
    );
    assert_eq!(h.tree.exists_checked("/none", &[]), Err(ErrorCode::NoNode));
    assert_eq!(
        h.tree.exists_checked("/a\0", &[]),
        Err(ErrorCode::BadArguments)
    );
    assert!(
        h.tree.exists("/secret").is_some(),
        "exists() itself does not check"
    );
    // getACL needs READ or ADMIN: WRITE alone is not enough.
    assert_eq!(h.tree.get_acl("/secret", &[]), Err(ErrorCode::NoAuth));
    assert!(h.tree.get_data("/secret", &[Id::new("super", "")]).is_ok());
}

#[test]
fn children_are_sorted_and_counted() {
    // DataTree.getChildren, getAllChildrenNumber
    let mut h = Harness::new();
    h.mk("/p", "");
    for c in ["b", "a", "c"] {
        h.mk(&format!("/p/{c}"), "");
    }
    h.mk("/p/a/x", "");
    h.mk("/pp", "");
    let (kids, stat) = h.tree.get_children("/p", &[]).unwrap();
    assert_eq!(kids, vec!["a", "b", "c"]);
    assert_eq!(stat.num_children, 3);
    assert_eq!(h.tree.all_children_number("/p", &[]), Ok(4));
    assert_eq!(h.tree.all_children_number("/", &[]), Ok(9));
    assert_eq!(h.tree.all_children_number("/p/a/x", &[]), Ok(0));
    assert_eq!(
        h.tree.all_children_number("/nope", &[]),
        Err(ErrorCode::NoNode)
    );
}

/// Every path below `path`, depth first, children in name order, read
/// through getChildren alone.
fn walked_by_get_children(tree: &DataTree, path: &str, into: &mut Vec<String>) {
    let (children, _) = tree.get_children(path, &[]).unwrap();
    for child in children {
        let child = format!("{}/{child}", path.trim_end_matches('/'));
        into.push(child.clone());
        walked_by_get_children(tree, &child, into);
    }
}

#[test]
fn wide_subtrees_are_walked_depth_first_in_name_order() {
    // A subtree walk looks children up in groups: parents of more
    // children than a group, of fewer, and of none, at several depths.
    let mut h = Harness::new();
    h.mk("/w", "");
    for i in 0..75 {
        h.mk(&format!("/w/c{i:02}"), "");
    }
    for i in 0..40 {
        h.mk(&format!("/w/c05/g{i:02}"), "");
    }
    h.mk("/w/c33/only", "");
    for i in 0..33 {
        h.mk(&format!("/w/c33/only/d{i:02}"), "");
    }
    h.mk("/w/c74/last", "");

    let mut expected = vec!["/".to_owned()];
    walked_by_get_children(&h.tree, "/", &mut expected);
    let walked: Vec<&str> = h.tree.znodes_parent_first().map(|(path, _)| path).collect();
    assert_eq!(walked, expected);
    assert_eq!(
        h.tree.all_children_number("/w", &[]),
        Ok(75 + 40 + 1 + 33 + 1)
    );
    assert_eq!(h.tree.all_children_number("/w/c33", &[]), Ok(34));
    assert_eq!(h.tree.all_children_number("/w/c05/g39", &[]), Ok(0));
}

#[test]
fn children_are_listed_page_by_page() {
    let mut h = Harness::new();
    h.mk("/p", "");
    let names: Vec<String> = (0..25).map(|i| format!("c{i:02}")).collect();
    for name in names.iter().rev() {
        h.mk(&format!("/p/{name}"), "");
    }
    let mut listed = Vec::new();
    let mut after = String::new();
    loop {
        let (page, stat, more) = h
            .tree
            .get_children_page("/p", &[], &after, 10, usize::MAX)
            .unwrap();
        assert_eq!(stat.num_children, 25);
        assert!(page.len() <= 10);
        listed.extend(page.iter().cloned());
        if !more {
            break;
        }
        after = page
            .last()
            .expect("a page before more is not empty")
            .clone();
    }
    assert_eq!(listed, names, "every child once, in order");

    // The byte bound: each name counts 4 bytes of length and its own 3.
    let (page, _, more) = h.tree.get_children_page("/p", &[], "", 100, 14).unwrap();
    assert_eq!((page, more), (vec!["c00".to_string(), "c01".into()], true));
    // A name between children, or past the last one.
    let (page, _, more) = h
        .tree
        .get_children_page("/p", &[], "c225", 2, usize::MAX)
        .unwrap();
    assert_eq!((page, more), (vec!["c23".to_string(), "c24".into()], false));
    let (page, _, more) = h
        .tree
        .get_children_page("/p", &[], "d", 2, usize::MAX)
        .unwrap();
    assert_eq!((page.len(), more), (0, false));
    assert_eq!(
        h.tree.get_children_page("/nope", &[], "", 2, usize::MAX),
        Err(ErrorCode::NoNode)
    );
}

#[test]
fn ops_need_a_live_session() {
    // SessionTracker.checkSession / checkGlobalSession
    let mut h = Harness::new();
    h.mk("/a", "");
    let stranger = 0x0200_0000_0000_0001;
    for op in [
        create("/b", "", CreateMode::Persistent),
        create("/b", "", CreateMode::Ephemeral),
        delete("/a", -1),
        set_data("/a", "", -1),
        set_acl("/a", Acl::open_unsafe(), -1),
        check("/a", -1),
    ] {
        let out = h.apply_as(stranger, op);
        assert_eq!(out.outcome, Outcome::Failed(ErrorCode::SessionExpired));
    }
}

#[test]
fn ephemerals_belong_to_their_session() {
    // DataTree.createNode (ephemerals map), killSession
    let mut h = Harness::new();
    let other = 0x0200_0000_0000_0002;
    h.session(other);
    h.mk("/dir", "");
    let e = CreateMode::Ephemeral;
    let out = h.apply(create("/dir/e2", "", e));
    let Outcome::Created { stat, .. } = out.outcome else {
        panic!()
    };
    assert_eq!(stat.ephemeral_owner, SESSION);
    h.apply(create("/e1", "", e));
    h.apply(create("/dir/e1", "", CreateMode::EphemeralSequential));
    h.apply_as(other, create("/theirs", "", e));
    assert_eq!(
        h.err(create("/e1/child", "", CreateMode::Persistent)),
        ErrorCode::NoChildrenForEphemerals
    );
    assert_eq!(h.tree.ephemeral_count(), 4);
    assert_eq!(h.tree.get_ephemerals(other, "/"), vec!["/theirs"]);
    assert_eq!(
        h.tree.get_ephemerals(SESSION, "/"),
        vec!["/dir/e10000000001", "/dir/e2", "/e1"]
    );
    assert_eq!(
        h.tree.get_ephemerals(SESSION, " "),
        h.tree.get_ephemerals(SESSION, "")
    );
    assert_eq!(
        h.tree.get_ephemerals(SESSION, "/dir/e1"),
        vec!["/dir/e10000000001"]
    );
    assert_eq!(h.tree.get_ephemerals(other, "/"), vec!["/theirs"]);

    let closed = h.apply(tree::TxnOp::CloseSession);
    assert_eq!(closed.outcome, Outcome::SessionClosed);
    assert_eq!(
        events(&closed),
        vec![
            ("/dir/e10000000001".into(), EventType::NodeDeleted),
            ("/dir".into(), EventType::NodeChildrenChanged),
            ("/dir/e2".into(), EventType::NodeDeleted),
            ("/dir".into(), EventType::NodeChildrenChanged),
            ("/e1".into(), EventType::NodeDeleted),
            ("/".into(), EventType::NodeChildrenChanged),
        ]
    );
    assert!(h.tree.session(SESSION).is_none());
    assert!(h.tree.get_ephemerals(SESSION, "/").is_empty());
    assert_eq!(h.tree.ephemeral_count(), 1);
    assert_eq!(h.stat("/dir").pzxid, h.zxid);
    assert_eq!(
        h.tree.sessions().map(|(id, _)| id).collect::<Vec<_>>(),
        vec![other]
    );
    // Closing an unknown session is not an error.
    assert_eq!(
        h.apply(tree::TxnOp::CloseSession).outcome,
        Outcome::SessionClosed
    );
}

#[test]
fn container_and_ttl_owners() {
    // EphemeralType, DataNode.getClientEphemeralOwner
    let mut h = Harness::new();
    let out = h.apply(create("/c", "", CreateMode::Container));
    let Outcome::Created { stat, .. } = out.outcome else {
        panic!()
    };
    assert_eq!(stat.ephemeral_owner, 0, "clients see 0 for containers");
    let out = h.apply(create_ttl("/t", CreateMode::PersistentWithTtl, 1000));
    let Outcome::Created { stat, .. } = out.outcome else {
        panic!()
    };
    assert_eq!(stat.ephemeral_owner, 0);
    // Containers and TTL nodes may have children.
    h.mk("/c/x", "");
    h.mk("/t/x", "");
    let out = h.apply(create_ttl(
        "/ts-",
        CreateMode::PersistentSequentialWithTtl,
        5,
    ));
    assert!(matches!(out.outcome, Outcome::Created { ref path, .. } if path.starts_with("/ts-")));
    // EphemeralType.validateTTL
    for (mode, ttl) in [
        (CreateMode::PersistentWithTtl, 0),
        (CreateMode::PersistentWithTtl, -1),
        (CreateMode::PersistentWithTtl, tree::TTL_MAX_MS + 1),
        (CreateMode::Persistent, 0),
        (CreateMode::Persistent, 100),
        (CreateMode::Container, 1),
    ] {
        assert_eq!(
            h.err(create_ttl("/bad", mode, ttl)),
            ErrorCode::BadArguments,
            "{mode:?} {ttl}"
        );
    }
    let out = h.apply(create_ttl(
        "/max",
        CreateMode::PersistentWithTtl,
        tree::TTL_MAX_MS,
    ));
    assert!(matches!(out.outcome, Outcome::Created { .. }));
}

#[test]
fn reaper_candidates_and_reap() {
    // ContainerManager.getCandidates, PrepRequestProcessor deleteContainer
    let mut h = Harness::new();
    h.apply(create("/used", "", CreateMode::Container));
    h.mk("/used/child", "");
    h.apply(delete("/used/child", -1));
    h.apply(create("/fresh", "", CreateMode::Container));
    h.apply(create("/full", "", CreateMode::Container));
    h.mk("/full/x", "");
    h.apply(create_ttl("/ttl", CreateMode::PersistentWithTtl, 1000));
    h.mk("/plain", "");
    h.apply(create("/eph", "", CreateMode::Ephemeral));
    let ttl_mtime = h.stat("/ttl").mtime;

    let now = h.time_ms;
    assert_eq!(h.tree.reap_candidates(now, 0), vec!["/used"]);
    let fresh_mtime = h.stat("/fresh").mtime;
    assert_eq!(
        h.tree.reap_candidates(fresh_mtime + 501, 500),
        vec!["/fresh", "/used"]
    );
    assert_eq!(
        h.tree.reap_candidates(ttl_mtime + 1001, 0),
        vec!["/ttl", "/used"]
    );
    assert_eq!(h.tree.reap_candidates(ttl_mtime + 1000, 0), vec!["/used"]);

    let reap = |p: &str| tree::TxnOp::Reap { path: p.into() };
    assert_eq!(h.err(reap("/full")), ErrorCode::NotEmpty);
    assert_eq!(h.err(reap("/plain")), ErrorCode::BadVersion);
    assert_eq!(h.err(reap("/eph")), ErrorCode::BadVersion);
    assert_eq!(
        h.err(reap("/ttl")),
        ErrorCode::BadVersion,
        "not expired at Txn time"
    );
    assert_eq!(h.err(reap("/gone")), ErrorCode::NoNode);
    assert_eq!(h.err(reap("/zookeeper")), ErrorCode::BadArguments);
    let applied = h.apply(reap("/used"));
    assert_eq!(applied.outcome, Outcome::Deleted);
    assert_eq!(
        events(&applied),
        vec![
            ("/used".into(), EventType::NodeDeleted),
            ("/".into(), EventType::NodeChildrenChanged)
        ]
    );
    // A reaper Txn needs no session and no permission.
    h.apply(set_acl(
        "/",
        vec![acl(perms::READ | perms::CREATE, "world", "anyone")],
        -1,
    ));
    h.time_ms = ttl_mtime + 2000;
    let out = h.apply_full(0, vec![], reap("/ttl"));
    assert_eq!(out.outcome, Outcome::Deleted);
    assert!(h.tree.exists("/ttl").is_none());
}

#[test]
fn zookeeper_subtree_rules() {
    // DataTree.isSpecialPath, addConfigNode (READ_ACL_UNSAFE)
    let mut h = Harness::new();
    assert_eq!(
        h.err(set_data("/zookeeper/config", "x", -1)),
        ErrorCode::NoAuth
    );
    assert!(matches!(
        h.apply(set_data("/zookeeper", "x", -1)).outcome,
        Outcome::SetData { .. }
    ));
    let out = h.apply(create("/zookeeper/mine", "", CreateMode::Persistent));
    assert!(matches!(out.outcome, Outcome::Created { .. }));
    let out = h.apply_full(
        SESSION,
        vec![Id::new("super", "")],
        set_data("/zookeeper/config", "x", -1),
    );
    assert!(matches!(out.outcome, Outcome::SetData { .. }));
}

#[test]
fn approximate_data_size_follows_zookeeper() {
    // DataTree.nodeDataSize
    let mut h = Harness::new();
    let base = h.tree.approximate_data_bytes();
    h.mk("/abc", "12345");
    assert_eq!(h.tree.approximate_data_bytes(), base + 4 + 5);
    h.apply(set_data("/abc", "1", -1));
    assert_eq!(h.tree.approximate_data_bytes(), base + 4 + 1);
    h.mk("/é", "");
    assert_eq!(
        h.tree.approximate_data_bytes(),
        base + 4 + 1 + 2,
        "UTF-16 units"
    );
    assert_eq!(h.tree.node_count(), 7);
}

#[test]
fn quota_stats_follow_the_subtree() {
    // DataTree.createNode/deleteNode/setData quota hooks, updateQuotaForPath
    let mut h = Harness::new();
    h.mk("/app", "12");
    h.mk("/app/a", "345");
    h.mk("/zookeeper/quota/app", "");
    h.mk("/zookeeper/quota/app/zookeeper_limits", "count=10,bytes=-1");
    let stats = "/zookeeper/quota/app/zookeeper_stats";
    let out = h.apply(create(stats, "count=0,bytes=0", CreateMode::Persistent));
    let Outcome::Created { stat, .. } = out.outcome else {
        panic!()
    };
    assert_eq!(stat.data_length, 15, "the reply predates the recount");
    let read = |h: &Harness| {
        String::from_utf8(h.tree.get_data(stats, &[]).unwrap().0.unwrap().to_vec()).unwrap()
    };
    assert_eq!(read(&h), "count=2,bytes=5");
    let before = h.stat(stats);
    h.mk("/app/b", "67");
    assert_eq!(read(&h), "count=3,bytes=7");
    h.apply(set_data("/app/a", "", -1));
    assert_eq!(read(&h), "count=3,bytes=4");
    h.apply(delete("/app/b", -1));
    assert_eq!(read(&h), "count=2,bytes=2");
    let after = h.stat(stats);
    assert_eq!(
        (after.version, after.mzxid),
        (before.version, before.mzxid),
        "no stat change"
    );
    h.mk("/apple", "x");
    assert_eq!(read(&h), "count=2,bytes=2", "prefixes are per component");
    // Deleting the limits node stops the tracking.
    h.apply(delete("/zookeeper/quota/app/zookeeper_limits", -1));
    h.mk("/app/c", "");
    assert_eq!(read(&h), "count=2,bytes=2");
}

/// `/app` with two znodes (5 bytes) under a quota whose limits node
/// holds `limits`, quotas enforced.
fn quota_harness(limits: &str) -> Harness {
    let mut h = Harness::new();
    h.mk("/app", "12");
    h.mk("/app/a", "345");
    h.mk("/zookeeper/quota/app", "");
    h.mk("/zookeeper/quota/app/zookeeper_limits", limits);
    h.mk("/zookeeper/quota/app/zookeeper_stats", "");
    h.enforce_quota = true;
    h
}

#[test]
fn a_hard_count_limit_refuses_the_create_that_passes_it() {
    // ZooKeeperServer.checkQuota: usage + diff > hard limit throws
    let mut h = quota_harness("count=-1,bytes=-1=;countHardLimit=3");
    let fits = h.apply(create("/app/b", "", CreateMode::Persistent));
    assert!(matches!(fits.outcome, Outcome::Created { .. }));
    assert!(fits.quota_breaches.is_empty());
    let over = h.apply(create("/app/c", "", CreateMode::Persistent));
    assert_eq!(over.outcome, Outcome::Failed(ErrorCode::QuotaExceeded));
    assert_eq!(
        over.quota_breaches
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec!["Quota exceeded: /app [current count=4, hardCountLimit=3]"]
    );
    assert_eq!(over.quota_breaches[0].namespace.as_deref(), Some("app"));
    assert!(h.tree.exists("/app/c").is_none());
    // A setData changes no count; a delete is never checked.
    assert!(matches!(
        h.apply(set_data("/app/b", "more", -1)).outcome,
        Outcome::SetData { .. }
    ));
    assert_eq!(h.apply(delete("/app/b", -1)).outcome, Outcome::Deleted);
    assert!(matches!(
        h.apply(create("/app/c", "", CreateMode::Persistent))
            .outcome,
        Outcome::Created { .. }
    ));
    // Without enforcement the limit is bookkeeping only.
    h.enforce_quota = false;
    let unchecked = h.apply(create("/app/d", "", CreateMode::Persistent));
    assert!(matches!(unchecked.outcome, Outcome::Created { .. }));
    assert!(unchecked.quota_breaches.is_empty());
}

#[test]
fn a_hard_byte_limit_weighs_the_data_a_set_data_replaces() {
    let mut h = quota_harness("count=-1,bytes=-1=;byteHardLimit=8");
    // 5 bytes used; "345" (3) replaced by 6 bytes: 8, at the limit.
    assert!(matches!(
        h.apply(set_data("/app/a", "abcdef", -1)).outcome,
        Outcome::SetData { .. }
    ));
    let over = h.apply(set_data("/app/a", "abcdefg", -1));
    assert_eq!(over.outcome, Outcome::Failed(ErrorCode::QuotaExceeded));
    assert_eq!(
        over.quota_breaches[0].to_string(),
        "Quota exceeded: /app [current bytes=9, hardByteLimit=8]"
    );
    // The quota is checked before the version, as in ZooKeeper.
    assert_eq!(
        h.err(set_data("/app/a", "abcdefg", 99)),
        ErrorCode::QuotaExceeded
    );
    assert_eq!(h.err(set_data("/app/a", "abc", 99)), ErrorCode::BadVersion);
    // Shrinking always fits; null data weighs nothing.
    let set_null = TxnOp::SetData {
        path: "/app/a".into(),
        data: None,
        version: -1,
    };
    assert!(matches!(h.apply(set_null).outcome, Outcome::SetData { .. }));
    let create_null = TxnOp::Create {
        path: "/app/n".into(),
        data: None,
        acl: Acl::open_unsafe(),
        mode: CreateMode::Persistent,
        ttl_ms: -1,
    };
    assert!(matches!(
        h.apply(create_null).outcome,
        Outcome::Created { .. }
    ));
}

#[test]
fn a_soft_limit_is_reported_and_the_write_goes_on() {
    let mut h = quota_harness("count=2,bytes=4");
    let out = h.apply(create("/app/b", "xy", CreateMode::Persistent));
    assert!(matches!(out.outcome, Outcome::Created { .. }));
    let said: Vec<String> = out.quota_breaches.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        vec![
            "Quota exceeded: /app [current count=3, softCountLimit=2]",
            "Quota exceeded: /app [current bytes=7, softByteLimit=4]",
        ]
    );
    // The hard limit wins over the soft one when both are set.
    let mut h = quota_harness("count=2,bytes=-1=;countHardLimit=5");
    let out = h.apply(create("/app/b", "", CreateMode::Persistent));
    assert!(matches!(out.outcome, Outcome::Created { .. }));
    assert!(out.quota_breaches.is_empty());
}

#[test]
fn the_deepest_quota_decides() {
    let mut h = quota_harness("count=-1,bytes=-1=;countHardLimit=100");
    h.mk("/app/deep", "");
    h.mk("/zookeeper/quota/app/deep", "");
    h.mk(
        "/zookeeper/quota/app/deep/zookeeper_limits",
        "count=-1,bytes=-1=;countHardLimit=1",
    );
    h.mk("/zookeeper/quota/app/deep/zookeeper_stats", "");
    assert_eq!(
        h.err(create("/app/deep/x", "", CreateMode::Persistent)),
        ErrorCode::QuotaExceeded
    );
    assert!(matches!(
        h.apply(create("/app/x", "", CreateMode::Persistent))
            .outcome,
        Outcome::Created { .. }
    ));
    // A sequential create is checked under its final name.
    assert_eq!(
        h.err(create("/app/deep/s-", "", CreateMode::PersistentSequential)),
        ErrorCode::QuotaExceeded
    );
}

#[test]
fn a_quota_hit_in_a_multi_applies_nothing_and_is_judged_on_the_tree_before_it() {
    let mut h = quota_harness("count=-1,bytes=-1=;countHardLimit=3");
    let out = h.apply(TxnOp::Multi(vec![
        set_data("/app", "changed", -1),
        create("/app/b", "", CreateMode::Persistent),
        create("/app/c", "", CreateMode::Persistent),
        create("/app/b/d", "", CreateMode::Persistent),
    ]));
    // ZooKeeper's prep stage reads limits and usage from the committed
    // tree: each create alone fits (2 + 1 <= 3), so the multi does too.
    assert!(matches!(&out.outcome, Outcome::Multi(r) if r.iter().all(Result::is_ok)));
    assert_eq!(h.stat("/app").num_children, 3);

    let mut h = quota_harness("count=-1,bytes=-1=;countHardLimit=2");
    let out = h.apply(TxnOp::Multi(vec![
        set_data("/app", "changed", -1),
        create("/app/b", "", CreateMode::Persistent),
    ]));
    assert_eq!(out.outcome.multi_error(), Some(ErrorCode::QuotaExceeded));
    assert!(out.triggers.is_empty());
    assert_eq!(out.quota_breaches.len(), 1);
    assert_eq!(h.tree.get_data("/app", &[]).unwrap().0.unwrap(), "12");
    assert!(h.tree.exists("/app/b").is_none());
}

#[test]
fn quotas_are_summed_per_namespace_as_zookeeper_s_metrics_do() {
    // QuotaMetricsUtils: leaves under /zookeeper/quota, hard limit first
    let mut h = quota_harness("count=-1,bytes=-1=;countHardLimit=3");
    h.mk("/app/deep", "");
    h.mk("/zookeeper/quota/app/deep", "");
    h.mk(
        "/zookeeper/quota/app/deep/zookeeper_limits",
        "count=7,bytes=100",
    );
    h.mk("/zookeeper/quota/app/deep/zookeeper_stats", "");
    h.mk("/other", "");
    let q = h.tree.quotas_per_namespace();
    let app = |m: &std::collections::BTreeMap<String, i64>| m.get("app").copied();
    assert_eq!(app(&q.count_limit), Some(3 + 7));
    assert_eq!(app(&q.bytes_limit), Some(-1 + 100));
    // /app counts itself, /app/a and /app/deep; /app/deep itself.
    assert_eq!(app(&q.count_usage), Some(3 + 1));
    assert_eq!(app(&q.bytes_usage), Some(5));
    assert_eq!(q.count_limit.len(), 1);
}

#[test]
fn a_limits_node_zookeeper_cannot_parse_fails_the_write() {
    // new StatsTrack(data) throws; the prep stage answers MarshallingError
    let mut h = quota_harness("count=x");
    assert_eq!(
        h.err(create("/app/b", "", CreateMode::Persistent)),
        ErrorCode::MarshallingError
    );
    h.enforce_quota = false;
    assert!(matches!(
        h.apply(create("/app/b", "", CreateMode::Persistent))
            .outcome,
        Outcome::Created { .. }
    ));
}

#[test]
fn triggers_carry_the_acl_zookeeper_filters_events_with() {
    // DataTree.createNode/deleteNode/setData pass the node's or the
    // parent's ACL to triggerWatch; NIOServerCnxn.process checks READ
    let mut h = Harness::new();
    let private = vec![acl(perms::ALL, "digest", "u:h")];
    h.apply(create_acl(
        "/dir",
        "",
        CreateMode::Persistent,
        vec![acl(perms::ALL, "world", "anyone")],
    ));
    let created = h.apply(create_acl(
        "/dir/p",
        "",
        CreateMode::Persistent,
        private.clone(),
    ));
    assert_eq!(&*created.triggers[0].acl, &private[..]);
    assert_eq!(&*created.triggers[1].acl, &Acl::open_unsafe()[..]);
    let out = h.apply_full(
        SESSION,
        vec![Id::new("digest", "u:h")],
        set_data("/dir/p", "x", -1),
    );
    assert_eq!(&*out.triggers[0].acl, &private[..]);
    let deleted = h.apply(delete("/dir/p", -1));
    assert_eq!(&*deleted.triggers[0].acl, &private[..]);
    assert_eq!(&*deleted.triggers[1].acl, &Acl::open_unsafe()[..]);
}

#[test]
fn versions_are_cheap_and_independent() {
    // Readers keep an old version while apply goes on.
    let mut h = Harness::new();
    h.mk("/a", "old");
    let snapshot = h.tree.clone();
    h.apply(set_data("/a", "new", -1));
    h.mk("/b", "");
    assert_eq!(snapshot.get_data("/a", &[]).unwrap().0.unwrap(), "old");
    assert!(snapshot.exists("/b").is_none());
    assert_eq!(h.tree.get_data("/a", &[]).unwrap().0.unwrap(), "new");
    fn send_sync<T: Send + Sync + 'static>(_: &T) {}
    send_sync(&h.tree);
}

/// What the server weighs to decide whether a txn may be applied while
/// readers wait: a multi's ops, a closing session's ephemerals, a quota
/// recount's walk (the whole tree), else one.
#[test]
fn znodes_touched_at_most_counts_multi_ops_closing_ephemerals_and_quota_recounts() {
    let mut h = Harness::new();
    h.mk("/p", "");
    for name in ["/p/e1", "/p/e2"] {
        h.apply(create(name, "", CreateMode::Ephemeral));
    }
    let txn = |op| Txn {
        time_ms: T0,
        session_id: SESSION,
        auth: vec![],
        enforce_quota: false,
        op,
    };
    let multi = TxnOp::Multi(vec![
        set_data("/p", "a", -1),
        set_data("/p", "b", -1),
        set_data("/p", "c", -1),
    ]);
    assert_eq!(h.tree.znodes_touched_at_most(&txn(multi)), 3);
    assert_eq!(h.tree.znodes_touched_at_most(&txn(TxnOp::CloseSession)), 2);
    let other_session = Txn {
        session_id: SESSION + 1,
        ..txn(TxnOp::CloseSession)
    };
    assert_eq!(h.tree.znodes_touched_at_most(&other_session), 0);
    assert_eq!(
        h.tree.znodes_touched_at_most(&txn(set_data("/p", "", -1))),
        1
    );
    let recount = create(
        "/zookeeper/quota/p/zookeeper_stats",
        "",
        CreateMode::Persistent,
    );
    let whole_tree = h.tree.node_count() - 1;
    assert_eq!(
        h.tree.znodes_touched_at_most(&txn(recount.clone())),
        whole_tree
    );
    assert_eq!(
        h.tree
            .znodes_touched_at_most(&txn(TxnOp::Multi(vec![recount, set_data("/p", "", -1)]))),
        whole_tree + 1
    );
}
