//! `paddock mirror`'s copy of a ZooKeeper ensemble's tree: a `ZkTree`
//! replayed tolerantly while the leader's fuzzy SNAP is caught up, then
//! Paddock's own `DataTree`, each txn applied as the tree's own and its
//! outcome checked against the leader's.

use tree::DataTree;

use crate::tree_txn::{agrees, tree_change, TreeChange};
use crate::zk_learner::{LearnerError, Replica};
use crate::zk_tree::ZkTree;
use crate::zk_txn::LoggedTxn;

/// ZooKeeper's tree as followed, and where it is in the leader's history.
#[derive(Debug, Default)]
pub struct Mirror {
    copy: Copy,
    /// The last txn applied; 0 before the first sync.
    zxid: i64,
    /// Txns applied since the mirror began.
    txns: u64,
}

/// The copy of the tree, in the form its sync allows.
#[derive(Debug)]
enum Copy {
    /// Loaded from the leader's fuzzy snapshot, not yet up to date.
    Loading(ZkTree),
    /// Up to date: Paddock's tree, each txn applied and checked.
    Following(DataTree),
}

impl Default for Copy {
    /// A ZooKeeper that has applied nothing holds what a new tree holds.
    fn default() -> Self {
        Copy::Following(DataTree::new())
    }
}

impl Mirror {
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    /// The tree as ZooKeeper itself would load it at this zxid, and how
    /// many ephemerals of ended sessions that removed.
    pub fn into_data_tree(self) -> Result<(DataTree, usize), tree::SnapshotError> {
        match self.copy {
            Copy::Loading(zk) => zk.into_data_tree(self.zxid),
            Copy::Following(tree) => Ok((tree, 0)),
        }
    }
}

impl Replica for Mirror {
    fn zxid(&self) -> i64 {
        self.zxid
    }

    fn load(&mut self, tree: ZkTree, zxid: i64) {
        self.copy = Copy::Loading(tree);
        self.zxid = zxid;
    }

    /// From now on the copy is Paddock's tree.
    fn up_to_date(&mut self, _leader: u64, _epoch: i64) -> Result<(), LearnerError> {
        self.copy = match std::mem::take(&mut self.copy) {
            Copy::Loading(zk) => Copy::Following(zk.into_tree().map_err(LearnerError::Tree)?),
            following => following,
        };
        Ok(())
    }

    fn apply(&mut self, txn: LoggedTxn) -> Result<(), String> {
        match &mut self.copy {
            Copy::Loading(zk) => {
                zk.replay(&txn);
            }
            Copy::Following(tree) => apply_to_tree(tree, &txn)?,
        }
        self.zxid = txn.header.zxid;
        self.txns += 1;
        Ok(())
    }

    fn start_over(&mut self) {
        self.copy = Copy::default();
        self.zxid = 0;
    }

    fn txns(&self) -> u64 {
        self.txns
    }
}

/// Applies a txn the leader committed to a tree that holds what the
/// leader's held; `Err` says how the outcome differed.
fn apply_to_tree(tree: &mut DataTree, logged: &LoggedTxn) -> Result<(), String> {
    let zxid = logged.header.zxid;
    match tree_change(logged) {
        TreeChange::Config(data) => tree.install_config(data, zxid),
        TreeChange::Txn(txn) => {
            let applied = tree.apply(zxid, &txn);
            if !agrees(&logged.txn, &applied.outcome) {
                return Err(format!(
                    "came out as {:?} here where ZooKeeper's was {:?}",
                    applied.outcome, logged.txn
                ));
            }
        }
    }
    Ok(())
}
