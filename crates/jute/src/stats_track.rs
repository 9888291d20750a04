//! ZooKeeper's `StatsTrack`: the text in a quota's limits and stats
//! nodes (`/zookeeper/quota/<path>/zookeeper_limits`, `.../zookeeper_stats`),
//! which clients write with `setquota` and servers read and rewrite. Both
//! sides must parse it exactly as Java does, quirks included, since a
//! node Java cannot parse fails a write on a quota-enforcing server.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;

/// The keys ZooKeeper writes: soft limits (or usage, in a stats node)
/// under the first two, hard limits under the others.
pub mod key {
    pub const COUNT: &str = "count";
    pub const BYTES: &str = "bytes";
    pub const COUNT_HARD_LIMIT: &str = "countHardLimit";
    pub const BYTE_HARD_LIMIT: &str = "byteHardLimit";
}

/// ZooKeeper's `StatsTrack`: `key=value` pairs separated by `,` or `;`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StatsTrack {
    /// Sorted, which is also the order `toString` writes extra keys in.
    stats: BTreeMap<String, i64>,
}

impl StatsTrack {
    /// `new StatsTrack(byte[])`; `None` where Java would throw.
    pub fn parse(data: &[u8]) -> Option<Self> {
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

    /// The value under `key`; -1 (ZooKeeper's "not set") when absent.
    pub fn get(&self, key: &str) -> i64 {
        self.stats.get(key).copied().unwrap_or(-1)
    }

    pub fn set(&mut self, key: &str, value: i64) {
        self.stats.insert(key.to_owned(), value);
    }

    pub fn add(&mut self, key: &str, diff: i64) {
        let value = self.get(key).wrapping_add(diff);
        self.set(key, value);
    }

    /// The text ZooKeeper stores (see the `Display` impl).
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(self.to_string())
    }
}

impl fmt::Display for StatsTrack {
    /// `StatsTrack.toString`: count and bytes first; other keys after an
    /// extra `=` (which old parsers ignore), sorted, `;`-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (count, bytes) = (self.get(key::COUNT), self.get(key::BYTES));
        write!(f, "{}={count},{}={bytes}", key::COUNT, key::BYTES)?;
        let mut extra = self
            .stats
            .iter()
            .filter(|(k, _)| *k != key::COUNT && *k != key::BYTES)
            .peekable();
        if extra.peek().is_some() {
            f.write_str("=")?;
        }
        for (k, v) in extra {
            write!(f, ";{k}={v}")?;
        }
        Ok(())
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
    }
}
