//! What zkCli prints, and how it reads ACLs and checks paths: each
//! function here reproduces one piece of zkCli (or of the Java client or
//! jute beneath it) whose output scripts and people read, so the outputs
//! can be compared line for line.

use client::{perms, Acl, Error, EventType, Id, KeeperState, Stat};

use crate::date;

/// A `Stat` as zkCli's `StatPrinter`: eleven lines, zxids and the owner
/// in Java's `Long.toHexString` (two's complement for negatives, as
/// Rust's `{:x}` on `i64`), times as Java's `Date.toString`.
pub fn stat(stat: &Stat) -> String {
    format!(
        "cZxid = 0x{:x}\n\
         ctime = {}\n\
         mZxid = 0x{:x}\n\
         mtime = {}\n\
         pZxid = 0x{:x}\n\
         cversion = {}\n\
         dataVersion = {}\n\
         aclVersion = {}\n\
         ephemeralOwner = 0x{:x}\n\
         dataLength = {}\n\
         numChildren = {}\n",
        stat.czxid,
        date::java_date(stat.ctime),
        stat.mzxid,
        date::java_date(stat.mtime),
        stat.pzxid,
        stat.cversion,
        stat.version,
        stat.aversion,
        stat.ephemeral_owner,
        stat.data_length,
        stat.num_children,
    )
}

/// Java's `String.compareTo`, by which zkCli sorts children: UTF-16
/// order, which differs from Rust's for characters beyond U+FFFF.
pub fn java_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// A list as Java's `List.toString`, which is how zkCli prints children
/// and ephemeral nodes: `[a, b]`.
pub fn list<S: AsRef<str>>(items: &[S]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("[{}]", items.join(", "))
}

/// `config -c`, as zkCli's `ConfigUtils.getClientConfigStr`: the
/// configuration's version, a space, and the client address of every
/// server that has one, comma-separated (a bare port is the wildcard
/// address).
pub fn client_config(text: &str) -> String {
    let mut version = "";
    let mut clients = Vec::new();
    for line in text.lines() {
        match line.split_once('=') {
            Some(("version", v)) => version = v.trim(),
            Some((key, value)) if key.starts_with("server.") => {
                if let Some((_, client)) = value.split_once(';') {
                    let client = client.trim();
                    clients.push(match client.contains(':') {
                        true => client.to_string(),
                        false => format!("0.0.0.0:{client}"),
                    });
                }
            }
            _ => {}
        }
    }
    format!("{version} {}", clients.join(","))
}

/// Permissions as ZooKeeper's `ZKUtil.getPermString`: `cdrwa` order.
pub fn perm_string(perms: i32) -> String {
    [
        (perms::CREATE, 'c'),
        (perms::DELETE, 'd'),
        (perms::READ, 'r'),
        (perms::WRITE, 'w'),
        (perms::ADMIN, 'a'),
    ]
    .into_iter()
    .filter(|(bit, _)| perms & bit != 0)
    .map(|(_, c)| c)
    .collect()
}

/// A string as jute's `ToStringOutputArchive` writes it: a leading quote,
/// and the characters that would break its format percent-escaped.
fn jute_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 1);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\0' => out.push_str("%00"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            ',' => out.push_str("%2C"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}

/// An `Id` as its jute `toString`, which ends with a newline because it
/// is a top-level record: `'world,'anyone` and `\n`.
fn jute_id(id: &Id) -> String {
    format!("{},{}\n", jute_string(&id.scheme), jute_string(&id.id))
}

/// One ACL entry as `getAcl` prints it: `'world,'anyone`, a newline, and
/// `: cdrwa` (zkCli concatenates the id's `toString` and the perms).
pub fn acl(acl: &Acl) -> String {
    format!("{}: {}", jute_id(&acl.id), perm_string(acl.perms))
}

