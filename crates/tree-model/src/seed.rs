//! Steps as a test generator or a fuzzer produces them: small numbers that
//! become a [`Command`] only against the current model, so that paths name
//! existing nodes (sequential ones included) and versions are right or off
//! by one often enough to matter. Every number is reduced modulo the size of
//! its choice, so any value is a valid seed, and the tables favour choices
//! that succeed: a run of failed creates would leave nothing to test.

use bytes::Bytes;
use jute::{perms, Acl, CreateMode, Id};
use tree::TxnOp;

use crate::model::{Model, SPECIAL_PATHS, TTL_MAX_MS};
use crate::op::{open_session, Command};

/// The sessions steps run as. Both are open when a run starts.
pub const SESSIONS: [i64; 2] = [0x0100_0000_0000_0001, 0x0100_0000_0000_0002];

/// Bounds that keep one step cheap whatever the seed's vectors hold.
const MAX_MULTI_OPS: usize = 8;
const MAX_COMPONENTS: usize = 4;
const MAX_DATA: usize = 8;

/// One step of a run. A write's `session` picks one of the open sessions
/// 3 times in 4 (if one is open), else any of [`SESSIONS`]; opening and
/// closing pick any of [`SESSIONS`].
#[derive(Debug, Clone)]
pub enum Step {
    /// One op as a Txn of its own.
    Write {
        session: u8,
        op: OpSeed,
    },
    /// A multi; each op is chosen against the model as the ops before it
    /// would leave it, as a client writing the multi would.
    Multi {
        session: u8,
        ops: Vec<OpSeed>,
    },
    /// Every read, compared with the model.
    Read {
        path: PathSeed,
    },
    OpenSession {
        session: u8,
        timeout_ms: u16,
    },
    CloseSession {
        session: u8,
    },
    /// The clock moves on by `ms` modulo 2 s: enough to expire the short
    /// TTLs, while the 1 ms each Txn takes finds their exact boundaries.
    Sleep {
        ms: u16,
    },
}

/// One op.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub struct OpSeed {
    /// Out of 32: create 11, delete 6, setData 6, check 4, setACL 2, the
    /// reaper's delete 2, an empty multi 1 (a nested one inside a multi).
    /// Inside a multi the last three, which ZooKeeper refuses there, come
    /// 4 times in 256 only, so that most multis get to run.
    pub kind: u8,
    pub path: PathSeed,
    /// -1, the node's version, one more, one less.
    pub version: u8,
    /// `None` is null data.
    pub data: Option<Vec<u8>>,
    /// A `CreateMode` by flag value.
    pub mode: u8,
    /// For TTL modes mostly a valid TTL (1 ms to the largest), 3 in 16 an
    /// invalid one; for the others mostly -1, 2 in 16 a TTL they refuse.
    pub ttl: u8,
    /// Out of 16: 12 `world:anyone` with all permissions; read only;
    /// create and delete only; an empty list; a duplicated entry.
    pub acl: u8,
}

/// A path.
#[derive(Debug, Clone)]
pub enum PathSeed {
    /// A node the run created, by index in path order; before there is
    /// one, a child of the root named by a [`component`].
    Existing(u16),
    /// A child, named by a [`component`], of any node.
    Child(u16, u8),
    /// Components joined by `/`, with or without the leading one.
    Fresh { absolute: bool, components: Vec<u8> },
    /// One of the nodes every tree starts with: `/` and `/zookeeper/...`.
    Special(u8),
}

/// Mostly three names, so that paths collide; then the components ZooKeeper
/// refuses (empty, `.`, `..`, NUL, a control character), which a sequential
/// suffix may make valid again, and `zookeeper`.
pub fn component(seed: u8) -> &'static str {
    match seed % 64 {
        0..=20 => "a",
        21..=38 => "b",
        39..=56 => "c",
        57 => "",
        58 => ".",
        59 => "..",
        60 => "\0",
        61 => "\u{1}",
        _ => "zookeeper",
    }
}

fn session(seed: u8) -> i64 {
    SESSIONS[usize::from(seed) % SESSIONS.len()]
}

fn acl(seed: u8) -> Vec<Acl> {
    let anyone = |perms| Acl {
        perms,
        id: Id::anyone(),
    };
    match seed % 16 {
        0..=11 => vec![anyone(perms::ALL)],
        12 => vec![anyone(perms::READ)],
        13 => vec![anyone(perms::CREATE | perms::DELETE)],
        14 => vec![],
        _ => vec![anyone(perms::ALL), anyone(perms::ALL)],
    }
}

fn ttl(seed: u8, mode: CreateMode) -> i64 {
    if mode.is_ttl() {
        match seed % 16 {
            0..=2 => 1,
            3..=5 => 20,
            6..=8 => 100,
            9..=10 => 1000,
            11 => 60_000,
            12 => TTL_MAX_MS,
            13 => 0,
            14 => -1,
            _ => TTL_MAX_MS + 1,
        }
    } else {
        match seed % 16 {
            14 => 0,
            15 => 100,
            _ => -1,
        }
    }
}

