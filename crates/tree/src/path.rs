//! Znode path rules, as ZooKeeper's `PathUtils` and the path helpers of
//! `PrepRequestProcessor` and `DataTree` apply them.
//!
//! ZooKeeper checks paths in Java's UTF-16 code units; so do we, which is
//! why characters outside the Basic Multilingual Plane (stored by Java as
//! surrogate pairs) are rejected like the surrogates themselves.

use jute::ErrorCode;

/// The root. ZooKeeper also keeps it under `""`; see [`lookup_key`].
pub const ROOT: &str = "/";
/// ZooKeeper's own subtree (`Quotas.procZookeeper`).
pub const PROC_ZOOKEEPER: &str = "/zookeeper";
/// Quota bookkeeping lives below here (`Quotas.quotaZookeeper`).
pub const QUOTA_ZOOKEEPER: &str = "/zookeeper/quota";
/// The ensemble configuration node (`ZooDefs.CONFIG_NODE`).
pub const CONFIG_ZOOKEEPER: &str = "/zookeeper/config";

/// `PathUtils.validatePath`: `BadArguments` unless `path` is a canonical
/// absolute path (no empty, `.` or `..` component, no trailing slash, no
/// control, private-use, surrogate or U+FFF0..U+FFFF characters).
pub fn validate_path(path: &str) -> Result<(), ErrorCode> {
    if path_is_valid(path) {
        Ok(())
    } else {
        Err(ErrorCode::BadArguments)
    }
}

fn path_is_valid(path: &str) -> bool {
    match path.strip_prefix('/') {
        None => false,
        Some("") => true,
        // A trailing or doubled slash leaves an empty component.
        Some(rest) => rest.split('/').all(component_is_valid),
    }
}

/// Java walks the path's UTF-16 units and allocates nothing; neither does
/// this, which asks the same of each component. A copy of the path in
/// UTF-16, made for every request and every txn applied, was 9% of the
/// apply loop's samples while a restart among 10M znodes replayed its log.
fn component_is_valid(component: &str) -> bool {
    !matches!(component, "" | "." | "..") && !component.chars().any(is_forbidden_char)
}

/// The characters `PathUtils` rejects: NUL, controls, private use, the
/// specials from U+FFF0, and everything beyond U+FFFF (a surrogate pair
/// in Java, whose units it rejects).
fn is_forbidden_char(c: char) -> bool {
    matches!(
        u32::from(c),
        0x0000..=0x001f | 0x007f..=0x009f | 0xe000..=0xf8ff | 0xfff0..
    )
}

/// The parent as ZooKeeper computes it: everything before the last `/`
/// (`""` for a child of the root). `None` when there is no `/` at all.
pub fn parent_of(path: &str) -> Option<&str> {
    path.rfind('/').map(|i| &path[..i])
}

