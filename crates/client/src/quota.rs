//! Quotas, as zkCli's `setquota`, `listquota` and `delquota` keep them:
//! plain znodes under `/zookeeper/quota`, so any ZooKeeper server honours
//! them. A quota on `/p` is `/zookeeper/quota/p/zookeeper_limits` (the
//! limits, in ZooKeeper's [`StatsTrack`] text) beside `zookeeper_stats`,
//! which the server keeps counting the subtree's znodes and bytes into.
//! Soft limits are only logged by the server; hard ones refuse writes with
//! [`Error::QuotaExceeded`] when the server enforces quotas
//! (`zookeeper.enforceQuota`).
//!
//! As in zkCli, a quota can only be set on an existing znode, and not on
//! one with a quota above or below it.

use jute::{quota_key as key, CreateMode, StatsTrack};

use crate::{Client, Error};

/// ZooKeeper's `Quotas.quotaZookeeper`.
pub const QUOTA_ROOT: &str = "/zookeeper/quota";
const LIMITS_NODE: &str = "zookeeper_limits";
const STATS_NODE: &str = "zookeeper_stats";

/// The limits to set (or, for [`Client::delete_quota`], to remove).
/// `None` leaves a limit as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuotaLimits {
    /// Soft limit on znodes, the quota's own included (`setquota -n`).
    pub count: Option<i64>,
    /// Soft limit on data bytes (`-b`).
    pub bytes: Option<i64>,
    /// Hard limit on znodes (`-N`).
    pub count_hard: Option<i64>,
    /// Hard limit on data bytes (`-B`).
    pub bytes_hard: Option<i64>,
}

impl QuotaLimits {
    fn entries(&self) -> [(&'static str, Option<i64>); 4] {
        [
            (key::COUNT, self.count),
            (key::BYTES, self.bytes),
            (key::COUNT_HARD_LIMIT, self.count_hard),
            (key::BYTE_HARD_LIMIT, self.bytes_hard),
        ]
    }

    fn is_empty(&self) -> bool {
        self.entries().iter().all(|(_, value)| value.is_none())
    }

    /// zkCli's checks: counts above zero, byte limits zero or more.
    pub fn validate(&self) -> Result<(), Error> {
        let count_ok = |v: Option<i64>| v.is_none_or(|v| v > 0);
        let bytes_ok = |v: Option<i64>| v.is_none_or(|v| v >= 0);
        if !count_ok(self.count) || !count_ok(self.count_hard) {
            return Err(invalid("the num quota must be greater than zero"));
        }
        if !bytes_ok(self.bytes) || !bytes_ok(self.bytes_hard) {
            return Err(invalid(
                "the bytes quota must be greater than or equal to zero",
            ));
        }
        Ok(())
    }
}

/// A quota as it stands: its limits and the usage the server counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    pub limits: StatsTrack,
    pub usage: StatsTrack,
}

impl Quota {
    /// zkCli's warnings after `setquota`: a limit already below the usage.
    pub fn warnings(&self) -> Vec<String> {
        let usage_count = self.usage.get(key::COUNT);
        let usage_bytes = self.usage.get(key::BYTES);
        let below = |soft: &str, hard: &str, used: i64| {
            [soft, hard].iter().any(|k| {
                let limit = self.limits.get(k);
                limit > -1 && limit < used
            })
        };
        let mut warnings = Vec::new();
        if below(key::COUNT, key::COUNT_HARD_LIMIT, usage_count) {
            warnings.push(format!(
                "[Warning]: the count quota you create is less than the existing count:{usage_count}"
            ));
        }
        if below(key::BYTES, key::BYTE_HARD_LIMIT, usage_bytes) {
            warnings.push(format!(
                "[Warning]: the bytes quota you create is less than the existing bytes:{usage_bytes}"
            ));
        }
        warnings
    }
}

/// `Quotas.quotaPath`: the znode under which `path`'s quota lives.
pub fn quota_path(path: &str) -> String {
    format!("{QUOTA_ROOT}{path}")
}

fn limits_path(path: &str) -> String {
    format!("{QUOTA_ROOT}{path}/{LIMITS_NODE}")
}

fn stats_path(path: &str) -> String {
    format!("{QUOTA_ROOT}{path}/{STATS_NODE}")
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        reason: reason.into(),
    }
}

/// zkCli's first check of `setquota`: no quota inside the quota tree.
pub fn check_quota_target(path: &str) -> Result<(), Error> {
    if path.starts_with(QUOTA_ROOT) {
        return Err(invalid(format!(
            "cannot set a quota under the path: {QUOTA_ROOT}"
        )));
    }
    Ok(())
}

fn parse_stats(path: &str, data: Option<&[u8]>) -> Result<StatsTrack, Error> {
    StatsTrack::parse(data.unwrap_or_default()).ok_or_else(|| {
        invalid(format!(
            "{path} does not hold a quota ZooKeeper can read: {:?}",
            String::from_utf8_lossy(data.unwrap_or_default())
        ))
    })
}