fn pick_version(seed: u8, current: Option<i32>) -> i32 {
    let current = current.unwrap_or(0);
    match seed % 4 {
        0 => -1,
        1 => current,
        2 => current + 1,
        _ => current - 1,
    }
}

impl PathSeed {
    fn realize(&self, model: &Model) -> String {
        match self {
            PathSeed::Existing(i) => {
                let created: Vec<&str> = model
                    .paths()
                    .into_iter()
                    .filter(|p| !SPECIAL_PATHS.contains(p))
                    .collect();
                if created.is_empty() {
                    format!("/{}", component(*i as u8))
                } else {
                    created[usize::from(*i) % created.len()].to_owned()
                }
            }
            PathSeed::Child(i, c) => {
                let paths = model.paths();
                let parent = paths[usize::from(*i) % paths.len()];
                let parent = if parent == "/" { "" } else { parent };
                format!("{parent}/{}", component(*c))
            }
            PathSeed::Fresh {
                absolute,
                components,
            } => {
                let joined = components
                    .iter()
                    .take(MAX_COMPONENTS)
                    .map(|c| component(*c))
                    .collect::<Vec<_>>()
                    .join("/");
                if *absolute {
                    format!("/{joined}")
                } else {
                    joined
                }
            }
            PathSeed::Special(i) => SPECIAL_PATHS[usize::from(*i) % SPECIAL_PATHS.len()].to_owned(),
        }
    }
}

impl OpSeed {
    fn realize(&self, model: &Model, in_multi: bool) -> TxnOp {
        let kind = match (in_multi, self.kind) {
            (true, k @ 0..=251) => k % 27,
            (true, k) => 27 + k % 5,
            (false, k) => k % 33,
        };
        let path = self.path.realize(model);
        let data: Option<Bytes> = self
            .data
            .as_ref()
            .map(|d| d.iter().take(MAX_DATA).copied().collect());
        let version = pick_version(self.version, model.version(&path));
        match kind {
            0..=10 => {
                let mode = CreateMode::from_flags(i32::from(self.mode % 7)).expect("flags 0..=6");
                TxnOp::Create {
                    path,
                    data,
                    acl: acl(self.acl),
                    mode,
                    ttl_ms: ttl(self.ttl, mode),
                }
            }
            11..=16 => TxnOp::Delete { path, version },
            17..=22 => TxnOp::SetData {
                path,
                data,
                version,
            },
            23..=26 => TxnOp::Check { path, version },
            27..=28 => TxnOp::SetAcl {
                version: pick_version(self.version, model.aversion(&path)),
                path,
                acl: acl(self.acl),
            },
            29..=30 => TxnOp::Reap { path },
            32 => TxnOp::Reconfig {
                members: format!(
                    "server.1=127.0.0.1:{}:3888:participant\n",
                    2888 + u16::from(self.mode)
                ),
            },
            _ => TxnOp::Multi(Vec::new()),
        }
    }
}

impl Model {
    /// Mostly a live session: a run where most writes fail with
    /// `SessionExpired` tests little else.
    fn writer(&self, seed: u8) -> i64 {
        let open = self.sessions();
        if seed % 4 == 3 || open.is_empty() {
            session(seed / 4)
        } else {
            open[usize::from(seed / 4) % open.len()].0
        }
    }

    /// The command `step` stands for in the current state. `zxid` and
    /// `time_ms` are those the command's Txn will get.
    pub(crate) fn realize(&self, step: &Step, zxid: i64, time_ms: i64) -> Command {
        match step {
            Step::Write { session, op } => Command::Write {
                session: self.writer(*session),
                op: op.realize(self, false),
            },
            Step::Multi { session, ops } => {
                let session = self.writer(*session);
                let mut scratch = self.clone();
                let ops = ops
                    .iter()
                    .take(MAX_MULTI_OPS)
                    .map(|seed| {
                        let op = seed.realize(&scratch, true);
                        scratch.apply(zxid, time_ms, session, &op);
                        op
                    })
                    .collect();
                Command::Write {
                    session,
                    op: TxnOp::Multi(ops),
                }
            }
            Step::Read { path } => Command::Read {
                path: path.realize(self),
            },
            Step::OpenSession {
                session: s,
                timeout_ms,
            } => Command::Write {
                session: session(*s),
                op: open_session(i32::from(*timeout_ms)),
            },
            Step::CloseSession { session: s } => Command::Write {
                session: session(*s),
                op: TxnOp::CloseSession,
            },
            Step::Sleep { ms } => Command::Sleep { ms: ms % 2000 },
        }
    }
}
