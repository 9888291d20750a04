//! ZooKeeper's audit log (`audit.enable`): one line per write a client
//! asked for, per ephemeral deleted with its session, and at server start
//! and stop, in ZooKeeper's format, so the tools that read ZooKeeper's
//! audit log read ours. Lines go to the log under the target `audit`
//! (`RUST_LOG=audit=info` keeps them alone); a failure is logged as an
//! error, anything else as info, as ZooKeeper's `Slf4jAuditLogger` does.
//!
//! What is logged follows ZooKeeper's `AuditHelper`, quirks included:
//! create, create2 and createContainer are audited but createTTL is not;
//! a multi that succeeded is one line per create, delete and setData in
//! it (a sequential create's line lacks the node type, which ZooKeeper
//! looks up by the requested path); a multi that failed is one
//! `multiOperation` failure; setAcl's ACL entries are written one after
//! the other without a separator.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use jute::{Acl, CreateMode, Id, MultiOp, Request};
use tree::Outcome;

/// The `tracing` target of every audit line.
pub const TARGET: &str = "audit";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditResult {
    Success,
    Failure,
    Invoked,
}

/// ZooKeeper's `AuditEvent`: fields in its order, absent ones left out,
/// tab-separated, the result last.
#[derive(Debug, Default)]
struct AuditEvent<'a> {
    session: Option<String>,
    user: Option<String>,
    ip: Option<String>,
    operation: &'a str,
    znode: Option<&'a str>,
    znode_type: Option<&'a str>,
    acl: Option<&'a str>,
}

impl AuditEvent<'_> {
    fn emit(&self, result: AuditResult) {
        let line = Line(self, result);
        match result {
            AuditResult::Failure => tracing::error!(target: TARGET, "{line}"),
            _ => tracing::info!(target: TARGET, "{line}"),
        }
    }
}

struct Line<'a>(&'a AuditEvent<'a>, AuditResult);

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Line(event, result) = self;
        let fields = [
            ("session", event.session.as_deref()),
            ("user", event.user.as_deref()),
            ("ip", event.ip.as_deref()),
            ("operation", Some(event.operation)),
            ("znode", event.znode),
            ("znode_type", event.znode_type),
            ("acl", event.acl),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                write!(f, "{name}={value}\t")?;
            }
        }
        let result = match result {
            AuditResult::Success => "success",
            AuditResult::Failure => "failure",
            AuditResult::Invoked => "invoked",
        };
        write!(f, "result={result}")
    }
}

/// A write request as the audit needs it, taken when it arrives (its
/// session's identities then) and logged once it is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedWrite {
    session_id: i64,
    /// `AuthUtil.getUsers`: the user names of the session's ids.
    user: Option<String>,
    what: Written,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Written {
    Create {
        path: String,
        mode: CreateMode,
    },
    Delete {
        path: String,
    },
    SetData {
        path: String,
    },
    SetAcl {
        path: String,
        acl: String,
    },
    Multi {
        /// The requested path of each create in it, with its mode.
        create_modes: HashMap<String, CreateMode>,
        ops: Vec<MultiEntry>,
    },
    Reconfig,
}

/// What a multi's op is about, as its result's line names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MultiEntry {
    /// Named by the path created.
    Create,
    Delete(String),
    SetData(String),
    Check,
}

impl AuditedWrite {
    /// What ZooKeeper audits of `request`; `None` for what it does not.
    pub fn of(request: &Request, session_id: i64, auth: &[Id]) -> Option<AuditedWrite> {
        let what = match request {
            Request::Create { req, .. } => Written::Create {
                path: req.path.clone(),
                mode: CreateMode::from_flags(req.flags)?,
            },
            Request::Delete(req) => Written::Delete {
                path: req.path.clone(),
            },
            Request::SetData(req) => Written::SetData {
                path: req.path.clone()?,
            },
            Request::SetAcl(req) => Written::SetAcl {
                path: req.path.clone()?,
                acl: acl_to_string(&req.acl),
            },
            Request::Multi(ops) => Written::Multi {
                create_modes: ops
                    .iter()
                    .filter_map(|op| match op {
                        MultiOp::Create { req, .. } => {
                            Some((req.path.clone(), CreateMode::from_flags(req.flags)?))
                        }
                        _ => None,
                    })
                    .collect(),
                ops: ops
                    .iter()
                    .map(|op| match op {
                        MultiOp::Create { .. } | MultiOp::CreateTtl(_) => MultiEntry::Create,
                        MultiOp::Delete(req) => MultiEntry::Delete(req.path.clone()),
                        MultiOp::SetData(req) => MultiEntry::SetData(req.path.clone()),
                        MultiOp::Check(_) => MultiEntry::Check,
                    })
                    .collect(),
            },
            Request::Reconfig(_) => Written::Reconfig,
            _ => return None,
        };
        Some(AuditedWrite {
            session_id,
            user: users(auth),
            what,
        })
    }

