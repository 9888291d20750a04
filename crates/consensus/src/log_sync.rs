//! The log's `fdatasync` on a thread of its own, and what waits for it.
//!
//! The consensus thread writes each Ready's entries and hard state to the
//! WAL (into the page cache, microseconds) and hands the sync to
//! [`LogSyncer`]. It goes on ticking, stepping heartbeats and sending
//! appends while the disk is slow: a sync stalled for most of a second, as
//! on a disk other servers share, no longer silences a leader or deafens a
//! follower, so it no longer costs an election. Raft-rs supports this
//! directly: `advance_append_async` takes the Ready back before it is
//! durable, `on_persist_ready` says when it is.
//!
//! What must wait for durability still waits: [`PersistQueue`] holds each
//! Ready's persisted messages (a follower's acknowledgements and votes)
//! until its sync is done, and raft applies only entries it was told are
//! persisted, so a client is answered only after both a quorum and this
//! server's own disk hold its write.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use raft::prelude::Message;
use storage::{PendingSync, StorageError};

/// A sync done: every Ready up to `through` that wrote to the log is durable.
#[derive(Debug)]
pub(crate) struct Synced {
    pub(crate) through: u64,
    pub(crate) took: Duration,
}

/// The thread that runs the log's syncs, one at a time, oldest first.
pub(crate) struct LogSyncer {
    requests: Option<mpsc::Sender<(u64, PendingSync)>>,
    thread: Option<JoinHandle<()>>,
}

impl LogSyncer {
    /// Starts the thread; `done` hears of each sync as it ends. After a
    /// failed sync the thread stops: the log is poisoned.
    pub(crate) fn start(
        done: impl Fn(Result<Synced, StorageError>) + Send + 'static,
    ) -> std::io::Result<LogSyncer> {
        let (requests, inbox) = mpsc::channel::<(u64, PendingSync)>();
        let thread = thread::Builder::new()
            .name("log-sync".into())
            .spawn(move || {
                while let Ok(mut latest) = inbox.recv() {
                    // One sync covers every request queued behind it: they
                    // are of the same segment file, or of an older one that
                    // rolling to the next already synced.
                    while let Ok(newer) = inbox.try_recv() {
                        latest = newer;
                    }
                    let (through, pending) = latest;
                    let started = Instant::now();
                    let result = pending.finish().map(|()| Synced {
                        through,
                        took: started.elapsed(),
                    });
                    let failed = result.is_err();
                    done(result);
                    if failed {
                        return;
                    }
                }
            })?;
        Ok(LogSyncer {
            requests: Some(requests),
            thread: Some(thread),
        })
    }

    /// Syncs what Ready `number` (and every one before it) wrote.
    pub(crate) fn sync(&self, number: u64, pending: PendingSync) {
        if let Some(requests) = &self.requests {
            // Closed only after a failed sync, which the consensus thread
            // hears of and stops on.
            let _ = requests.send((number, pending));
        }
    }
}

impl Drop for LogSyncer {
    /// Waits for the sync under way, so the log's files are closed once the
    /// consensus thread is gone.
    fn drop(&mut self) {
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Readies raft was given back before they were durable, oldest first,
/// until raft can be told they are persisted.
#[derive(Default)]
pub(crate) struct PersistQueue {
    waiting: VecDeque<Waiting>,
    /// Every Ready up to this number that wrote to the log is durable.
    synced_through: u64,
}

struct Waiting {
    number: u64,
    /// It wrote what must be durable before raft may count it persisted.
    needs_sync: bool,
    /// Messages that may leave only once it is persisted.
    messages: Vec<Message>,
}

/// Readies now persisted: tell raft `through`, then send `messages`.
#[derive(Debug, PartialEq)]
pub(crate) struct Persisted {
    pub(crate) through: u64,
    pub(crate) messages: Vec<Message>,
}

impl PersistQueue {
    /// Ready `number` was given back to raft; `needs_sync` if a sync of
    /// what it wrote was started. Readies come in increasing order.
    pub(crate) fn push(&mut self, number: u64, needs_sync: bool, messages: Vec<Message>) {
        self.waiting.push_back(Waiting {
            number,
            needs_sync,
            messages,
        });
    }

    /// Everything written up to Ready `through` is durable.
    pub(crate) fn synced(&mut self, through: u64) {
        self.synced_through = self.synced_through.max(through);
    }

    /// The Readies at the front that are persisted: those whose sync is
    /// done, and those that needed none once every one before them is.
    pub(crate) fn take_persisted(&mut self) -> Option<Persisted> {
        let mut persisted: Option<Persisted> = None;
        while let Some(front) = self.waiting.front() {
            if front.needs_sync && front.number > self.synced_through {
                break;
            }
            let Some(done) = self.waiting.pop_front() else {
                break;
            };
            let batch = persisted.get_or_insert_with(|| Persisted {
                through: done.number,
                messages: Vec::new(),
            });
            batch.through = done.number;
            batch.messages.extend(done.messages);
        }
        persisted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(to: u64) -> Message {
        Message {
            to,
            ..Default::default()
        }
    }

    #[test]
    fn a_ready_is_persisted_once_its_sync_and_every_earlier_one_are_done() {
        let mut queue = PersistQueue::default();
        queue.push(1, true, vec![message(1)]);
        queue.push(2, false, vec![message(2)]);
        queue.push(3, true, vec![message(3)]);
        queue.push(4, false, vec![]);
        assert_eq!(queue.take_persisted(), None, "ready 1 is not synced yet");
        queue.synced(1);
        assert_eq!(
            queue.take_persisted(),
            Some(Persisted {
                through: 2,
                messages: vec![message(1), message(2)]
            }),
            "ready 2 needed no sync, but had to wait for ready 1"
        );
        queue.synced(3);
        assert_eq!(
            queue.take_persisted(),
            Some(Persisted {
                through: 4,
                messages: vec![message(3)]
            })
        );
        assert_eq!(queue.take_persisted(), None);
    }

    #[test]
    fn a_ready_that_needs_no_sync_behind_nothing_is_persisted_at_once() {
        let mut queue = PersistQueue::default();
        queue.push(7, false, vec![message(9)]);
        assert_eq!(
            queue.take_persisted(),
            Some(Persisted {
                through: 7,
                messages: vec![message(9)]
            })
        );
    }

    #[test]
    fn a_late_report_of_an_older_sync_changes_nothing() {
        let mut queue = PersistQueue::default();
        queue.push(1, true, vec![]);
        queue.push(2, true, vec![message(2)]);
        queue.synced(2);
        queue.synced(1);
        assert_eq!(queue.take_persisted().map(|p| p.through), Some(2));
    }

    #[test]
    fn the_syncer_reports_each_sync_and_coalesces_a_queue() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = storage::Wal::open(dir.path(), storage::WalOptions::default()).unwrap();
        let (reports, heard) = mpsc::channel();
        let syncer = LogSyncer::start(move |result| {
            let _ = reports.send(result.map(|synced| synced.through));
        })
        .unwrap();
        for number in 1..=20 {
            wal.append(&[(number, b"entry")]).unwrap();
            syncer.sync(number, wal.start_sync().unwrap().unwrap());
        }
        drop(syncer);
        let synced: Vec<u64> = heard.iter().map(Result::unwrap).collect();
        assert_eq!(synced.last(), Some(&20), "the last request is synced");
        assert!(synced.windows(2).all(|pair| pair[0] < pair[1]));
    }
}
