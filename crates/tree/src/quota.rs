//! Quota bookkeeping, as ZooKeeper's `DataTree` does it.
//!
//! A quota on `/p` is a `zookeeper_limits` node under `/zookeeper/quota/p`
//! (written by `setquota`). Creating it registers `/p`; creating the
//! sibling `zookeeper_stats` fills it with `count=N,bytes=M` for the
//! subtree. From then on every create, delete and setData below `/p`
//! rewrites that stats node's data in place — no version, mzxid or watch
//! change — so `listquota` can read usage. Enforcement (`enforceQuota`,
//! off by default) is a server decision and not done here.
//!
//! ZooKeeper's quirks are kept because they are visible in the stats
//! nodes: path components are split on `/` with blank ones dropped
//! (`PathTrie.split`), and deleting a limits node unregisters the whole
//! subtree of quota paths below it. Where ZooKeeper would throw from
//! inside `processTxn` (an unparsable stats node, an empty quota path),
//! we skip the bookkeeping instead.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::path::{self, QUOTA_ZOOKEEPER};
use crate::DataTree;

const LIMIT_NODE: &str = "zookeeper_limits";
const STAT_NODE: &str = "zookeeper_stats";

/// `PathTrie.split`: components, dropping those Java's `trim()` empties.
fn components(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|c| !c.chars().all(|ch| ch <= ' '))
        .collect()
}

fn key_of(components: &[&str]) -> String {
    format!("/{}", components.join("/"))
}

/// `Quotas.statPath`.
fn stat_path(quota_path: &str) -> String {
    format!("{QUOTA_ZOOKEEPER}{quota_path}/{STAT_NODE}")
}

/// Whether creating `path` recounts a quota's subtree (it is a quota's
/// stats node), walking every znode below the quota's path.
pub(crate) fn recounts_subtree(path: &str) -> bool {
    path.starts_with(QUOTA_ZOOKEEPER) && path::child_name(path) == STAT_NODE
}

/// Java's `s.substring(from)` in UTF-16 units; `None` where Java would
/// throw (or split a surrogate pair).
fn java_substring_from(s: &str, from: usize) -> Option<&str> {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        if units == from {
            return Some(&s[i..]);
        }
        units += c.len_utf16();
    }
    (units == from).then_some("")
}

impl DataTree {
    /// `DataTree.getMaxPrefixWithQuota`: the deepest registered quota path
    /// that is a component-wise prefix of `path`, never the root.
    fn max_quota_prefix(&self, path: &str) -> Option<String> {
        if self.quota_paths.is_empty() {
            return None;
        }
        let parts = components(path);
        (1..=parts.len())
            .rev()
            .map(|n| key_of(&parts[..n]))
            .find(|key| self.quota_paths.contains(key))
    }

    /// `PathTrie.addPath`.
    fn add_quota_path(&mut self, path: &str) {
        if path.is_empty() {
            return; // ZooKeeper throws here
        }
        let parts = components(path);
        if !parts.is_empty() {
            self.quota_paths.insert(key_of(&parts));
        }
    }

    /// `PathTrie.deletePath`: drops the trie node and everything below it.
    fn delete_quota_path(&mut self, path: &str) {
        let parts = components(path);
        if path.is_empty() || parts.is_empty() {
            return; // ZooKeeper throws here
        }
        let key = key_of(&parts);
        let below = format!("{key}/");
        let doomed: Vec<String> = self
            .quota_paths
            .iter()
            .filter(|p| **p == key || p.starts_with(&below))
            .cloned()
            .collect();
        for p in doomed {
            self.quota_paths.remove(&p);
        }
    }

    /// `DataTree.updateQuotaStat`: add to the stats node of `quota_path`.
    fn update_quota_stat(&mut self, quota_path: &str, bytes_diff: i64, count_diff: i64) {
        let stat_node = stat_path(quota_path);
        let Some(node) = self.node(&stat_node) else {
            return;
        };
        let Some(mut stats) = StatsTrack::parse(node.data.as_deref().unwrap_or_default()) else {
            return;
        };
        stats.add("count", count_diff);
        stats.add("bytes", bytes_diff);
        self.overwrite_data(&stat_node, stats.to_bytes());
    }

