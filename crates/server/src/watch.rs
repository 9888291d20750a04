//! The watches of this server's connected clients. Watches are local, as in
//! ZooKeeper: a client re-registers them (`setWatches2`) after reconnecting.
//!
//! Trigger rules follow ZooKeeper's `WatchManager`: one-shot data watches
//! (set by getData and exists) fire on created, deleted and data changed;
//! one-shot child watches on children changed and deleted; persistent
//! watches on every event at their path; persistent recursive watches on
//! every event at or below their path except children changed. A
//! connection gets one event per trigger however many of its watches match.

use std::collections::{BTreeSet, HashMap};

use jute::EventType;

/// Identifies a client connection on this server.
pub type ConnectionId = u64;

/// Which table a watch lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    Data,
    Child,
    Persistent,
    PersistentRecursive,
}

#[derive(Default)]
pub struct WatchRegistry {
    by_kind: HashMap<WatchKind, HashMap<String, BTreeSet<ConnectionId>>>,
    /// Reverse index so a closing connection drops its watches in time
    /// proportional to what it had, not to the whole table.
    by_connection: HashMap<ConnectionId, BTreeSet<(WatchKindKey, String)>>,
    /// Number of recursive watches: when zero, triggers skip walking the
    /// ancestors of every changed path.
    recursive_count: usize,
}

/// `WatchKind` as an ordered key for the reverse index.
type WatchKindKey = u8;

fn key_of(kind: WatchKind) -> WatchKindKey {
    match kind {
        WatchKind::Data => 0,
        WatchKind::Child => 1,
        WatchKind::Persistent => 2,
        WatchKind::PersistentRecursive => 3,
    }
}

fn kind_of(key: WatchKindKey) -> WatchKind {
    match key {
        0 => WatchKind::Data,
        1 => WatchKind::Child,
        2 => WatchKind::Persistent,
        _ => WatchKind::PersistentRecursive,
    }
}

impl WatchRegistry {
    pub fn add(&mut self, connection: ConnectionId, kind: WatchKind, path: &str) {
        let inserted = self
            .by_kind
            .entry(kind)
            .or_default()
            .entry(path.to_string())
            .or_default()
            .insert(connection);
        if inserted {
            self.by_connection
                .entry(connection)
                .or_default()
                .insert((key_of(kind), path.to_string()));
            if kind == WatchKind::PersistentRecursive {
                self.recursive_count += 1;
            }
        }
    }

    /// Removes one watch; true if it was there.
    pub fn remove(&mut self, connection: ConnectionId, kind: WatchKind, path: &str) -> bool {
        let Some(table) = self.by_kind.get_mut(&kind) else {
            return false;
        };
        let Some(watchers) = table.get_mut(path) else {
            return false;
        };
        if !watchers.remove(&connection) {
            return false;
        }
        if watchers.is_empty() {
            table.remove(path);
        }
        self.forget_reverse(connection, kind, path);
        if kind == WatchKind::PersistentRecursive {
            self.recursive_count -= 1;
        }
        true
    }

    fn forget_reverse(&mut self, connection: ConnectionId, kind: WatchKind, path: &str) {
        if let Some(set) = self.by_connection.get_mut(&connection) {
            set.remove(&(key_of(kind), path.to_string()));
            if set.is_empty() {
                self.by_connection.remove(&connection);
            }
        }
    }

    pub fn contains(&self, connection: ConnectionId, kind: WatchKind, path: &str) -> bool {
        self.by_kind
            .get(&kind)
            .and_then(|table| table.get(path))
            .is_some_and(|watchers| watchers.contains(&connection))
    }

    /// Drops every watch of a closed connection.
    pub fn remove_connection(&mut self, connection: ConnectionId) {
        let Some(watches) = self.by_connection.remove(&connection) else {
            return;
        };
        for (key, path) in watches {
            let kind = kind_of(key);
            if let Some(table) = self.by_kind.get_mut(&kind) {
                if let Some(watchers) = table.get_mut(&path) {
                    watchers.remove(&connection);
                    if watchers.is_empty() {
                        table.remove(&path);
                    }
                }
            }
            if kind == WatchKind::PersistentRecursive {
                self.recursive_count -= 1;
            }
        }
    }

