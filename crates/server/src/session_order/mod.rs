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
//!    decides. A read that comes after a write not yet applied is held at
//!    that write's [`WriteGate`], and the apply loop answers it right
//!    after it applies the write, before any later txn: it sees the write
//!    and none of the session's later ones, which may therefore be
//!    proposed at once (ZooKeeper's CommitProcessor gets the same by
//!    applying no commit while a read is in flight). A read after a sync
//!    waits its turn at the writer, and so does every read after it; a
//!    write after such a waiting read is proposed by the writer once the
//!    read is answered. Any other read is answered by the reader at once.
//!    So is a write that is all the session has in process, for the
//!    writer to carry through the log itself (`Proposal::Driven`). A
//!    write left to the writer holds back every later write of the
//!    session until the writer has proposed it: proposed by the reader
//!    meanwhile, a later write would be applied first. The reader waits
//!    for that when no read waits ([`SessionOrder::write_must_wait`]), so
//!    the later write is still proposed at once and with others; it
//!    leaves the write to the writer otherwise.
//! 3. *A watch event never overtakes the answer that set the watch, and an
//!    answer that may show a change never overtakes the change's event.*
//!    Read answers are numbered under the lock the apply loop fires
//!    watches under (`pipeline::answer_read`), each event is stamped with
//!    the number of answers built before it, and [`EventOrder`] places it
//!    among the answers the writer sends.

mod events;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub use events::EventOrder;

/// What the reader must know of the writer's progress to keep rule 2
/// without giving up pipelining. The reader alone records arrivals, the
/// writer alone completions, so a decision the reader makes can only be
/// more cautious than it needed to be, never less.
#[derive(Default)]
pub struct SessionOrder {
    syncs_unfinished: AtomicUsize,
    reads_waiting: AtomicUsize,
    writes_unproposed: AtomicUsize,
}

/// When a write that has just arrived is proposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propose {
    /// By the reader, now.
    Now,
    /// By the writer, as soon as it comes to it: the write is all the
    /// session has in process.
    Next,
    /// By the writer, once the requests before it are answered.
    InTurn,
}

/// Who answers a read that has just arrived, and when.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer<R> {
    /// The reader, now.
    Now(R),
    /// The writer, after everything of the session before it.
    InTurn(R),
    /// The apply loop, right after the write it is held behind.
    Held,
}

/// The session's latest write or sync, as the reader last met one: what a
/// read that arrives now must come after. The reader keeps it.
pub enum Barrier<R> {
    None,
    /// A sync, or a request ordered as one: a reconfig, whose answer comes
    /// from the leader's decision rather than from the apply loop.
    Sync,
    Write(Arc<WriteGate<R>>),
}

/// The reads held behind one write. The reader holds them while the write
/// is not applied; the apply loop takes them once it has applied it
/// ([`WriteGate::pass`]), and a read arriving later is answered at once.
pub struct WriteGate<R> {
    held: Mutex<Option<Vec<R>>>,
}

impl<R> Default for WriteGate<R> {
    fn default() -> Self {
        Self {
            held: Mutex::new(Some(Vec::new())),
        }
    }
}

impl<R> WriteGate<R> {
    /// Holds `read` until the write is applied; gives it back if it
    /// already is.
    pub fn hold(&self, read: R) -> Result<(), R> {
        match self.held.lock().expect("write gate poisoned").as_mut() {
            Some(held) => {
                held.push(read);
                Ok(())
            }
            None => Err(read),
        }
    }

    /// Shows `look` the reads held so far, leaving them held: the apply
    /// loop loads what they will look up before it applies the write.
    pub fn each_held(&self, look: impl FnMut(&R)) {
        if let Some(held) = self.held.lock().expect("write gate poisoned").as_ref() {
            held.iter().for_each(look);
        }
    }

    /// The write is applied (apply loop): the reads held behind it, in
    /// arrival order, to answer before anything else is applied.
    pub fn pass(&self) -> Vec<R> {
        self.held
            .lock()
            .expect("write gate poisoned")
            .take()
            .unwrap_or_default()
    }
}