    /// `DataTree.updateQuotaForPath`: recount a subtree into its stats node.
    fn update_quota_for_path(&mut self, quota_path: &str) {
        let (count, bytes) = self.subtree_usage(quota_path);
        let mut stats = StatsTrack::default();
        stats.set("count", count);
        stats.set("bytes", bytes);
        self.overwrite_data(&stat_path(quota_path), stats.to_bytes());
    }

    /// `DataTree.setupQuota`, run when a tree is loaded: every quota's
    /// path registered and its usage recounted.
    pub(crate) fn setup_quotas(&mut self) {
        let quota_paths: Vec<String> = self
            .descendant_entries(QUOTA_ZOOKEEPER)
            .filter(|(p, _)| path::child_name(p) == LIMIT_NODE)
            .filter_map(|(p, _)| {
                let parent = path::parent_of(p)?;
                java_substring_from(parent, QUOTA_ZOOKEEPER.len()).map(str::to_owned)
            })
            .collect();
        for quota_path in quota_paths {
            self.add_quota_path(&quota_path);
            self.update_quota_for_path(&quota_path);
        }
    }

    /// `DataTree.getCounts`: nodes and data bytes at and below `path`.
    fn subtree_usage(&self, path: &str) -> (i64, i64) {
        let Some(top) = self.node(path) else {
            return (0, 0);
        };
        let mut count = 1;
        let mut bytes = top.data_len() as i64;
        for node in self.descendants(path) {
            count += 1;
            bytes += node.data_len() as i64;
        }
        (count, bytes)
    }

    /// The quota part of `DataTree.createNode`.
    pub(crate) fn quota_on_create(&mut self, parent: &str, path: &str, data_len: i64) {
        if let Some(quota_path) = parent.strip_prefix(QUOTA_ZOOKEEPER) {
            let child = path::child_name(path);
            if child == LIMIT_NODE {
                self.add_quota_path(quota_path);
            }
            if child == STAT_NODE {
                self.update_quota_for_path(quota_path);
            }
        }
        if let Some(prefix) = self.max_quota_prefix(path) {
            self.update_quota_stat(&prefix, data_len, 1);
        }
    }

    /// The quota part of `DataTree.deleteNode`. ZooKeeper tests the parent
    /// against `/zookeeper`, not `/zookeeper/quota`, then cuts 16 units.
    pub(crate) fn quota_on_delete(&mut self, parent: &str, path: &str, data_len: i64) {
        if parent.starts_with(path::PROC_ZOOKEEPER) && path::child_name(path) == LIMIT_NODE {
            if let Some(quota_path) = java_substring_from(parent, QUOTA_ZOOKEEPER.len()) {
                self.delete_quota_path(quota_path);
            }
        }
        if let Some(prefix) = self.max_quota_prefix(path) {
            self.update_quota_stat(&prefix, -data_len, -1);
        }
    }

    /// The quota part of `DataTree.setData`.
    pub(crate) fn quota_on_set_data(&mut self, path: &str, bytes_diff: i64) {
        if let Some(prefix) = self.max_quota_prefix(path) {
            self.update_quota_stat(&prefix, bytes_diff, 0);
        }
    }
}

/// ZooKeeper's `StatsTrack`: `key=value` pairs separated by `,` or `;`.
#[derive(Debug, Default, PartialEq, Eq)]
struct StatsTrack {
    /// Sorted, which is also the order `toString` writes extra keys in.
    stats: BTreeMap<String, i64>,
}

impl StatsTrack {
    /// `new StatsTrack(byte[])`; `None` where Java would throw.
    fn parse(data: &[u8]) -> Option<Self> {
        let text = String::from_utf8_lossy(data);
        let mut stats = BTreeMap::new();
        for pair in java_regex_split(&text) {
            let kv = java_split_drop_trailing(pair, '=');
            let value = kv.get(1)?;
            let value = if value.is_empty() {
                -1
            } else {
                java_parse_long(value)?
            };
            stats.insert(kv[0].to_owned(), value);
        }
        Some(Self { stats })
    }

    fn get(&self, key: &str) -> i64 {
        self.stats.get(key).copied().unwrap_or(-1)
    }

