//! The driver of raft's `RawNode`: a thread that takes proposals and peer
//! messages from a channel, ticks on a timer, and handles each Ready in
//! raft-rs's documented order — send what may go before persisting, write
//! entries and hard state, hand committed entries to the state machine,
//! give the Ready back to raft — while the sync of what it wrote runs on
//! the log's own thread (`log_sync`); what had to wait for the sync is sent
//! when it ends. A group of one syncs on this thread instead: it has no
//! peer to keep talking to meanwhile.
//!
//! The thread holds the driver for each turn, and a group of one's
//! proposer may take a turn itself while the thread is idle
//! (`Consensus::propose_driving`), so that a lone client's write wakes no
//! other thread; `inbox` keeps that from reordering anything.
//!
//! Group commit falls out of the loop: while one sync runs, the Readies
//! after it write their batches (or, in a group of one, the proposals
//! queue in the channel), and the next sync covers them all.
//!
//! A proposal is known by its origin: the entry's context carries the id
//! of the server that proposed it and that server's sequence number. A
//! follower's proposal is forwarded to the leader by raft and gets its log
//! index there, so (term, index) cannot identify it on the server whose
//! client waits; (origin, sequence) can, on every server. Entries of one
//! origin reach the log in sequence order, so when sequence `s` commits,
//! every pending proposal of that origin below `s` was lost.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use protobuf::Message as _;
use raft::prelude::{ConfChangeV2, Entry, EntryType, Message, MessageType};
use raft::{ProgressState, RawNode, StateRole};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::backlog::{Backlog, Unapplied};
use crate::durable::{DurableLog, RaftStore, RecoveredLog, Restored};
use crate::fence::{Control, Fence};
use crate::hand_off::{self, Follower, HandOff};
use crate::inbox::{self, Bell, Commands, Inbox};
use crate::log_sync::{LogSyncer, PersistQueue, Synced};
use crate::membership::Membership;
use crate::snapshot::SnapshotMeta;
use crate::status::{Role, Status};
use crate::Error;

/// Commands taken from the channel per turn of the loop: bounds the time a
/// turn spends before it writes and hands out its sync, so latency stays
/// flat under load.
const COMMANDS_PER_TURN_MAX: usize = 4096;

/// Committed entries handed to the state machine per Ready, at most (raft
/// always hands out at least one). A restart replaying a long log reads it
/// back a page at a time while the state machine applies the pages before,
/// rather than all of it before the first is applied.
const COMMITTED_BYTES_PER_READY_MAX: u64 = 4 << 20;

/// Committed bytes a replay hands out ahead of the state machine, at most
/// (see `backlog`): a few Readies, so that the next is read while the
/// state machine applies the ones before.
const REPLAY_BACKLOG_BYTES_MAX: u64 = 4 * COMMITTED_BYTES_PER_READY_MAX;

/// A proposal or read-index request not answered in this long is given up
/// (its waiter dropped): its leader was lost, or the message was.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a log waiting for disk space tries its write again.
const NO_SPACE_RETRY: Duration = Duration::from_millis(500);

/// Where raft messages for other servers go. Sending never blocks; a
/// message that cannot be queued is dropped (raft retries), and the peers
/// it was for are returned so raft can be told they are unreachable.
pub trait Network: Send + Sync + 'static {
    fn send(&self, messages: Vec<Message>) -> Vec<u64>;

    /// Sends a message of the consensus layer itself; false if it was
    /// dropped (it is repeated while it matters).
    fn send_control(&self, to: u64, control: Control) -> bool;

    /// Sends a snapshot: the bytes of the snapshot file the message names,
    /// then the message itself. `done` is told whether it was sent, so raft
    /// knows to resume replication or to try again.
    fn send_snapshot(&self, message: Message, done: SnapshotSent) {
        let _ = message;
        done(false);
    }
}

/// Told whether a snapshot reached its follower.
pub type SnapshotSent = Box<dyn FnOnce(bool) + Send>;

/// The network of a group of one: there is nobody to talk to.
pub struct NoPeers;

impl Network for NoPeers {
    fn send(&self, messages: Vec<Message>) -> Vec<u64> {
        debug_assert!(messages.is_empty(), "a one-voter group sends no messages");
        Vec::new()
    }

    fn send_control(&self, _to: u64, _control: Control) -> bool {
        false
    }
}

/// How the replicated log is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// This server's id (ZooKeeper's `myid`).
    pub id: u64,
    /// Ids of the voting servers. Standalone is `[id]`.
    pub voters: Vec<u64>,
    /// Ids of non-voting servers (ZooKeeper's observers).
    pub learners: Vec<u64>,
    /// Where the write-ahead log lives.
    pub log_dir: PathBuf,
    /// One raft tick.
    pub tick: Duration,
    /// Ticks without a leader before a follower campaigns.
    pub election_ticks: usize,
    /// A log sync slower than this is logged as a warning (ZooKeeper's
    /// `fsync.warningthresholdms`): while it lasts this server neither
    /// ticks nor answers, so a slow disk is what makes elections happen.
    pub sync_warning: Duration,
}

/// What the state machine is handed, in log order.
pub enum Applying<W> {
    /// Entries the group committed, and their share of the backlog of
    /// entries not yet applied: drop it once they are.
    Entries(Vec<CommittedEntry<W>>, Unapplied),
    /// A snapshot from the leader replaced the log up to its index: load it
    /// from the snapshot directory, where it is already durable.
    Restore(SnapshotMeta),
}

/// An entry the group has committed, in log order, with the waiter of the
/// proposal that produced it when that proposal was made on this server.
pub struct CommittedEntry<W> {
    /// Log index: the zxid of the transaction the entry carries.
    pub index: u64,
    pub term: u64,
    /// Empty for raft's own entries (a new leader's no-op, the end of a
    /// joint membership change).
    pub data: Bytes,
    pub waiter: Option<W>,
    /// The group's membership from this entry on, when the entry changed
    /// it.
    pub membership: Option<Membership>,
}

/// Called with the log index a linearizable read must wait for, or `None`
/// when the group could not confirm its leadership in time.
pub type ReadIndexCallback = Box<dyn FnOnce(Option<u64>) + Send>;

enum Command<W> {
    Propose {
        data: Vec<u8>,
        waiter: W,
    },
    ProposeMembership {
        target: Membership,
        data: Vec<u8>,
        waiter: W,
    },
    ReadIndex {
        callback: ReadIndexCallback,
    },
    Step(Message),
    Control {
        from: u64,
        control: Control,
    },
    Compact {
        snapshot: SnapshotMeta,
    },
    SnapshotReport {
        to: u64,
        sent: bool,
    },
    HandOff {
        avoid: Option<u64>,
        reply: oneshot::Sender<HandOff>,
    },
    /// The log's sync thread finished a sync, or failed one.
    Synced(Result<Synced, storage::StorageError>),
    Stop,
}

/// What the server asks of a replication this crate does not run, which
/// it reaches through the same handle: Paddock as the observer of an
/// Apache ZooKeeper ensemble. Such a replication delivers what its leader
/// commits on the same `Applying` channel, in zxid order.
pub enum Upstream<W> {
    Propose { data: Vec<u8>, waiter: W },
    ReadIndex { callback: ReadIndexCallback },
    Stop,
}

/// Hands a request to an upstream replication; false once it has stopped.
pub type UpstreamSender<W> = Arc<dyn Fn(Upstream<W>) -> bool + Send + Sync>;

/// Where the handle's requests go.
enum Route<W> {
    Raft(RaftRoute<W>),
    Upstream(UpstreamSender<W>),
}

impl<W> Clone for Route<W> {
    fn clone(&self) -> Self {
        match self {
            Route::Raft(raft) => Route::Raft(RaftRoute {
                commands: raft.commands.clone(),
                driver: raft.driver.clone(),
            }),
            Route::Upstream(send) => Route::Upstream(send.clone()),
        }
    }
}

/// The driver, held by the consensus thread for each of its turns, and
/// emptied when the thread ends.
type DriverSlot<W> = Mutex<Option<Driver<W>>>;

/// Raft's route: commands for the consensus thread, and the driver itself
/// for a proposer that may drive it (`RaftRoute::propose_here`).
struct RaftRoute<W> {
    commands: Commands<Command<W>>,
    driver: Arc<DriverSlot<W>>,
}

impl<W: Send + 'static> RaftRoute<W> {
    /// Proposes `data` on the caller's thread, in a turn of its own, when
    /// the driver is free, drives a group of one, and no command sent
    /// before waits in the channel (which keeps each session's writes in
    /// order); gives the proposal back otherwise.
    ///
    /// A group of one's write then costs no thread hand-over: the proposer
    /// writes and syncs the log, and hands the entry to the state machine
    /// from the thread the state machine runs on. Through the consensus
    /// thread a single client's write woke two threads more (the consensus
    /// thread, then a runtime worker through its eventfd), on this 2-core
    /// VM 30-80 us each when the core was idle: 7.1 context switches and 4
    /// futex calls a write, against 3.3 and 0.07 driven by the connection's
    /// writer, and a quarter less of the server's CPU (`perf stat` over
    /// `paddock bench latency --target`).
    fn propose_here(&self, data: Vec<u8>, waiter: W) -> Result<(), (Vec<u8>, W)> {
        let Ok(mut slot) = self.driver.try_lock() else {
            return Err((data, waiter));
        };
        let Some(driver) = slot
            .as_mut()
            .filter(|driver| driver.drives_here() && self.commands.none_waiting())
        else {
            return Err((data, waiter));
        };
        let driving = self.commands.driving();
        driver.turn_with(Command::Propose { data, waiter });
        // The driver first, so that the thread woken for what was sent
        // meanwhile finds it free.
        drop(slot);
        drop(driving);
        Ok(())
    }
}

/// The handle the server holds. Cloning shares the same thread.
pub struct Consensus<W> {
    route: Route<W>,
    status: Arc<Status>,
    thread: Arc<std::sync::Mutex<Option<thread::JoinHandle<()>>>>,
}

impl<W> Clone for Consensus<W> {
    fn clone(&self) -> Self {
        Self {
            route: self.route.clone(),
            status: self.status.clone(),
            thread: self.thread.clone(),
        }
    }
}

