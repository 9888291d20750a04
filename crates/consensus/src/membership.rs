//! Who is in the group: its voters and learners (ZooKeeper's participants
//! and observers), and how the group moves from one membership to another
//! while it runs (ZooKeeper's dynamic reconfiguration) through raft's
//! `ConfChangeV2`. A change of more than one server goes through joint
//! consensus: until the group leaves the joint state (raft proposes that
//! by itself once the change is applied), every decision needs a majority
//! of the old voters and of the new.

use raft::prelude::{
    ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState,
};

/// The group's servers as raft knows them at one log index.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Membership {
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    /// In a joint state: the voters being left, whose majority is also
    /// needed until the group leaves it.
    pub voters_outgoing: Vec<u64>,
    /// In a joint state: voters that become learners when it is left.
    pub learners_next: Vec<u64>,
    /// Whether raft leaves the joint state by itself.
    pub auto_leave: bool,
}

impl Membership {
    /// A membership outside any change: `voters` and `learners`.
    pub fn new(voters: Vec<u64>, learners: Vec<u64>) -> Self {
        Self {
            voters,
            learners,
            ..Self::default()
        }
    }

    /// Whether a change is half done: the group needs two majorities.
    pub fn is_joint(&self) -> bool {
        !self.voters_outgoing.is_empty()
    }

    pub(crate) fn from_raft(conf: &ConfState) -> Self {
        Self {
            voters: sorted(&conf.voters),
            learners: sorted(&conf.learners),
            voters_outgoing: sorted(&conf.voters_outgoing),
            learners_next: sorted(&conf.learners_next),
            auto_leave: conf.auto_leave,
        }
    }

    pub(crate) fn to_raft(&self) -> ConfState {
        let mut conf = ConfState::from((self.voters.clone(), self.learners.clone()));
        conf.voters_outgoing = self.voters_outgoing.clone();
        conf.learners_next = self.learners_next.clone();
        conf.auto_leave = self.auto_leave;
        conf
    }

    /// The change that turns this membership (outside any change) into
    /// `target`: servers added, removed, promoted or demoted. `None` when
    /// there is nothing to change. One server's change is applied at once;
    /// more go through a joint state that raft leaves by itself.
    pub(crate) fn change_to(&self, target: &Membership) -> Option<ConfChangeV2> {
        let mut changes = Vec::new();
        let mut single = |change_type, node_id| {
            let mut change = ConfChangeSingle::default();
            change.set_change_type(change_type);
            change.node_id = node_id;
            changes.push(change);
        };
        for &id in &target.voters {
            if !self.voters.contains(&id) {
                single(ConfChangeType::AddNode, id);
            }
        }
        for &id in &target.learners {
            if !self.learners.contains(&id) {
                single(ConfChangeType::AddLearnerNode, id);
            }
        }
        for &id in self.voters.iter().chain(&self.learners) {
            if !target.voters.contains(&id) && !target.learners.contains(&id) {
                single(ConfChangeType::RemoveNode, id);
            }
        }
        if changes.is_empty() {
            return None;
        }
        let mut change = ConfChangeV2::default();
        change.set_transition(ConfChangeTransition::Auto);
        change.set_changes(changes.into());
        Some(change)
    }
}

fn sorted(ids: &[u64]) -> Vec<u64> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(change: &ConfChangeV2) -> Vec<(ConfChangeType, u64)> {
        change
            .get_changes()
            .iter()
            .map(|c| (c.get_change_type(), c.node_id))
            .collect()
    }

    #[test]
    fn a_change_names_what_differs() {
        let three = Membership::new(vec![1, 2, 3], vec![]);
        assert_eq!(three.change_to(&three), None);
        let four = Membership::new(vec![1, 2, 3, 4], vec![]);
        assert_eq!(
            kinds(&three.change_to(&four).unwrap()),
            [(ConfChangeType::AddNode, 4)]
        );
        let replaced = Membership::new(vec![1, 2, 5], vec![3]);
        assert_eq!(
            kinds(&three.change_to(&replaced).unwrap()),
            [
                (ConfChangeType::AddNode, 5),
                (ConfChangeType::AddLearnerNode, 3)
            ]
        );
        let observer_promoted = Membership::new(vec![1, 2, 3], vec![]);
        let with_observer = Membership::new(vec![1, 2], vec![3]);
        assert_eq!(
            kinds(&with_observer.change_to(&observer_promoted).unwrap()),
            [(ConfChangeType::AddNode, 3)]
        );
        let shrunk = Membership::new(vec![1], vec![]);
        assert_eq!(
            kinds(&three.change_to(&shrunk).unwrap()),
            [
                (ConfChangeType::RemoveNode, 2),
                (ConfChangeType::RemoveNode, 3)
            ]
        );
    }

    #[test]
    fn round_trips_through_raft() {
        let joint = Membership {
            voters: vec![1, 2, 4],
            learners: vec![5],
            voters_outgoing: vec![1, 2, 3],
            learners_next: vec![3],
            auto_leave: true,
        };
        assert!(joint.is_joint());
        assert_eq!(Membership::from_raft(&joint.to_raft()), joint);
    }
}
