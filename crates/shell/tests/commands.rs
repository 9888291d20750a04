//! Every shell command against a real Paddock server, with the output
//! zkCli prints for it (taken from Debian's zkCli 3.8 against the same
//! server; `tests/e2e/test_shell.py` compares the two programs directly).

mod common;

use std::collections::HashMap;

use common::{bounded, Server, TestShell};

/// The `key = value` lines of a printed `Stat`, which must be exactly
/// zkCli's eleven, in its order.
fn stat_fields(text: &str) -> HashMap<String, String> {
    let keys: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split_once(" = ").map(|(key, _)| key))
        .collect();
    assert_eq!(
        keys,
        [
            "cZxid",
            "ctime",
            "mZxid",
            "mtime",
            "pZxid",
            "cversion",
            "dataVersion",
            "aclVersion",
            "ephemeralOwner",
            "dataLength",
            "numChildren"
        ],
        "{text}"
    );
    text.lines()
        .filter_map(|line| line.split_once(" = "))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Java's `Date.toString`: `Sat Nov 21 11:46:25 UTC 2026`.
fn assert_java_date(text: &str) {
    let parts: Vec<&str> = text.split(' ').collect();
    assert_eq!(parts.len(), 6, "{text}");
    assert!(["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"].contains(&parts[0]));
    assert_eq!(parts[1].len(), 3, "{text}");
    assert_eq!(parts[2].len(), 2, "{text}");
    assert_eq!(parts[3].len(), 8, "{text}");
    assert!(parts[5].parse::<u32>().is_ok(), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn reads_and_writes() {
    let server = Server::start();
    bounded(async {
        let mut sh = TestShell::connect(&server).await;
        let created = sh.run("create /t hello").await;
        assert_eq!(
            (created.out.as_str(), created.err.as_str()),
            ("", "Created /t\n")
        );
        assert_eq!(sh.ok("get /t").await, "hello\n");
        assert_eq!(sh.ok("create /t/b 'two words'").await, "");
        assert_eq!(sh.ok("get /t/b").await, "two words\n");
        sh.ok("create /t/a").await;
        // No data is null data, which zkCli prints as null.
        assert_eq!(sh.ok("get /t/a").await, "null\n");
        assert_eq!(sh.ok("ls /t").await, "[a, b]\n");
        assert_eq!(sh.ok("ls /t/a").await, "[]\n");

        let out = sh.ok("set -s /t world!").await;
        let stat = stat_fields(&out);
        assert_eq!(stat["dataVersion"], "1");
        assert_eq!(stat["dataLength"], "6");
        assert_eq!(stat["numChildren"], "2");
        assert_eq!(stat["cversion"], "2");
        assert_eq!(stat["ephemeralOwner"], "0x0");
        assert!(stat["cZxid"].starts_with("0x"));
        assert_java_date(&stat["ctime"]);
        assert_java_date(&stat["mtime"]);

        let out = sh.ok("get -s /t").await;
        let (data, stat_text) = out.split_once('\n').unwrap();
        assert_eq!(data, "world!");
        assert_eq!(stat_fields(stat_text), stat);
        assert_eq!(stat_fields(&sh.ok("stat /t").await), stat);
        let out = sh.ok("ls -s /t").await;
        let (children, stat_text) = out.split_once('\n').unwrap();
        assert_eq!(children, "[a, b]");
        assert_eq!(stat_fields(stat_text), stat);

        // Versions.
        assert_eq!(
            sh.fails("set -v 7 /t x").await,
            "version No is not valid : /t\n"
        );
        sh.ok("set -v 1 /t x").await;
        assert_eq!(
            sh.fails("delete -v 9 /t/a").await,
            "version No is not valid : /t/a\n"
        );
        sh.ok("delete -v 0 /t/a").await;

        // Errors, word for word.
        assert_eq!(
            sh.fails("get /t/nope").await,
            "Node does not exist: /t/nope\n"
        );
        assert_eq!(
            sh.fails("stat /t/nope").await,
            "Node does not exist: /t/nope\n"
        );
        assert_eq!(
            sh.fails("ls /t/nope").await,
            "Node does not exist: /t/nope\n"
        );
        assert_eq!(sh.fails("create /t").await, "Node already exists: /t\n");
        assert_eq!(sh.fails("create /x/y").await, "Node does not exist: /x/y\n");
        assert_eq!(sh.fails("delete /t").await, "Node not empty: /t\n");
        assert_eq!(
            sh.fails("get t").await,
            "Path must start with / character\n"
        );
        assert_eq!(
            sh.fails("get /t/").await,
            "Path must not end with / character\n"
        );
        assert_eq!(
            sh.fails("ls //x").await,
            "Invalid path string \"//x\" caused by empty node name specified @1\n"
        );

        assert_eq!(sh.ok("getAllChildrenNumber /t").await, "1\n");
        assert_eq!(sh.ok("sync /t").await, "Sync is OK\n");
        sh.ok("deleteall /t").await;
        assert_eq!(sh.fails("get /t").await, "Node does not exist: /t\n");
        assert_eq!(sh.fails("deleteall /t").await, "Node does not exist: /t\n");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn node_kinds() {
    let server = Server::start();
    bounded(async {
        let mut sh = TestShell::connect(&server).await;
        sh.ok("create /k").await;
        assert_eq!(
            sh.run("create -s /k/s- x").await.err,
            "Created /k/s-0000000000\n"
        );
        assert_eq!(
            sh.run("create -s /k/s- x").await.err,
            "Created /k/s-0000000001\n"
        );
        assert_eq!(sh.run("create -e /k/e").await.err, "Created /k/e\n");
        assert_eq!(
            sh.run("create -e -s /k/es").await.err,
            "Created /k/es0000000003\n"
        );
        let owner = &stat_fields(&sh.ok("stat /k/e").await)["ephemeralOwner"];
        assert_ne!(owner, "0x0");
        assert_eq!(sh.ok("getEphemerals").await, "[/k/e, /k/es0000000003]\n");
        assert_eq!(sh.ok("getEphemerals /k/es").await, "[/k/es0000000003]\n");
        assert_eq!(
            sh.fails("create /k/e/child").await,
            "Ephemerals cannot have children: /k/e/child\n"
        );
        sh.ok("create -c /k/c").await;
        sh.ok("create -t 60000 /k/ttl").await;
        sh.ok("create -s -t 60000 /k/ttls-").await;
        assert_eq!(
            sh.fails("create -t 0 /k/bad").await,
            "ttl must be positive and cannot be larger than: 1099511627775\n"
        );
        assert_eq!(
            sh.fails("create -c -e /k/bad").await,
            "-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential.\n"
        );
        assert_eq!(
            sh.ok("ls /k").await,
            "[c, e, es0000000003, s-0000000000, s-0000000001, ttl, ttls-0000000006]\n"
        );
        assert_eq!(
            sh.ok("ls -R /k").await,
            "/k\n/k/c\n/k/e\n/k/es0000000003\n/k/s-0000000000\n/k/s-0000000001\n/k/ttl\n\
             /k/ttls-0000000006\n"
        );
        sh.ok("create /k/c/x").await;
        sh.ok("create /k/c/x/y").await;
        // Depth first, each node's children listed before descending.
        sh.ok("create /k/c/w").await;
        let tree = sh.ok("ls -R /k/c").await;
        assert_eq!(tree, "/k/c\n/k/c/w\n/k/c/x\n/k/c/x/y\n");
        // Batches of two nodes per multi, and one by one.
        assert_eq!(sh.ok("deleteall -b 2 /k/c").await, "");
        sh.ok("create /k/d").await;
        sh.ok("create /k/d/e").await;
        sh.ok("deleteall /k/d -b 0").await;
        assert_eq!(sh.ok("getAllChildrenNumber /k").await, "6\n");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn acls_and_auth() {
    let server = Server::start();
    bounded(async {
        let mut sh = TestShell::connect(&server).await;
        sh.ok("create /open").await;
        assert_eq!(sh.ok("getAcl /open").await, "'world,'anyone\n: cdrwa\n");
        let out = sh.ok("getAcl -s /open").await;
        assert!(
            out.starts_with("'world,'anyone\n: cdrwa\ncZxid = 0x"),
            "{out}"
        );

        sh.ok("create /ro x world:anyone:r").await;
        assert_eq!(sh.ok("getAcl /ro").await, "'world,'anyone\n: r\n");
        assert_eq!(
            sh.fails("set /ro y").await,
            "Insufficient permission : /ro\n"
        );
        assert_eq!(
            sh.fails("setAcl /ro world:anyone:cdrwa").await,
            "Insufficient permission : /ro\n"
        );

        // AclParser's complaints come first, and the good entries stay.
        let out = sh.run("create /half x bad,world:anyone:rz").await;
        assert_eq!(
            out.err,
            "bad does not have the form scheme:id:perm\nUnknown perm type: z\nCreated /half\n"
        );
        assert_eq!(sh.ok("getAcl /half").await, "'world,'anyone\n: r\n");
        let out = sh.run("create /none x bad").await;
        assert_eq!(out.code, 1);
        assert_eq!(
            out.err,
            "bad does not have the form scheme:id:perm\nKeeperErrorCode = InvalidACL\n\
             Acl is not valid : null\n"
        );

        // A digest identity: the ACL names it, the session proves it.
        assert_eq!(sh.ok("whoami").await, "Auth scheme: User\nip: 127.0.0.1\n");
        sh.ok("addauth digest alice:secret").await;
        assert_eq!(
            sh.ok("whoami").await,
            "Auth scheme: User\nip: 127.0.0.1\ndigest: alice\n"
        );
        sh.ok("create /mine x auth::cdrwa").await;
        let acl = sh.ok("getAcl /mine").await;
        assert!(acl.starts_with("'digest,'alice:"), "{acl}");
        assert!(acl.ends_with("\n: cdrwa\n"), "{acl}");

        let out = sh.ok("setAcl -s /open world:anyone:cdra").await;
        assert_eq!(stat_fields(&out)["aclVersion"], "1");
        assert_eq!(
            sh.fails("setAcl -v 0 /open world:anyone:r").await,
            "version No is not valid : /open\n"
        );
        sh.ok("create /open/a").await;
        sh.ok("create /open/a/b").await;
        sh.ok("setAcl -R /open world:anyone:cdrwa").await;
        assert_eq!(sh.ok("getAcl /open/a/b").await, "'world,'anyone\n: cdrwa\n");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn watches_print_once_per_notification() {
    let server = Server::start();
    bounded(async {
        let mut sh = TestShell::connect(&server).await;
        let connected = sh.events.take();
        assert_eq!(
            connected,
            "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null\n"
        );
        sh.ok("create /w x").await;
        // Three watches on /w's data: one event, as zkCli's single
        // default watcher prints it.
        sh.ok("get -w /w").await;
        sh.ok("get -w /w").await;
        sh.ok("stat -w /w").await;
        assert_eq!(sh.events.take(), "");
        sh.ok("set /w y").await;
        assert_eq!(
            sh.events.take(),
            "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:/w\n"
        );
        sh.ok("ls -w /w").await;
        sh.ok("create /w/c").await;
        assert!(sh
            .events
            .take()
            .contains("type:NodeChildrenChanged path:/w\n"));

        // A watch for a node that does not exist yet.
        assert_eq!(
            sh.fails("stat -w /w/later").await,
            "Node does not exist: /w/later\n"
        );
        sh.ok("create /w/later").await;
        assert!(sh
            .events
            .take()
            .contains("type:NodeCreated path:/w/later\n"));

        // Removing watches tells the watcher.
        sh.ok("get -w /w").await;
        sh.ok("ls -w /w").await;
        sh.ok("removewatches /w").await;
        let removed = sh.events.take();
        assert!(
            removed.contains("type:DataWatchRemoved path:/w\n"),
            "{removed}"
        );
        assert!(
            removed.contains("type:ChildWatchRemoved path:/w\n"),
            "{removed}"
        );
        assert_eq!(
            sh.fails("removewatches /w -d").await,
            "KeeperErrorCode = No such watcher for /w\n"
        );

        // A persistent recursive watch sees everything below, until removed.
        sh.ok("addWatch /w").await;
        sh.ok("set /w/c data").await;
        sh.ok("create /w/c/d").await;
        sh.ok("delete /w/c/d").await;
        let events = sh.events.take();
        let types: Vec<&str> = events
            .lines()
            .filter_map(|line| line.strip_prefix("WatchedEvent state:SyncConnected "))
            .collect();
        assert_eq!(
            types,
            [
                "type:NodeDataChanged path:/w/c",
                "type:NodeCreated path:/w/c/d",
                "type:NodeDeleted path:/w/c/d"
            ]
        );
        sh.ok("removewatches /w -r").await;
        assert!(sh
            .events
            .take()
            .contains("type:PersistentWatchRemoved path:/w\n"));
        sh.ok("set /w/c again").await;
        assert_eq!(sh.events.take(), "");

        // printwatches off silences events, not commands.
        sh.ok("addWatch -m PERSISTENT /w").await;
        assert_eq!(sh.ok("printwatches").await, "printwatches is on\n");
        sh.ok("printwatches off").await;
        sh.ok("set /w quiet").await;
        assert_eq!(sh.events.take(), "");
        assert_eq!(sh.ok("printwatches").await, "printwatches is off\n");
        sh.ok("printwatches on").await;
        sh.ok("set /w loud").await;
        assert!(sh.events.take().contains("type:NodeDataChanged path:/w\n"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn session_history_and_errors() {
    let server = Server::start();
    bounded(async {
        let mut sh = TestShell::connect(&server).await;
        let host = server.connect_string();
        assert_eq!(sh.shell.prompt(), format!("[zk: {host}(CONNECTED) 0] "));
        sh.ok("create /h").await;
        sh.ok("create -e /h/e").await;
        assert_eq!(sh.shell.prompt(), format!("[zk: {host}(CONNECTED) 2] "));

        // Parse errors: usage, commons-cli's wording, exit codes.
        assert_eq!(sh.fails("get").await, "get [-s] [-w] path\n");
        assert_eq!(sh.fails("get -x /h").await, "Unrecognized option: -x\n");
        assert_eq!(
            sh.fails("set /h x -v").await,
            "Missing argument for option: v\n"
        );
        let unknown = sh.run("bogus").await;
        assert_eq!(unknown.code, 127);
        assert!(unknown.err.ends_with("Command not found: bogus\n"));
        assert!(sh
            .ok("help")
            .await
            .contains("\tls [-s] -p pageSize path # the children page by page"));
        let old = sh.run("get /h watch").await;
        assert_eq!(
            (old.out.as_str(), old.err.as_str()),
            (
                "null\n",
                "'get path [watch]' has been deprecated. Please use 'get [-s] [-w] path' instead.\n"
            )
        );

        // history shows the last ten and the current command; redo reruns.
        let history = sh.ok("history").await;
        let lines: Vec<&str> = history.lines().collect();
        assert_eq!(lines.first(), Some(&"0 - create /h"));
        assert_eq!(lines.last(), Some(&"8 - history"));
        assert_eq!(sh.fails("redo 0").await, "Node already exists: /h\n");
        assert_eq!(sh.fails("redo 99").await, "Command index out of range\n");
        assert!(sh.ok("history").await.contains("9 - create /h\n"));

        // close ends the session (and its ephemeral node); connect starts
        // another.
        sh.events.take();
        sh.ok("close").await;
        assert!(sh
            .events
            .take()
            .contains("state:Closed type:None path:null"));
        assert_eq!(sh.shell.prompt(), format!("[zk: {host}(CLOSED) 13] "));
        assert_eq!(sh.fails("ls /").await, "Not connected\n");
        sh.ok("connect").await;
        assert!(sh
            .events
            .take()
            .contains("state:SyncConnected type:None path:null"));
        assert_eq!(sh.ok("ls /h").await, "[]\n");
        sh.ok(&format!("connect {host}")).await;
        assert_eq!(sh.ok("getEphemerals").await, "[]\n");
    })
    .await;
}
