//! Paddock as an observer of a running Apache ZooKeeper ensemble, through
//! ZooKeeper's learner protocol on the leader's quorum port (`Learner`,
//! `Observer`, and the leader's `LearnerHandler`):
//!
//! 1. OBSERVERINFO (our server id) → LEADERINFO (the epoch) → ACKEPOCH
//!    (the zxid we are at);
//! 2. the leader syncs us: SNAP (its whole tree, then "BenWasHere"), DIFF
//!    (the committed txns we lack, as PROPOSAL/COMMIT pairs) or TRUNC
//!    (roll back, which a mirror cannot: it starts over with a SNAP);
//! 3. NEWLEADER → ACK, UPTODATE → ACK;
//! 4. from then on every committed txn arrives as an INFORM, and each PING
//!    is answered (with an empty session table: no client is ours yet).
//!
//! The copy keeps ZooKeeper's zxids. Right after a SNAP it is a
//! [`ZkTree`], on which txns are replayed with ZooKeeper's tolerant
//! semantics: the leader's snapshot is fuzzy (taken while it applied
//! txns), so a txn may find its effect already there. Once the leader
//! says it is up to date, the copy becomes Paddock's own `DataTree` and
//! each txn is applied as the tree's own (`tree_txn`), its outcome checked
//! against the leader's: a copy that came out differently starts over
//! from the leader's snapshot.
//!
//! Only the leader listens on the quorum port, so the leader is found by
//! trying each server's in turn; when it goes, the next one elected is
//! found the same way and syncs us by DIFF from where we are.

use std::collections::VecDeque;
use std::io::{self, BufReader};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::java_io::{JavaIn, ReadError};
pub use crate::zk_mirror::Mirror;
use crate::zk_quorum::{fields, kind, QuorumPacket};
use crate::zk_tree::ZkTree;
use crate::zk_txn::LoggedTxn;

/// `Learner`'s and `LearnerHandler`'s protocol version (Zab 1.0).
const PROTOCOL_VERSION: i32 = 0x10000;
/// What a leader writes after the snapshot it sends.
const SNAP_SIGNATURE: &str = "BenWasHere";
/// The pause between two rounds of tries to find the leader
/// (`zookeeper.leaderConnectDelayDuringRetryMs`).
const RETRY_PAUSE: Duration = Duration::from_millis(100);
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// How to reach the ensemble and how long to wait, as its zoo.cfg says.
#[derive(Debug, Clone)]
pub struct LearnerConfig {
    /// Every server's quorum address (`host:port`, the first port of its
    /// `server.N` line).
    pub servers: Vec<String>,
    /// Our id in the ensemble: one no server of it has.
    pub server_id: i64,
    /// tickTime × initLimit: to connect and be synced.
    pub init_limit: Duration,
    /// tickTime × syncLimit: the longest silence from a live leader.
    pub sync_limit: Duration,
    /// How long no server may lead before the ensemble is taken as
    /// stopped.
    pub give_up_after: Duration,
}

/// What following reports as it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Synced by the leader at `server`: the mirror is at `zxid`.
    Synced {
        server: String,
        how: &'static str,
        zxid: i64,
    },
    /// Txns applied so far (told at most once a ping, when there are new).
    Progress { zxid: i64, txns: u64 },
    /// The connection to the leader ended; a leader is looked for again.
    Lost { server: String, reason: String },
}

/// Why following ended.
#[derive(Debug)]
pub enum Ended {
    /// The caller asked it to.
    Stopped,
    /// No server led for `give_up_after`: the ensemble was stopped (or
    /// cannot be reached). The last failure says why.
    EnsembleGone { last: String },
}