impl<W: Send + 'static> Consensus<W> {
    /// Starts the thread on `log`, the log read after the snapshot the
    /// state machine was `restored` from. Committed entries after what the
    /// state machine holds (the snapshot, or the last delta loaded over it)
    /// arrive on `committed`, replayed ones first; messages for other
    /// servers leave through `network`.
    ///
    /// When the thread stops — every handle dropped, or a storage error,
    /// which it logs — it drops `committed`, so the receiver sees the end.
    pub fn start(
        config: Config,
        log: RecoveredLog,
        restored: Restored<'_>,
        committed: UnboundedSender<Applying<W>>,
        network: Arc<dyn Network>,
    ) -> Result<Self, Error> {
        let log = DurableLog::over(log, &config.voters, &config.learners, restored)?;
        let fence = Fence::open(
            &config.log_dir,
            config.id,
            &config.voters,
            !log.found_hard_state(),
        )
        .map_err(|source| Error::Fence {
            dir: config.log_dir.clone(),
            source,
        })?;
        if fence.is_some() {
            // Not a warning: every server of a new group starts this way.
            tracing::info!(
                "server {} has no raft state in {} (a new group, or a data directory wiped or lost): it votes only once it knows a term it cannot have voted in before, asking the other voters for theirs",
                config.id,
                config.log_dir.display()
            );
        }
        let raft_config = raft::Config {
            id: config.id,
            election_tick: config.election_ticks,
            heartbeat_tick: (config.election_ticks / 10).max(1),
            applied: log.applied_at_start(),
            pre_vote: true,
            check_quorum: true,
            // A follower far behind is sent the whole window at once, read
            // from the log on this thread while the leader's own writes
            // wait: 16 MB, not 256. In `paddock bench catchup` of 512 MB
            // the leader's client's worst latency fell from 108-228 ms to
            // 48-61 and the catch-up took no longer; 16 MB is still far
            // more than one round trip to the follower carries at disk
            // speed.
            max_size_per_msg: 256 << 10,
            max_inflight_msgs: 64,
            max_committed_size_per_ready: COMMITTED_BYTES_PER_READY_MAX,
            ..Default::default()
        };
        raft_config.validate()?;
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let raw = RawNode::new(&raft_config, log.raft_storage(), &logger)?;
        // A group of one needs no election timeout to find its leader.
        let campaign_alone = config.voters == [config.id] && config.learners.is_empty();

        let (commands, inbox) = inbox::channel();
        let bell = inbox.bell();
        let status = Arc::new(Status::default());
        let sync_reports = commands.clone();
        let syncer = LogSyncer::start(move |result| {
            let _ = sync_reports.send(Command::Synced(result));
        })
        .map_err(|e| thread_error("starting the log's sync thread", e))?;
        let mut driver = Driver {
            id: config.id,
            raw,
            log,
            inbox,
            committed,
            backlog: Backlog::default(),
            network,
            commands: commands.clone(),
            next_sequence: 1,
            pending: BTreeMap::new(),
            next_read: 1,
            reads: HashMap::new(),
            ticks: 0,
            leader_id: 0,
            status: status.clone(),
            tick: config.tick,
            election_timeout: config.tick * config.election_ticks as u32,
            sync_warning: config.sync_warning,
            deferred: Vec::new(),
            hand_off: None,
            fence,
            joint: false,
            persisting: PersistQueue::default(),
            failure: None,
            syncer,
        };
        let membership = driver.membership();
        driver.set_membership(&membership);
        let log_dir = config.log_dir.clone();
        let slot = Arc::new(Mutex::new(Some(driver)));
        let served = slot.clone();
        let thread = thread::Builder::new()
            .name("consensus".into())
            .spawn(move || {
                let outcome = serve(&served, &bell, campaign_alone);
                // Dropping the driver closes the log and the channel to the
                // state machine, which is how the server learns of the end.
                drop(served.lock().unwrap_or_else(PoisonError::into_inner).take());
                match outcome {
                    Ok(()) | Err(Error::Stopped) => {}
                    Err(error) => tracing::error!(
                        "the replicated log in {} failed and this server must stop: {error}",
                        log_dir.display()
                    ),
                }
            })
            .map_err(|e| thread_error("starting the consensus thread", e))?;
        Ok(Self {
            route: Route::Raft(RaftRoute {
                commands,
                driver: slot,
            }),
            status,
            thread: Arc::new(std::sync::Mutex::new(Some(thread))),
        })
    }

    /// A handle on a replication run outside this crate by `thread`,
    /// which takes requests through `send` and publishes what it knows in
    /// `status`. Membership changes, hand-offs and peer messages do not
    /// reach it: its leader is not one of ours.
    pub fn upstream(
        send: UpstreamSender<W>,
        status: Arc<Status>,
        thread: thread::JoinHandle<()>,
    ) -> Self {
        Self {
            route: Route::Upstream(send),
            status,
            thread: Arc::new(std::sync::Mutex::new(Some(thread))),
        }
    }

    /// Stops the thread after the batch it is handling (everything it
    /// acknowledged is already synced) and waits for it, so the log's files
    /// are closed when this returns. Later calls on any handle fail with
    /// `Stopped`.
    pub fn shutdown(&self) {
        match &self.route {
            Route::Raft(raft) => drop(raft.commands.send(Command::Stop)),
            Route::Upstream(send) => drop(send(Upstream::Stop)),
        }
        let thread = self.thread.lock().expect("thread handle poisoned").take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// Proposes `data`. Its `waiter` comes back with the committed entry,
    /// or is dropped if the proposal is lost (no leader, leader changed).
    pub fn propose(&self, data: Vec<u8>, waiter: W) -> Result<(), Error> {
        match &self.route {
            Route::Raft(_) => self.send(Command::Propose { data, waiter }),
            Route::Upstream(send) => sent(send(Upstream::Propose { data, waiter })),
        }
    }

    /// Proposes `data` as `propose` does, and carries it through the log
    /// on the caller's thread when that costs no batching: in a group of
    /// one, while the consensus thread is idle and nothing is queued for
    /// it, the entry is written, synced and handed to the state machine
    /// before this returns. For a caller with no other proposal to make
    /// right away (a client's last request in hand): one that proposed
    /// several in a row this way would sync the log once for each.
    pub fn propose_driving(&self, data: Vec<u8>, waiter: W) -> Result<(), Error> {
        let Route::Raft(raft) = &self.route else {
            return self.propose(data, waiter);
        };
        match raft.propose_here(data, waiter) {
            Ok(()) => Ok(()),
            Err((data, waiter)) => self.send(Command::Propose { data, waiter }),
        }
    }

    /// Proposes that the group's voters and learners become `target`'s,
    /// with `data` for the state machine in the same entry (the change's
    /// own transaction). Committed, the entry arrives with its `data` and
    /// the new membership, which holds from that entry on; a change of
    /// more than one server is joint until raft leaves that state by
    /// itself, an entry later. Like any proposal, `waiter` is dropped if
    /// it is lost, and also if another change is under way (raft allows
    /// one at a time). A `target` equal to the membership is proposed as
    /// a plain entry.
    pub fn propose_membership(
        &self,
        target: Membership,
        data: Vec<u8>,
        waiter: W,
    ) -> Result<(), Error> {
        self.send(Command::ProposeMembership {
            target,
            data,
            waiter,
        })
    }

    /// Asks the leader for the commit index a linearizable read must wait
    /// for (raft's read index); `callback` gets it, or `None`.
    pub fn read_index(&self, callback: ReadIndexCallback) -> Result<(), Error> {
        match &self.route {
            Route::Raft(_) => self.send(Command::ReadIndex { callback }),
            Route::Upstream(send) => sent(send(Upstream::ReadIndex { callback })),
        }
    }

    /// Before a graceful stop: if this server leads, asks the follower
    /// best placed to take over to campaign at once (raft's leader
    /// transfer), and resolves once another server leads or an election
    /// timeout has passed. Meanwhile new proposals are refused, as raft
    /// drops them during a transfer; those already made are kept, because
    /// the new leader's log holds them. `avoid` is a server that did not
    /// take over when asked before: another is asked if there is one.
    pub async fn hand_off(&self, avoid: Option<u64>) -> Result<HandOff, Error> {
        let (reply, outcome) = oneshot::channel();
        self.send(Command::HandOff { avoid, reply })?;
        outcome.await.map_err(|_| Error::Stopped)
    }

    /// Hands a message from another server to raft.
    pub fn step(&self, message: Message) -> Result<(), Error> {
        self.send(Command::Step(message))
    }

    /// Hands a control message from server `from` to the consensus layer.
    pub fn control(&self, from: u64, control: Control) -> Result<(), Error> {
        self.send(Command::Control { from, control })
    }

    /// Tells the log that `snapshot` is durable: what it covers may be
    /// forgotten, and followers behind it may be sent it.
    pub fn compact(&self, snapshot: SnapshotMeta) -> Result<(), Error> {
        self.send(Command::Compact { snapshot })
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    /// Sends a command to the raft thread. An upstream replication takes
    /// none of these but proposals and reads: a membership change's waiter
    /// is dropped (the change is lost), the rest have nothing to do.
    fn send(&self, command: Command<W>) -> Result<(), Error> {
        match &self.route {
            Route::Raft(raft) => raft.commands.send(command).map_err(|_| Error::Stopped),
            Route::Upstream(_) => match command {
                Command::HandOff { reply, .. } => {
                    let _ = reply.send(HandOff::NotLeading);
                    Ok(())
                }
                _ => Ok(()),
            },
        }
    }
}

fn sent(accepted: bool) -> Result<(), Error> {
    if accepted {
        Ok(())
    } else {
        Err(Error::Stopped)
    }
}

struct Driver<W> {
    id: u64,
    raw: RawNode<RaftStore>,
    log: DurableLog,
    inbox: Inbox<Command<W>>,
    committed: UnboundedSender<Applying<W>>,
    /// What was handed out on `committed` and is not applied yet.
    backlog: Backlog,
    network: Arc<dyn Network>,
    /// For snapshot reports, which arrive from the network's tasks. It
    /// keeps the channel open, so the loop ends when the state machine's
    /// receiver closes.
    commands: Commands<Command<W>>,
    /// Sequence number for this server's next proposal.
    next_sequence: u64,
    /// Proposals made here and not yet committed, by sequence number, with
    /// the tick they were made at.
    pending: BTreeMap<u64, (u64, W)>,
    next_read: u64,
    /// Read-index requests in flight, by the id carried in their context,
    /// with the tick they were asked at.
    reads: HashMap<u64, (u64, ReadIndexCallback)>,
    /// Ticks made: what requests in flight are timed by. A request reads
    /// no clock of its own (a proposal's `clock_gettime` was 0.8% of a
    /// standalone server's CPU under writes), and it is given up after
    /// [`REQUEST_TIMEOUT`] of ticks, which like raft's own timers count
    /// the attention this thread got.
    ticks: u64,
    /// The leader as of the last Ready; when it changes, what was in
    /// flight through the old one is given up at once.
    leader_id: u64,
    status: Arc<Status>,
    tick: Duration,
    /// How long a transfer of leadership may take before raft gives up.
    election_timeout: Duration,
    sync_warning: Duration,
    /// Commands to carry out on the next turn: those that arrived while
    /// the log waited for disk space, and membership changes that came
    /// while the previous one was committed but not yet applied here.
    deferred: Vec<Command<W>>,
    /// A hand-off of leadership under way, answered once it ends.
    hand_off: Option<HandingOff>,
    /// While this voter may not vote: it lost its raft state (`fence`).
    fence: Option<Fence>,
    /// Whether the membership is in a joint state, half way through a
    /// change.
    joint: bool,
    /// Readies given back to raft and not yet durable.
    persisting: PersistQueue,
    /// What failed in a turn a proposer drove, for the consensus thread
    /// to stop on.
    failure: Option<Error>,
    /// Declared last: dropping it waits for the sync under way.
    syncer: LogSyncer,
}

struct HandingOff {
    to: u64,
    started: Instant,
    /// Log index space: the leader's last entry when it asked.
    last_index: u64,
    reply: oneshot::Sender<HandOff>,
}

/// The consensus thread: a turn of the driver whenever a command is
/// queued or a tick is due, until the server stops or the log fails.
fn serve<W: Send + 'static>(
    slot: &DriverSlot<W>,
    bell: &Bell,
    campaign_alone: bool,
) -> Result<(), Error> {
    bell.serve_from_this_thread();
    let tick = {
        let mut guard = hold(slot)?;
        let driver = guard.as_mut().ok_or(Error::Stopped)?;
        if campaign_alone {
            driver.replay_then_campaign()?;
        }
        driver.tick
    };
    let mut next_tick = Instant::now() + tick;
    loop {
        bell.wait(next_tick.saturating_duration_since(Instant::now()));
        let mut guard = hold(slot)?;
        let driver = guard.as_mut().ok_or(Error::Stopped)?;
        if let Some(error) = driver.failure.take() {
            return Err(error);
        }
        driver.take_commands()?;
        let now = Instant::now();
        if now >= next_tick {
            driver.tick();
            // Ticks this thread missed while it was held up are not made
            // up: raft's timers measure the attention it got, and a burst
            // of ticks on its return would time out an election before
            // the heartbeats queued meanwhile were even read.
            next_tick += tick;
            if next_tick <= now {
                next_tick = now + tick;
            }
        }
        driver.finish_turn()?;
        if driver.committed.is_closed() {
            return Ok(());
        }
    }
}

