//! The snapshot being written, on a thread of its own, at the lowest CPU
//! and I/O priority: it takes the CPU and the disk time that requests
//! leave, not a share of theirs.
//!
//! At normal priority the writer is one more busy thread on cores the
//! request path needs: serialising gigabytes takes 10-20 s of CPU, and
//! under load every thread of the request path waited its turn behind it.
//! In `paddock bench statesize` to 4 GB a probe's worst latency was 89-110
//! ms at normal priority and 15-38 ms at nice 19; in `crud --preset 10gb`
//! the worst set took 175-392 ms and 48-66 ms, the phases as fast.
//!
//! Its disk writes are in the idle I/O class, so that the block layer's
//! scheduler sends the log's writes and syncs first. In `crud --preset
//! 10gb`, whose 10 KB set phase has a snapshot of the growing tree
//! written nearly all the time, three runs each: the phase ran at
//! 14,993-17,930 sets/s against 14,074-15,608, with a p99.9 of 16.7-18.0
//! ms against 20.0-57.5.
//!
//! A thread cannot raise its priority again without CAP_SYS_NICE, so a
//! snapshot that falls far behind (`SnapshotSchedule::is_far_overdue`: a
//! server whose requests leave it no CPU) is given up, and the apply loop
//! writes the next one at normal priority: the log since the last
//! snapshot, which a restart replays, grows at most to about twice its
//! usual bound.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The nice value of a snapshot written in the background: the lowest
/// priority, which on a busy core gets about 1.5% of it.
const BACKGROUND_NICE: i32 = 19;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// As the request path's threads: after a background one was given up.
    Normal,
    /// Only the CPU the request path leaves.
    Background,
}

/// The apply loop's handle on the snapshot being written, if any.
#[derive(Debug, Default)]
pub struct SnapshotJob {
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    running: AtomicBool,
    running_in_background: AtomicBool,
    give_up: AtomicBool,
    /// The last snapshot was given up: write the next at normal priority.
    hurry: AtomicBool,
}

impl SnapshotJob {
    /// Claims the job for a new snapshot, at the priority the last one's
    /// fate calls for; `None` while one is being written.
    pub fn start(&self) -> Option<Running> {
        let state = &self.state;
        if state.running.swap(true, Ordering::AcqRel) {
            return None;
        }
        let priority = if state.hurry.swap(false, Ordering::AcqRel) {
            Priority::Normal
        } else {
            Priority::Background
        };
        state.give_up.store(false, Ordering::Release);
        state
            .running_in_background
            .store(priority == Priority::Background, Ordering::Release);
        Some(Running {
            state: state.clone(),
            priority,
        })
    }

    /// Asks a snapshot written in the background to stop, so that the next
    /// is written at normal priority; true if there was one to ask.
    pub fn give_up_background(&self) -> bool {
        let state = &self.state;
        state.running.load(Ordering::Acquire)
            && state.running_in_background.load(Ordering::Acquire)
            && !state.give_up.swap(true, Ordering::AcqRel)
    }
}

/// The snapshot being written: moved to its thread, and done when dropped.
#[derive(Debug)]
pub struct Running {
    state: Arc<State>,
    priority: Priority,
}

impl Running {
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Lowers the calling thread's CPU and I/O priority if this snapshot
    /// is written in the background. Lowering either needs no privilege.
    pub fn set_thread_priority(&self) {
        if self.priority == Priority::Background {
            lower_thread_priority(BACKGROUND_NICE);
            lower_thread_io_priority();
        }
    }

    /// `out`, failing the next write once the snapshot was given up.
    pub fn guard<'a>(&'a self, out: &'a mut dyn Write) -> impl Write + 'a {
        GivenUpStops {
            out,
            give_up: &self.state.give_up,
        }
    }

    pub fn given_up(&self) -> bool {
        self.state.give_up.load(Ordering::Acquire)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.given_up() {
            self.state.hurry.store(true, Ordering::Release);
        }
        self.state.running.store(false, Ordering::Release);
    }
}

struct GivenUpStops<'a> {
    out: &'a mut dyn Write,
    give_up: &'a AtomicBool,
}