/// A failure that trying again would repeat: the mirror stops rather
/// than go on from a tree it could not keep exact.
#[derive(Debug, thiserror::Error)]
pub enum LearnerError {
    #[error("the leader sent txn {zxid:#x} in a form this build cannot read ({source}); the mirror stops here rather than diverge from ZooKeeper")]
    Txn {
        zxid: i64,
        source: jute::DecodeError,
    },
    #[error("the snapshot the leader sent cannot be read: {0}")]
    Snapshot(ReadError),
    #[error("the tree the leader sent is not whole: {0}")]
    Tree(tree::SnapshotError),
    #[error("the tree the leader sent cannot be saved as a snapshot: {0}")]
    Save(String),
    #[error(
        "the ensemble was taken over while this server was not following it (the leader's tree holds {}): it cannot join the Paddock ensemble from ZooKeeper; start it with an empty data directory and no observeZooKeeper, and add it with reconfig",
        crate::zk_observer::TAKEOVER_PATH
    )]
    TakenOverMeanwhile,
    #[error("no address to reach for the ZooKeeper server {server:?}: {source}")]
    Address { server: String, source: io::Error },
}

/// What a learner keeps in step with the leader: `paddock mirror`'s own
/// tree, or a server's (through its apply loop).
pub(crate) trait Replica {
    /// The last txn applied; 0 before the first sync.
    fn zxid(&self) -> i64;
    /// A SNAP: the leader's tree at `zxid`, fuzzy.
    fn load(&mut self, tree: ZkTree, zxid: i64);
    /// UPTODATE: the copy holds everything server `leader` committed in
    /// `epoch` so far.
    fn up_to_date(&mut self, leader: u64, epoch: i64) -> Result<(), LearnerError>;
    /// One committed txn, past `zxid()`, in zxid order. `Err` says how it
    /// came out other than on the leader: the copy starts over.
    fn apply(&mut self, txn: LoggedTxn) -> Result<(), String>;
    /// Forgets the copy: the next sync is a SNAP.
    fn start_over(&mut self);
    /// Txns applied so far.
    fn txns(&self) -> u64;
    /// A PING's answer: the sessions this server's clients kept alive
    /// since the last, `{long id; int timeoutMs}` each.
    fn sessions_touched(&mut self) -> Vec<u8> {
        Vec::new()
    }
    /// Requests may go to the leader through `link` (synced), or no more
    /// (`None`: the connection ended).
    fn linked(&mut self, _link: Option<TcpStream>) {}
    /// A packet of the steady state other than PING and INFORM.
    fn other(&mut self, packet: QuorumPacket) {
        tracing::warn!("ignored {} from the leader", kind::name(packet.kind));
    }
}

/// The epochs a learner has seen (Java's `acceptedEpoch` and
/// `currentEpoch`), kept across its connections.
#[derive(Debug, Default)]
struct Epochs {
    /// The newest a LEADERINFO offered.
    accepted: i64,
    /// That of the last NEWLEADER acknowledged.
    current: i64,
}

/// How one connection to a leader ended.
enum SessionEnd {
    Stopped,
    Lost(String),
    Failed(LearnerError),
}

impl From<ReadError> for SessionEnd {
    fn from(e: ReadError) -> Self {
        SessionEnd::Lost(e.to_string())
    }
}

impl From<io::Error> for SessionEnd {
    fn from(e: io::Error) -> Self {
        SessionEnd::Lost(e.to_string())
    }
}

impl From<LearnerError> for SessionEnd {
    fn from(e: LearnerError) -> Self {
        SessionEnd::Failed(e)
    }
}

/// Follows the ensemble's leader, whichever it is, until `stop` is set
/// or no server leads for `config.give_up_after`.
pub fn follow(
    config: &LearnerConfig,
    mirror: &mut Mirror,
    stop: &AtomicBool,
    report: &mut dyn FnMut(Event),
) -> Result<Ended, LearnerError> {
    follow_with(config, mirror, stop, report)
}

