//! The log's `fdatasync` on a thread of its own, and what waits for it.
//!
//! The consensus thread writes each Ready's entries and hard state to the
//! WAL (into the page cache, microseconds) and hands the sync to
//! [`LogSyncer`]. It goes on ticking, stepping heartbeats and sending
//! appends while the disk is slow: a sync stalled for most of a second, as
//! on a disk other servers share, no longer silences a leader or deafens a
//! follower, so it no longer costs an election. Raft-rs supports this
//! directly: `advance_append_async` takes the Ready back before it is
//! durable, `on_persist_ready` says when it is. A group of one has no
//! peer to keep talking to, and its consensus thread syncs itself.
//!
//! Trimming the log after a snapshot waits there for the sync of the hard
//! state it rewrote, then runs on a thread of its own: unlinking segments
//! of 64 MB and syncing the directory after each took 100-250 ms after a
//! snapshot of a few hundred MB, and every write waited behind it when it
//! ran between two syncs. Its removals pause between steps so that syncs
//! commit in between; once the log stops there are no syncs left, and the
//! removals still queued finish without pauses (`RemovalPace`).
//!
//! What must wait for durability still waits: [`PersistQueue`] holds each
//! Ready's persisted messages (a follower's acknowledgements and votes)
//! until its sync is done, and raft applies only entries it was told are
//! persisted, so a client is answered only after both a quorum and this
//! server's own disk hold its write.

use std::collections::VecDeque;
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use raft::prelude::Message;
use storage::{PendingSync, RemovalPace, SegmentRemoval, StorageError};

/// A sync done: every Ready up to `through` that wrote to the log is durable.
#[derive(Debug)]
pub(crate) struct Synced {
    pub(crate) through: u64,
    pub(crate) took: Duration,
}

/// The thread that runs the log's syncs one at a time, in the order
/// asked, and hands each removal, once the syncs asked before it are done,
/// to the trimming thread, which runs them in order.
pub(crate) struct LogSyncer {
    requests: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// The trimming thread's pace, hurried when the syncer stops.
    removal_pace: RemovalPace,
}

enum Job {
    /// Sync what Ready `through` (and every one before it) wrote.
    Sync { through: u64, pending: PendingSync },
    /// Remove segments the log no longer needs.
    Remove(SegmentRemoval),
}

impl LogSyncer {
    /// Starts the threads; `done` hears of each sync as it ends, and of a
    /// failed job, after which the thread that ran it stops: the log is
    /// poisoned.
    pub(crate) fn start(
        done: impl Fn(Result<Synced, StorageError>) + Send + Sync + 'static,
    ) -> std::io::Result<LogSyncer> {
        let done = Arc::new(done);
        let removal_pace = RemovalPace::default();
        let (trim, trimmer) = start_trimming(done.clone(), removal_pace.clone())?;
        let (requests, inbox) = mpsc::channel::<Job>();
        let thread = thread::Builder::new()
            .name("log-sync".into())
            .spawn(move || {
                while let Ok(first) = inbox.recv() {
                    let mut jobs = vec![first];
                    jobs.extend(inbox.try_iter());
                    for job in coalesce(jobs) {
                        match job {
                            Job::Sync { through, pending } => match sync(through, pending) {
                                Ok(synced) => done(Ok(synced)),
                                Err(error) => return done(Err(error)),
                            },
                            // Closed only after a failed removal, which
                            // stops the consensus thread.
                            Job::Remove(removal) => {
                                let _ = trim.send(removal);
                            }
                        }
                    }
                }
                // Removals asked before the end are done before it.
                drop(trim);
                let _ = trimmer.join();
            })?;
        Ok(LogSyncer {
            requests: Some(requests),
            thread: Some(thread),
            removal_pace,
        })
    }

    /// Syncs what Ready `number` (and every one before it) wrote.
    pub(crate) fn sync(&self, number: u64, pending: PendingSync) {
        self.ask(Job::Sync {
            through: number,
            pending,
        });
    }

    /// Removes segments once every sync asked before is done.
    pub(crate) fn remove(&self, removal: SegmentRemoval) {
        self.ask(Job::Remove(removal));
    }

    fn ask(&self, job: Job) {
        if let Some(requests) = &self.requests {
            // Closed only after a failed job, which the consensus thread
            // hears of and stops on.
            let _ = requests.send(job);
        }
    }
}

/// Of consecutive syncs only the last runs: it covers the ones before it,
/// which are of the same segment file or of an older one that rolling to
/// the next already synced. A removal keeps its place.
fn coalesce(jobs: Vec<Job>) -> Vec<Job> {
    let mut kept: Vec<Job> = Vec::with_capacity(jobs.len());
    for job in jobs {
        if matches!(job, Job::Sync { .. }) && matches!(kept.last(), Some(Job::Sync { .. })) {
            kept.pop();
        }
        kept.push(job);
    }
    kept
}

fn sync(through: u64, pending: PendingSync) -> Result<Synced, StorageError> {
    let started = Instant::now();
    pending.finish()?;
    Ok(Synced {
        through,
        took: started.elapsed(),
    })
}

/// The trimming thread: removes segments at `pace`, in the order asked,
/// until its one sender, the sync thread's, is dropped.
fn start_trimming(
    done: Arc<impl Fn(Result<Synced, StorageError>) + Send + Sync + 'static>,
    pace: RemovalPace,
) -> std::io::Result<(mpsc::Sender<SegmentRemoval>, JoinHandle<()>)> {
    let (requests, inbox) = mpsc::channel::<SegmentRemoval>();
    let thread = thread::Builder::new()
        .name("log-trim".into())
        .spawn(move || {
            for removal in inbox {
                if let Err(error) = removal.finish(&pace) {
                    return done(Err(error));
                }
            }
        })?;
    Ok((requests, thread))
}

