//! The vote fence of a voter that lost its raft state.
//!
//! Raft's safety rests on each voter remembering its vote: one vote per
//! term, kept on disk. A server restarted with an empty data directory and
//! its old id (what operators do with ZooKeeper after losing a disk) has
//! forgotten the votes it cast, and could vote a second time in a term where
//! it already helped elect a leader: two leaders in one term, and
//! acknowledged writes lost.
//!
//! Such a server is fenced: it casts no vote, for another server or for
//! itself, until it knows a term higher than any it could have voted in.
//! That floor is learned by asking the other voters for their current term
//! (a term query on the peer transport). If this server's old vote helped
//! elect a leader in term `t`, a majority voted with it, and all of them
//! hold a term of at least `t` from then on: at least `majority - 1` of the
//! other `n - 1` voters. Once `n - majority + 1` of the other voters have
//! answered, the answers include one of them, so the highest answer is at
//! least `t`. Votes in terms above the floor are safe. (That is a majority
//! of all voters when `n` is odd, and one less when it is even: in a group
//! of two, the other voter's answer alone.)
//!
//! The answers also carry each voter's commit index. Until this server
//! holds the log up to the highest of them again, it votes only for a
//! candidate whose log reaches that index too (any leader that can win
//! holds every committed entry, so this refuses no rightful one). Without
//! it, two servers that both lost their disks, one after the other, could
//! elect one of themselves with an empty log while the third still holds
//! the data, and the group would forget everything. The fence is lifted
//! once this server's durable term passes the floor and its durable log
//! reaches the commit index it was told.
//!
//! A group started for the first time looks the same from inside: every
//! voter has an empty log. When a majority counting this server answers with
//! term 0, nobody can have voted yet (raft never votes in term 0), so the
//! floor is 0 and the election goes ahead. This cannot be mistaken for a
//! wipe in a running group unless a majority lost its disks, which no
//! replication protocol survives.
//!
//! The fence is a marker file in the log directory, written before the
//! server takes part and removed when the fence is lifted, so a restart in
//! between finds it still fenced.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// The marker's name in the log directory.
const MARKER: &str = "vote-fence";

/// Messages of the consensus layer itself, outside raft's vocabulary,
/// carried by the peer transport beside raft's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// A fenced voter asks for the receiver's current term.
    TermQuery,
    /// The answer: the receiver's term (at least its durable one) and its
    /// commit index.
    TermAnswer { term: u64, commit: u64 },
}

pub(crate) struct Fence {
    marker: PathBuf,
    /// The other voters.
    peers: Vec<u64>,
    /// Voters in the group, this server included.
    voters: usize,
    /// Each other voter's answer to the term query.
    answers: BTreeMap<u64, u64>,
    /// Set once from the answers: no vote in this term or below.
    floor: Option<u64>,
    /// The highest commit index answered: no vote for a log short of it.
    committed: u64,
}

impl Fence {
    /// The fence of voter `id` of `voters`, whose raft state in `dir` is
    /// lost when `state_lost` (no hard state was found there). Nothing for
    /// a server that is not a voter, or the only one: it cannot take part
    /// in a contested election.
    pub(crate) fn open(
        dir: &Path,
        id: u64,
        voters: &[u64],
        state_lost: bool,
    ) -> io::Result<Option<Self>> {
        let marker = dir.join(MARKER);
        if !voters.contains(&id) || voters == [id] {
            return Ok(None);
        }
        if state_lost {
            File::create(&marker)?.sync_all()?;
            File::open(dir)?.sync_all()?;
        } else if !marker.exists() {
            return Ok(None);
        }
        Ok(Some(Self {
            marker,
            peers: voters.iter().copied().filter(|&v| v != id).collect(),
            voters: voters.len(),
            answers: BTreeMap::new(),
            floor: None,
            committed: 0,
        }))
    }

