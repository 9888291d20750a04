//! Quota bookkeeping, as ZooKeeper's `DataTree` does it.
//!
//! A quota on `/p` is a `zookeeper_limits` node under `/zookeeper/quota/p`
//! (written by `setquota`). Creating it registers `/p`; creating the
//! sibling `zookeeper_stats` fills it with `count=N,bytes=M` for the
//! subtree. From then on every create, delete and setData below `/p`
//! rewrites that stats node's data in place — no version, mzxid or watch
//! change — so `listquota` can read usage.
//!
//! Enforcement (`zookeeper.enforceQuota`, off by default) is ZooKeeper's
//! `ZooKeeperServer.checkQuota`, asked by a create or setData whose Txn
//! carries the proposer's setting: the usage after the write is compared
//! with the limits node's hard limit, or else its soft one. Passing a soft
//! limit is reported; passing a hard one refuses the write with
//! `QuotaExceeded`.
//!
//! ZooKeeper's quirks are kept because they are visible in the stats
//! nodes: path components are split on `/` with blank ones dropped
//! (`PathTrie.split`), and deleting a limits node unregisters the whole
//! subtree of quota paths below it. Where ZooKeeper would throw from
//! inside `processTxn` (an unparsable stats node, an empty quota path),
//! we skip the bookkeeping instead.

use std::collections::BTreeMap;
use std::fmt;

use jute::{quota_key as key, ErrorCode, StatsTrack};

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

/// `Quotas.limitPath`.
fn limit_path(quota_path: &str) -> String {
    format!("{QUOTA_ZOOKEEPER}{quota_path}/{LIMIT_NODE}")
}

/// `PathUtils.getTopNamespace`: the first component of `path`, the label
/// of ZooKeeper's per-namespace quota metrics.
pub fn top_namespace(path: &str) -> Option<&str> {
    path.split('/').nth(1).filter(|c| !c.is_empty())
}

/// What a quota limit is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaMeasure {
    Count,
    Bytes,
}

/// A write that takes a quota's usage past one of its limits, as
/// `ZooKeeperServer.checkQuota` finds it. ZooKeeper logs each one; a hard
/// limit also refuses the write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaBreach {
    /// The quota's path: the deepest one above the written znode.
    pub quota_path: String,
    /// The written path's [`top_namespace`].
    pub namespace: Option<String>,
    pub measure: QuotaMeasure,
    /// Usage once the write is applied.
    pub usage: i64,
    pub limit: i64,
    pub hard: bool,
}

/// Quota limits and usage summed per top-level namespace, as ZooKeeper's
/// `QuotaMetricsUtils` reports them in its `quota_*_per_namespace`
/// metrics: a limit is the hard one where set, else the soft one.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QuotasPerNamespace {
    pub count_limit: BTreeMap<String, i64>,
    pub bytes_limit: BTreeMap<String, i64>,
    pub count_usage: BTreeMap<String, i64>,
    pub bytes_usage: BTreeMap<String, i64>,
}

