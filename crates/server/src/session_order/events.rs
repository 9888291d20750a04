//! Where a connection's watch events go among its read answers.
//!
//! A read registers its watch and is answered under the lock the apply
//! loop holds while it fires watches, and every answer is numbered there;
//! each event is stamped with how many answers had been built when it was
//! queued. The client registers a watch only when the answer that set it
//! arrives, so an event must not overtake that answer (the client would
//! drop it, and wait forever), and an answer that may already show a
//! change must not overtake the change's event (ZooKeeper's client sees
//! the event first). An event stamped `k` therefore goes after answer `k`
//! and before answer `k + 1`.

use std::collections::VecDeque;

use crate::shared::{QueuedEvent, WatchEvent};

#[derive(Default)]
pub struct EventOrder {
    /// Events that must wait for an answer not yet written, in order.
    held: VecDeque<QueuedEvent>,
    /// The number of the last read answer written.
    answers_written: u64,
}

impl EventOrder {
    /// An event just queued: returned if it may be written now.
    pub fn arrived(&mut self, queued: QueuedEvent) -> Option<WatchEvent> {
        if self.held.is_empty() && queued.after_answers <= self.answers_written {
            Some(queued.event)
        } else {
            self.held.push_back(queued);
            None
        }
    }

    /// Keeps an event until [`EventOrder::before`] or
    /// [`EventOrder::after`] releases it.
    pub fn hold(&mut self, queued: QueuedEvent) {
        self.held.push_back(queued);
    }

    /// The events to write before an answer: read answer number `read`, or
    /// (None) any other reply.
    pub fn before(&mut self, read: Option<u64>) -> Vec<WatchEvent> {
        let limit = read.map_or(self.answers_written, |n| n - 1);
        self.release(limit)
    }

    /// The events to write right after that answer.
    pub fn after(&mut self, read: Option<u64>) -> Vec<WatchEvent> {
        if let Some(n) = read {
            self.answers_written = n;
        }
        self.release(self.answers_written)
    }

    fn release(&mut self, limit: u64) -> Vec<WatchEvent> {
        let mut out = Vec::new();
        while self.held.front().is_some_and(|q| q.after_answers <= limit) {
            out.extend(self.held.pop_front().map(|q| q.event));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(zxid: i64, after_answers: u64) -> QueuedEvent {
        QueuedEvent {
            event: WatchEvent {
                zxid,
                event: jute::EventType::NodeDeleted,
                path: format!("/n{zxid}"),
            },
            after_answers,
        }
    }

    fn zxids(events: Vec<WatchEvent>) -> Vec<i64> {
        events.into_iter().map(|e| e.zxid).collect()
    }

    #[test]
    fn an_event_fired_after_a_read_was_answered_follows_that_answer() {
        let mut order = EventOrder::default();
        // The read (answer 1) set a watch; the delete fired it before the
        // answer reached the writer.
        order.hold(queued(7, 1));
        assert!(order.before(Some(1)).is_empty());
        assert_eq!(zxids(order.after(Some(1))), [7]);
    }

    #[test]
    fn an_event_queued_before_a_read_was_answered_precedes_it() {
        let mut order = EventOrder::default();
        order.hold(queued(5, 0));
        order.hold(queued(6, 1));
        assert_eq!(zxids(order.before(Some(1))), [5]);
        assert_eq!(zxids(order.after(Some(1))), [6]);
    }

    #[test]
    fn events_wait_for_an_answer_built_but_not_yet_written() {
        let mut order = EventOrder::default();
        assert!(order.arrived(queued(1, 0)).is_some());
        assert!(order.arrived(queued(2, 1)).is_none());
        // A later event waits behind the held one, keeping the order.
        assert!(order.arrived(queued(3, 0)).is_none());
        // A write's reply does not release what waits for answer 1.
        assert!(order.before(None).is_empty());
        assert_eq!(zxids(order.after(Some(1))), [2, 3]);
        assert!(order.arrived(queued(4, 1)).is_some());
    }
}