    /// Logs the write's lines once its `outcome` is known.
    pub fn log(&self, remote: IpAddr, outcome: &Outcome) {
        let session = session_hex(self.session_id);
        let ip = java_host_address(remote);
        let event = |operation, znode, znode_type, acl| AuditEvent {
            session: Some(session.clone()),
            user: self.user.clone(),
            ip: Some(ip.clone()),
            operation,
            znode,
            znode_type,
            acl,
        };
        let result = if matches!(outcome, Outcome::Failed(_)) {
            AuditResult::Failure
        } else {
            AuditResult::Success
        };
        match &self.what {
            Written::Create { path, mode } => {
                let created = match outcome {
                    Outcome::Created { path, .. } => path,
                    _ => path,
                };
                let znode_type = create_mode_name(*mode);
                event("create", Some(created), Some(znode_type), None).emit(result);
            }
            Written::Delete { path } => event("delete", Some(path), None, None).emit(result),
            Written::SetData { path } => event("setData", Some(path), None, None).emit(result),
            Written::SetAcl { path, acl } => {
                event("setAcl", Some(path), None, Some(acl)).emit(result)
            }
            Written::Reconfig => event("reconfig", None, None, None).emit(result),
            Written::Multi { create_modes, ops } => {
                let Outcome::Multi(results) = outcome else {
                    return event("multiOperation", None, None, None).emit(AuditResult::Failure);
                };
                if results.iter().any(Result::is_err) {
                    return event("multiOperation", None, None, None).emit(AuditResult::Failure);
                }
                for (op, result) in ops.iter().zip(results) {
                    match (op, result) {
                        (MultiEntry::Create, Ok(Outcome::Created { path, .. })) => {
                            let mode = create_modes.get(path).copied().map(create_mode_name);
                            event("create", Some(path), mode, None).emit(AuditResult::Success);
                        }
                        (MultiEntry::Delete(path), _) => {
                            event("delete", Some(path), None, None).emit(AuditResult::Success)
                        }
                        (MultiEntry::SetData(path), _) => {
                            event("setData", Some(path), None, None).emit(AuditResult::Success)
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// `DataTree.killSession`'s line for each ephemeral a closed or expired
/// session took with it, written by every server as the txn is applied.
pub fn ephemeral_deleted(server_user: &str, session_id: i64, path: &str) {
    AuditEvent {
        session: Some(session_hex(session_id)),
        user: Some(server_user.to_owned()),
        operation: "ephemeralZNodeDeletionOnSessionCloseOrExpire",
        znode: Some(path),
        ..AuditEvent::default()
    }
    .emit(AuditResult::Success);
}

/// `ZKAuditProvider.addZKStartStopAuditLog`: the server started...
pub fn server_started(server_user: &str) {
    AuditEvent {
        user: Some(server_user.to_owned()),
        operation: "serverStart",
        ..AuditEvent::default()
    }
    .emit(AuditResult::Success);
}

/// ... and is stopping.
pub fn server_stopping(server_user: &str) {
    AuditEvent {
        user: Some(server_user.to_owned()),
        operation: "serverStop",
        ..AuditEvent::default()
    }
    .emit(AuditResult::Invoked);
}

/// `ZKAuditProvider.getZKUser`: the user the server runs as, named as
/// Java's `user.name` names it (the password entry of the real uid).
pub fn server_user() -> String {
    // SAFETY: getuid cannot fail. getpwuid_r writes only into `entry` and
    // `buffer`, both ours and large enough by their stated lengths, and
    // `found` is either null or points at `entry`, whose `pw_name` points
    // into `buffer`, alive until the name is copied out.
    unsafe {
        let uid = libc::getuid();
        let mut entry: libc::passwd = std::mem::zeroed();
        let mut buffer = vec![0 as libc::c_char; 16 * 1024];
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(
            uid,
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        );
        if rc == 0 && !found.is_null() && !entry.pw_name.is_null() {
            return std::ffi::CStr::from_ptr(entry.pw_name)
                .to_string_lossy()
                .into_owned();
        }
        uid.to_string()
    }
}

/// `ServerCnxn.getSessionIdHex`: `0x` and lowercase hex, unpadded.
fn session_hex(session_id: i64) -> String {
    format!("0x{session_id:x}")
}

/// `AuthUtil.getUsers`: each id's user name as its provider gives it
/// (`digest`: the name before the colon; `ip`, `sasl`, `x509`: the id),
/// comma-separated; ids of schemes without a provider (`super`) left out.
fn users(auth: &[Id]) -> Option<String> {
    let names: Vec<&str> = java_set_order(auth)
        .into_iter()
        .filter_map(|id| match id.scheme.as_str() {
            "digest" => id.id.split(':').next(),
            "ip" | "sasl" | "x509" => Some(id.id.as_str()),
            _ => None,
        })
        .filter(|name| !name.trim().is_empty())
        .collect();
    (!names.is_empty()).then(|| names.join(","))
}

/// The order ZooKeeper keeps a connection's ids in: a set backed by a
/// `ConcurrentHashMap`, iterated by table slot (the id's Jute hash code,
/// spread), ties in the order added. Exact while the table has not grown
/// (up to 11 ids; a session has two or three).
fn java_set_order(ids: &[Id]) -> Vec<&Id> {
    const TABLE_SLOTS: u32 = 16;
    let mut ordered: Vec<(u32, &Id)> = ids
        .iter()
        .map(|id| {
            let hash = java_id_hash(id);
            let spread = (hash ^ (hash >> 16)) & 0x7fff_ffff;
            (spread & (TABLE_SLOTS - 1), id)
        })
        .collect();
    ordered.sort_by_key(|(slot, _)| *slot); // stable: ties keep their order
    ordered.into_iter().map(|(_, id)| id).collect()
}

/// Jute's generated `Id.hashCode`, over Java's `String.hashCode`.
fn java_id_hash(id: &Id) -> u32 {
    let string_hash = |s: &str| {
        s.encode_utf16().fold(0i32, |h, unit| {
            h.wrapping_mul(31).wrapping_add(i32::from(unit))
        })
    };
    let scheme = 17i32.wrapping_mul(37).wrapping_add(string_hash(&id.scheme));
    scheme.wrapping_mul(37).wrapping_add(string_hash(&id.id)) as u32
}

/// `ZKUtil.aclToString`: `scheme:id:perms` per entry, run together.
fn acl_to_string(acl: &[Acl]) -> String {
    acl.iter()
        .map(|a| format!("{}:{}:{}", a.id.scheme, a.id.id, perm_string(a.perms)))
        .collect()
}

/// `ZKUtil.getPermString`: in ZooKeeper's order, which is not zkCli's.
fn perm_string(perms: i32) -> String {
    use jute::perms::*;
    [
        (CREATE, 'c'),
        (DELETE, 'd'),
        (READ, 'r'),
        (WRITE, 'w'),
        (ADMIN, 'a'),
    ]
    .iter()
    .filter(|(bit, _)| perms & bit != 0)
    .map(|(_, c)| *c)
    .collect()
}

/// `CreateMode.toString().toLowerCase()`.
fn create_mode_name(mode: CreateMode) -> &'static str {
    match mode {
        CreateMode::Persistent => "persistent",
        CreateMode::PersistentSequential => "persistent_sequential",
        CreateMode::Ephemeral => "ephemeral",
        CreateMode::EphemeralSequential => "ephemeral_sequential",
        CreateMode::Container => "container",
        CreateMode::PersistentWithTtl => "persistent_with_ttl",
        CreateMode::PersistentSequentialWithTtl => "persistent_sequential_with_ttl",
    }
}

/// `InetAddress.getHostAddress`: IPv6 in eight groups, unabbreviated.
fn java_host_address(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6
                .segments()
                .iter()
                .map(|s| format!("{s:x}"))
                .collect::<Vec<_>>()
                .join(":"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_zookeeper_s_fields_in_its_order() {
        let event = AuditEvent {
            session: Some(session_hex(0x1000abc)),
            // In the order of ZooKeeper's hash set, not the order added.
            user: users(&[Id::new("ip", "127.0.0.1"), Id::new("digest", "u:hash=")]),
            ip: Some(java_host_address("::1".parse().unwrap())),
            operation: "setAcl",
            znode: Some("/a"),
            acl: Some("world:anyone:cdrwadigest:u:x=:r"),
            ..AuditEvent::default()
        };
        assert_eq!(
            Line(&event, AuditResult::Failure).to_string(),
            "session=0x1000abc\tuser=u,127.0.0.1\tip=0:0:0:0:0:0:0:1\toperation=setAcl\t\
             znode=/a\tacl=world:anyone:cdrwadigest:u:x=:r\tresult=failure"
        );
        let start = AuditEvent {
            user: Some("zk".into()),
            operation: "serverStart",
            ..AuditEvent::default()
        };
        assert_eq!(
            Line(&start, AuditResult::Success).to_string(),
            "user=zk\toperation=serverStart\tresult=success"
        );
    }

    #[test]
    fn acls_and_users_as_zookeeper_writes_them() {
        let acl = [
            Acl {
                perms: jute::perms::ALL,
                id: Id::new("world", "anyone"),
            },
            Acl {
                perms: jute::perms::READ | jute::perms::ADMIN,
                id: Id::new("ip", "10.0.0.1"),
            },
        ];
        assert_eq!(acl_to_string(&acl), "world:anyone:cdrwaip:10.0.0.1:ra");
        assert_eq!(users(&[Id::new("super", "")]), None);
        assert_eq!(session_hex(-1), "0xffffffffffffffff");
    }
}
