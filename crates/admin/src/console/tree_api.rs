//! The console's view of the tree and its changes, each through the
//! signed-in person's own session: a znode with its data (text, JSON, or
//! hexadecimal for the rest), stat and ACL; its children a page at a time,
//! with a name filter; create, set with a version check, delete, and a
//! recursive delete that must name how many znodes it removes.

use client::{child_path, Client, CreateMode, CreateOptions, Error, ErrorCode, Op, Stat};
use serde_json::{json, Value};

/// At most this many children in one page of the listing.
const PAGE_CHILDREN_MAX: i32 = 500;
/// Znodes deleted per `multi` in a recursive delete.
const DELETE_BATCH: usize = 1000;
/// Data shown as it is up to this size; longer data is cut, with its size.
const DATA_SHOWN_BYTES_MAX: usize = 64 * 1024;

/// A failed request: the HTTP status and what to tell the person.
pub struct Failure {
    pub status: axum::http::StatusCode,
    pub message: String,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        use axum::http::StatusCode;
        let status = match (&error, error.code()) {
            (Error::InvalidPath { .. }, _) | (_, Some(ErrorCode::BadArguments)) => {
                StatusCode::BAD_REQUEST
            }
            (_, Some(ErrorCode::NoAuth)) => StatusCode::FORBIDDEN,
            (_, Some(ErrorCode::NoNode)) => StatusCode::NOT_FOUND,
            (_, Some(ErrorCode::NodeExists | ErrorCode::BadVersion | ErrorCode::NotEmpty)) => {
                StatusCode::CONFLICT
            }
            _ => StatusCode::BAD_GATEWAY,
        };
        Failure {
            status,
            message: error.to_string(),
        }
    }
}

impl Failure {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Failure {
            status: axum::http::StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }
}

pub type Answer = Result<Value, Failure>;

/// A znode: data, stat and ACL.
pub async fn node(zk: &Client, path: &str) -> Answer {
    let data = zk.get_data(path);
    let acl = zk.get_acl(path);
    let (data, stat) = data.await?;
    let acl = match acl.await {
        Ok((acl, _)) => acl
            .iter()
            .map(|a| json!({"scheme": a.id.scheme, "id": a.id.id, "perms": perms_text(a.perms)}))
            .collect(),
        // getACL needs READ or ADMIN, getData READ: with data read, the
        // ACL is readable too; an error here is shown, not fatal.
        Err(_) => Vec::new(),
    };
    Ok(json!({
        "path": path,
        "data": data_view(data.as_deref()),
        "stat": stat_view(&stat),
        "acl": acl,
    }))
}

/// ZooKeeper's letters for a permission set, as zkCli prints them.
fn perms_text(perms: i32) -> String {
    [(4, 'c'), (8, 'd'), (1, 'r'), (2, 'w'), (16, 'a')]
        .iter()
        .filter(|(bit, _)| perms & bit != 0)
        .map(|(_, letter)| *letter)
        .collect()
}

/// How data reads best: none, JSON (pretty-printed), text, or bytes.
fn data_view(data: Option<&[u8]>) -> Value {
    let Some(bytes) = data else {
        return json!({"kind": "null", "bytes": 0});
    };
    let shown = &bytes[..bytes.len().min(DATA_SHOWN_BYTES_MAX)];
    let cut = shown.len() < bytes.len();
    if let Ok(text) = std::str::from_utf8(shown) {
        if let Ok(parsed) = serde_json::from_str::<Value>(text) {
            if parsed.is_object() || parsed.is_array() {
                let pretty = serde_json::to_string_pretty(&parsed).unwrap_or_default();
                return json!({"kind": "json", "bytes": bytes.len(), "text": text, "pretty": pretty, "cut": cut});
            }
        }
        if !text.chars().any(|c| c.is_control() && !c.is_whitespace()) {
            return json!({"kind": "text", "bytes": bytes.len(), "text": text, "cut": cut});
        }
    }
    let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
    json!({"kind": "binary", "bytes": bytes.len(), "hex": hex.join(" "), "cut": cut})
}

fn stat_view(stat: &Stat) -> Value {
    json!({
        "czxid": format!("{:#x}", stat.czxid),
        "mzxid": format!("{:#x}", stat.mzxid),
        "pzxid": format!("{:#x}", stat.pzxid),
        "ctime": stat.ctime,
        "mtime": stat.mtime,
        "version": stat.version,
        "cversion": stat.cversion,
        "aversion": stat.aversion,
        "ephemeralOwner": format!("{:#x}", stat.ephemeral_owner),
        "dataLength": stat.data_length,
        "numChildren": stat.num_children,
    })
}

