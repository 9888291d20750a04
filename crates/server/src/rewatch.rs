//! `setWatches` / `setWatches2`: a reconnecting client re-registers its
//! watches, with the last zxid it saw. As ZooKeeper's `DataTree.setWatches`
//! does, a watch whose node changed after that zxid fires at once instead
//! of being registered, so nothing that happened while the client was away
//! goes unnoticed.

use jute::EventType;
use tree::DataTree;

use crate::shared::WatchEvent;
use crate::watch::{ConnectionId, WatchKind, WatchRegistry};

/// ZooKeeper sends events fired by `setWatches` without a zxid.
const NO_ZXID: i64 = -1;

pub struct Reregister {
    pub relative_zxid: i64,
    pub data: Vec<String>,
    pub exist: Vec<String>,
    pub child: Vec<String>,
    pub persistent: Vec<String>,
    pub persistent_recursive: Vec<String>,
}

impl Reregister {
    pub fn apply(
        self,
        tree: &DataTree,
        watches: &mut WatchRegistry,
        connection: ConnectionId,
        fired: &mut Vec<WatchEvent>,
    ) {
        let mut fire = |path: String, event: EventType| {
            fired.push(WatchEvent {
                zxid: NO_ZXID,
                event,
                path,
            })
        };
        for path in self.data {
            match tree.exists(&path) {
                None => fire(path, EventType::NodeDeleted),
                Some(stat) if stat.mzxid > self.relative_zxid => {
                    fire(path, EventType::NodeDataChanged)
                }
                Some(_) => watches.add(connection, WatchKind::Data, &path),
            }
        }
        for path in self.exist {
            match tree.exists(&path) {
                Some(_) => fire(path, EventType::NodeCreated),
                None => watches.add(connection, WatchKind::Data, &path),
            }
        }
        for path in self.child {
            match tree.exists(&path) {
                None => fire(path, EventType::NodeDeleted),
                Some(stat) if stat.pzxid > self.relative_zxid => {
                    fire(path, EventType::NodeChildrenChanged)
                }
                Some(_) => watches.add(connection, WatchKind::Child, &path),
            }
        }
        for path in self.persistent {
            watches.add(connection, WatchKind::Persistent, &path);
        }
        for path in self.persistent_recursive {
            watches.add(connection, WatchKind::PersistentRecursive, &path);
        }
    }
}