impl fmt::Display for QuotaBreach {
    /// ZooKeeper's own words, so operators' log searches keep working.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (measure, limit_name) = match self.measure {
            QuotaMeasure::Count => ("count", "CountLimit"),
            QuotaMeasure::Bytes => ("bytes", "ByteLimit"),
        };
        let kind = if self.hard { "hard" } else { "soft" };
        write!(
            f,
            "Quota exceeded: {} [current {measure}={}, {kind}{limit_name}={}]",
            self.quota_path, self.usage, self.limit
        )
    }
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
        let Some(mut stats) = StatsTrack::parse(node.data().unwrap_or_default()) else {
            return;
        };
        stats.add(key::COUNT, count_diff);
        stats.add(key::BYTES, bytes_diff);
        self.overwrite_data(&stat_node, stats.to_bytes());
    }

    /// `DataTree.updateQuotaForPath`: recount a subtree into its stats node.
    fn update_quota_for_path(&mut self, quota_path: &str) {
        let (count, bytes) = self.subtree_usage(quota_path);
        let mut stats = StatsTrack::default();
        stats.set(key::COUNT, count);
        stats.set(key::BYTES, bytes);
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

    /// `ZooKeeperServer.checkQuota`, judged on this tree's limits and
    /// usage: adding `count_diff` znodes and `bytes_diff` bytes at `path`.
    /// Each limit passed is pushed to `breaches`, the count's before the
    /// bytes'; a hard one ends the check with `QuotaExceeded`. A limits or
    /// stats node ZooKeeper could not parse fails the write as ZooKeeper's
    /// prep stage does with any unexpected exception.
    pub(crate) fn check_quota(
        &self,
        path: &str,
        bytes_diff: i64,
        count_diff: i64,
        breaches: &mut Vec<QuotaBreach>,
    ) -> Result<(), ErrorCode> {
        let Some(quota_path) = self.max_quota_prefix(path) else {
            return Ok(());
        };
        let Some(limits) = self.stats_track_at(&limit_path(&quota_path))? else {
            return Ok(());
        };
        let checks = [
            (
                QuotaMeasure::Count,
                key::COUNT,
                key::COUNT_HARD_LIMIT,
                count_diff,
            ),
            (
                QuotaMeasure::Bytes,
                key::BYTES,
                key::BYTE_HARD_LIMIT,
                bytes_diff,
            ),
        ];
        let limited = |(_, soft, hard, diff): &(_, &str, &str, i64)| {
            *diff != 0 && (limits.get(soft) > -1 || limits.get(hard) > -1)
        };
        if !checks.iter().any(limited) {
            return Ok(());
        }
        let Some(usage) = self.stats_track_at(&stat_path(&quota_path))? else {
            return Ok(());
        };
        for check in checks.iter().filter(|c| limited(c)) {
            let (measure, soft, hard, diff) = *check;
            let hard_limit = limits.get(hard);
            let is_hard = hard_limit > -1;
            let limit = if is_hard {
                hard_limit
            } else {
                limits.get(soft)
            };
            let new_usage = usage.get(soft).wrapping_add(diff);
            if new_usage > limit {
                breaches.push(QuotaBreach {
                    quota_path: quota_path.clone(),
                    namespace: top_namespace(path).map(str::to_owned),
                    measure,
                    usage: new_usage,
                    limit,
                    hard: is_hard,
                });
                if is_hard {
                    return Err(ErrorCode::QuotaExceeded);
                }
            }
        }
        Ok(())
    }

    /// The `StatsTrack` in the data of the node at `path`: `None` when
    /// there is no such node (ZooKeeper logs and skips the check), an
    /// error where ZooKeeper's parse would throw.
    fn stats_track_at(&self, path: &str) -> Result<Option<StatsTrack>, ErrorCode> {
        let Some(node) = self.node(path) else {
            return Ok(None);
        };
        let data = node.data().ok_or(ErrorCode::MarshallingError)?;
        StatsTrack::parse(data)
            .map(Some)
            .ok_or(ErrorCode::MarshallingError)
    }

    /// ZooKeeper's `QuotaMetricsUtils.getQuotaLimitOrUsage`: every leaf
    /// limits or stats node under `/zookeeper/quota` whose data parses,
    /// summed under the first component of its quota path.
    pub fn quotas_per_namespace(&self) -> QuotasPerNamespace {
        let mut out = QuotasPerNamespace::default();
        for (node_path, node) in self.descendant_entries(QUOTA_ZOOKEEPER) {
            let node_path: &str = node_path;
            if !node.children.is_empty() {
                continue;
            }
            let Some(trimmed) = java_substring_from(node_path, QUOTA_ZOOKEEPER.len()) else {
                continue;
            };
            let Some(namespace) = top_namespace(trimmed) else {
                continue;
            };
            let Some(stats) = node.data().and_then(StatsTrack::parse) else {
                continue;
            };
            let add = |map: &mut BTreeMap<String, i64>, value: i64| {
                let sum = map.entry(namespace.to_owned()).or_default();
                *sum = sum.wrapping_add(value);
            };
            let either = |hard: i64, soft: i64| if hard > -1 { hard } else { soft };
            match path::child_name(node_path) {
                LIMIT_NODE => {
                    let count = either(stats.get(key::COUNT_HARD_LIMIT), stats.get(key::COUNT));
                    let bytes = either(stats.get(key::BYTE_HARD_LIMIT), stats.get(key::BYTES));
                    add(&mut out.count_limit, count);
                    add(&mut out.bytes_limit, bytes);
                }
                STAT_NODE => {
                    add(&mut out.count_usage, stats.get(key::COUNT));
                    add(&mut out.bytes_usage, stats.get(key::BYTES));
                }
                _ => {}
            }
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_substrings_and_components() {
        assert_eq!(java_substring_from("/zookeeper/quota/a", 16), Some("/a"));
        assert_eq!(java_substring_from("/zookeeper/quota", 16), Some(""));
        assert_eq!(java_substring_from("/zookeeper/x", 16), None);
        assert_eq!(components("/a// /b"), vec!["a", "b"]);
    }
}
