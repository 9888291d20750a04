//! Znode paths on the client side: validation before sending (the rules of
//! ZooKeeper's `PathUtils.validatePath`, so a bad path fails here with a
//! reason instead of as a bare `BadArguments` from the server) and the
//! chroot, which prefixes every path on the way out and is stripped from
//! every path on the way back.

use crate::error::Error;

/// Checks `path` as ZooKeeper's client does. A sequential create may end in
/// `/` (the server appends the counter), so `sequential` relaxes that rule.
pub(crate) fn validate(path: &str, sequential: bool) -> Result<(), Error> {
    let invalid = |reason| {
        Err(Error::InvalidPath {
            path: path.to_owned(),
            reason,
        })
    };
    if path.is_empty() {
        return invalid("a path must not be empty");
    }
    if !path.starts_with('/') {
        return invalid("a path must start with /");
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') && !sequential {
        return invalid("a path must not end with /");
    }
    // A sequential path may end in '/', after which the server appends the
    // counter; the segment check below sees that last segment as non-empty.
    let body = if sequential && path.ends_with('/') {
        &path[..path.len() - 1]
    } else {
        path
    };
    for segment in body[1..].split('/') {
        if segment.is_empty() {
            return invalid("empty node name (//)");
        }
        if segment == "." || segment == ".." {
            return invalid("relative paths (. and ..) are not allowed");
        }
    }
    for c in path.chars() {
        let forbidden = matches!(c,
            '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{e000}'..='\u{f8ff}'
            | '\u{fff0}'..='\u{ffff}');
        if forbidden {
            return invalid("control and private-use characters are not allowed");
        }
    }
    Ok(())
}

/// The chroot suffix of a connect string ("/app" in "h:2181/app"). Paths
/// the caller sees never include it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Chroot {
    /// `None` for no chroot; otherwise a valid path other than "/".
    root: Option<String>,
}

impl Chroot {
    pub(crate) fn new(root: Option<String>) -> Self {
        Self { root }
    }

    pub(crate) fn root(&self) -> Option<&str> {
        self.root.as_deref()
    }

    /// The server's path for a client path ("/" is the chroot itself).
    pub(crate) fn prefix(&self, client_path: &str) -> String {
        match &self.root {
            None => client_path.to_owned(),
            Some(root) if client_path == "/" => root.clone(),
            Some(root) => format!("{root}{client_path}"),
        }
    }

    /// The client's path for a server path. A path outside the chroot (which
    /// the server should never send) is returned unchanged rather than
    /// mangled.
    pub(crate) fn strip(&self, server_path: &str) -> String {
        let Some(root) = &self.root else {
            return server_path.to_owned();
        };
        match server_path.strip_prefix(root.as_str()) {
            Some("") => "/".to_owned(),
            Some(rest) if rest.starts_with('/') => rest.to_owned(),
            _ => server_path.to_owned(),
        }
    }

    /// Validates a client path and returns the server's path for it.
    pub(crate) fn server_path(&self, client_path: &str, sequential: bool) -> Result<String, Error> {
        validate(client_path, sequential)?;
        Ok(self.prefix(client_path))
    }
}

/// The path of `child` under `parent`.
pub fn child_path(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_follows_zookeeper() {
        for ok in ["/", "/a", "/a/b", "/a.b", "/...", "/a/b-c_d", "/ü"] {
            assert_eq!(validate(ok, false), Ok(()), "{ok}");
        }
        for bad in [
            "", "a", "/a/", "//", "/a//b", "/a/./b", "/..", "/a\u{0}b", "/a\u{1}",
        ] {
            assert!(validate(bad, false).is_err(), "{bad:?}");
        }
        assert_eq!(validate("/queue/", true), Ok(()));
        assert_eq!(validate("/queue/item-", true), Ok(()));
        assert!(validate("/queue//", true).is_err());
    }

    #[test]
    fn chroot_prefixes_and_strips() {
        let none = Chroot::default();
        assert_eq!(none.prefix("/a"), "/a");
        assert_eq!(none.strip("/a"), "/a");

        let c = Chroot::new(Some("/app".into()));
        assert_eq!(c.prefix("/"), "/app");
        assert_eq!(c.prefix("/a/b"), "/app/a/b");
        assert_eq!(c.strip("/app"), "/");
        assert_eq!(c.strip("/app/a"), "/a");
        assert_eq!(c.strip("/apple"), "/apple");
        assert_eq!(c.strip("/other"), "/other");
    }
}