impl SessionOrder {
    /// A write arrived (reader); `alone` when nothing else of the session
    /// is in process or read. Proposed at once unless a read waits at the
    /// writer, which must not see it, or a write the writer is to propose
    /// is not yet, which must be applied first; reads held at a gate are
    /// answered before it can be applied. Left to the writer when `alone`.
    pub fn write_arrived(&self, alone: bool) -> Propose {
        let propose = if self.reads_waiting.load(Ordering::Acquire) > 0
            || self.writes_unproposed.load(Ordering::Acquire) > 0
        {
            Propose::InTurn
        } else if alone {
            Propose::Next
        } else {
            return Propose::Now;
        };
        self.writes_unproposed.fetch_add(1, Ordering::AcqRel);
        propose
    }

    /// A write left to the writer is proposed (writer).
    pub fn write_proposed(&self) {
        self.writes_unproposed.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether a write arriving now would be left to the writer only
    /// because writes left to it before are not proposed yet (reader).
    /// The writer proposes those as soon as it comes to them, so the
    /// reader had better wait for that than have this one proposed after
    /// they are answered.
    pub fn write_must_wait(&self) -> bool {
        self.reads_waiting.load(Ordering::Acquire) == 0
            && self.writes_unproposed.load(Ordering::Acquire) > 0
    }

    /// A sync arrived (reader): later reads wait for it.
    pub fn sync_arrived(&self) {
        self.syncs_unfinished.fetch_add(1, Ordering::AcqRel);
    }

    /// A read arrived (reader), after the session's `latest` write or
    /// sync. An earlier read answered after this one would see newer data
    /// than it, and the session's zxids would go backwards; so behind a
    /// waiting read it waits too.
    pub fn read_arrived<R>(&self, read: R, latest: &Barrier<R>) -> Answer<R> {
        if self.reads_waiting.load(Ordering::Acquire) > 0 {
            return self.wait(read);
        }
        match latest {
            Barrier::Write(gate) => match gate.hold(read) {
                Ok(()) => Answer::Held,
                Err(read) => Answer::Now(read),
            },
            Barrier::Sync if self.syncs_unfinished.load(Ordering::Acquire) > 0 => self.wait(read),
            Barrier::Sync | Barrier::None => Answer::Now(read),
        }
    }

    fn wait<R>(&self, read: R) -> Answer<R> {
        self.reads_waiting.fetch_add(1, Ordering::AcqRel);
        Answer::InTurn(read)
    }

    /// A sync was answered, or given up (writer).
    pub fn sync_finished(&self) {
        self.syncs_unfinished.fetch_sub(1, Ordering::AcqRel);
    }

    /// A read that waited its turn was answered (writer).
    pub fn waiting_read_answered(&self) {
        self.reads_waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(order: &SessionOrder) -> (Propose, Barrier<u32>, Arc<WriteGate<u32>>) {
        let gate = Arc::new(WriteGate::default());
        (
            order.write_arrived(false),
            Barrier::Write(gate.clone()),
            gate,
        )
    }

    #[test]
    fn reads_alone_are_answered_at_once() {
        let order = SessionOrder::default();
        assert_eq!(order.read_arrived(1, &Barrier::None), Answer::Now(1));
        assert_eq!(order.read_arrived(2, &Barrier::None), Answer::Now(2));
    }

    #[test]
    fn reads_after_a_write_are_held_until_it_is_applied() {
        let order = SessionOrder::default();
        let (proposed, latest, gate) = write(&order);
        assert_eq!(proposed, Propose::Now);
        assert_eq!(order.read_arrived(1, &latest), Answer::Held);
        assert_eq!(order.read_arrived(2, &latest), Answer::Held);
        assert_eq!(gate.pass(), vec![1, 2], "in arrival order");
        assert_eq!(
            order.read_arrived(3, &latest),
            Answer::Now(3),
            "the write is applied: a later read sees it whoever answers"
        );
        assert!(gate.pass().is_empty());
    }

    #[test]
    fn held_reads_can_be_looked_at_and_stay_held() {
        let order = SessionOrder::default();
        let (_, latest, gate) = write(&order);
        let seen = |gate: &WriteGate<u32>| {
            let mut seen = Vec::new();
            gate.each_held(|read| seen.push(*read));
            seen
        };
        assert!(seen(&gate).is_empty());
        assert_eq!(order.read_arrived(1, &latest), Answer::Held);
        assert_eq!(order.read_arrived(2, &latest), Answer::Held);
        assert_eq!(seen(&gate), vec![1, 2]);
        assert_eq!(gate.pass(), vec![1, 2], "still held, in arrival order");
        assert!(seen(&gate).is_empty(), "passed: none held");
    }

    #[test]
    fn a_write_after_held_reads_is_proposed_at_once() {
        let order = SessionOrder::default();
        let (_, first, first_gate) = write(&order);
        assert_eq!(order.read_arrived(1, &first), Answer::Held);
        // The apply loop answers read 1 right after the first write, so
        // it cannot see this one, however soon it is applied.
        let (proposed, second, second_gate) = write(&order);
        assert_eq!(proposed, Propose::Now);
        assert_eq!(order.read_arrived(2, &second), Answer::Held);
        assert_eq!(first_gate.pass(), vec![1]);
        assert_eq!(second_gate.pass(), vec![2]);
    }

    #[test]
    fn a_read_after_a_sync_waits_and_so_does_a_write_after_it() {
        let order = SessionOrder::default();
        order.sync_arrived();
        assert_eq!(order.read_arrived(1, &Barrier::Sync), Answer::InTurn(1));
        // Proposed now, it could be applied before the read is answered,
        // which would then see it.
        let (proposed, latest, _gate) = write(&order);
        assert_eq!(proposed, Propose::InTurn);
        assert_eq!(
            order.read_arrived(2, &latest),
            Answer::InTurn(2),
            "behind a waiting read, whatever came between"
        );
        order.sync_finished();
        order.waiting_read_answered();
        order.write_proposed();
        order.waiting_read_answered();
        assert_eq!(write(&order).0, Propose::Now);
    }

    #[test]
    fn a_write_after_a_waiting_write_waits_until_that_is_proposed() {
        let order = SessionOrder::default();
        order.sync_arrived();
        assert_eq!(order.read_arrived(1, &Barrier::Sync), Answer::InTurn(1));
        assert_eq!(write(&order).0, Propose::InTurn);
        assert!(
            !order.write_must_wait(),
            "a read waits: the writer is not about to propose it"
        );
        order.sync_finished();
        order.waiting_read_answered();
        assert!(
            order.write_must_wait(),
            "the read is answered: the write is next"
        );
        assert_eq!(
            write(&order).0,
            Propose::InTurn,
            "proposed by the reader before the writer proposes the first, it would be applied first"
        );
        order.write_proposed();
        order.write_proposed();
        assert_eq!(write(&order).0, Propose::Now);
    }

    #[test]
    fn a_write_all_alone_is_left_to_the_writer_and_holds_back_the_next() {
        let order = SessionOrder::default();
        assert_eq!(order.write_arrived(true), Propose::Next);
        assert!(order.write_must_wait(), "the writer is about to propose it");
        assert_eq!(order.write_arrived(false), Propose::InTurn);
        assert_eq!(order.write_arrived(true), Propose::InTurn);
        order.write_proposed();
        order.write_proposed();
        assert_eq!(
            order.write_arrived(false),
            Propose::InTurn,
            "one is still to propose"
        );
        order.write_proposed();
        order.write_proposed();
        assert!(!order.write_must_wait());
        assert_eq!(order.write_arrived(false), Propose::Now);
        assert_eq!(order.write_arrived(true), Propose::Next);
    }

    #[test]
    fn a_read_after_a_finished_sync_is_answered_at_once() {
        let order = SessionOrder::default();
        order.sync_arrived();
        order.sync_finished();
        assert_eq!(order.read_arrived(1, &Barrier::Sync), Answer::Now(1));
    }

    #[test]
    fn a_read_after_a_write_that_follows_a_sync_is_held_at_the_write() {
        // The write is proposed after the sync asked for its read index,
        // so it is applied past it: a read that sees the write is past
        // the sync too.
        let order = SessionOrder::default();
        order.sync_arrived();
        let (proposed, latest, gate) = write(&order);
        assert_eq!(proposed, Propose::Now);
        assert_eq!(order.read_arrived(1, &latest), Answer::Held);
        assert_eq!(gate.pass(), vec![1]);
    }
}