/// The driver, once whoever held it last let go. A panic while holding it
/// left raft half way through a turn: the log stops.
fn hold<W>(slot: &DriverSlot<W>) -> Result<std::sync::MutexGuard<'_, Option<Driver<W>>>, Error> {
    slot.lock().map_err(|_| Error::Panicked)
}

impl<W: Send + 'static> Driver<W> {
    /// Takes the commands queued, up to a turn's worth.
    fn take_commands(&mut self) -> Result<(), Error> {
        for _ in 0..COMMANDS_PER_TURN_MAX {
            match self.inbox.try_recv() {
                Ok(command) => self.handle(command)?,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        Ok(())
    }

    fn tick(&mut self) {
        self.ticks += 1;
        self.raw.tick();
        self.give_up_stale_requests();
        self.ask_for_terms();
    }

    /// What every turn ends with, after its commands and tick.
    fn finish_turn(&mut self) -> Result<(), Error> {
        // A group of one commits what it synced itself in a second
        // Ready, at once.
        while self.raw.has_ready() {
            self.handle_ready()?;
        }
        self.lift_fence_once_passed()?;
        self.check_hand_off();
        self.step_down_if_removed();
        for command in std::mem::take(&mut self.deferred) {
            self.handle(command)?;
        }
        Ok(())
    }

    /// Whether a proposer may drive a turn on its own thread: a group of
    /// one that leads (the consensus thread has replayed its log and
    /// campaigned: a proposal before that is dropped) and whose log is
    /// sound and has room. In a larger group the turns carry the peers'
    /// messages too, and the sync runs on the log's own thread anyway; a
    /// full disk makes a turn wait for space, which a proposer's thread
    /// must not.
    fn drives_here(&self) -> bool {
        self.failure.is_none()
            && self.is_alone()
            && self.raw.raft.state == StateRole::Leader
            && !self.status.disk_full.load(Ordering::Relaxed)
    }

    /// A turn of `command` alone, on a proposer's thread. A failure is left
    /// for the consensus thread, which stops on it within a tick.
    fn turn_with(&mut self, command: Command<W>) {
        if let Err(error) = self.handle(command).and_then(|()| self.finish_turn()) {
            self.failure = Some(error);
        }
    }

    fn handle(&mut self, command: Command<W>) -> Result<(), Error> {
        match command {
            Command::Propose { data, waiter } => {
                self.propose(data, waiter);
                Ok(())
            }
            Command::ProposeMembership {
                target,
                data,
                waiter,
            } => {
                self.propose_membership(target, data, waiter);
                Ok(())
            }
            Command::ReadIndex { callback } => {
                let id = self.next_read;
                self.next_read += 1;
                self.reads.insert(id, (self.ticks, callback));
                self.raw.read_index(id.to_be_bytes().to_vec());
                Ok(())
            }
            // A message for an old term or from a removed peer is raft's to
            // ignore; an error here is never a reason to stop.
            Command::Step(mut message) => {
                // A leader's heartbeat commits up to what it believes this
                // server holds. A server that lost its data (its directory
                // was wiped to rejoin) holds less, and raft would panic on
                // committing entries it does not have: commit only what is
                // here, as raft itself does for appends. The leader's next
                // append is then rejected and it backs off to a snapshot.
                if message.get_msg_type() == raft::prelude::MessageType::MsgHeartbeat {
                    let last = self.raw.raft.raft_log.last_index();
                    message.commit = message.commit.min(last);
                }
                self.forget_lost_log(&message);
                if self.fenced_from(&message) {
                    return Ok(());
                }
                if is_membership_proposal(&message) && previous_change_unapplied(&self.raw.raft) {
                    self.deferred.push(Command::Step(message));
                    return Ok(());
                }
                let _ = self.raw.step(message);
                Ok(())
            }
            Command::Control { from, control } => {
                self.control(from, control);
                Ok(())
            }
            Command::Compact { snapshot } => {
                let needed = self.lowest_index_followers_need();
                let removal = self.until_space(|log| log.compact(snapshot.clone(), needed))?;
                if let Some(removal) = removal {
                    // The hard state compaction wrote again must be durable
                    // before the segments holding older copies go.
                    self.start_sync(self.persisting.newest())?;
                    self.syncer.remove(removal);
                }
                Ok(())
            }
            Command::Stop => Err(Error::Stopped),
            Command::HandOff { avoid, reply } => {
                self.start_hand_off(avoid, reply);
                Ok(())
            }
            Command::SnapshotReport { to, sent } => {
                let status = if sent {
                    raft::SnapshotStatus::Finish
                } else {
                    raft::SnapshotStatus::Failure
                };
                self.raw.report_snapshot(to, status);
                Ok(())
            }
            Command::Synced(result) => {
                let synced = result?;
                self.note_sync(synced.took);
                self.persisting.synced(synced.through);
                self.tell_persisted();
                Ok(())
            }
        }
    }

    fn next_origin(&mut self) -> ProposalOrigin {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        ProposalOrigin {
            server: self.id,
            sequence,
        }
    }

    fn propose(&mut self, data: Vec<u8>, waiter: W) {
        let origin = self.next_origin();
        // A refused proposal (no known leader) drops its waiter, which its
        // caller sees as a lost request.
        if self.raw.propose(origin.encode(), data).is_ok() {
            self.pending.insert(origin.sequence, (self.ticks, waiter));
        }
    }

    fn propose_membership(&mut self, target: Membership, data: Vec<u8>, waiter: W) {
        if previous_change_unapplied(&self.raw.raft) {
            self.deferred.push(Command::ProposeMembership {
                target,
                data,
                waiter,
            });
            return;
        }
        let raft = &self.raw.raft;
        if self.joint || raft.pending_conf_index > raft.raft_log.applied {
            // One change at a time: raft would turn this one into an empty
            // entry.
            return;
        }
        let current = self.membership();
        let Some(mut change) = current.change_to(&target) else {
            self.propose(data, waiter);
            return;
        };
        change.context = data.into();
        let origin = self.next_origin();
        if self
            .raw
            .propose_conf_change(origin.encode(), change)
            .is_ok()
        {
            self.pending.insert(origin.sequence, (self.ticks, waiter));
        }
    }

    fn set_membership(&mut self, membership: &Membership) {
        self.joint = membership.is_joint();
        self.status.set_membership(membership.clone());
    }

    /// The membership raft works with now.
    fn membership(&self) -> Membership {
        Membership::from_raft(&self.raw.raft.prs().conf().to_conf_state())
    }

    /// Applies a committed change of membership to raft: it holds from
    /// this entry on. Returns the change's own data for the state machine,
    /// and the new membership; a change raft refuses (none this server
    /// proposes) leaves the membership as it was on every server alike,
    /// and its data is not applied.
    fn apply_membership_change(&mut self, entry: &Entry) -> (Bytes, Option<Membership>) {
        let change = match ConfChangeV2::parse_from_bytes(&entry.data) {
            Ok(change) => change,
            Err(error) => {
                tracing::error!(
                    index = entry.index,
                    "a committed membership change cannot be read, and is skipped: {error}"
                );
                return (Bytes::new(), None);
            }
        };
        match self.raw.apply_conf_change(&change) {
            Ok(conf) => {
                let membership = Membership::from_raft(&conf);
                tracing::info!(
                    index = entry.index,
                    ?membership,
                    "the group's membership changed"
                );
                self.set_membership(&membership);
                (Bytes::from(change.context.to_vec()), Some(membership))
            }
            Err(error) => {
                tracing::error!(
                    index = entry.index,
                    "raft refused a committed membership change, which is skipped: {error}"
                );
                (Bytes::new(), None)
            }
        }
    }

    /// A leader that a membership change left without a vote hands its
    /// leadership to a voter, as ZooKeeper's leader does when a reconfig
    /// removes it; raft itself would let it lead on. One removed from the
    /// group altogether then stops leading at once (see `leave_if_removed`).
    fn step_down_if_removed(&mut self) {
        let raft = &self.raw.raft;
        if raft.state != StateRole::Leader || self.hand_off.is_some() || raft.promotable() {
            return;
        }
        tracing::info!("this server leads but is no longer a voter: handing leadership over");
        let (reply, _) = oneshot::channel();
        self.start_hand_off(None, reply);
        leave_if_removed(&mut self.raw.raft);
    }

    /// A group of one elects itself once the entries its log already
    /// commits have been handed to the state machine, before it takes any
    /// command. Campaigning first makes raft read every one of them back
    /// from the log, to look for a membership change not yet applied: at
    /// 1M znodes, a restart that replays half a million entries spent a
    /// tenth of its time there.
    fn replay_then_campaign(&mut self) -> Result<(), Error> {
        loop {
            let log = &self.raw.raft.raft_log;
            if log.applied >= log.committed || !self.raw.has_ready() {
                break;
            }
            self.handle_ready()?;
            self.backlog.wait_until_below(REPLAY_BACKLOG_BYTES_MAX);
        }
        self.raw.campaign()?;
        Ok(())
    }

    fn handle_ready(&mut self) -> Result<(), Error> {
        if !self.raw.has_ready() {
            return Ok(());
        }
        let mut ready = self.raw.ready();
        // A leader's appends and heartbeats may go out before it persists.
        self.send(ready.take_messages());
        let installed_snapshot = !ready.snapshot().is_empty();
        if installed_snapshot {
            // The server stepped the leader's snapshot message only once the
            // snapshot's bytes were durable in the snapshot directory.
            let meta = SnapshotMeta::from_raft(ready.snapshot());
            self.until_space(|log| log.install_snapshot(&meta))?;
            self.set_membership(&meta.membership);
            let _ = self.committed.send(Applying::Restore(meta));
        }
        // Whoever sees a committed entry or an answered read must also see
        // the role and term that produced it (a node can become leader and
        // commit in one ready).
        self.publish_status();
        for state in ready.take_read_states() {
            self.answer_read(&state.request_ctx, Some(state.index));
        }
        self.forward(ready.take_committed_entries());
        self.until_space(|log| log.write(ready.entries(), ready.hs()))?;
        let number = ready.number();
        let must_sync = ready.must_sync();
        // A follower's acknowledgements and votes wait until it has
        // persisted; what claims nothing about its log goes now.
        let (now, after_sync): (Vec<_>, Vec<_>) = ready
            .take_persisted_messages()
            .into_iter()
            .partition(may_leave_before_sync);
        self.send(now);
        self.raw.advance_append_async(ready);
        let needs_sync = if installed_snapshot {
            // The snapshot's mark was synced here, and with it everything
            // written before it.
            self.sync_here(number)?;
            false
        } else if must_sync && self.is_alone() {
            self.sync_here(number)?;
            false
        } else {
            must_sync && self.start_sync(number)?
        };
        self.persisting.push(number, needs_sync, after_sync);
        self.tell_persisted();
        // After `tell_persisted`: a restored snapshot counts as applied
        // only once raft knows it is persisted.
        self.raw.advance_apply();
        self.notice_leader_change();
        self.publish_status();
        Ok(())
    }

    /// A group of one: no voter or learner but this server. It has nobody
    /// to keep talking to while its disk works, so it syncs on this thread
    /// (`sync_here`): handing the sync to the log's thread and hearing back
    /// cost two thread wake-ups per write, about 0.04 ms of each write's
    /// latency, and saved nothing.
    fn is_alone(&self) -> bool {
        self.raw.raft.prs().iter().len() == 1
    }

    /// Syncs what was written through Ready `number` on this thread.
    fn sync_here(&mut self, number: u64) -> Result<(), Error> {
        let started = Instant::now();
        self.log.sync()?;
        self.note_sync(started.elapsed());
        self.persisting.synced(number);
        Ok(())
    }

    fn note_sync(&self, took: Duration) {
        self.status.log_syncs.record(took);
        self.warn_if_slow(took);
    }

    /// Hands the sync of what was written through Ready `number` to the
    /// log's thread; false if a sync already under way covers it.
    fn start_sync(&mut self, number: u64) -> Result<bool, Error> {
        match self.log.start_sync()? {
            Some(pending) => {
                self.syncer.sync(number, pending);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Tells raft which Readies are now persisted and sends what waited for
    /// them.
    fn tell_persisted(&mut self) {
        if let Some(persisted) = self.persisting.take_persisted() {
            self.raw.on_persist_ready(persisted.through);
            self.send(persisted.messages);
        }
    }

    fn warn_if_slow(&self, took: Duration) {
        if took < self.sync_warning {
            return;
        }
        tracing::warn!(
            took_ms = took.as_millis() as u64,
            "syncing the log took {} ms (fsync.warningthresholdms is {} ms): no write \
             was acknowledged by this server meanwhile; give the log a disk of its own \
             (dataLogDir) or find what else writes to that disk",
            took.as_millis(),
            self.sync_warning.as_millis(),
        );
    }

    /// Proposals and read-index requests made through a leader that is
    /// gone may never be answered. Waiting out the request timeout would
    /// stall their clients; dropping them now lets each client see
    /// ConnectionLoss and retry at once, as ZooKeeper's clients do when
    /// their server loses its leader. (A dropped proposal may still commit:
    /// ConnectionLoss tells a ZooKeeper client exactly that.)
    fn notice_leader_change(&mut self) {
        let leader = self.raw.raft.leader_id;
        if leader == self.leader_id {
            return;
        }
        let had_leader = self.leader_id != 0;
        self.leader_id = leader;
        if leader != 0 {
            self.status.record_leader(leader, self.raw.raft.term);
        }
        if !had_leader {
            return;
        }
        self.status.leader_changes.fetch_add(1, Ordering::Relaxed);
        // After a hand-off this server's proposals are in the new leader's
        // log, which commits them: their clients get answers, not
        // ConnectionLoss. (With three voters the transferee's ack already
        // committed them; with five it may not have. Should another server
        // win instead, they wait until the server stops, which drops them.)
        let keep_proposals = self.hand_off.is_some();
        if !self.reads.is_empty() || (!keep_proposals && !self.pending.is_empty()) {
            tracing::info!(
                proposals = if keep_proposals {
                    0
                } else {
                    self.pending.len()
                },
                reads = self.reads.len(),
                "leader changed: giving up requests in flight through the old one"
            );
        }
        if !keep_proposals {
            self.pending.clear();
        }
        for (_, (_, callback)) in self.reads.drain() {
            callback(None);
        }
    }

    fn start_hand_off(&mut self, avoid: Option<u64>, reply: oneshot::Sender<HandOff>) {
        let raft = &self.raw.raft;
        if raft.state != StateRole::Leader {
            let _ = reply.send(HandOff::NotLeading);
            return;
        }
        let progress = raft.prs();
        let voters = progress.conf().voters().ids();
        let followers = voters.iter().filter(|&id| id != self.id).filter_map(|id| {
            progress.get(id).map(|p| Follower {
                id,
                matched: p.matched,
                recently_active: p.recent_active,
            })
        });
        let Some(to) = hand_off::successor(followers, avoid) else {
            let _ = reply.send(HandOff::NoOtherVoter);
            return;
        };
        let last_index = raft.raft_log.last_index();
        self.raw.transfer_leader(to);
        self.hand_off = Some(HandingOff {
            to,
            started: Instant::now(),
            last_index,
            reply,
        });
    }

    /// Answers the hand-off under way once another server leads, or once
    /// raft would have given the transfer up (an election timeout).
    fn check_hand_off(&mut self) {
        let Some(handing) = &self.hand_off else {
            return;
        };
        let leader = self.raw.raft.leader_id;
        let outcome = if leader != 0 && leader != self.id {
            HandOff::Done {
                to: leader,
                elapsed: handing.started.elapsed(),
                last_index: handing.last_index,
            }
        } else if handing.started.elapsed() >= self.election_timeout {
            HandOff::NotTaken { asked: handing.to }
        } else {
            return;
        };
        if let Some(handing) = self.hand_off.take() {
            let _ = handing.reply.send(outcome);
        }
    }

    fn send(&mut self, mut messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        // Snapshots travel with their file's bytes, which take a while.
        let (snapshots, others): (Vec<_>, Vec<_>) = messages
            .drain(..)
            .partition(|m| m.get_msg_type() == raft::prelude::MessageType::MsgSnapshot);
        for message in snapshots {
            let to = message.to;
            let commands = self.commands.clone();
            self.network.send_snapshot(
                message,
                Box::new(move |sent| {
                    let _ = commands.send(Command::SnapshotReport { to, sent });
                }),
            );
        }
        let others = others
            .into_iter()
            .filter(|message| !self.fenced_from(message))
            .collect();
        for peer in self.network.send(others) {
            self.raw.report_unreachable(peer);
        }
    }

    /// Raft assumes a follower never loses what it acknowledged. One that
    /// did (its directory was wiped to rejoin) rejects an append with its
    /// log ending below its match, and raft would keep that match: every
    /// acceptance below it looks stale, so after the snapshot the follower
    /// would be caught up one probe at a time, a round trip per message,
    /// until it passed its old match. Lowering the match to what the
    /// follower holds lets the first acceptance resume pipelined sending.
    fn forget_lost_log(&mut self, message: &Message) {
        let raft = &mut self.raw.raft;
        if raft.state != StateRole::Leader || message.term != raft.term {
            return;
        }
        let Some(progress) = raft.mut_prs().get_mut(message.from) else {
            return;
        };
        if let Some(holds) = lost_log(progress.matched, message) {
            tracing::warn!(
                peer = message.from,
                acknowledged = progress.matched,
                holds,
                "peer {} holds its log only to index {holds}, below the {} it acknowledged: it \
                 lost its data (a wiped directory); replicating to it from what it holds",
                message.from,
                progress.matched
            );
            progress.matched = holds;
        }
    }

    /// Whether `message` is a vote request the fence holds back: asked of
    /// this server, or asked by it (a candidate votes for itself).
    fn fenced_from(&self, message: &Message) -> bool {
        let Some(fence) = &self.fence else {
            return false;
        };
        let held = message.get_msg_type() == MessageType::MsgRequestVote
            && !fence.allows_vote(message.term, message.index);
        if held {
            tracing::debug!(
                "a vote request for term {} (log to {}) held back: this server lost its raft state; it votes above term {:?} for a log to {} or more",
                message.term,
                message.index,
                fence.floor(),
                fence.committed()
            );
        }
        held
    }

    fn control(&mut self, from: u64, control: Control) {
        match control {
            Control::TermQuery => {
                let term = self.raw.raft.term;
                let commit = self.raw.raft.raft_log.committed;
                self.network
                    .send_control(from, Control::TermAnswer { term, commit });
            }
            Control::TermAnswer { term, commit } => {
                let Some(fence) = &mut self.fence else {
                    return;
                };
                if let Some(floor) = fence.answered(from, term, commit) {
                    tracing::info!(
                        "a majority of the other voters answered: this server votes again from term {}, for a log to index {} or more",
                        floor + 1,
                        fence.committed()
                    );
                }
            }
        }
    }

    /// A fenced voter asks the voters that have not answered for their term.
    fn ask_for_terms(&mut self) {
        let Some(fence) = &self.fence else {
            return;
        };
        for peer in fence.to_ask() {
            self.network.send_control(peer, Control::TermQuery);
        }
    }

    /// Lifts the fence once this server's term passed its floor and its log
    /// holds what the group had committed, both durable: raft votes neither
    /// below its term nor twice in it.
    fn lift_fence_once_passed(&mut self) -> Result<(), Error> {
        let Some(fence) = &self.fence else {
            return Ok(());
        };
        let (term, last_index) = (self.log.hard_state_term(), self.log.last_index());
        if !fence.passed_by(term, last_index) {
            return Ok(());
        }
        self.log.sync()?;
        let fence = self.fence.take().expect("checked above");
        fence.lift().map_err(|source| Error::Fence {
            dir: self.log.dir().to_path_buf(),
            source,
        })?;
        tracing::info!(
            "the vote fence is lifted: term {term} and the log to index {last_index} are durable"
        );
        Ok(())
    }

    fn answer_read(&mut self, context: &[u8], index: Option<u64>) {
        let Ok(id) = <[u8; 8]>::try_from(context).map(u64::from_be_bytes) else {
            return;
        };
        if let Some((_, callback)) = self.reads.remove(&id) {
            callback(index);
        }
    }

    fn give_up_stale_requests(&mut self) {
        let timeout_ticks = request_timeout_ticks(self.tick);
        let now = self.ticks;
        let stale = |since: u64| now - since >= timeout_ticks;
        self.pending.retain(|_, (since, _)| !stale(*since));
        let stale: Vec<u64> = self
            .reads
            .iter()
            .filter(|(_, (since, _))| stale(*since))
            .map(|(&id, _)| id)
            .collect();
        for id in stale {
            if let Some((_, callback)) = self.reads.remove(&id) {
                callback(None);
            }
        }
    }

    /// Sends committed entries to the state machine, each with the waiter
    /// of the proposal this server made for it, if any.
    fn forward(&mut self, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        let bytes = entries.iter().map(|entry| entry.data.len() as u64).sum();
        let batch = entries
            .into_iter()
            .map(|mut entry| {
                let waiter = ProposalOrigin::decode(&entry.context)
                    .filter(|origin| origin.server == self.id)
                    .and_then(|origin| self.take_waiter(origin.sequence));
                let (data, membership) = match entry.get_entry_type() {
                    EntryType::EntryNormal => (std::mem::take(&mut entry.data), None),
                    EntryType::EntryConfChangeV2 => self.apply_membership_change(&entry),
                    // Raft's first form of change, which nothing here
                    // proposes.
                    EntryType::EntryConfChange => (Bytes::new(), None),
                };
                CommittedEntry {
                    index: entry.index,
                    term: entry.term,
                    data,
                    waiter,
                    membership,
                }
            })
            .collect();
        // A closed receiver means the server is stopping; the loop ends on
        // its next turn.
        let _ = self
            .committed
            .send(Applying::Entries(batch, self.backlog.add(bytes)));
    }

    fn take_waiter(&mut self, sequence: u64) -> Option<W> {
        // Proposals of one origin commit in sequence order: any still
        // pending below this one were lost.
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > sequence {
                break;
            }
            let at = *entry.key();
            let (_, waiter) = entry.remove();
            if at == sequence {
                return Some(waiter);
            }
        }
        None
    }

    /// On a leader, the lowest log index a follower still in touch needs:
    /// the one after the snapshot it is being sent, or after what it holds.
    /// Compacting the log past it would send that follower one more
    /// snapshot, whole, as soon as it is done with this one.
    fn lowest_index_followers_need(&self) -> Option<u64> {
        let raft = &self.raw.raft;
        if raft.state != StateRole::Leader {
            return None;
        }
        raft.prs()
            .iter()
            .filter(|&(&id, progress)| id != raft.id && progress.recent_active)
            .map(|(_, progress)| match progress.state {
                ProgressState::Snapshot => progress.pending_snapshot + 1,
                ProgressState::Probe | ProgressState::Replicate => progress.matched + 1,
            })
            .min()
    }

    /// Runs `write` until it stops failing for lack of disk space. Meanwhile
    /// the status says so, and the server refuses writes and serves reads;
    /// what reaches this thread is turned away as a server without a leader
    /// would (proposals and read-index requests dropped, their callers
    /// retry) and peer messages are dropped as a lossy network would (raft
    /// sends again), so nothing piles up however long the wait. A leader
    /// stuck here stops heartbeating and the others elect one whose disk
    /// has room.
    fn until_space<T>(
        &mut self,
        mut write: impl FnMut(&mut DurableLog) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut waited = false;
        loop {
            match write(&mut self.log) {
                Err(Error::Storage(error @ storage::StorageError::NoSpace { .. })) => {
                    if !waited {
                        tracing::error!(
                            "{error}. Until then this server refuses writes and serves reads; it retries every {} ms",
                            NO_SPACE_RETRY.as_millis()
                        );
                        self.status.disk_full.store(true, Ordering::Relaxed);
                        waited = true;
                    }
                    off_the_runtime(|| self.turn_away_commands(NO_SPACE_RETRY))?;
                }
                result => {
                    if waited {
                        tracing::info!(
                            "disk space is back for the log in {}: writes resume",
                            self.log.dir().display()
                        );
                        self.status.disk_full.store(false, Ordering::Relaxed);
                    }
                    return result;
                }
            }
        }
    }

    /// Takes commands for `wait` without acting on them: see `until_space`.
    fn turn_away_commands(&mut self, wait: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let command = match self.inbox.recv_timeout(left) {
                Ok(command) => command,
                Err(RecvTimeoutError::Timeout) => return Ok(()),
                Err(RecvTimeoutError::Disconnected) => return Err(Error::Stopped),
            };
            match command {
                Command::Stop => return Err(Error::Stopped),
                Command::Propose { .. }
                | Command::ProposeMembership { .. }
                | Command::Step(_)
                | Command::Control { .. } => {}
                Command::ReadIndex { callback } => callback(None),
                Command::HandOff { reply, .. } => {
                    let _ = reply.send(HandOff::DiskFull);
                }
                Command::Compact { .. } | Command::SnapshotReport { .. } | Command::Synced(_) => {
                    self.deferred.push(command)
                }
            }
        }
    }

    fn publish_status(&self) {
        let raft = &self.raw.raft;
        let role = match raft.state {
            StateRole::Leader => Role::Leader,
            StateRole::Follower => Role::Follower,
            StateRole::Candidate | StateRole::PreCandidate => Role::Candidate,
        };
        self.status.role.store(role as u8, Ordering::Relaxed);
        self.status.term.store(raft.term, Ordering::Relaxed);
        self.status
            .leader_id
            .store(raft.leader_id, Ordering::Relaxed);
        self.status
            .commit_index
            .store(raft.raft_log.committed, Ordering::Relaxed);
        self.status
            .last_index
            .store(raft.raft_log.last_index(), Ordering::Relaxed);
        let changing = raft.pending_conf_index > raft.raft_log.applied || self.joint;
        self.status
            .membership_changing
            .store(changing, Ordering::Relaxed);
    }
}

/// Raft-rs holds back every message of a server that does not lead until
/// the Ready that made it is persisted. These claim nothing about this
/// server's log, term or vote, so they go at once (as in etcd's raft with
/// asynchronous storage writes): a heartbeat's answer keeps the leader's
/// check-quorum satisfied and a forwarded proposal or read reaches the
/// leader while a slow sync runs. Answers to appends and everything about
/// votes still wait.
fn may_leave_before_sync(message: &Message) -> bool {
    matches!(
        message.get_msg_type(),
        MessageType::MsgHeartbeatResponse | MessageType::MsgPropose | MessageType::MsgReadIndex
    )
}

/// A leader no longer in its own group follows from now on: raft-rs lets
/// it lead on, and panics when an append response then moves the commit
/// index (it updates the leader's own progress, which the removal took
/// away; the fault harness's membership run hit it). The hand-off asked
/// just before still reaches its successor (raft queued the message), and
/// the others elect if it does not take over.
fn leave_if_removed<T: raft::Storage>(raft: &mut raft::Raft<T>) {
    if raft.state == StateRole::Leader && raft.prs().get(raft.id).is_none() {
        let term = raft.term;
        raft.become_follower(term, raft::INVALID_ID);
    }
}

/// This leader's last membership change is committed but not yet applied
/// here. Raft would turn a change proposed now into an empty entry (one
/// change at a time, counted until applied), losing it silently, though its
/// proposer may already have seen the previous one applied on its own
/// server; ZooKeeper takes a reconfig once the previous has committed. Such
/// a change waits for the next turn instead.
fn previous_change_unapplied<S: raft::Storage>(raft: &raft::Raft<S>) -> bool {
    raft.state == StateRole::Leader
        && raft.has_pending_conf()
        && raft.pending_conf_index <= raft.raft_log.committed
}

/// A proposal, forwarded by a follower, that changes the membership.
fn is_membership_proposal(message: &Message) -> bool {
    message.get_msg_type() == MessageType::MsgPropose
        && message.get_entries().iter().any(|entry| {
            matches!(
                entry.get_entry_type(),
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2
            )
        })
}

/// Runs `wait`, which blocks, without holding up the async runtime's other
/// tasks when called on one of its workers: a proposer whose turn found
/// the disk full.
fn off_the_runtime<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

fn thread_error(context: &str, source: std::io::Error) -> Error {
    Error::Storage(storage::StorageError::Io {
        context: context.into(),
        source,
    })
}

/// Which server proposed an entry, and its sequence number there; carried
/// in the entry's context (16 bytes). Raft's own entries have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProposalOrigin {
    server: u64,
    sequence: u64,
}

impl ProposalOrigin {
    fn encode(self) -> Vec<u8> {
        let mut context = Vec::with_capacity(16);
        context.extend_from_slice(&self.server.to_be_bytes());
        context.extend_from_slice(&self.sequence.to_be_bytes());
        context
    }

    fn decode(context: &[u8]) -> Option<Self> {
        let bytes: &[u8; 16] = context.try_into().ok()?;
        let (server, sequence) = bytes.split_at(8);
        Some(Self {
            server: u64::from_be_bytes(server.try_into().ok()?),
            sequence: u64::from_be_bytes(sequence.try_into().ok()?),
        })
    }
}

/// The ticks of `tick` each that make [`REQUEST_TIMEOUT`], rounded up.
fn request_timeout_ticks(tick: Duration) -> u64 {
    let ticks = REQUEST_TIMEOUT.as_nanos().div_ceil(tick.as_nanos().max(1));
    u64::try_from(ticks).unwrap_or(u64::MAX)
}

/// The index a follower's log ends at, when `message` rejects an append
/// with it below `matched`, what the follower once acknowledged. A
/// follower that kept its log never answers so: it rejects only probes
/// past its match, and its log matches the leader's up to it.
fn lost_log(matched: u64, message: &Message) -> Option<u64> {
    let rejects = message.get_msg_type() == MessageType::MsgAppendResponse && message.reject;
    (rejects && message.reject_hint < matched).then_some(message.reject_hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeltaMeta;

    #[test]
    fn a_request_is_given_up_after_the_ticks_that_make_its_timeout() {
        assert_eq!(request_timeout_ticks(Duration::from_millis(100)), 100);
        assert_eq!(request_timeout_ticks(Duration::from_millis(3)), 3334);
        assert_eq!(request_timeout_ticks(REQUEST_TIMEOUT * 2), 1);
        assert_eq!(request_timeout_ticks(Duration::ZERO), 10_000_000_000);
    }

    #[test]
    fn a_rejection_below_the_match_shows_a_lost_log() {
        let response = |reject, reject_hint| {
            let mut message = Message::default();
            message.set_msg_type(MessageType::MsgAppendResponse);
            message.reject = reject;
            message.reject_hint = reject_hint;
            message
        };
        // Wiped: it acknowledged 500 and now holds nothing.
        assert_eq!(lost_log(500, &response(true, 0)), Some(0));
        // A probe past the match, rejected at or beyond it: nothing lost.
        assert_eq!(lost_log(500, &response(true, 500)), None);
        assert_eq!(lost_log(500, &response(true, 700)), None);
        // An acceptance says nothing of a loss.
        assert_eq!(lost_log(500, &response(false, 0)), None);
        let mut heartbeat = response(true, 0);
        heartbeat.set_msg_type(MessageType::MsgHeartbeatResponse);
        assert_eq!(lost_log(500, &heartbeat), None);
    }

    /// The log in `dir`, read as a server with no snapshot reads it.
    fn read_log(dir: &std::path::Path) -> RecoveredLog {
        RecoveredLog::read(dir, 0).unwrap()
    }

    /// A group of one on the log in `dir`, with no snapshot.
    fn start_alone(
        dir: &std::path::Path,
        committed: UnboundedSender<Applying<u32>>,
    ) -> Consensus<u32> {
        start_alone_restored(dir, committed, Restored::default())
    }

    /// A group of one on the log in `dir`, its state machine `restored`.
    fn start_alone_restored(
        dir: &std::path::Path,
        committed: UnboundedSender<Applying<u32>>,
        restored: Restored<'_>,
    ) -> Consensus<u32> {
        Consensus::start(
            config(dir),
            read_log(dir),
            restored,
            committed,
            Arc::new(NoPeers),
        )
        .unwrap()
    }

    fn config(dir: &std::path::Path) -> Config {
        Config {
            id: 1,
            voters: vec![1],
            learners: vec![],
            log_dir: dir.to_path_buf(),
            tick: Duration::from_millis(10),
            election_ticks: 10,
            sync_warning: Duration::from_secs(1),
        }
    }

    /// Collects committed entries with data until `count` have arrived.
    fn collect(
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<Applying<u32>>,
        count: usize,
    ) -> Vec<(u64, Vec<u8>, Option<u32>)> {
        let mut seen = Vec::new();
        while seen.len() < count {
            let Applying::Entries(batch, _) = rx.blocking_recv().expect("consensus stopped") else {
                panic!("no snapshot is sent in these tests");
            };
            seen.extend(
                batch
                    .into_iter()
                    .filter(|e| !e.data.is_empty())
                    .map(|e| (e.index, e.data.to_vec(), e.waiter)),
            );
        }
        seen
    }

    #[test]
    fn proposals_commit_in_order_with_their_waiters_and_replay_after_restart() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let node = start_alone(dir.path(), tx);
        for i in 0..3u32 {
            node.propose(vec![b'a' + i as u8], i).unwrap();
        }
        let first = collect(&mut rx, 3);
        assert_eq!(
            first
                .iter()
                .map(|(_, d, w)| (d.clone(), *w))
                .collect::<Vec<_>>(),
            vec![
                (b"a".to_vec(), Some(0)),
                (b"b".to_vec(), Some(1)),
                (b"c".to_vec(), Some(2))
            ]
        );
        assert!(
            first.windows(2).all(|w| w[0].0 < w[1].0),
            "indexes increase"
        );
        assert_eq!(node.status().role(), Role::Leader);
        assert!(
            node.status().log_syncs().snapshot().count >= 1,
            "a lone voter's own syncs are counted as the log thread's are"
        );
        node.shutdown();
        drop(rx);

        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let _node = start_alone(dir.path(), tx);
        let replayed = collect(&mut rx, 3);
        assert_eq!(
            replayed
                .iter()
                .map(|(i, d, w)| (*i, d.clone(), *w))
                .collect::<Vec<_>>(),
            first
                .iter()
                .map(|(i, d, _)| (*i, d.clone(), None))
                .collect::<Vec<_>>(),
            "the same entries at the same indexes, without waiters"
        );
    }

    #[test]
    fn a_restart_from_a_delta_hands_out_only_the_entries_after_it_with_its_membership() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let node = start_alone(dir.path(), tx);
        for i in 0..6u32 {
            node.propose(vec![i as u8], i).unwrap();
        }
        let indexes: Vec<u64> = collect(&mut rx, 6).iter().map(|(i, ..)| *i).collect();
        node.shutdown();
        drop(rx);
        // Restarts on the log with `delta` loaded, collecting `count`
        // entries with data.
        let restart = |delta: &DeltaMeta, count: usize| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let restored = Restored {
                snapshot: None,
                last_delta: Some(delta),
            };
            let node = start_alone_restored(dir.path(), tx, restored);
            let handed: Vec<u64> = collect(&mut rx, count).iter().map(|(i, ..)| *i).collect();
            let membership = node.status().membership();
            node.shutdown();
            (handed, membership)
        };

        let with_a_learner = Membership::new(vec![1], vec![9]);
        let delta = DeltaMeta {
            index: indexes[3],
            term: 1,
            base: 0,
            previous: 0,
            membership: with_a_learner.clone(),
        };
        let (handed, membership) = restart(&delta, 2);
        assert_eq!(
            handed,
            indexes[4..],
            "the entries the delta holds are not handed out"
        );
        assert_eq!(
            membership, with_a_learner,
            "raft restarts with the delta's membership"
        );

        // A delta past what the log knows committed (its entries lost with
        // an unsynced tail, say): raft hands out all it has, with the
        // membership it knew, and the state machine passes over the rest.
        let ahead = DeltaMeta {
            index: indexes[5] + 10,
            ..delta
        };
        let (handed, membership) = restart(&ahead, 6);
        assert_eq!(handed, indexes);
        assert_eq!(membership, Membership::new(vec![1], vec![]));
    }

    /// The waiters of the entries already handed to the state machine.
    fn waiters_handed(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Applying<u32>>) -> Vec<u32> {
        let mut waiters = Vec::new();
        while let Ok(Applying::Entries(batch, _)) = rx.try_recv() {
            waiters.extend(batch.into_iter().filter_map(|e| e.waiter));
        }
        waiters
    }

    /// A group of one in a directory of its own, once it leads.
    fn leading_alone() -> (
        tempfile::TempDir,
        tokio::sync::mpsc::UnboundedReceiver<Applying<u32>>,
        Consensus<u32>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let node = start_alone(dir.path(), tx);
        wait_for("leadership", || node.status().role() == Role::Leader);
        (dir, rx, node)
    }

    #[test]
    fn a_lone_voter_commits_a_driven_proposal_before_propose_returns() {
        let (_dir, mut rx, node) = leading_alone();
        // Through the consensus thread an entry arrives a thread wake-up
        // and a sync after its proposal returns. Driven, it has arrived:
        // all but the few that meet the thread in a tick's turn.
        let mut driven = 0;
        for i in 0..20u32 {
            node.propose_driving(vec![i as u8], i).unwrap();
            if waiters_handed(&mut rx).contains(&i) {
                driven += 1;
            } else {
                collect(&mut rx, 1);
            }
        }
        assert!(driven >= 15, "{driven} of 20 driven");
    }

    #[test]
    fn a_proposal_driven_before_the_group_leads_waits_for_it() {
        // Made while the consensus thread starts, before it campaigns: raft
        // would drop it, so it must be queued for the thread instead.
        for _ in 0..10 {
            let dir = tempfile::tempdir().unwrap();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let node = start_alone(dir.path(), tx);
            node.propose_driving(b"first".to_vec(), 1).unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !waiters_handed(&mut rx).contains(&1) {
                assert!(Instant::now() < deadline, "the first proposal was lost");
                thread::sleep(Duration::from_millis(5));
            }
        }
    }

    #[test]
    fn driven_and_queued_proposals_commit_in_the_order_made() {
        let (_dir, mut rx, node) = leading_alone();
        // A driven proposal made while a queued one waits must not pass it.
        for i in 0..300u32 {
            let data = i.to_be_bytes().to_vec();
            if i % 3 == 0 {
                node.propose(data, i).unwrap();
            } else {
                node.propose_driving(data, i).unwrap();
            }
        }
        let committed: Vec<u32> = collect(&mut rx, 300)
            .into_iter()
            .map(|(_, data, _)| u32::from_be_bytes(data.try_into().unwrap()))
            .collect();
        assert_eq!(committed, (0..300).collect::<Vec<_>>());
    }

    /// A replay hands out no more than the backlog allows while the state
    /// machine has not applied what it was given, and the rest once it has.
    #[test]
    fn a_replay_waits_for_the_state_machine_to_apply() {
        const ENTRY_BYTES: usize = 256 << 10;
        const ENTRIES: usize = 160; // 40 MB
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let node = start_alone(dir.path(), tx);
        for i in 0..ENTRIES as u32 {
            node.propose(vec![i as u8; ENTRY_BYTES], i).unwrap();
        }
        collect(&mut rx, ENTRIES);
        node.shutdown();
        drop(rx);

        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let _node = start_alone(dir.path(), tx);
        let (mut held, mut handed_bytes, mut entries) = (Vec::new(), 0, 0);
        // Until a wait brings nothing more.
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let before = held.len();
            while let Ok(applying) = rx.try_recv() {
                let Applying::Entries(batch, unapplied) = applying else {
                    panic!("no snapshot is sent in these tests");
                };
                handed_bytes += batch.iter().map(|e| e.data.len() as u64).sum::<u64>();
                entries += batch.iter().filter(|e| !e.data.is_empty()).count();
                held.push(unapplied);
            }
            if held.len() == before {
                break;
            }
        }
        assert!(
            handed_bytes < REPLAY_BACKLOG_BYTES_MAX + COMMITTED_BYTES_PER_READY_MAX,
            "{handed_bytes} bytes handed out while none was applied"
        );
        assert!(entries < ENTRIES);
        drop(held);
        entries += collect(&mut rx, ENTRIES - entries).len();
        assert_eq!(entries, ENTRIES);
    }

    /// Delivers messages between in-process nodes; a cut node neither
    /// sends nor receives, a muted one only control messages. Every vote
    /// granted is recorded, as (voter, term, candidate).
    #[derive(Default)]
    struct Wires {
        nodes: std::sync::Mutex<HashMap<u64, Consensus<u32>>>,
        cut: std::sync::Mutex<Option<u64>>,
        muted: std::sync::Mutex<Option<u64>>,
        votes: std::sync::Mutex<Vec<(u64, u64, u64)>>,
    }

    impl Wires {
        fn is_cut(&self, id: u64) -> bool {
            *self.cut.lock().unwrap() == Some(id)
        }

        fn is_muted(&self, id: u64) -> bool {
            self.is_cut(id) || *self.muted.lock().unwrap() == Some(id)
        }
    }

    /// One node's end of the wires.
    struct Port {
        id: u64,
        wires: Arc<Wires>,
    }

    impl Network for Port {
        fn send(&self, messages: Vec<Message>) -> Vec<u64> {
            let nodes = self.wires.nodes.lock().unwrap();
            for message in messages {
                if self.wires.is_muted(message.to) || self.wires.is_muted(message.from) {
                    continue;
                }
                if message.get_msg_type() == MessageType::MsgRequestVoteResponse && !message.reject
                {
                    let vote = (message.from, message.term, message.to);
                    self.wires.votes.lock().unwrap().push(vote);
                }
                if let Some(node) = nodes.get(&message.to) {
                    let _ = node.step(message);
                }
            }
            Vec::new()
        }

        fn send_control(&self, to: u64, control: Control) -> bool {
            if self.wires.is_cut(to) || self.wires.is_cut(self.id) {
                return false;
            }
            let nodes = self.wires.nodes.lock().unwrap();
            nodes
                .get(&to)
                .is_some_and(|node| node.control(self.id, control).is_ok())
        }
    }

    type Receiver = tokio::sync::mpsc::UnboundedReceiver<Applying<u32>>;

    fn start_group(dirs: &[tempfile::TempDir]) -> (Arc<Wires>, Vec<Receiver>) {
        let wires = Arc::new(Wires::default());
        let mut receivers = Vec::new();
        for (i, dir) in dirs.iter().enumerate() {
            let id = i as u64 + 1;
            receivers.push(start_member(&wires, id, dir.path()));
        }
        (wires, receivers)
    }

    /// Starts server `id` of the group of three on `wires`.
    fn start_member(wires: &Arc<Wires>, id: u64, dir: &std::path::Path) -> Receiver {
        start_with_voters(wires, id, dir, vec![1, 2, 3])
    }

    /// Starts server `id` on `wires`, knowing `voters` until the log says
    /// otherwise.
    fn start_with_voters(
        wires: &Arc<Wires>,
        id: u64,
        dir: &std::path::Path,
        voters: Vec<u64>,
    ) -> Receiver {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let config = Config {
            id,
            voters,
            ..config(dir)
        };
        let port = Arc::new(Port {
            id,
            wires: wires.clone(),
        });
        let log = read_log(&config.log_dir);
        let node = Consensus::start(config, log, Restored::default(), tx, port).unwrap();
        wires.nodes.lock().unwrap().insert(id, node);
        rx
    }

    fn leader(wires: &Wires) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let nodes = wires.nodes.lock().unwrap();
            let cut = *wires.cut.lock().unwrap();
            if let Some((&id, _)) = nodes
                .iter()
                .find(|(&id, n)| Some(id) != cut && n.status().role() == Role::Leader)
            {
                return id;
            }
            drop(nodes);
            assert!(Instant::now() < deadline, "no leader elected");
            thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn three_nodes_agree_and_a_follower_proposal_reaches_its_waiter() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (wires, mut receivers) = start_group(&dirs);
        let leader_id = leader(&wires);
        let follower_id = if leader_id == 1 { 2 } else { 1 };
        {
            let nodes = wires.nodes.lock().unwrap();
            nodes[&leader_id]
                .propose(b"from-leader".to_vec(), 10)
                .unwrap();
            nodes[&follower_id]
                .propose(b"from-follower".to_vec(), 20)
                .unwrap();
        }
        let seen: Vec<_> = receivers.iter_mut().map(|rx| collect(rx, 2)).collect();
        for (i, entries) in seen.iter().enumerate() {
            let id = i as u64 + 1;
            let data: Vec<_> = entries.iter().map(|(_, d, _)| d.clone()).collect();
            let first: Vec<_> = seen[0].iter().map(|(_, d, _)| d.clone()).collect();
            assert_eq!(
                data, first,
                "node {id} applied the same entries in the same order"
            );
            for (_, data, waiter) in entries {
                let expected = match (id, data.as_slice()) {
                    (id, b"from-leader") if id == leader_id => Some(10),
                    (id, b"from-follower") if id == follower_id => Some(20),
                    _ => None,
                };
                assert_eq!(*waiter, expected, "node {id}, entry {data:?}");
            }
        }
    }

    /// Entries with data, and the memberships entries brought, until an
    /// entry with `last` as its data has arrived.
    fn until_data(rx: &mut Receiver, last: &[u8]) -> (Vec<Vec<u8>>, Vec<Membership>) {
        let (mut data, mut memberships) = (Vec::new(), Vec::new());
        while data.last().map(Vec::as_slice) != Some(last) {
            let Applying::Entries(batch, _) = rx.blocking_recv().expect("consensus stopped") else {
                panic!("no snapshot is sent in these tests");
            };
            for entry in batch {
                memberships.extend(entry.membership);
                if !entry.data.is_empty() {
                    data.push(entry.data.to_vec());
                }
            }
        }
        (data, memberships)
    }

    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_server_joins_with_the_change_s_data_and_votes_from_then_on() {
        let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
        let (wires, mut receivers) = start_group(&dirs[..3]);
        let leader_id = leader(&wires);
        receivers.push(start_with_voters(
            &wires,
            4,
            dirs[3].path(),
            vec![1, 2, 3, 4],
        ));
        let four = Membership::new(vec![1, 2, 3, 4], vec![]);
        wires.nodes.lock().unwrap()[&leader_id]
            .propose_membership(four.clone(), b"grow".to_vec(), 1)
            .unwrap();
        for rx in receivers.iter_mut() {
            let (data, memberships) = until_data(rx, b"grow");
            assert_eq!(data, [b"grow".to_vec()]);
            assert_eq!(memberships, std::slice::from_ref(&four));
        }
        for node in wires.nodes.lock().unwrap().values() {
            wait_for("the new membership in the status", || {
                node.status().membership() == four && !node.status().membership_changing()
            });
        }
        // With server 4 a voter, a write needs three of four: cut one
        // other than the leader and 4, and writes still commit.
        let cut = [1, 2, 3].into_iter().find(|&id| id != leader_id).unwrap();
        *wires.cut.lock().unwrap() = Some(cut);
        wires.nodes.lock().unwrap()[&leader_id]
            .propose(b"after".to_vec(), 2)
            .unwrap();
        let (data, _) = until_data(&mut receivers[3], b"after");
        assert_eq!(data, [b"after".to_vec()]);
        // A restart knows zoo.cfg's three voters, then replays the change.
        *wires.cut.lock().unwrap() = None;
        let restarted = if leader_id == 1 { 2 } else { 1 };
        let node = wires.nodes.lock().unwrap().remove(&restarted).unwrap();
        node.shutdown();
        let dir = dirs[restarted as usize - 1].path();
        let mut rx = start_with_voters(&wires, restarted, dir, vec![1, 2, 3]);
        let (_, memberships) = until_data(&mut rx, b"after");
        assert_eq!(memberships, std::slice::from_ref(&four));
        let nodes = wires.nodes.lock().unwrap();
        wait_for("the replayed membership", || {
            nodes[&restarted].status().membership() == four
        });
    }

    #[test]
    fn two_servers_change_in_a_joint_step_and_a_removed_leader_hands_over() {
        let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
        let (wires, mut receivers) = start_group(&dirs[..3]);
        let old_leader = leader(&wires);
        let kept: Vec<u64> = [1, 2, 3]
            .into_iter()
            .filter(|&id| id != old_leader)
            .collect();
        for id in [4, 5] {
            let dir = dirs[id as usize - 1].path();
            receivers.push(start_with_voters(&wires, id, dir, vec![1, 2, 3, 4, 5]));
        }
        // The leader leaves and two join: one change, through a joint state.
        let mut voters = kept.clone();
        voters.extend([4, 5]);
        let target = Membership::new(voters, vec![]);
        wires.nodes.lock().unwrap()[&old_leader]
            .propose_membership(target.clone(), b"replace".to_vec(), 1)
            .unwrap();
        for rx in receivers.iter_mut().skip(3) {
            let (data, memberships) = until_data(rx, b"replace");
            assert_eq!(data, [b"replace".to_vec()]);
            assert!(memberships[0].is_joint(), "{memberships:?}");
        }
        let new_leader = {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let id = leader(&wires);
                if id != old_leader {
                    break id;
                }
                assert!(Instant::now() < deadline, "the removed leader kept leading");
                thread::sleep(Duration::from_millis(10));
            }
        };
        assert!(target.voters.contains(&new_leader));
        for id in &target.voters {
            let nodes = wires.nodes.lock().unwrap();
            let node = &nodes[id];
            wait_for("the joint state to be left", || {
                node.status().membership() == target
            });
        }
        wires.nodes.lock().unwrap()[&new_leader]
            .propose(b"after".to_vec(), 2)
            .unwrap();
        for rx in receivers.iter_mut().skip(3) {
            let (data, _) = until_data(rx, b"after");
            assert_eq!(data.last().unwrap(), b"after");
        }
    }

    #[test]
    fn a_change_committed_but_not_applied_holds_the_next_for_a_turn() {
        use raft::prelude::{ConfChangeSingle, ConfChangeType, ConfState};
        use raft::storage::MemStorage;

        let storage = MemStorage::new_with_conf_state(ConfState::from((vec![1], vec![])));
        let config = raft::Config {
            id: 1,
            ..Default::default()
        };
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let mut raw = RawNode::new(&config, storage.clone(), &logger).unwrap();
        raw.campaign().unwrap();
        let persist = |raw: &mut RawNode<MemStorage>| {
            let ready = raw.ready();
            storage.wl().append(ready.entries()).unwrap();
            if let Some(hard_state) = ready.hs() {
                storage.wl().set_hardstate(hard_state.clone());
            }
            raw.advance_append(ready)
        };
        let light = persist(&mut raw);
        raw.advance_apply_to(light.commit_index().unwrap_or(raw.raft.raft_log.committed));
        assert_eq!(raw.raft.state, StateRole::Leader);
        assert!(!previous_change_unapplied(&raw.raft));

        let mut change = ConfChangeV2::default();
        let mut add = ConfChangeSingle::default();
        add.set_change_type(ConfChangeType::AddLearnerNode);
        add.node_id = 2;
        change.mut_changes().push(add);
        raw.propose_conf_change(vec![], change).unwrap();
        assert!(
            !previous_change_unapplied(&raw.raft),
            "not committed yet: a second change is refused, as ZooKeeper's ReconfigInProgress"
        );
        let light = persist(&mut raw);
        assert!(
            light.commit_index().is_some(),
            "a lone voter commits on persisting"
        );
        assert!(
            previous_change_unapplied(&raw.raft),
            "committed and not applied: the next change waits a turn"
        );
        raw.advance_apply();
        assert!(!previous_change_unapplied(&raw.raft));
    }

    #[test]
    fn a_leader_removed_from_its_group_follows_and_survives_append_responses() {
        use raft::prelude::{ConfChangeSingle, ConfChangeType, ConfState};
        use raft::storage::MemStorage;

        let storage = MemStorage::new_with_conf_state(ConfState::from((vec![1, 2, 3], vec![])));
        let config = raft::Config {
            id: 1,
            ..Default::default()
        };
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let mut raw = RawNode::new(&config, storage.clone(), &logger).unwrap();
        let persist = |raw: &mut RawNode<MemStorage>| {
            let ready = raw.ready();
            storage.wl().append(ready.entries()).unwrap();
            if let Some(hard_state) = ready.hs() {
                storage.wl().set_hardstate(hard_state.clone());
            }
            raw.advance(ready);
        };
        let answer = |raw: &RawNode<MemStorage>, from: u64, msg_type: MessageType| {
            let mut message = Message::default();
            message.set_msg_type(msg_type);
            (message.from, message.to) = (from, 1);
            message.term = raw.raft.term;
            message.index = raw.raft.raft_log.last_index();
            message
        };
        raw.campaign().unwrap();
        persist(&mut raw);
        raw.step(answer(&raw, 2, MessageType::MsgRequestVoteResponse))
            .unwrap();
        assert_eq!(raw.raft.state, StateRole::Leader);
        persist(&mut raw);

        let mut change = ConfChangeV2::default();
        let mut remove = ConfChangeSingle::default();
        remove.set_change_type(ConfChangeType::RemoveNode);
        remove.node_id = 1;
        change.mut_changes().push(remove);
        raw.propose_conf_change(vec![], change.clone()).unwrap();
        persist(&mut raw);
        raw.apply_conf_change(&change).unwrap();
        assert!(raw.raft.prs().get(1).is_none(), "removed");

        leave_if_removed(&mut raw.raft);
        assert_eq!(raw.raft.state, StateRole::Follower);
        // Both remaining voters acknowledge the change, which commits it.
        // As a leader, raft-rs panicked here, on its own progress.
        for from in [2, 3] {
            let _ = raw.step(answer(&raw, from, MessageType::MsgAppendResponse));
        }
    }

    #[test]
    fn a_change_under_way_refuses_another() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (wires, mut receivers) = start_group(&dirs);
        let leader_id = leader(&wires);
        let follower = [1, 2, 3].into_iter().find(|&id| id != leader_id).unwrap();
        let voters: Vec<u64> = [1, 2, 3].into_iter().filter(|&id| id != follower).collect();
        let demoted = Membership::new(voters, vec![follower]);
        {
            let nodes = wires.nodes.lock().unwrap();
            let leader = &nodes[&leader_id];
            leader
                .propose_membership(demoted.clone(), b"first".to_vec(), 1)
                .unwrap();
            // Refused: the first change is not applied yet.
            leader
                .propose_membership(
                    Membership::new(vec![1, 2, 3], vec![]),
                    b"second".to_vec(),
                    2,
                )
                .unwrap();
            leader.propose(b"after".to_vec(), 3).unwrap();
        }
        let leader_rx = &mut receivers[leader_id as usize - 1];
        let (data, memberships) = until_data(leader_rx, b"after");
        assert_eq!(data, [b"first".to_vec(), b"after".to_vec()]);
        assert_eq!(memberships, [demoted]);
    }

    #[test]
    fn a_new_leader_takes_over_when_the_old_one_is_cut_off() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (wires, mut receivers) = start_group(&dirs);
        let old = leader(&wires);
        *wires.cut.lock().unwrap() = Some(old);
        let new = leader(&wires);
        assert_ne!(new, old);
        wires.nodes.lock().unwrap()[&new]
            .propose(b"after".to_vec(), 7)
            .unwrap();
        let survivor = receivers.remove(new as usize - 1);
        let mut survivor = survivor;
        let entries = collect(&mut survivor, 1);
        assert_eq!(entries[0].1, b"after".to_vec());
        assert_eq!(entries[0].2, Some(7));
    }

    #[test]
    fn a_voter_that_lost_its_state_never_votes_twice_in_a_term() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (wires, mut receivers) = start_group(&dirs);
        let leader_id = leader(&wires);
        wires.nodes.lock().unwrap()[&leader_id]
            .propose(b"before".to_vec(), 1)
            .unwrap();
        for rx in &mut receivers {
            collect(rx, 1);
        }
        // A voter that helped elect the leader loses its disk and comes
        // back with its old id, while the leader is cut off.
        let (voter, term, _) = *wires
            .votes
            .lock()
            .unwrap()
            .iter()
            .rfind(|(_, _, candidate)| *candidate == leader_id)
            .expect("someone voted for the leader");
        let third = (1..=3).find(|&id| id != voter && id != leader_id).unwrap();
        let node = wires.nodes.lock().unwrap().remove(&voter).unwrap();
        node.shutdown();
        let dir = dirs[voter as usize - 1].path();
        for file in std::fs::read_dir(dir).unwrap() {
            std::fs::remove_file(file.unwrap().path()).unwrap();
        }
        *wires.cut.lock().unwrap() = Some(leader_id);
        let _rx = start_member(&wires, voter, dir);
        assert!(
            dir.join("vote-fence").exists(),
            "fenced before it takes part"
        );

        // The third server asks for a vote in the very term the lost vote
        // was cast in: without the fence, an empty log would grant it.
        let mut request = Message::default();
        request.set_msg_type(MessageType::MsgRequestVote);
        request.from = third;
        request.to = voter;
        request.term = term;
        // A log past anything committed: only the term rule can refuse it.
        request.index = 1_000;
        request.log_term = term;
        wires.nodes.lock().unwrap()[&voter].step(request).unwrap();
        thread::sleep(Duration::from_millis(300));

        *wires.cut.lock().unwrap() = None;
        leader(&wires);
        let deadline = Instant::now() + Duration::from_secs(10);
        while dir.join("vote-fence").exists() {
            // The fence lifts at the first election above the floor. The
            // floor may be the term of the leader elected after the cut,
            // so a follower is told to campaign: a leader ignores the hint.
            assert!(Instant::now() < deadline, "the fence was never lifted");
            let current = leader(&wires);
            let candidate = if current == third { leader_id } else { third };
            if let Some(node) = wires.nodes.lock().unwrap().get(&candidate) {
                let mut timeout = Message::default();
                timeout.set_msg_type(MessageType::MsgTimeoutNow);
                timeout.to = candidate;
                let _ = node.step(timeout);
            }
            thread::sleep(Duration::from_millis(100));
        }
        let votes = wires.votes.lock().unwrap();
        for (i, (voter, term, candidate)) in votes.iter().enumerate() {
            assert!(
                votes[..i]
                    .iter()
                    .all(|(v, t, c)| (v, t) != (voter, term) || c == candidate),
                "server {voter} voted for {candidate} in term {term} after voting otherwise: {votes:?}"
            );
        }
    }

    #[test]
    fn two_voters_that_lost_their_state_do_not_elect_an_empty_log() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (wires, mut receivers) = start_group(&dirs);
        let old_leader = leader(&wires);
        for i in 0..5 {
            wires.nodes.lock().unwrap()[&old_leader]
                .propose(format!("entry {i}").into_bytes(), i)
                .unwrap();
        }
        for rx in &mut receivers {
            collect(rx, 5);
        }
        // The leader and one follower lose their disks; the other follower
        // alone holds the log. Both come back empty, and hear each other's
        // empty answers beside the survivor's.
        let survivor = (1..=3).find(|&id| id != old_leader).unwrap();
        let wiped: Vec<u64> = (1..=3).filter(|&id| id != survivor).collect();
        for &id in &wiped {
            let node = wires.nodes.lock().unwrap().remove(&id).unwrap();
            node.shutdown();
            for file in std::fs::read_dir(dirs[id as usize - 1].path()).unwrap() {
                std::fs::remove_file(file.unwrap().path()).unwrap();
            }
        }
        // The survivor answers their term queries, but its raft messages
        // are held up a while: the wiped two may try to elect each other.
        *wires.muted.lock().unwrap() = Some(survivor);
        let mut restarted: Vec<_> = wiped
            .iter()
            .map(|&id| start_member(&wires, id, dirs[id as usize - 1].path()))
            .collect();
        thread::sleep(Duration::from_millis(800));
        *wires.muted.lock().unwrap() = None;
        let expected: Vec<_> = (0..5).map(|i| format!("entry {i}").into_bytes()).collect();
        for rx in &mut restarted {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut data = Vec::new();
            while data.len() < expected.len() {
                assert!(
                    Instant::now() < deadline,
                    "the committed entries never came back: {data:?}"
                );
                match rx.try_recv() {
                    Ok(Applying::Entries(batch, _)) => data.extend(
                        batch
                            .into_iter()
                            .filter(|e| !e.data.is_empty())
                            .map(|e| e.data.to_vec()),
                    ),
                    Ok(Applying::Restore(_)) => panic!("no snapshot is sent in these tests"),
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
            assert_eq!(data, expected, "the wiped servers got the log back");
        }
        assert_eq!(leader(&wires), survivor);
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn a_leader_hands_off_and_its_proposal_in_flight_still_commits() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (wires, mut receivers) = start_group(&dirs);
        let old = leader(&wires);
        let (old_node, follower) = {
            let nodes = wires.nodes.lock().unwrap();
            let follower = nodes.keys().copied().find(|&id| id != old).unwrap();
            (nodes[&old].clone(), nodes[&follower].clone())
        };
        assert_eq!(
            block_on(follower.hand_off(None)).unwrap(),
            HandOff::NotLeading
        );
        // Queued ahead of the hand-off: in the old leader's log when it
        // asks, so the new leader commits it.
        old_node.propose(b"in flight".to_vec(), 9).unwrap();
        let outcome = block_on(old_node.hand_off(None)).unwrap();
        let HandOff::Done { to, .. } = outcome else {
            panic!("the leadership was not handed over: {outcome:?}");
        };
        assert_ne!(to, old);
        assert_eq!(leader(&wires), to);
        let entries = collect(&mut receivers[old as usize - 1], 1);
        assert_eq!(entries[0].1, b"in flight".to_vec());
        assert_eq!(entries[0].2, Some(9), "the proposer still gets its answer");
    }

    #[test]
    fn a_hand_off_the_follower_asked_does_not_take_is_taken_by_the_other() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (wires, _receivers) = start_group(&dirs);
        let old = leader(&wires);
        let node = wires.nodes.lock().unwrap()[&old].clone();
        let mut followers = (1..=3).filter(|&id| id != old);
        let (unreachable, live) = (followers.next().unwrap(), followers.next().unwrap());
        *wires.cut.lock().unwrap() = Some(unreachable);
        // Asked first, as the caller was told it did not take over before
        // the cut (it is still recently active in the leader's eyes).
        let first = block_on(node.hand_off(Some(live))).unwrap();
        assert_eq!(first, HandOff::NotTaken { asked: unreachable });
        let second = block_on(node.hand_off(Some(unreachable))).unwrap();
        assert!(
            matches!(second, HandOff::Done { to, .. } if to == live),
            "the other follower should lead: {second:?}"
        );
    }

    #[test]
    fn a_lone_voter_has_nobody_to_hand_off_to() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let node = start_alone(dir.path(), tx);
        while node.status().role() != Role::Leader {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            block_on(node.hand_off(None)).unwrap(),
            HandOff::NoOtherVoter
        );
    }

    #[test]
    fn read_index_answers_with_the_commit_index() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let node = start_alone(dir.path(), tx);
        node.propose(b"x".to_vec(), 1).unwrap();
        let (index, _, _) = collect(&mut rx, 1)[0].clone();
        let (answer_tx, answer_rx) = std::sync::mpsc::channel();
        node.read_index(Box::new(move |index| {
            let _ = answer_tx.send(index);
        }))
        .unwrap();
        let answer = answer_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("read index answered");
        assert!(
            answer.is_some_and(|read| read >= index),
            "{answer:?} >= {index}"
        );
    }
}