/// [`follow`], for any replica.
pub(crate) fn follow_with(
    config: &LearnerConfig,
    replica: &mut dyn Replica,
    stop: &AtomicBool,
    report: &mut dyn FnMut(Event),
) -> Result<Ended, LearnerError> {
    let mut epochs = Epochs::default();
    let mut reported_txns = replica.txns();
    let mut last = String::from("no server tried yet");
    let mut since = Instant::now();
    while since.elapsed() < config.give_up_after {
        for server in &config.servers {
            if stop.load(Ordering::Relaxed) {
                return Ok(Ended::Stopped);
            }
            let stream = match connect(server, config.init_limit)? {
                Ok(stream) => stream,
                Err(e) => {
                    last = format!("{server}: {e}");
                    continue;
                }
            };
            let mut learner = Session {
                config,
                server,
                stream,
                replica: &mut *replica,
                epochs: &mut epochs,
                reported_txns: &mut reported_txns,
                stop,
                report: &mut *report,
            };
            let end = learner.run();
            replica.linked(None);
            match end {
                SessionEnd::Stopped => return Ok(Ended::Stopped),
                SessionEnd::Failed(e) => return Err(e),
                SessionEnd::Lost(reason) => {
                    last = format!("{server}: {reason}");
                    report(Event::Lost {
                        server: server.clone(),
                        reason,
                    });
                    since = Instant::now();
                }
            }
        }
        std::thread::sleep(RETRY_PAUSE);
    }
    Ok(Ended::EnsembleGone { last })
}

/// Connects to one server's quorum port: the outer error is a server
/// that names no address, the inner one a server that does not answer
/// (only the leader listens).
fn connect(server: &str, timeout: Duration) -> Result<io::Result<TcpStream>, LearnerError> {
    let address = server
        .to_socket_addrs()
        .and_then(|mut all| {
            all.next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))
        })
        .map_err(|source| LearnerError::Address {
            server: server.to_owned(),
            source,
        })?;
    Ok(
        TcpStream::connect_timeout(&address, timeout).and_then(|stream| {
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(timeout))?;
            Ok(stream)
        }),
    )
}

/// One connection to a leader, from registration to its end.
struct Session<'a> {
    config: &'a LearnerConfig,
    server: &'a str,
    stream: TcpStream,
    replica: &'a mut dyn Replica,
    epochs: &'a mut Epochs,
    /// The txn count last reported as progress.
    reported_txns: &'a mut u64,
    stop: &'a AtomicBool,
    report: &'a mut dyn FnMut(Event),
}