impl Client {
    /// zkCli's `setquota`: creates the quota of `path` with `limits`, or
    /// changes the limits given of the one it has. Returns the quota as it
    /// now stands; see [`Quota::warnings`].
    pub async fn set_quota(&self, path: &str, limits: QuotaLimits) -> Result<Quota, Error> {
        check_quota_target(path)?;
        if limits.is_empty() {
            return Err(invalid("no limit given"));
        }
        limits.validate()?;
        if self.exists(path).await?.is_none() {
            return Err(invalid(format!("{path} does not exist.")));
        }
        self.refuse_nested_quota(path).await?;
        let mut node = String::from(QUOTA_ROOT);
        for component in path.split('/').filter(|c| !c.is_empty()) {
            node = format!("{node}/{component}");
            self.create_if_missing(&node, None).await?;
        }
        let limits_node = limits_path(path);
        let mut stored = match self.get_data(&limits_node).await {
            Ok((data, _)) => parse_stats(&limits_node, data.as_deref())?,
            // zkCli writes every limit of a new quota, unset ones as -1.
            Err(Error::NoNode { .. }) => {
                let mut unset = StatsTrack::default();
                for (name, _) in QuotaLimits::default().entries() {
                    unset.set(name, -1);
                }
                unset
            }
            Err(e) => return Err(e),
        };
        for (name, value) in limits.entries() {
            if let Some(value) = value {
                stored.set(name, value);
            }
        }
        if self.create_if_missing(&limits_node, Some(&stored)).await? {
            let mut zero = StatsTrack::default();
            zero.set(key::COUNT, 0);
            zero.set(key::BYTES, 0);
            self.create_if_missing(&stats_path(path), Some(&zero))
                .await?;
        } else {
            self.set_data(&limits_node, stored.to_bytes(), None).await?;
        }
        self.list_quota(path).await
    }

    /// zkCli's `listquota`: the limits and usage of `path`'s quota;
    /// [`Error::NoNode`] when it has none.
    pub async fn list_quota(&self, path: &str) -> Result<Quota, Error> {
        let limits_node = limits_path(path);
        let (limits, _) = self.get_data(&limits_node).await?;
        let stats_node = stats_path(path);
        let (usage, _) = self.get_data(&stats_node).await?;
        Ok(Quota {
            limits: parse_stats(&limits_node, limits.as_deref())?,
            usage: parse_stats(&stats_node, usage.as_deref())?,
        })
    }

    /// zkCli's `delquota`: with `which`, unsets the limits it names (any
    /// value will do); without, removes the quota and the quota znodes
    /// left empty above it. Returns false when `path` has no quota.
    pub async fn delete_quota(
        &self,
        path: &str,
        which: Option<QuotaLimits>,
    ) -> Result<bool, Error> {
        let limits_node = limits_path(path);
        let data = match self.get_data(&limits_node).await {
            Ok((data, _)) => data,
            Err(Error::NoNode { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        match which {
            Some(which) => {
                let mut stored = parse_stats(&limits_node, data.as_deref())?;
                for (name, value) in which.entries() {
                    if value.is_some() {
                        stored.set(name, -1);
                    }
                }
                self.set_data(&limits_node, stored.to_bytes(), None).await?;
            }
            None => {
                let node = quota_path(path);
                for child in self.get_children(&node).await? {
                    self.delete(&format!("{node}/{child}"), None).await?;
                }
                self.trim_empty_quota_nodes(node).await?;
            }
        }
        Ok(true)
    }

    /// zkCli's `checkIfChildQuota` and `checkIfParentQuota`.
    async fn refuse_nested_quota(&self, path: &str) -> Result<(), Error> {
        let own = quota_path(path);
        let mut pending = vec![own.clone()];
        while let Some(node) = pending.pop() {
            let children = match self.get_children(&node).await {
                Ok(children) => children,
                Err(Error::NoNode { .. }) => continue,
                Err(e) => return Err(e),
            };
            if node != own && children.iter().any(|c| c == LIMITS_NODE) {
                let child = &node[QUOTA_ROOT.len()..];
                return Err(invalid(format!(
                    "{path} has a child {child} which has a quota"
                )));
            }
            pending.extend(children.iter().map(|c| format!("{node}/{c}")));
        }
        let mut node = String::from(QUOTA_ROOT);
        let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for component in components.iter().take(components.len().saturating_sub(1)) {
            node = format!("{node}/{component}");
            let children = match self.get_children(&node).await {
                Ok(children) => children,
                Err(Error::NoNode { .. }) => return Ok(()),
                Err(e) => return Err(e),
            };
            if children.iter().any(|c| c == LIMITS_NODE) {
                let parent = &node[QUOTA_ROOT.len()..];
                return Err(invalid(format!(
                    "{path} has a parent {parent} which has a quota"
                )));
            }
        }
        Ok(())
    }

    /// Creates `path` (null data when `data` is `None`) unless it exists;
    /// whether it was created here.
    async fn create_if_missing(
        &self,
        path: &str,
        data: Option<&StatsTrack>,
    ) -> Result<bool, Error> {
        let data = data.map(StatsTrack::to_bytes);
        let created = self
            .create(path, data.as_deref(), CreateMode::Persistent)
            .await;
        match created {
            Ok(_) => Ok(true),
            Err(Error::NodeExists { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// zkCli's `trimProcQuotas`: deletes `node` and its ancestors below
    /// the quota root while they have no children.
    async fn trim_empty_quota_nodes(&self, mut node: String) -> Result<(), Error> {
        while node != QUOTA_ROOT && node.starts_with(QUOTA_ROOT) {
            if !self.get_children(&node).await?.is_empty() {
                break;
            }
            self.delete(&node, None).await?;
            let cut = node.rfind('/').unwrap_or(0);
            node.truncate(cut);
        }
        Ok(())
    }
}