    /// The voters still to ask for their term; none once the floor is known.
    pub(crate) fn to_ask(&self) -> impl Iterator<Item = u64> + '_ {
        self.peers
            .iter()
            .copied()
            .filter(|peer| self.floor.is_none() && !self.answers.contains_key(peer))
    }

    /// Records `from`'s answer; returns the floor when this answer set it.
    pub(crate) fn answered(&mut self, from: u64, term: u64, commit: u64) -> Option<u64> {
        if !self.peers.contains(&from) {
            return None;
        }
        // Any answer's commit index counts, even after the floor is set:
        // a higher one only makes the vote stricter.
        self.committed = self.committed.max(commit);
        if self.floor.is_some() {
            return None;
        }
        let known = self.answers.entry(from).or_default();
        *known = (*known).max(term);
        let majority = self.voters / 2 + 1;
        let highest = self.answers.values().copied().max().unwrap_or(0);
        let answered = self.answers.len();
        let first_start = highest == 0 && answered + 1 >= majority;
        if answered > self.voters - majority || first_start {
            self.floor = Some(highest);
        }
        self.floor
    }

    /// Whether this server may vote in `term` for a candidate whose log
    /// ends at `last_index` (its own, when it is the candidate).
    pub(crate) fn allows_vote(&self, term: u64, last_index: u64) -> bool {
        self.floor.is_some_and(|floor| term > floor) && last_index >= self.committed
    }

    /// Whether a durable term and log ending at `last_index` make the fence
    /// unneeded: raft never votes below its own term and votes once in it,
    /// and the log holds what the group had committed when asked.
    pub(crate) fn passed_by(&self, term: u64, last_index: u64) -> bool {
        self.allows_vote(term, last_index)
    }

    /// Removes the marker; the caller made the term that passed it durable.
    pub(crate) fn lift(self) -> io::Result<()> {
        fs::remove_file(&self.marker)?;
        let dir = self.marker.parent().expect("the marker is in the log dir");
        File::open(dir)?.sync_all()
    }

    pub(crate) fn floor(&self) -> Option<u64> {
        self.floor
    }

    pub(crate) fn committed(&self) -> u64 {
        self.committed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fenced(dir: &Path, id: u64, voters: &[u64]) -> Fence {
        Fence::open(dir, id, voters, true)
            .unwrap()
            .expect("a voter among others is fenced")
    }

    #[test]
    fn the_floor_waits_for_a_majority_of_the_other_voters() {
        let dir = tempfile::tempdir().unwrap();
        let mut fence = fenced(dir.path(), 1, &[1, 2, 3]);
        assert!(!fence.allows_vote(100, 0), "no vote before any answer");
        assert_eq!(fence.to_ask().collect::<Vec<_>>(), vec![2, 3]);
        // One other voter of three is not enough: the leader this server
        // may have elected could be the one that has not answered.
        assert_eq!(fence.answered(2, 7, 0), None);
        assert_eq!(fence.to_ask().collect::<Vec<_>>(), vec![3]);
        assert_eq!(fence.answered(3, 9, 0), Some(9));
        assert!(!fence.allows_vote(9, 0));
        assert!(fence.allows_vote(10, 0));
        assert_eq!(fence.to_ask().count(), 0, "nothing left to ask");
    }

    #[test]
    fn in_an_even_group_one_answer_fewer_meets_every_quorum() {
        let dir = tempfile::tempdir().unwrap();
        // Of two voters, a leader this one helped elect had the other's
        // vote too: its answer alone sets the floor.
        let mut pair = fenced(dir.path(), 1, &[1, 2]);
        assert_eq!(pair.answered(2, 4, 0), Some(4));
        assert!(pair.allows_vote(5, 0));
        // Of four, a quorum of three holds two of the other three voters.
        let dir = tempfile::tempdir().unwrap();
        let mut four = fenced(dir.path(), 1, &[1, 2, 3, 4]);
        assert_eq!(
            four.answered(2, 3, 0),
            None,
            "the two silent ones may be the quorum"
        );
        assert_eq!(four.answered(3, 5, 0), Some(5));
    }

    #[test]
    fn the_floor_is_set_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut fence = fenced(dir.path(), 3, &[1, 2, 3, 4, 5]);
        assert_eq!(fence.answered(1, 4, 0), None);
        let again = fence.answered(1, 6, 0);
        assert_eq!(again, None, "a voter answering twice counts once");
        assert_eq!(fence.answered(9, 50, 0), None, "not a voter");
        assert_eq!(fence.answered(2, 5, 0), None);
        assert_eq!(fence.answered(4, 3, 0), Some(6));
        assert_eq!(fence.answered(5, 40, 0), None);
        assert_eq!(fence.floor(), Some(6));
    }

    #[test]
    fn a_group_started_for_the_first_time_votes_once_a_majority_is_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let mut fence = fenced(dir.path(), 1, &[1, 2, 3]);
        assert_eq!(fence.answered(2, 0, 0), Some(0), "two of three never voted");
        assert!(fence.allows_vote(1, 0));

        let mut five = fenced(dir.path(), 1, &[1, 2, 3, 4, 5]);
        assert_eq!(five.answered(2, 0, 0), None, "two of five is no majority");
        assert_eq!(five.answered(3, 0, 0), Some(0));
    }

    #[test]
    fn a_running_group_is_not_taken_for_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut fence = fenced(dir.path(), 1, &[1, 2, 3, 4, 5]);
        assert_eq!(fence.answered(2, 0, 0), None);
        let used = fence.answered(3, 8, 0);
        assert_eq!(used, None, "a term was used: wait for a majority");
        assert_eq!(fence.answered(4, 2, 0), Some(8), "three of the four others");
    }

    #[test]
    fn no_vote_for_a_log_short_of_what_the_group_committed() {
        // Servers 1 and 3 lost their disks one after the other; server 2
        // holds the log to index 900. Each wiped one hears the other's
        // empty answer and server 2's: neither may elect the other.
        let dir = tempfile::tempdir().unwrap();
        let mut fence = fenced(dir.path(), 3, &[1, 2, 3]);
        assert_eq!(fence.answered(2, 1, 900), None);
        assert_eq!(fence.answered(1, 0, 0), Some(1));
        assert_eq!(fence.committed(), 900);
        assert!(
            !fence.allows_vote(5, 0),
            "the other wiped server's empty log"
        );
        assert!(fence.allows_vote(5, 900), "server 2, which holds the data");
        assert!(!fence.passed_by(5, 10), "its own log is not back yet");
        assert!(fence.passed_by(5, 950));
        fence.answered(2, 3, 1000);
        assert!(!fence.allows_vote(5, 950), "a later answer only adds to it");
    }

    #[test]
    fn the_marker_keeps_a_restarted_server_fenced_until_lifted() {
        let dir = tempfile::tempdir().unwrap();
        let mut fence = fenced(dir.path(), 2, &[1, 2, 3]);
        let again = Fence::open(dir.path(), 2, &[1, 2, 3], false).unwrap();
        assert!(
            again.is_some(),
            "the raft state is back, the marker still fences"
        );
        fence.answered(1, 3, 20);
        fence.answered(3, 3, 20);
        assert!(!fence.passed_by(3, 20));
        assert!(fence.passed_by(4, 20));
        fence.lift().unwrap();
        let reopened = Fence::open(dir.path(), 2, &[1, 2, 3], false).unwrap();
        assert!(reopened.is_none());
    }

    #[test]
    fn a_lone_voter_or_a_learner_is_never_fenced() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Fence::open(dir.path(), 1, &[1], true).unwrap().is_none());
        assert!(Fence::open(dir.path(), 4, &[1, 2, 3], true)
            .unwrap()
            .is_none());
        assert!(!dir.path().join(MARKER).exists());
    }
}