    /// The connections to notify of `event` at `path`, each once, in id
    /// order; one-shot watches that fired are removed.
    pub fn trigger(&mut self, path: &str, event: EventType) -> BTreeSet<ConnectionId> {
        let mut notify = BTreeSet::new();
        let one_shot: &[WatchKind] = match event {
            EventType::NodeCreated | EventType::NodeDataChanged => &[WatchKind::Data],
            EventType::NodeDeleted => &[WatchKind::Data, WatchKind::Child],
            EventType::NodeChildrenChanged => &[WatchKind::Child],
            _ => &[],
        };
        for &kind in one_shot {
            if let Some(watchers) = self.by_kind.get_mut(&kind).and_then(|t| t.remove(path)) {
                for connection in &watchers {
                    self.forget_reverse(*connection, kind, path);
                }
                notify.extend(watchers);
            }
        }
        if let Some(watchers) = self
            .by_kind
            .get(&WatchKind::Persistent)
            .and_then(|t| t.get(path))
        {
            notify.extend(watchers.iter().copied());
        }
        if self.recursive_count > 0 && event != EventType::NodeChildrenChanged {
            if let Some(table) = self.by_kind.get(&WatchKind::PersistentRecursive) {
                for ancestor in self_and_ancestors(path) {
                    if let Some(watchers) = table.get(ancestor) {
                        notify.extend(watchers.iter().copied());
                    }
                }
            }
        }
        notify
    }

    /// Watch counts for `wchs`: (connections, paths, watches).
    pub fn summary(&self) -> (usize, usize, usize) {
        let paths: BTreeSet<&String> = self.by_kind.values().flat_map(|t| t.keys()).collect();
        let watches = self.by_connection.values().map(BTreeSet::len).sum();
        (self.by_connection.len(), paths.len(), watches)
    }

    /// Every (connection, path) pair, for `wchc` / `wchp` style listings.
    pub fn pairs(&self) -> Vec<(ConnectionId, String)> {
        self.by_connection
            .iter()
            .flat_map(|(c, set)| set.iter().map(move |(_, p)| (*c, p.clone())))
            .collect()
    }
}

/// `/a/b` yields `/a/b`, `/a`, `/`.
fn self_and_ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let current = next?;
        next = match current.rfind('/') {
            _ if current == "/" => None,
            Some(0) => Some("/"),
            Some(at) => Some(&current[..at]),
            None => None,
        };
        Some(current)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_watches_fire_once() {
        let mut w = WatchRegistry::default();
        w.add(1, WatchKind::Data, "/a");
        w.add(2, WatchKind::Child, "/a");
        assert_eq!(w.trigger("/a", EventType::NodeDataChanged), [1].into());
        assert!(w.trigger("/a", EventType::NodeDataChanged).is_empty());
        assert_eq!(w.trigger("/a", EventType::NodeDeleted), [2].into());
        assert_eq!(w.summary(), (0, 0, 0));
    }

    #[test]
    fn persistent_watches_stay_and_recursive_skip_child_events() {
        let mut w = WatchRegistry::default();
        w.add(1, WatchKind::Persistent, "/a");
        w.add(2, WatchKind::PersistentRecursive, "/");
        w.add(3, WatchKind::PersistentRecursive, "/a");
        assert_eq!(w.trigger("/a", EventType::NodeChildrenChanged), [1].into());
        assert_eq!(w.trigger("/a/b", EventType::NodeCreated), [2, 3].into());
        assert_eq!(
            w.trigger("/a", EventType::NodeDataChanged),
            [1, 2, 3].into()
        );
        assert_eq!(w.trigger("/ab", EventType::NodeCreated), [2].into());
    }

    #[test]
    fn a_connection_is_notified_once_per_trigger() {
        let mut w = WatchRegistry::default();
        w.add(1, WatchKind::Data, "/a");
        w.add(1, WatchKind::Persistent, "/a");
        assert_eq!(w.trigger("/a", EventType::NodeDataChanged), [1].into());
    }

    #[test]
    fn closing_a_connection_drops_its_watches() {
        let mut w = WatchRegistry::default();
        w.add(1, WatchKind::Data, "/a");
        w.add(1, WatchKind::PersistentRecursive, "/b");
        w.add(2, WatchKind::Data, "/a");
        w.remove_connection(1);
        assert_eq!(w.trigger("/a", EventType::NodeDataChanged), [2].into());
        assert!(w.trigger("/b/c", EventType::NodeCreated).is_empty());
        assert!(!w.remove(1, WatchKind::Data, "/a"));
    }

    #[test]
    fn ancestors() {
        assert_eq!(
            self_and_ancestors("/a/b").collect::<Vec<_>>(),
            ["/a/b", "/a", "/"]
        );
        assert_eq!(self_and_ancestors("/").collect::<Vec<_>>(), ["/"]);
    }
}
