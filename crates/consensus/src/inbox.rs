//! The consensus thread's commands: a channel, and a count of the commands
//! sent and not yet taken, which says when the thread must wake.
//!
//! The thread waits on the count, not on the channel, because it may take
//! commands only while it holds the driver: in a group of one a proposer
//! drives raft itself when the driver is free and nothing sent before it
//! waits here (`Consensus::propose`). Were the thread to take a command
//! and then wait for the driver, a session's next write, proposed directly
//! meanwhile, would commit before it. The same count tells that proposer
//! that nothing waits.
//!
//! While a proposer drives, a send does not wake the thread, which could
//! only wait for the driver: the proposer wakes it once, when it lets go
//! and something was sent meanwhile.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// How often a thread other than the consensus thread looks for commands
/// while it waits for them (a proposer that found the log's disk full):
/// only the consensus thread is woken by a send.
const OTHER_THREAD_POLL: Duration = Duration::from_millis(10);

/// Sends commands to the consensus thread. Cloning shares the channel.
pub(crate) struct Commands<C> {
    sender: mpsc::Sender<C>,
    waiting: Arc<Waiting>,
}

impl<C> Clone for Commands<C> {
    fn clone(&self) -> Self {
        Self {
            sender: self.sender.clone(),
            waiting: self.waiting.clone(),
        }
    }
}

/// Where the commands arrive: taken by whoever holds the driver.
pub(crate) struct Inbox<C> {
    receiver: mpsc::Receiver<C>,
    waiting: Arc<Waiting>,
}

/// A proposer's hold on the driver, as the senders see it.
pub(crate) struct Driving<'a>(&'a Waiting);

impl Drop for Driving<'_> {
    fn drop(&mut self) {
        self.0.driving.store(false, Ordering::SeqCst);
        // A send that saw the mark did not wake the thread; one after
        // this store does. Both flag and count are sequentially
        // consistent, so a send is never missed by both.
        if self.0.queued.load(Ordering::SeqCst) > 0 {
            self.0.wake();
        }
    }
}

/// What the consensus thread waits on, without the driver.
#[derive(Clone)]
pub(crate) struct Bell(Arc<Waiting>);

struct Waiting {
    /// Commands sent and not yet taken.
    queued: AtomicUsize,
    /// A proposer holds the driver, and wakes the thread when it lets go.
    driving: AtomicBool,
    /// The consensus thread, once it waits here.
    thread: OnceLock<Thread>,
}

pub(crate) fn channel<C>() -> (Commands<C>, Inbox<C>) {
    let (sender, receiver) = mpsc::channel();
    let waiting = Arc::new(Waiting {
        queued: AtomicUsize::new(0),
        driving: AtomicBool::new(false),
        thread: OnceLock::new(),
    });
    (
        Commands {
            sender,
            waiting: waiting.clone(),
        },
        Inbox { receiver, waiting },
    )
}

impl<C> Commands<C> {
    /// Queues `command` and wakes the consensus thread; gives the command
    /// back once the inbox is gone.
    pub(crate) fn send(&self, command: C) -> Result<(), C> {
        self.waiting.queued.fetch_add(1, Ordering::SeqCst);
        if let Err(mpsc::SendError(command)) = self.sender.send(command) {
            self.waiting.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(command);
        }
        // The proposer driving, if any, sees the count once it lets go.
        if !self.waiting.driving.load(Ordering::SeqCst) {
            self.waiting.wake();
        }
        Ok(())
    }

    /// A proposer takes the driver: sends stop waking the thread until the
    /// returned mark is dropped, after the driver is let go.
    pub(crate) fn driving(&self) -> Driving<'_> {
        self.waiting.driving.store(true, Ordering::SeqCst);
        Driving(&self.waiting)
    }

    /// No command sent before this call is still waiting to be taken.
    /// Only meaningful to the holder of the driver, which alone takes them.
    pub(crate) fn none_waiting(&self) -> bool {
        self.waiting.queued.load(Ordering::SeqCst) == 0
    }
}

impl<C> Inbox<C> {
    pub(crate) fn bell(&self) -> Bell {
        Bell(self.waiting.clone())
    }

    pub(crate) fn try_recv(&self) -> Result<C, TryRecvError> {
        let command = self.receiver.try_recv()?;
        self.waiting.queued.fetch_sub(1, Ordering::SeqCst);
        Ok(command)
    }