/// The last component: everything after the last `/`.
pub fn child_name(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// The path of the child `name` of `parent` (`""` and `"/"` both name the
/// root).
pub fn child_path(parent: &str, name: &str) -> String {
    let parent = lookup_key(parent);
    let separator = if parent == ROOT { "" } else { "/" };
    format!("{parent}{separator}{name}")
}

/// ZooKeeper's nodes map holds the root under both `""` and `"/"`; we store
/// it once, under `"/"`, and map the alias here.
pub fn lookup_key(path: &str) -> &str {
    if path.is_empty() {
        ROOT
    } else {
        path
    }
}

/// The path a parent's `NodeChildrenChanged` watch is registered under.
pub fn watch_path_of_parent(parent: &str) -> &str {
    lookup_key(parent)
}

/// `DataTree.isSpecialPath`: nodes ZooKeeper owns and never deletes.
pub fn is_special_path(path: &str) -> bool {
    matches!(
        path,
        ROOT | PROC_ZOOKEEPER | QUOTA_ZOOKEEPER | CONFIG_ZOOKEEPER
    )
}

/// `PrepRequestProcessor.getParentPathAndValidate`, used by delete (and
/// deleteContainer): a cheap check, not the full `validate_path`.
pub fn parent_for_delete(path: &str) -> Result<&str, ErrorCode> {
    if path.contains('\0') || is_special_path(path) {
        return Err(ErrorCode::BadArguments);
    }
    parent_of(path).ok_or(ErrorCode::BadArguments)
}

/// `PrepRequestProcessor.validatePathForCreate`: the full check happens
/// later, after the sequence suffix is appended.
pub fn parent_for_create(path: &str) -> Result<&str, ErrorCode> {
    if path.contains('\0') {
        return Err(ErrorCode::BadArguments);
    }
    parent_of(path).ok_or(ErrorCode::BadArguments)
}

/// Java's `String.length()`: UTF-16 code units. ZooKeeper's approximate
/// data size counts paths this way.
pub fn java_len(s: &str) -> u64 {
    s.encode_utf16().count() as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// `PathUtils.validatePath` as Java runs it, unit by unit over the
    /// path's UTF-16: the reference the allocation-free check must match.
    fn java_validate_path(path: &str) -> bool {
        let units: Vec<u16> = path.encode_utf16().collect();
        let (slash, dot) = (u16::from(b'/'), u16::from(b'.'));
        let n = units.len();
        if n == 0 || units[0] != slash {
            return false;
        }
        if n == 1 {
            return true;
        }
        if units[n - 1] == slash {
            return false;
        }
        let mut last = slash;
        for i in 1..n {
            let c = units[i];
            let component_ends_after = i + 1 == n || units[i + 1] == slash;
            let refused = if c == 0 || (c == slash && last == slash) {
                true
            } else if c == dot && last == dot {
                units[i - 2] == slash && component_ends_after
            } else if c == dot {
                units[i - 1] == slash && component_ends_after
            } else {
                (0x0001..=0x001f).contains(&c)
                    || (0x007f..=0x009f).contains(&c)
                    || (0xd800..=0xf8ff).contains(&c)
                    || c >= 0xfff0
            };
            if refused {
                return false;
            }
            last = c;
        }
        true
    }

    /// Characters at the edges of every class the check tells apart.
    fn path_char() -> impl Strategy<Value = char> {
        prop::sample::select(vec![
            '/',
            '/',
            '/',
            '.',
            '.',
            '.',
            'a',
            'z',
            ' ',
            '\0',
            '\u{1}',
            '\u{1f}',
            '\u{7e}',
            '\u{7f}',
            '\u{9f}',
            '\u{a0}',
            'é',
            '日',
            '\u{d7ff}',
            '\u{e000}',
            '\u{f8ff}',
            '\u{f900}',
            '\u{ffef}',
            '\u{fff0}',
            '\u{ffff}',
            '\u{10000}',
            '\u{1f600}',
        ])
    }

    proptest! {
        #[test]
        fn validation_matches_javas_walk_over_utf16_units(
            chars in prop::collection::vec(path_char(), 0..12)
        ) {
            let path: String = chars.into_iter().collect();
            prop_assert_eq!(path_is_valid(&path), java_validate_path(&path), "{:?}", path);
        }
    }

    fn ok(p: &str) -> bool {
        validate_path(p).is_ok()
    }

    #[test]
    fn valid_paths() {
        // PathUtils.validatePath
        for p in [
            "/",
            "/a",
            "/a/b",
            "/a.b",
            "/...",
            "/a..",
            "/.a",
            "/a/.b/..c",
            "/zookeeper",
            "/é",
            "/日本",
            "/ ",
        ] {
            assert!(ok(p), "{p:?} should be valid");
        }
    }

    #[test]
    fn invalid_paths() {
        // PathUtils.validatePath
        for p in [
            "",
            "a",
            "a/b",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/.",
            "/a/..",
            "/./a",
            "/../a",
            "/a\0b",
            "/a\u{1}",
            "/a\u{7f}",
            "/a\u{9f}",
            "/a\u{e000}",
            "/a\u{f8ff}",
            "/a\u{fff0}",
            "/a\u{ffff}",
            "/a\u{1f600}", // a surrogate pair in Java
        ] {
            assert!(!ok(p), "{p:?} should be invalid");
        }
    }

    #[test]
    fn parents() {
        assert_eq!(parent_of("/a"), Some(""));
        assert_eq!(parent_of("/a/b"), Some("/a"));
        assert_eq!(parent_of("/a/"), Some("/a"));
        assert_eq!(parent_of("a"), None);
        assert_eq!(child_name("/a/b"), "b");
        assert_eq!(child_path("/a", "b"), "/a/b");
        assert_eq!(child_path("/", "b"), "/b");
        assert_eq!(child_path("", "b"), "/b");
        assert_eq!(lookup_key(""), "/");
        assert_eq!(
            parent_for_delete("/zookeeper"),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(parent_for_delete("/"), Err(ErrorCode::BadArguments));
        assert_eq!(parent_for_delete("/zookeeper/x"), Ok("/zookeeper"));
        assert_eq!(parent_for_create("noslash"), Err(ErrorCode::BadArguments));
        assert_eq!(java_len("/\u{1f600}"), 3);
    }
}