/// Parses an ACL as zkCli's `AclParser`: comma-separated
/// `scheme:id:perms`, the id being everything between the first and the
/// last colon (digest ids contain one). Bad entries and unknown perm
/// letters are skipped with a message, which is returned alongside for
/// stderr, as zkCli prints them.
pub fn parse_acl(text: &str) -> (Vec<Acl>, Vec<String>) {
    let mut acl = Vec::new();
    let mut complaints = Vec::new();
    // Java's `String.split` drops trailing empty strings, except that a
    // blank input is one empty entry.
    let mut entries: Vec<&str> = text.split(',').collect();
    if !text.is_empty() {
        while entries.last() == Some(&"") {
            entries.pop();
        }
    }
    for entry in entries {
        let (Some(first), Some(last)) = (entry.find(':'), entry.rfind(':')) else {
            complaints.push(format!("{entry} does not have the form scheme:id:perm"));
            continue;
        };
        if first == last {
            complaints.push(format!("{entry} does not have the form scheme:id:perm"));
            continue;
        }
        let mut perms = 0;
        for c in entry[last + 1..].chars() {
            match c {
                'r' => perms |= perms::READ,
                'w' => perms |= perms::WRITE,
                'c' => perms |= perms::CREATE,
                'd' => perms |= perms::DELETE,
                'a' => perms |= perms::ADMIN,
                other => complaints.push(format!("Unknown perm type: {other}")),
            }
        }
        acl.push(Acl {
            perms,
            id: Id::new(&entry[..first], &entry[first + 1..last]),
        });
    }
    (acl, complaints)
}

/// A path checked as ZooKeeper's `PathUtils.validatePath`, with its
/// messages (zkCli prints them as they are). Positions count UTF-16
/// units, as Java's do. A sequential create's path is checked with a
/// digit appended, since the server appends the counter.
pub fn validate_path(path: &str, sequential: bool) -> Result<(), String> {
    if sequential {
        return validate_path(&format!("{path}1"), false);
    }
    let units: Vec<u16> = path.encode_utf16().collect();
    let slash = u16::from(b'/');
    let dot = u16::from(b'.');
    if units.is_empty() {
        return Err("Path length must be > 0".to_owned());
    }
    if units[0] != slash {
        return Err("Path must start with / character".to_owned());
    }
    if units.len() == 1 {
        return Ok(());
    }
    if units[units.len() - 1] == slash {
        return Err("Path must not end with / character".to_owned());
    }
    let mut reason = None;
    let mut last = slash;
    for i in 1..units.len() {
        let c = units[i];
        let ends_segment = i + 1 == units.len() || units[i + 1] == slash;
        if c == 0 {
            reason = Some(format!("null character not allowed @{i}"));
        } else if c == slash && last == slash {
            reason = Some(format!("empty node name specified @{i}"));
        } else if c == dot && last == dot {
            if units[i - 2] == slash && ends_segment {
                reason = Some(format!("relative paths not allowed @{i}"));
            }
        } else if c == dot {
            if units[i - 1] == slash && ends_segment {
                reason = Some(format!("relative paths not allowed @{i}"));
            }
        } else if matches!(c, 0x01..=0x1f | 0x7f..=0x9f | 0xd800..=0xf8ff | 0xfff0..=0xffff) {
            reason = Some(format!("invalid character @{i}"));
        }
        if reason.is_some() {
            break;
        }
        last = c;
    }
    match reason {
        Some(reason) => Err(format!("Invalid path string \"{path}\" caused by {reason}")),
        None => Ok(()),
    }
}

/// A failed operation as zkCli reports it: its `CliWrapperException`
/// wording for the common codes, the Java client's `KeeperErrorCode = ...
/// for /path` for the others, and this client's own wording for what the
/// Java client has no equivalent of.
pub fn error(error: &Error) -> String {
    use Error::*;
    match error {
        NoNode { path } => format!("Node does not exist: {path}"),
        NoChildrenForEphemerals { path } => format!("Ephemerals cannot have children: {path}"),
        NodeExists { path } => format!("Node already exists: {path}"),
        NotEmpty { path } => format!("Node not empty: {path}"),
        NotReadOnly { path } => format!("Not a read-only call: {path}"),
        InvalidAcl { path } => format!("Acl is not valid : {path}"),
        NoAuth { path } => format!("Insufficient permission : {path}"),
        BadArguments { path } => format!("Arguments are not valid : {path}"),
        BadVersion { path } => format!("version No is not valid : {path}"),
        QuotaExceeded { path } => format!("Quota has exceeded : {path}"),
        ReconfigInProgress { .. } => {
            "Another reconfiguration is in progress -- concurrent reconfigs not supported (yet)"
                .to_owned()
        }
        NewConfigNoQuorum { .. } => "No quorum of new config is connected and up-to-date with \
             the leader of last committed config - try invoking reconfiguration after new \
             servers are connected and synced"
            .to_owned(),
        // A failed multi (deleteall's batches) reports the op that failed.
        Multi { error, .. } => self::error(error),
        other => keeper_message(other),
    }
}