    pub(crate) fn recv_timeout(&self, timeout: Duration) -> Result<C, RecvTimeoutError> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.try_recv() {
                Ok(command) => return Ok(command),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RecvTimeoutError::Timeout);
            }
            Bell(self.waiting.clone()).wait(left);
        }
    }
}

impl Waiting {
    /// A system call only if the thread is asleep: unparking a thread that
    /// is not is one atomic swap.
    fn wake(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

impl Bell {
    /// Makes the calling thread the one a send wakes.
    pub(crate) fn serve_from_this_thread(&self) {
        let _ = self.0.thread.set(thread::current());
    }

    /// Waits until a command is queued or `timeout` passes; at once if one
    /// is queued already. May return early for no reason. A thread other
    /// than the serving one only sleeps a little, as no send wakes it.
    pub(crate) fn wait(&self, timeout: Duration) {
        if self.0.queued.load(Ordering::SeqCst) > 0 {
            return;
        }
        let serving = self.0.thread.get().map(Thread::id);
        if serving == Some(thread::current().id()) {
            thread::park_timeout(timeout);
        } else {
            thread::sleep(timeout.min(OTHER_THREAD_POLL));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_follows_what_is_sent_and_taken() {
        let (commands, inbox) = channel::<u32>();
        assert!(commands.none_waiting());
        commands.send(1).unwrap();
        commands.send(2).unwrap();
        assert!(!commands.none_waiting());
        assert_eq!(inbox.try_recv(), Ok(1));
        assert!(!commands.none_waiting());
        assert_eq!(inbox.try_recv(), Ok(2));
        assert!(commands.none_waiting());
        drop(inbox);
        assert_eq!(commands.send(3), Err(3));
        assert!(commands.none_waiting(), "a refused command is not counted");
    }

    type Waiter = thread::JoinHandle<(Result<u32, TryRecvError>, Duration)>;

    /// A thread serving `inbox`, asleep in a wait of 30 s by the time this
    /// returns; it takes a command once woken.
    fn serving_thread_asleep(inbox: Inbox<u32>) -> Waiter {
        let (ready_tx, ready) = mpsc::channel();
        let waiter = thread::spawn(move || {
            let bell = inbox.bell();
            bell.serve_from_this_thread();
            ready_tx.send(()).unwrap();
            let started = Instant::now();
            bell.wait(Duration::from_secs(30));
            (inbox.try_recv(), started.elapsed())
        });
        ready.recv().unwrap();
        thread::sleep(Duration::from_millis(20));
        waiter
    }

    /// What the waiter took, once it was woken rather than timed out.
    fn woken(waiter: Waiter) -> Result<u32, TryRecvError> {
        let (command, waited) = waiter.join().unwrap();
        assert!(
            waited < Duration::from_secs(10),
            "woken, not timed out: {waited:?}"
        );
        command
    }

    #[test]
    fn a_send_wakes_the_serving_thread_at_once() {
        let (commands, inbox) = channel::<u32>();
        let waiter = serving_thread_asleep(inbox);
        commands.send(7).unwrap();
        assert_eq!(woken(waiter), Ok(7));
    }

    #[test]
    fn a_send_while_driving_wakes_the_thread_when_the_driver_is_let_go() {
        let (commands, inbox) = channel::<u32>();
        let driving = commands.driving();
        let waiter = serving_thread_asleep(inbox);
        commands.send(5).unwrap();
        thread::sleep(Duration::from_millis(50));
        assert!(
            !waiter.is_finished(),
            "a send while a proposer drives leaves the thread asleep"
        );
        drop(driving);
        assert_eq!(woken(waiter), Ok(5));
    }

    #[test]
    fn a_queued_command_ends_a_wait_before_it_starts() {
        let (commands, inbox) = channel::<u32>();
        let bell = inbox.bell();
        bell.serve_from_this_thread();
        commands.send(1).unwrap();
        let started = Instant::now();
        bell.wait(Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn another_thread_finds_commands_by_looking() {
        let (commands, inbox) = channel::<u32>();
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            commands.send(9).unwrap();
            commands
        });
        assert_eq!(inbox.recv_timeout(Duration::from_secs(30)), Ok(9));
        drop(sender.join().unwrap());
        assert_eq!(
            inbox.recv_timeout(Duration::from_millis(1)),
            Err(RecvTimeoutError::Disconnected)
        );
    }
}