impl Write for GivenUpStops<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.give_up.load(Ordering::Relaxed) {
            return Err(io::Error::other(
                "a snapshot written in the background was given up",
            ));
        }
        self.out.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(target_os = "linux")]
fn lower_thread_priority(nice: i32) {
    // On Linux a nice value is a thread's own, set through its thread id.
    // SAFETY: gettid and setpriority take no pointers.
    let result = unsafe {
        let thread = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, thread as libc::id_t, nice)
    };
    if result != 0 {
        tracing::debug!(
            "could not lower the snapshot thread's priority: {}",
            io::Error::last_os_error()
        );
    }
}

/// Elsewhere a nice value is the whole process's: the snapshot is written
/// at the request path's priority.
#[cfg(not(target_os = "linux"))]
fn lower_thread_priority(_nice: i32) {}

/// `ioprio_set`'s class for I/O served only when no other is waiting
/// (`IOPRIO_CLASS_IDLE`), placed above the 13 bits of level in a value.
#[cfg(target_os = "linux")]
const IOPRIO_IDLE: libc::c_long = 3 << 13;
/// `IOPRIO_WHO_PROCESS`: with id 0, the calling thread.
#[cfg(target_os = "linux")]
const IOPRIO_WHO_PROCESS: libc::c_long = 1;

/// Puts the calling thread's disk I/O in the idle class, so that the
/// block layer's scheduler sends the log's writes and syncs ahead of the
/// snapshot's (mq-deadline and bfq keep the classes apart; with no
/// scheduler the class changes nothing).
#[cfg(target_os = "linux")]
fn lower_thread_io_priority() {
    // SAFETY: ioprio_set takes three integers.
    let result = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_IDLE) };
    if result != 0 {
        tracing::debug!(
            "could not lower the snapshot thread's I/O priority: {}",
            io::Error::last_os_error()
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_thread_io_priority() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_snapshot_at_a_time_in_the_background_until_one_is_given_up() {
        let job = SnapshotJob::default();
        let first = job.start().unwrap();
        assert_eq!(first.priority(), Priority::Background);
        assert!(job.start().is_none());
        drop(first);

        let slow = job.start().unwrap();
        assert!(job.give_up_background());
        assert!(!job.give_up_background(), "asked once");
        let mut sink = Vec::new();
        assert!(slow.guard(&mut sink).write_all(b"x").is_err());
        assert!(sink.is_empty());
        drop(slow);

        let hurried = job.start().unwrap();
        assert_eq!(hurried.priority(), Priority::Normal);
        assert!(!job.give_up_background(), "never at normal priority");
        hurried.guard(&mut sink).write_all(b"x").unwrap();
        drop(hurried);
        assert_eq!(job.start().unwrap().priority(), Priority::Background);
    }

    #[test]
    fn a_snapshot_given_up_midway_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let snapshots = consensus::Snapshots::open(dir.path()).unwrap();
        let meta = consensus::SnapshotMeta {
            index: 7,
            ..Default::default()
        };
        let job = SnapshotJob::default();
        let running = job.start().unwrap();
        let written = snapshots.save(&meta, 3, |out| {
            let mut out = running.guard(out);
            out.write_all(&[1; 4096])?;
            job.give_up_background();
            out.write_all(&[2; 4096])
        });
        assert!(written.is_err() && running.given_up());
        drop(running);
        assert!(snapshots.latest().unwrap().is_none());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(job.start().unwrap().priority(), Priority::Normal);
    }

    #[test]
    fn nothing_to_give_up_when_idle() {
        assert!(!SnapshotJob::default().give_up_background());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_background_snapshot_lowers_only_its_own_thread() {
        let job = SnapshotJob::default();
        let running = job.start().unwrap();
        let nice_of_this_thread =
            || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        // SAFETY: ioprio_get takes two integers.
        let io_priority_of_this_thread =
            || unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) };
        let before = (nice_of_this_thread(), io_priority_of_this_thread());
        let lowered = std::thread::spawn(move || {
            running.set_thread_priority();
            (nice_of_this_thread(), io_priority_of_this_thread())
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (BACKGROUND_NICE, IOPRIO_IDLE));
        assert_ne!(before.1, IOPRIO_IDLE);
        assert_eq!(
            (nice_of_this_thread(), io_priority_of_this_thread()),
            before
        );
    }
}