    fn set(&mut self, key: &str, value: i64) {
        self.stats.insert(key.to_owned(), value);
    }

    fn add(&mut self, key: &str, diff: i64) {
        let value = self.get(key).wrapping_add(diff);
        self.set(key, value);
    }

    /// `StatsTrack.toString`: count and bytes first; other keys after an
    /// extra `=` (which old parsers ignore), sorted, `;`-separated.
    fn to_bytes(&self) -> Bytes {
        let mut out = format!("count={},bytes={}", self.get("count"), self.get("bytes"));
        let extra: Vec<_> = self
            .stats
            .iter()
            .filter(|(k, _)| *k != "count" && *k != "bytes")
            .collect();
        if !extra.is_empty() {
            out.push('=');
            for (k, v) in extra {
                out.push_str(&format!(";{k}={v}"));
            }
        }
        Bytes::from(out)
    }
}

/// `Pattern.compile("[,;]+").split(s)`: a leading separator yields a
/// leading empty string, trailing empty strings are dropped.
fn java_regex_split(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new(); // StatsTrack returns before splitting
    }
    let mut parts: Vec<&str> = s.split([',', ';']).collect();
    // Runs of separators are one match: drop the empties between them,
    // keeping a leading one.
    let mut merged = Vec::with_capacity(parts.len());
    for (i, p) in parts.drain(..).enumerate() {
        if i == 0 || !p.is_empty() {
            merged.push(p);
        }
    }
    while merged.last().is_some_and(|p| p.is_empty()) {
        merged.pop();
    }
    merged
}

/// `s.split(String.valueOf(sep))`: no separator gives `[s]`; otherwise
/// trailing empty strings are dropped.
fn java_split_drop_trailing(s: &str, sep: char) -> Vec<&str> {
    if !s.contains(sep) {
        return vec![s];
    }
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// `Long.parseLong` for ASCII digits with an optional sign.
fn java_parse_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_track_round_trip() {
        // StatsTrack(String), toString
        let s = StatsTrack::parse(b"count=3,bytes=10").unwrap();
        assert_eq!(s.get("count"), 3);
        assert_eq!(&s.to_bytes()[..], b"count=3,bytes=10");
        let s = StatsTrack::parse(b"count=-1,bytes=-1=;byteHardLimit=5;countHardLimit=2").unwrap();
        assert_eq!(s.get("byteHardLimit"), 5);
        assert_eq!(
            &s.to_bytes()[..],
            b"count=-1,bytes=-1=;byteHardLimit=5;countHardLimit=2"
        );
        assert_eq!(StatsTrack::parse(b"count=").map(|s| s.get("count")), None);
        assert_eq!(
            StatsTrack::parse(b"count==7").map(|s| s.get("count")),
            Some(-1)
        );
        assert!(StatsTrack::parse(b",count=1").is_none());
        assert_eq!(StatsTrack::parse(b""), Some(StatsTrack::default()));
        assert_eq!(StatsTrack::parse(b",,;"), Some(StatsTrack::default()));
        assert!(StatsTrack::parse(b"count=x").is_none());
        assert_eq!(&StatsTrack::default().to_bytes()[..], b"count=-1,bytes=-1");
    }

    #[test]
    fn java_helpers() {
        assert_eq!(java_regex_split("a,,b;"), vec!["a", "b"]);
        assert_eq!(java_regex_split(",a"), vec!["", "a"]);
        assert_eq!(java_split_drop_trailing("a=", '='), vec!["a"]);
        assert_eq!(java_split_drop_trailing("=", '='), Vec::<&str>::new());
        assert_eq!(java_split_drop_trailing("=5", '='), vec!["", "5"]);
        assert_eq!(java_parse_long("+5"), Some(5));
        assert_eq!(java_parse_long("-5"), Some(-5));
        assert_eq!(java_parse_long("5 "), None);
        assert_eq!(java_substring_from("/zookeeper/quota/a", 16), Some("/a"));
        assert_eq!(java_substring_from("/zookeeper/quota", 16), Some(""));
        assert_eq!(java_substring_from("/zookeeper/x", 16), None);
        assert_eq!(components("/a// /b"), vec!["a", "b"]);
    }
}