/// A page of `path`'s children in byte order, after `after`, keeping the
/// names that start with `prefix`; each with its own count of children, so
/// the page shows which can be opened (null where the person may not
/// know it: `exists` needs READ since ZooKeeper 3.9).
pub async fn children(zk: &Client, path: &str, after: &str, prefix: &str) -> Answer {
    // Names starting with the prefix are the prefix itself and those
    // after it, until one no longer starts with it.
    let start = if after < prefix { prefix } else { after };
    let mut names = Vec::new();
    if start == prefix
        && !prefix.is_empty()
        && zk.exists(&child_path(path, prefix)).await?.is_some()
    {
        names.push(prefix.to_string());
    }
    let page = zk.get_children_page(path, start, PAGE_CHILDREN_MAX).await?;
    let in_range = page
        .children
        .iter()
        .take_while(|name| name.starts_with(prefix));
    names.extend(in_range.cloned());
    let more = page.more && page.children.last().is_some_and(|n| n.starts_with(prefix));
    let counts: Vec<_> = names
        .iter()
        .map(|n| zk.exists(&child_path(path, n)))
        .collect();
    let mut listed = Vec::with_capacity(names.len());
    for (name, count) in names.iter().zip(counts) {
        let children = match count.await {
            Ok(stat) => Some(stat.map_or(0, |stat| stat.num_children)),
            Err(e) if e.code() == Some(ErrorCode::NoAuth) => None,
            Err(e) => return Err(e.into()),
        };
        listed.push(json!({"name": name, "children": children}));
    }
    Ok(json!({"children": listed, "more": more, "count": page.stat.num_children}))
}

/// How many znodes a recursive delete of `path` would remove.
pub async fn subtree_size(zk: &Client, path: &str) -> Answer {
    let below = zk.get_all_children_number(path).await?;
    Ok(json!({"count": i64::from(below) + 1}))
}

/// What a create asks for.
pub struct NewNode<'a> {
    pub path: &'a str,
    pub data: &'a str,
    pub mode: &'a str,
}

pub async fn create(zk: &Client, new: NewNode<'_>) -> Answer {
    let mode = match new.mode {
        "persistent" => CreateMode::Persistent,
        "persistent_sequential" => CreateMode::PersistentSequential,
        "container" => CreateMode::Container,
        other => {
            return Err(Failure::bad_request(format!(
                "no znode kind {other:?}: persistent, persistent_sequential or container"
            )))
        }
    };
    let (path, stat) = zk
        .create(
            new.path,
            new.data.as_bytes().to_vec(),
            CreateOptions::new(mode),
        )
        .await?;
    Ok(json!({"path": path, "stat": stat_view(&stat)}))
}

/// Sets data if the znode is still at `version`: an edit made on a
/// version another client has since changed fails, and says so.
pub async fn set(zk: &Client, path: &str, data: &str, version: i32) -> Answer {
    let stat = zk
        .set_data(path, data.as_bytes().to_vec(), Some(version))
        .await?;
    Ok(json!({"stat": stat_view(&stat)}))
}

pub async fn delete(zk: &Client, path: &str, version: i32) -> Answer {
    zk.delete(path, Some(version)).await?;
    Ok(json!({"deleted": 1}))
}

/// Deletes `path` and everything below it, deepest first, if it is still
/// `expected` znodes: the count the person confirmed.
pub async fn delete_recursive(zk: &Client, path: &str, expected: usize) -> Answer {
    if path == "/" || path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Err(Failure::bad_request(format!("{path} cannot be deleted")));
    }
    let mut tree = zk.subtree(path).await?;
    if tree.len() != expected {
        return Err(Failure {
            status: axum::http::StatusCode::CONFLICT,
            message: format!(
                "{path} holds {} znodes now, not the {expected} confirmed: look again",
                tree.len()
            ),
        });
    }
    tree.reverse();
    for batch in tree.chunks(DELETE_BATCH) {
        zk.multi(batch.iter().map(|p| Op::delete(p, None))).await?;
    }
    Ok(json!({"deleted": tree.len()}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_reads_as_what_it_is() {
        assert_eq!(data_view(None)["kind"], "null");
        assert_eq!(data_view(Some(b"plain words\n"))["kind"], "text");
        let view = data_view(Some(br#"{"a":[1,2]}"#));
        assert_eq!(view["kind"], "json");
        assert!(view["pretty"].as_str().unwrap().contains("\n"));
        assert_eq!(data_view(Some(b"42"))["kind"], "text");
        let view = data_view(Some(&[0, 1, 0xff]));
        assert_eq!(
            (view["kind"].as_str(), view["hex"].as_str()),
            (Some("binary"), Some("00 01 ff"))
        );
    }

    #[test]
    fn permissions_read_as_zkcli_prints_them() {
        assert_eq!(perms_text(31), "cdrwa");
        assert_eq!(perms_text(1 | 16), "ra");
    }
}