/// The Java client's `KeeperException.getMessage`.
pub fn keeper_message(error: &Error) -> String {
    let Some(code) = error.code() else {
        // Not a result code: the client's own error says it best.
        return error.to_string();
    };
    let text = code_message(code);
    match error.path() {
        Some(path) => format!("KeeperErrorCode = {text} for {path}"),
        None => format!("KeeperErrorCode = {text}"),
    }
}

/// ZooKeeper's `KeeperException.getCodeMessage`, as in 3.8.
fn code_message(code: client::ErrorCode) -> &'static str {
    use client::ErrorCode::*;
    match code {
        Ok => "ok",
        SystemError => "SystemError",
        RuntimeInconsistency => "RuntimeInconsistency",
        DataInconsistency => "DataInconsistency",
        ConnectionLoss => "ConnectionLoss",
        MarshallingError => "MarshallingError",
        NewConfigNoQuorum => "NewConfigNoQuorum",
        ReconfigInProgress => "ReconfigInProgress",
        Unimplemented => "Unimplemented",
        OperationTimeout => "OperationTimeout",
        BadArguments => "BadArguments",
        ApiError => "APIError",
        NoNode => "NoNode",
        NoAuth => "NoAuth",
        BadVersion => "BadVersion",
        NoChildrenForEphemerals => "NoChildrenForEphemerals",
        NodeExists => "NodeExists",
        InvalidAcl => "InvalidACL",
        AuthFailed => "AuthFailed",
        NotEmpty => "Directory not empty",
        SessionExpired => "Session expired",
        InvalidCallback => "Invalid callback",
        SessionMoved => "Session moved",
        NotReadOnly => "Not a read-only call",
        EphemeralOnLocalSession => "Ephemeral node on local session",
        NoWatcher => "No such watcher",
        ReconfigDisabled => "Reconfig is disabled",
        SessionClosedRequireSaslAuth => "Session closed because client failed to authenticate",
        QuotaExceeded => "Quota has exceeded",
        Throttled => "Op throttled due to high load",
        // 3.8 has no message for these two and falls back to the name.
        UnknownSession => "Unknown error UNKNOWNSESSION",
        RequestTimeout => "Unknown error REQUESTTIMEOUT",
    }
}

/// Java's name of a `Watcher.Event.KeeperState`.
pub fn keeper_state(state: KeeperState) -> &'static str {
    match state {
        KeeperState::Disconnected => "Disconnected",
        KeeperState::SyncConnected => "SyncConnected",
        KeeperState::AuthFailed => "AuthFailed",
        KeeperState::ConnectedReadOnly => "ConnectedReadOnly",
        KeeperState::SaslAuthenticated => "SaslAuthenticated",
        KeeperState::Expired => "Expired",
        KeeperState::Closed => "Closed",
    }
}

/// Java's name of a `Watcher.Event.EventType`.
pub fn event_type(event_type: EventType) -> &'static str {
    match event_type {
        EventType::None => "None",
        EventType::NodeCreated => "NodeCreated",
        EventType::NodeDeleted => "NodeDeleted",
        EventType::NodeDataChanged => "NodeDataChanged",
        EventType::NodeChildrenChanged => "NodeChildrenChanged",
        EventType::DataWatchRemoved => "DataWatchRemoved",
        EventType::ChildWatchRemoved => "ChildWatchRemoved",
        EventType::PersistentWatchRemoved => "PersistentWatchRemoved",
    }
}