impl Drop for LogSyncer {
    /// Waits for the sync and the removals under way, so the log's files
    /// are closed once the consensus thread is gone; the removals, with no
    /// sync left to make room for, go on without pauses.
    fn drop(&mut self) {
        self.removal_pace.hurry();
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
    /// The newest Ready pushed.
    newest: u64,
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
        self.newest = number;
        self.waiting.push_back(Waiting {
            number,
            needs_sync,
            messages,
        });
    }

    /// The newest Ready given back to raft: a sync started now covers it.
    pub(crate) fn newest(&self) -> u64 {
        self.newest
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
    fn only_the_last_of_consecutive_syncs_runs_and_a_removal_keeps_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = storage::Wal::open(dir.path(), storage::WalOptions::default()).unwrap();
        let sync = |wal: &mut storage::Wal, through: u64| {
            wal.append(&[(through, b"entry")]).unwrap();
            Job::Sync {
                through,
                pending: wal.start_sync().unwrap().unwrap(),
            }
        };
        let jobs = vec![
            sync(&mut wal, 1),
            sync(&mut wal, 2),
            sync(&mut wal, 3),
            Job::Remove(wal.detach_through(0).unwrap()),
            sync(&mut wal, 4),
            sync(&mut wal, 5),
        ];
        let kept: Vec<Option<u64>> = coalesce(jobs)
            .iter()
            .map(|job| match job {
                Job::Sync { through, .. } => Some(*through),
                Job::Remove(_) => None,
            })
            .collect();
        assert_eq!(kept, vec![Some(3), None, Some(5)]);
    }

    /// The real file system, but every removal waits until the test lets
    /// it go.
    #[derive(Debug)]
    struct SlowRemoval {
        go: std::sync::Mutex<mpsc::Receiver<()>>,
    }

    impl storage::FileSystem for SlowRemoval {
        fn create_dir_all(&self, dir: &std::path::Path) -> std::io::Result<()> {
            storage::StdFs.create_dir_all(dir)
        }
        fn list_dir(&self, dir: &std::path::Path) -> std::io::Result<Vec<String>> {
            storage::StdFs.list_dir(dir)
        }
        fn open_read(
            &self,
            path: &std::path::Path,
        ) -> std::io::Result<Box<dyn storage::ReadableFile>> {
            storage::StdFs.open_read(path)
        }
        fn create(
            &self,
            path: &std::path::Path,
        ) -> std::io::Result<Box<dyn storage::WritableFile>> {
            storage::StdFs.create(path)
        }
        fn open_write(
            &self,
            path: &std::path::Path,
        ) -> std::io::Result<Box<dyn storage::WritableFile>> {
            storage::StdFs.open_write(path)
        }
        fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
            storage::StdFs.rename(from, to)
        }
        fn remove_file(&self, path: &std::path::Path) -> std::io::Result<()> {
            let _ = self.go.lock().unwrap().recv();
            storage::StdFs.remove_file(path)
        }
        fn sync_dir(&self, dir: &std::path::Path) -> std::io::Result<()> {
            storage::StdFs.sync_dir(dir)
        }
    }

    #[test]
    fn a_sync_does_not_wait_for_a_removal_asked_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let (go, gate) = mpsc::channel();
        let fs = Arc::new(SlowRemoval {
            go: std::sync::Mutex::new(gate),
        });
        let options = storage::WalOptions {
            segment_bytes: 4096,
            preallocate: false,
        };
        let (mut wal, _) = storage::Wal::open_with(
            dir.path(),
            options,
            storage::RecoveryMode::TolerateTailCorruption,
            fs,
        )
        .unwrap();
        for index in 1..=10 {
            wal.append(&[(index, &[7u8; 1024][..])]).unwrap();
        }
        let removal = wal.detach_through(5).unwrap();
        assert!(!removal.is_empty(), "the test needs sealed segments");
        let (reports, heard) = mpsc::channel();
        let syncer = LogSyncer::start(move |result| {
            let _ = reports.send(result.map(|synced| synced.through));
        })
        .unwrap();
        syncer.remove(removal);
        wal.append(&[(11, b"entry")]).unwrap();
        syncer.sync(1, wal.start_sync().unwrap().unwrap());
        let synced = heard.recv_timeout(Duration::from_secs(10));
        assert_eq!(
            synced.unwrap().unwrap(),
            1,
            "synced while the removal waits"
        );
        drop(go);
        drop(syncer);
    }

    #[test]
    fn removals_left_when_the_syncer_stops_finish_without_pauses() {
        let dir = tempfile::tempdir().unwrap();
        let options = storage::WalOptions {
            segment_bytes: 4096,
            preallocate: false,
        };
        let (mut wal, _) = storage::Wal::open(dir.path(), options).unwrap();
        for index in 1..=10 {
            wal.append(&[(index, &[7u8; 1024][..])]).unwrap();
        }
        let removal = wal.detach_through(9).unwrap();
        let mut segments: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        segments.sort();
        segments.pop();
        assert!(segments.len() >= 2, "the test needs sealed segments");
        // Sparse gigabytes: freed 2 MB a step at the gradual pace, each
        // segment would take 2.5 s. The active segment is left as it is.
        for path in &segments {
            let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            file.set_len(1 << 30).unwrap();
        }
        let syncer = LogSyncer::start(|_| {}).unwrap();
        let started = Instant::now();
        syncer.remove(removal);
        drop(syncer);
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(2500),
            "the syncer stopped {took:?} after it was asked to"
        );
        assert!(
            segments.iter().all(|path| !path.exists()),
            "the removal finished before the syncer stopped"
        );
    }

    #[test]
    fn the_syncer_reports_its_syncs_in_order_up_to_the_last_asked() {
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
