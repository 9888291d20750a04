//! The order of one session's requests, answers and watch events. ZooKeeper
//! keeps this rule in one class, its CommitProcessor; here it is this
//! module, with no I/O and no tokio in it, which a connection's reader and
//! writer call.
//!
//! 1. *Answers go out in the order the requests came.* The reader turns
//!    each request into a step in arrival order, and the one writer
//!    completes the steps in that order.
//! 2. *A read sees the session's earlier writes and none of its later
//!    ones, and the session's zxids never go backwards.* [`SessionOrder`]
//!    lets a read be answered by the reader at once only when nothing of
//!    the session before it is unfinished; otherwise it waits its turn at
//!    the writer. A write is proposed by the reader at once only when no
//!    earlier read is waiting (that read must not see it); otherwise the
//!    writer proposes it in its turn. A sync counts as a write: later
//!    reads wait for it.
//! 3. *A watch event never overtakes the answer that set the watch, and an
//!    answer that may show a change never overtakes the change's event.*
//!    Read answers are numbered under the lock the apply loop fires
//!    watches under (`pipeline::answer_read`), each event is stamped with
//!    the number of answers built before it, and [`EventOrder`] places it
//!    among the answers the writer sends.

mod events;

use std::sync::atomic::{AtomicUsize, Ordering};

pub use events::EventOrder;

/// What the reader must know of the writer's progress to keep rule 2
/// without giving up pipelining. The reader alone records arrivals, the
/// writer alone completions, so a decision the reader makes can only be
/// more cautious than it needed to be, never less.
#[derive(Default)]
pub struct SessionOrder {
    writes_unfinished: AtomicUsize,
    reads_waiting: AtomicUsize,
}

/// When a write that has just arrived is proposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propose {
    /// By the reader, now.
    Now,
    /// By the writer, once the reads before it are answered.
    InTurn,
}

/// When a read that has just arrived is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// By the reader, now.
    Now,
    /// By the writer, after everything of the session before it.
    InTurn,
}

impl SessionOrder {
    /// A write arrived (reader).
    pub fn write_arrived(&self) -> Propose {
        self.writes_unfinished.fetch_add(1, Ordering::AcqRel);
        if self.reads_waiting.load(Ordering::Acquire) == 0 {
            Propose::Now
        } else {
            Propose::InTurn
        }
    }

    /// A sync arrived (reader): later reads wait for it, as for a write.
    pub fn sync_arrived(&self) {
        self.writes_unfinished.fetch_add(1, Ordering::AcqRel);
    }

    /// A read arrived (reader). An earlier read answered after this one
    /// would see newer data than it, and the session's zxids would go
    /// backwards; so it is answered at once only with nothing before it
    /// unfinished.
    pub fn read_arrived(&self) -> Answer {
        if self.writes_unfinished.load(Ordering::Acquire) == 0
            && self.reads_waiting.load(Ordering::Acquire) == 0
        {
            return Answer::Now;
        }
        self.reads_waiting.fetch_add(1, Ordering::AcqRel);
        Answer::InTurn
    }

    /// A write or sync was answered, or given up (writer).
    pub fn write_finished(&self) {
        self.writes_unfinished.fetch_sub(1, Ordering::AcqRel);
    }

    /// A read that waited its turn was answered (writer).
    pub fn waiting_read_answered(&self) {
        self.reads_waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_alone_are_answered_at_once() {
        let order = SessionOrder::default();
        assert_eq!(order.read_arrived(), Answer::Now);
        assert_eq!(order.read_arrived(), Answer::Now);
    }

    #[test]
    fn a_read_after_a_write_waits_for_it() {
        let order = SessionOrder::default();
        assert_eq!(order.write_arrived(), Propose::Now);
        assert_eq!(order.read_arrived(), Answer::InTurn);
        order.write_finished();
        // The waiting read is still ahead of a new one.
        assert_eq!(order.read_arrived(), Answer::InTurn);
        order.waiting_read_answered();
        order.waiting_read_answered();
        assert_eq!(order.read_arrived(), Answer::Now);
    }

    #[test]
    fn a_write_after_a_waiting_read_is_proposed_in_turn() {
        let order = SessionOrder::default();
        assert_eq!(order.write_arrived(), Propose::Now);
        assert_eq!(order.read_arrived(), Answer::InTurn);
        // Proposed now, it could be applied before the read is answered,
        // which would then see it.
        assert_eq!(order.write_arrived(), Propose::InTurn);
        order.write_finished();
        order.waiting_read_answered();
        assert_eq!(order.write_arrived(), Propose::Now);
    }

    #[test]
    fn writes_pipeline_behind_writes() {
        let order = SessionOrder::default();
        for _ in 0..3 {
            assert_eq!(order.write_arrived(), Propose::Now);
        }
        for _ in 0..2 {
            order.write_finished();
            assert_eq!(order.read_arrived(), Answer::InTurn);
        }
    }

    #[test]
    fn a_read_after_a_sync_waits_for_it() {
        let order = SessionOrder::default();
        order.sync_arrived();
        assert_eq!(order.read_arrived(), Answer::InTurn);
        order.write_finished();
        order.waiting_read_answered();
        assert_eq!(order.read_arrived(), Answer::Now);
    }
}