impl Session<'_> {
    fn run(&mut self) -> SessionEnd {
        let reader = match self.stream.try_clone() {
            Ok(reader) => reader,
            Err(e) => return e.into(),
        };
        let mut input = JavaIn::new(BufReader::with_capacity(READ_BUFFER_BYTES, reader));
        let result = self
            .register(&mut input)
            .and_then(|epoch| self.sync(&mut input, epoch))
            .and_then(|()| self.observe(&mut input));
        match result {
            Ok(()) => SessionEnd::Stopped,
            Err(end) => end,
        }
    }

    fn send(&self, packet: QuorumPacket) -> io::Result<()> {
        packet.write(&mut &self.stream)
    }

    fn read(&self, input: &mut JavaIn<BufReader<TcpStream>>) -> Result<QuorumPacket, SessionEnd> {
        QuorumPacket::read(input).map_err(|e| {
            let timed_out = matches!(&e, ReadError::Io { source, .. }
                if matches!(source.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut));
            if timed_out {
                SessionEnd::Lost("the leader sent nothing for its initLimit or syncLimit".into())
            } else if e.is_end_of_input() {
                SessionEnd::Lost("the leader closed the connection".into())
            } else {
                e.into()
            }
        })
    }

    /// OBSERVERINFO, LEADERINFO, ACKEPOCH (`Learner.registerWithLeader`).
    /// Returns the leader's epoch.
    fn register(&mut self, input: &mut JavaIn<BufReader<TcpStream>>) -> Result<i64, SessionEnd> {
        let info = fields(|out| {
            out.i64(self.config.server_id)?;
            out.i32(PROTOCOL_VERSION)?;
            // Our quorum config's version: none, so never newer than the
            // leader's (which would make it drop us).
            out.i64(0)
        });
        let accepted = self.epochs.accepted << 32;
        self.send(QuorumPacket::new(kind::OBSERVER_INFO, accepted, Some(info)))?;
        let leader_info = self.expect(input, kind::LEADER_INFO)?;
        let epoch = leader_info.zxid >> 32;
        let acked_epoch = match epoch.cmp(&self.epochs.accepted) {
            std::cmp::Ordering::Greater => {
                self.epochs.accepted = epoch;
                self.epochs.current
            }
            // Acknowledged before: -1 says so.
            std::cmp::Ordering::Equal => -1,
            std::cmp::Ordering::Less => {
                return Err(SessionEnd::Lost(format!(
                    "its epoch {epoch} is older than the {} already followed",
                    self.epochs.accepted
                )))
            }
        };
        let data = fields(|out| out.i32(acked_epoch as i32));
        self.send(QuorumPacket::new(
            kind::ACK_EPOCH,
            self.replica.zxid(),
            Some(data),
        ))?;
        Ok(epoch)
    }

    fn expect(
        &self,
        input: &mut JavaIn<BufReader<TcpStream>>,
        expected: i32,
    ) -> Result<QuorumPacket, SessionEnd> {
        let packet = self.read(input)?;
        if packet.kind != expected {
            return Err(SessionEnd::Lost(format!(
                "expected {} from the leader, got {}",
                kind::name(expected),
                kind::name(packet.kind)
            )));
        }
        Ok(packet)
    }

    /// From the sync packet to UPTODATE (`Learner.syncWithLeader`).
    fn sync(
        &mut self,
        input: &mut JavaIn<BufReader<TcpStream>>,
        epoch: i64,
    ) -> Result<(), SessionEnd> {
        let how = self.start_sync(input)?;
        let mut proposals = VecDeque::new();
        // Told by NEWLEADER's config, when it names the server we reached.
        let mut leader = 0;
        loop {
            let packet = self.read(input)?;
            match packet.kind {
                kind::PROPOSAL => proposals.push_back(packet),
                kind::COMMIT | kind::COMMIT_AND_ACTIVATE => {
                    if proposals.front().is_some_and(|p| p.zxid == packet.zxid) {
                        let proposal = proposals.pop_front().expect("checked above");
                        self.apply(proposal.data.unwrap_or_default(), proposal.zxid)?;
                    }
                }
                kind::INFORM | kind::INFORM_AND_ACTIVATE => self.inform(packet)?,
                kind::NEW_LEADER => {
                    self.epochs.current = packet.zxid >> 32;
                    leader = leader_id(packet.data.as_deref(), self.server).unwrap_or(leader);
                    self.stream.set_read_timeout(Some(self.config.sync_limit))?;
                    self.send(QuorumPacket::new(kind::ACK, packet.zxid, None))?;
                }
                kind::UP_TO_DATE => {
                    self.replica.up_to_date(leader, epoch)?;
                    break;
                }
                // Java learners ignore pings until synced.
                kind::PING => {}
                other => tracing::warn!("ignored {} while syncing", kind::name(other)),
            }
        }
        self.send(QuorumPacket::new(kind::ACK, epoch << 32, None))?;
        self.replica.linked(Some(self.stream.try_clone()?));
        (self.report)(Event::Synced {
            server: self.server.to_owned(),
            how,
            zxid: self.replica.zxid(),
        });
        Ok(())
    }

    /// Reads how the leader syncs us, and for a SNAP the snapshot.
    fn start_sync(
        &mut self,
        input: &mut JavaIn<BufReader<TcpStream>>,
    ) -> Result<&'static str, SessionEnd> {
        let packet = self.read(input)?;
        match packet.kind {
            kind::DIFF => Ok("DIFF"),
            kind::SNAP => {
                let tree = crate::zk_snapshot::read_tree(input).map_err(|e| {
                    if e.is_end_of_input() {
                        SessionEnd::Lost(e.to_string())
                    } else {
                        LearnerError::Snapshot(e).into()
                    }
                })?;
                let at = input.offset();
                let signature = input.string("snapshot signature")?;
                if signature != SNAP_SIGNATURE {
                    let reason = format!("ends in {signature:?}, not {SNAP_SIGNATURE:?}");
                    return Err(
                        LearnerError::Snapshot(input.invalid("signature", at, reason)).into(),
                    );
                }
                self.replica.load(tree, packet.zxid);
                Ok("SNAP")
            }
            kind::TRUNC if packet.zxid >= self.replica.zxid() => Ok("TRUNC"),
            kind::TRUNC => {
                // A copy cannot be rolled back: the next sync sends all.
                self.replica.start_over();
                Err(SessionEnd::Lost(format!(
                    "the leader rolls history back to {:#x}; starting again from its snapshot",
                    packet.zxid
                )))
            }
            other => Err(SessionEnd::Lost(format!(
                "expected DIFF, SNAP or TRUNC from the leader, got {}",
                kind::name(other)
            ))),
        }
    }

    /// An INFORM's data is the txn; an INFORMANDACTIVATE's (a reconfig)
    /// puts the designated leader's id before it.
    fn inform(&mut self, packet: QuorumPacket) -> Result<(), SessionEnd> {
        let skip = if packet.kind == kind::INFORM_AND_ACTIVATE {
            8
        } else {
            0
        };
        let mut data = packet.data.unwrap_or_default();
        if data.len() < skip {
            return Err(SessionEnd::Lost(format!(
                "an {} of {} bytes",
                kind::name(packet.kind),
                data.len()
            )));
        }
        data.drain(..skip);
        self.apply(data, packet.zxid)
    }

    /// Steady state (`Observer.processPacket`), until asked to stop.
    fn observe(&mut self, input: &mut JavaIn<BufReader<TcpStream>>) -> Result<(), SessionEnd> {
        while !self.stop.load(Ordering::Relaxed) {
            let packet = self.read(input)?;
            match packet.kind {
                kind::PING => self.answer_ping(packet)?,
                kind::INFORM | kind::INFORM_AND_ACTIVATE => self.inform(packet)?,
                _ => self.replica.other(packet),
            }
        }
        Ok(())
    }

    /// A ping's answer lists the sessions our clients kept alive. The list
    /// must be there, if empty: the leader reads it unchecked.
    fn answer_ping(&mut self, ping: QuorumPacket) -> Result<(), SessionEnd> {
        let txns = self.replica.txns();
        if txns != *self.reported_txns {
            *self.reported_txns = txns;
            (self.report)(Event::Progress {
                zxid: self.replica.zxid(),
                txns,
            });
        }
        let touched = self.replica.sessions_touched();
        let mut answer = QuorumPacket::new(kind::PING, ping.zxid, Some(touched));
        answer.auth = ping.auth;
        Ok(self.send(answer)?)
    }

    /// Applies one committed txn. After a SNAP, txns up to its zxid are
    /// already in the tree (the leader counts a txn only once applied).
    fn apply(&mut self, bytes: Vec<u8>, zxid: i64) -> Result<(), SessionEnd> {
        let txn = LoggedTxn::decode(Bytes::from(bytes))
            .map_err(|source| LearnerError::Txn { zxid, source })?;
        if txn.header.zxid <= self.replica.zxid() {
            return Ok(());
        }
        self.replica.apply(txn).map_err(|why| {
            self.replica.start_over();
            SessionEnd::Lost(format!(
                "txn {zxid:#x} {why}; starting again from the leader's snapshot"
            ))
        })
    }
}

