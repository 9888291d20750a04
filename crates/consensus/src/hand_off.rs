//! Handing leadership over before a graceful stop. A leader that just
//! exits leaves the ensemble without writes for a whole election timeout;
//! one that first asks its most up-to-date follower to campaign at once
//! (raft's leader transfer: the follower gets `MsgTimeoutNow` once its log
//! matches the leader's) leaves a gap of a few round trips.

use std::cmp::Reverse;
use std::time::Duration;

/// What came of [`crate::Consensus::hand_off`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandOff {
    /// This server does not lead: there is nothing to hand over.
    NotLeading,
    /// This server is the only voter (standalone): nobody could take over.
    NoOtherVoter,
    /// Server `to` leads now, `elapsed` after the hand-off started.
    /// `last_index` (log index space) was this server's last entry when it
    /// asked: every proposal made through it lies at or below it, and the
    /// new leader, whose log matched, commits them.
    Done {
        to: u64,
        elapsed: Duration,
        last_index: u64,
    },
    /// The log waits for disk space: this server can neither write nor
    /// step through a transfer, and stops as it is.
    DiskFull,
    /// No other server led within an election timeout of asking `asked`
    /// (it was down, or could not catch up in time).
    NotTaken { asked: u64 },
}

/// A voter other than the leader, as the leader's progress tracker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Follower {
    pub id: u64,
    /// Log index space: the highest entry known to be in its log.
    pub matched: u64,
    /// Heard from within the last election timeout.
    pub recently_active: bool,
}

/// The follower to hand leadership to: any but `avoid` (one that did not
/// take over when asked last), unless it is the only one; then one heard
/// from lately (a dead follower keeps its last `matched`, and asking it
/// would waste an election timeout, while raft catches a live one up
/// before it campaigns); then the one holding most of the log, which
/// campaigns soonest; then the lowest id, so that the choice never depends
/// on hash-map order.
pub(crate) fn successor(
    followers: impl IntoIterator<Item = Follower>,
    avoid: Option<u64>,
) -> Option<u64> {
    followers
        .into_iter()
        .max_by_key(|f| {
            (
                Some(f.id) != avoid,
                f.recently_active,
                f.matched,
                Reverse(f.id),
            )
        })
        .map(|f| f.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn follower(id: u64, matched: u64, recently_active: bool) -> Follower {
        Follower {
            id,
            matched,
            recently_active,
        }
    }

    #[test]
    fn the_follower_with_the_most_log_is_chosen() {
        let chosen = successor([follower(2, 40, true), follower(3, 42, true)], None);
        assert_eq!(chosen, Some(3));
    }

    #[test]
    fn a_live_follower_beats_a_silent_one_with_more_log() {
        let chosen = successor([follower(2, 50, false), follower(3, 42, true)], None);
        assert_eq!(chosen, Some(3));
    }

    #[test]
    fn when_none_was_heard_from_lately_the_most_log_wins() {
        // Right after raft's quorum check every follower looks silent
        // until its next heartbeat answer.
        let chosen = successor([follower(2, 50, false), follower(3, 42, false)], None);
        assert_eq!(chosen, Some(2));
    }

    #[test]
    fn ties_go_to_the_lowest_id_whatever_the_order() {
        let followers = [follower(5, 42, true), follower(2, 42, true)];
        assert_eq!(successor(followers, None), Some(2));
        assert_eq!(successor(followers.into_iter().rev(), None), Some(2));
    }

    #[test]
    fn the_follower_that_did_not_take_over_is_asked_last() {
        let followers = [follower(2, 42, true), follower(3, 40, true)];
        assert_eq!(successor(followers, Some(2)), Some(3));
        assert_eq!(successor([follower(2, 42, true)], Some(2)), Some(2));
    }

    #[test]
    fn nobody_to_choose_without_followers() {
        assert_eq!(successor([], None), None);
    }
}