/// A watch event as zkCli's default watcher prints it (`printMessage`
/// puts a blank line before each of its two lines). Session events have
/// no path, which Java prints as `null`. The format is 3.8's: 3.9 added
/// the zxid.
pub fn event(state: &str, event_type: &str, path: Option<&str>) -> String {
    format!(
        "\nWATCHER::\n\nWatchedEvent state:{state} type:{event_type} path:{}\n",
        path.unwrap_or("null")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perms_in_zookeeper_order() {
        assert_eq!(perm_string(perms::ALL), "cdrwa");
        assert_eq!(perm_string(perms::READ | perms::WRITE), "rw");
        assert_eq!(perm_string(0), "");
    }

    #[test]
    fn acl_as_jute_prints_it() {
        assert_eq!(acl(&Acl::open_unsafe()[0]), "'world,'anyone\n: cdrwa");
        let odd = Acl {
            perms: perms::READ,
            id: Id::new("x", "a,b%}"),
        };
        assert_eq!(acl(&odd), "'x,'a%2Cb%25%7D\n: r");
    }

    #[test]
    fn acl_parsing_as_zkcli() {
        let (acl, complaints) = parse_acl("digest:u:h:rw,world:anyone:r,");
        assert!(complaints.is_empty());
        assert_eq!(
            acl,
            [
                Acl {
                    perms: perms::READ | perms::WRITE,
                    id: Id::new("digest", "u:h")
                },
                Acl {
                    perms: perms::READ,
                    id: Id::new("world", "anyone")
                }
            ]
        );
        let (acl, complaints) = parse_acl("bad:acl,world:anyone:rz");
        assert_eq!(acl.len(), 1);
        assert_eq!(
            complaints,
            [
                "bad:acl does not have the form scheme:id:perm",
                "Unknown perm type: z"
            ]
        );
        let (acl, complaints) = parse_acl("");
        assert!(acl.is_empty());
        assert_eq!(complaints, [" does not have the form scheme:id:perm"]);
    }

    #[test]
    fn paths_as_java_checks_them() {
        assert_eq!(validate_path("/", false), Ok(()));
        assert_eq!(validate_path("/a/b.c/..d", false), Ok(()));
        assert_eq!(validate_path("/a/", true), Ok(()));
        let err = |p: &str| validate_path(p, false).unwrap_err();
        assert_eq!(err(""), "Path length must be > 0");
        assert_eq!(err("a"), "Path must start with / character");
        assert_eq!(err("/a/"), "Path must not end with / character");
        assert_eq!(
            err("//x"),
            "Invalid path string \"//x\" caused by empty node name specified @1"
        );
        assert_eq!(
            err("/a/../b"),
            "Invalid path string \"/a/../b\" caused by relative paths not allowed @4"
        );
        assert_eq!(
            err("/a/."),
            "Invalid path string \"/a/.\" caused by relative paths not allowed @3"
        );
        assert_eq!(
            err("/a\u{1}"),
            "Invalid path string \"/a\u{1}\" caused by invalid character @2"
        );
        // Outside the BMP: a surrogate pair, rejected at its first unit.
        assert_eq!(
            err("/é😀"),
            "Invalid path string \"/é😀\" caused by invalid character @2"
        );
    }

    #[test]
    fn errors_as_zkcli_words_them() {
        let path = || "/x".to_owned();
        assert_eq!(
            error(&Error::NoNode { path: path() }),
            "Node does not exist: /x"
        );
        assert_eq!(
            error(&Error::BadVersion { path: path() }),
            "version No is not valid : /x"
        );
        assert_eq!(
            error(&Error::NoWatcher { path: path() }),
            "KeeperErrorCode = No such watcher for /x"
        );
        assert_eq!(
            error(&Error::ConnectionLoss {
                path: String::new()
            }),
            "KeeperErrorCode = ConnectionLoss"
        );
        assert_eq!(error(&Error::Closed), "the client is closed");
    }

    #[test]
    fn events_as_the_default_watcher_prints_them() {
        assert_eq!(
            event("SyncConnected", "NodeDataChanged", Some("/x")),
            "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:/x\n"
        );
        assert!(event("Closed", "None", None).ends_with("path:null\n"));
    }

    #[test]
    fn sorts_as_java() {
        let mut names = vec!["\u{fffd}", "😀", "b", "B"];
        names.sort_by(|a, b| java_cmp(a, b));
        assert_eq!(names, ["B", "b", "😀", "\u{fffd}"]);
    }

    #[test]
    fn lists_as_java() {
        assert_eq!(list::<&str>(&[]), "[]");
        assert_eq!(list(&["a", "b"]), "[a, b]");
    }

    #[test]
    fn client_config_is_the_version_and_the_client_addresses() {
        let text = "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
                    server.2=127.0.0.1:2889:3889:participant\n\
                    server.3=127.0.0.1:2890:3890:observer;2183\n\
                    version=10000000c";
        assert_eq!(client_config(text), "10000000c 0.0.0.0:2181,0.0.0.0:2183");
        assert_eq!(client_config(""), " ");
    }
}