/// The id of `server` (`host:quorumPort`) in a NEWLEADER's config, whose
/// lines read `server.N=host:quorumPort:electionPort...`.
fn leader_id(config: Option<&[u8]>, server: &str) -> Option<u64> {
    let text = std::str::from_utf8(config?).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        let id = key.strip_prefix("server.")?.parse().ok()?;
        let addresses = value.split(';').next()?;
        addresses
            .split('|')
            .any(|address| address.starts_with(&format!("{server}:")))
            .then_some(id)
    })
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::java_io::JavaOut;

    const EPOCH: i64 = 3;
    const SNAP_ZXID: i64 = (EPOCH << 32) | 5;
    const SESSION: i64 = 0x55;

    /// The leader's side of the script: what it sends, and what it must
    /// read back, in order.
    enum Step {
        Send(QuorumPacket),
        SendBytes(Vec<u8>),
        Expect(QuorumPacket),
    }

    fn stat(out: &mut JavaOut<Vec<u8>>, zxid: i64) -> io::Result<()> {
        for field in [zxid, zxid, 1_000, 1_000] {
            out.i64(field)?;
        }
        for version in [0, 0, 0] {
            out.i32(version)?;
        }
        out.i64(0)?;
        out.i64(zxid)
    }

    /// `serializeSnapshot` of a tree holding `/a`, one session, then the
    /// signature.
    fn snapshot_stream() -> Vec<u8> {
        fields(|out| {
            out.i32(1)?;
            out.i64(SESSION)?;
            out.i32(30_000)?;
            out.i32(0)?;
            for (path, data) in [("", None), ("/a", Some(&b"x"[..]))] {
                out.string(path)?;
                out.buffer(data)?;
                out.i64(-1)?;
                stat(out, 2)?;
            }
            out.string("/")?;
            out.string(SNAP_SIGNATURE)
        })
    }

    fn txn(zxid: i64, op: jute::OpCode, record: &[u8]) -> Vec<u8> {
        let mut bytes = fields(|out| {
            out.i64(SESSION)?;
            out.i32(1)?;
            out.i64(zxid)?;
            out.i64(2_000)?;
            out.i32(op.code())
        });
        bytes.extend_from_slice(record);
        bytes
    }

    fn set_data(zxid: i64, path: &str, data: &[u8], version: i32) -> Vec<u8> {
        let record = fields(|out| {
            out.string(path)?;
            out.buffer(Some(data))?;
            out.i32(version)
        });
        txn(zxid, jute::OpCode::SetData, &record)
    }

    fn packet(kind: i32, zxid: i64, data: Option<Vec<u8>>) -> QuorumPacket {
        QuorumPacket::new(kind, zxid, data)
    }

    /// Runs `script` as a leader on a loopback port and follows it.
    fn follow_script(
        mirror: &mut Mirror,
        script: Vec<Step>,
    ) -> (Result<Ended, LearnerError>, Vec<Event>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap().to_string();
        let leader = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut input = JavaIn::new(stream.try_clone().unwrap());
            for step in script {
                match step {
                    Step::Send(packet) => packet.write(&mut &stream).unwrap(),
                    Step::SendBytes(bytes) => io::Write::write_all(&mut &stream, &bytes).unwrap(),
                    Step::Expect(expected) => {
                        assert_eq!(QuorumPacket::read(&mut input).unwrap(), expected)
                    }
                }
            }
        });
        let config = LearnerConfig {
            servers: vec![server],
            server_id: 100,
            init_limit: Duration::from_secs(5),
            sync_limit: Duration::from_secs(5),
            give_up_after: Duration::from_millis(300),
        };
        let mut events = Vec::new();
        let ended = follow(&config, mirror, &AtomicBool::new(false), &mut |e| {
            events.push(e)
        });
        leader.join().expect("the leader's script failed");
        (ended, events)
    }

    fn registration() -> Vec<Step> {
        let info = fields(|out| {
            out.i64(100)?;
            out.i32(PROTOCOL_VERSION)?;
            out.i64(0)
        });
        vec![
            Step::Expect(packet(kind::OBSERVER_INFO, 0, Some(info))),
            Step::Send(packet(
                kind::LEADER_INFO,
                EPOCH << 32,
                Some(vec![0, 1, 0, 0]),
            )),
            Step::Expect(packet(kind::ACK_EPOCH, 0, Some(vec![0, 0, 0, 0]))),
        ]
    }

    #[test]
    fn an_observer_is_synced_by_snap_then_follows_informs_and_answers_pings() {
        let mut script = registration();
        script.extend([
            Step::Send(packet(kind::SNAP, SNAP_ZXID, None)),
            Step::SendBytes(snapshot_stream()),
            // Fuzzy: already in the snapshot, so not applied again.
            Step::Send(packet(
                kind::INFORM,
                SNAP_ZXID,
                Some(set_data(SNAP_ZXID, "/a", b"old", 9)),
            )),
            Step::Send(packet(
                kind::PROPOSAL,
                SNAP_ZXID + 1,
                Some(set_data(SNAP_ZXID + 1, "/a", b"y", 1)),
            )),
            Step::Send(packet(kind::COMMIT, SNAP_ZXID + 1, None)),
            Step::Send(packet(
                kind::NEW_LEADER,
                EPOCH << 32,
                Some(b"version=0".to_vec()),
            )),
            Step::Expect(packet(kind::ACK, EPOCH << 32, None)),
            Step::Send(packet(kind::UP_TO_DATE, -1, None)),
            Step::Expect(packet(kind::ACK, EPOCH << 32, None)),
            Step::Send(packet(
                kind::INFORM,
                SNAP_ZXID + 2,
                Some(set_data(SNAP_ZXID + 2, "/a", b"z", 2)),
            )),
            Step::Send(packet(kind::PING, 77, None)),
            // The session table, empty but not null.
            Step::Expect(packet(kind::PING, 77, Some(Vec::new()))),
        ]);
        let mut mirror = Mirror::default();
        let (ended, events) = follow_script(&mut mirror, script);
        assert!(matches!(ended, Ok(Ended::EnsembleGone { .. })), "{ended:?}");
        assert!(
            matches!(&events[0], Event::Synced { how: "SNAP", zxid, .. } if *zxid == SNAP_ZXID + 1)
        );
        assert_eq!(mirror.zxid(), SNAP_ZXID + 2);
        assert_eq!(
            mirror.txns(),
            2,
            "the txn the snapshot holds is not applied again"
        );
        let (tree, orphaned) = mirror.into_data_tree().unwrap();
        let (data, stat) = tree.get_data("/a", &[]).unwrap();
        assert_eq!(data.as_deref(), Some(&b"z"[..]));
        assert_eq!((stat.version, stat.mzxid), (2, SNAP_ZXID + 2));
        assert_eq!((tree.sessions().count(), orphaned), (1, 0));
    }

    #[test]
    fn a_txn_that_comes_out_differently_here_starts_the_copy_over() {
        let mut script = registration();
        script.extend([
            Step::Send(packet(kind::SNAP, SNAP_ZXID, None)),
            Step::SendBytes(snapshot_stream()),
            Step::Send(packet(kind::NEW_LEADER, EPOCH << 32, None)),
            Step::Expect(packet(kind::ACK, EPOCH << 32, None)),
            Step::Send(packet(kind::UP_TO_DATE, -1, None)),
            Step::Expect(packet(kind::ACK, EPOCH << 32, None)),
            // /a is at version 0 here: a leader that made it 5 held
            // another tree.
            Step::Send(packet(
                kind::INFORM,
                SNAP_ZXID + 1,
                Some(set_data(SNAP_ZXID + 1, "/a", b"y", 5)),
            )),
        ]);
        let mut mirror = Mirror::default();
        let (_, events) = follow_script(&mut mirror, script);
        assert!(
            events.iter().any(|e| matches!(e, Event::Lost { reason, .. }
                if reason.contains("starting again from the leader's snapshot"))),
            "{events:?}"
        );
        assert_eq!(mirror.zxid(), 0);
        assert_eq!(mirror.txns(), 0);
    }

    #[test]
    fn a_truncation_below_the_mirror_starts_it_over_and_a_bad_txn_stops_it() {
        let mut mirror = Mirror::default();
        mirror.load(ZkTree::default(), SNAP_ZXID);
        let mut script = registration();
        if let Step::Expect(ack_epoch) = &mut script[2] {
            ack_epoch.zxid = SNAP_ZXID;
        }
        script.push(Step::Send(packet(kind::TRUNC, SNAP_ZXID - 1, None)));
        let (ended, _) = follow_script(&mut mirror, script);
        assert!(matches!(ended, Ok(Ended::EnsembleGone { .. })));
        assert_eq!(
            mirror.zxid(),
            0,
            "a mirror that cannot roll back starts over"
        );

        let mut script = registration();
        script.extend([
            Step::Send(packet(kind::DIFF, 0, None)),
            Step::Send(packet(kind::INFORM, 1, Some(vec![0; 3]))),
        ]);
        let err = follow_script(&mut mirror, script).0.unwrap_err();
        assert!(err.to_string().contains("cannot read"), "{err}");
    }
}
