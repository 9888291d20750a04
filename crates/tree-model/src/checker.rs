//! Runs each step on the tree and on the model and compares everything the
//! tree shows: the op's outcome and watch triggers, then the whole state.

use std::fmt::{self, Debug, Write as _};
use std::io::Cursor;

use jute::{perms, Id};
use tree::{DataTree, Txn};

use crate::model::Model;
use crate::op::{open_session, Command};
use crate::seed::{Step, SESSIONS};

/// The time stamped on the first Txn.
const T0: i64 = 1_700_000_000_000;

/// A tree and its model, kept in step.
pub struct Checker {
    tree: DataTree,
    model: Model,
    /// The zxid of the last Txn.
    zxid: i64,
    /// The clock: each Txn moves it 1 ms, a [`Command::Sleep`] more.
    time_ms: i64,
    /// Commands so far, to show with a disagreement.
    history: Vec<Command>,
}

impl Default for Checker {
    fn default() -> Self {
        Self::new()
    }
}

/// `what` is only formatted on a difference: most comparisons are equal.
fn same<T: PartialEq + Debug>(what: fmt::Arguments, tree: T, model: T) -> Result<(), String> {
    if tree == model {
        Ok(())
    } else {
        Err(format!("{what}:\n  tree:  {tree:?}\n  model: {model:?}"))
    }
}

impl Checker {
    /// A fresh tree with every session of [`SESSIONS`] open.
    pub fn new() -> Self {
        let mut checker = Checker {
            tree: DataTree::new(),
            model: Model::new(),
            zxid: 0,
            time_ms: T0,
            history: Vec::new(),
        };
        for session in SESSIONS {
            let open = open_session(30_000);
            if let Err(e) = checker.run(Command::Write { session, op: open }) {
                panic!("{e}");
            }
        }
        checker
    }

    /// Realizes `step` against the model and runs it. On a disagreement,
    /// the error names it and lists the commands run so far.
    pub fn step(&mut self, step: &Step) -> Result<(), String> {
        let command = self.model.realize(step, self.zxid + 1, self.time_ms + 1);
        self.run(command)
    }

    /// Runs one concrete command on both sides and compares the results
    /// and then the whole state.
    pub fn run(&mut self, command: Command) -> Result<(), String> {
        let result = self.execute(&command).and_then(|()| self.compare_state());
        self.history.push(command);
        result.map_err(|what| self.report(&format!("the tree and the model disagree on {what}")))
    }

    /// Whatever the history, a snapshot of the tree loads as an equal tree.
    pub fn check_snapshot(&self) -> Result<(), String> {
        let mut buf = Vec::new();
        self.tree
            .write_snapshot(&mut buf)
            .map_err(|e| self.report(&format!("writing a snapshot: {e}")))?;
        match DataTree::read_snapshot(&mut Cursor::new(buf)) {
            Ok(loaded) if loaded == self.tree => Ok(()),
            Ok(_) => Err(self.report("a snapshot of the tree loads as a different tree")),
            Err(e) => Err(self.report(&format!("reading the snapshot: {e}"))),
        }
    }

    /// A snapshot of the tree now, from which changes are tracked for
    /// [`Checker::take_delta`].
    pub fn take_base(&mut self) -> Vec<u8> {
        self.tree.track_changes();
        self.tree.take_changes();
        let mut base = Vec::new();
        self.tree
            .write_snapshot(&mut base)
            .expect("a snapshot writes into memory");
        base
    }

    /// A delta of what changed since the last base or delta.
    pub fn take_delta(&mut self) -> Vec<u8> {
        let changes = self
            .tree
            .take_changes()
            .expect("take_base starts tracking changes");
        let mut delta = Vec::new();
        self.tree
            .write_delta(&changes, &mut delta)
            .expect("a delta writes into memory");
        delta
    }

    /// `base` and the `deltas` after it, the last taken now, load as an
    /// equal tree, and fold into a whole snapshot that loads as one too.
    pub fn check_loads_from(&self, base: &[u8], deltas: &[Vec<u8>]) -> Result<(), String> {
        let mut base_input = base;
        let mut inputs = delta_inputs(deltas);
        match DataTree::read_snapshot_and_deltas(&mut base_input, read_each(&mut inputs)) {
            Ok(loaded) if loaded == self.tree => {}
            Ok(_) => return Err(self.report("a base and its deltas load as a different tree")),
            Err(e) => return Err(self.report(&format!("reading a base and its deltas: {e}"))),
        }
        let folded = self.fold(base, deltas)?;
        match DataTree::read_snapshot(&mut folded.as_slice()) {
            Ok(loaded) if loaded == self.tree => Ok(()),
            Ok(_) => Err(self.report("a base folded with its deltas loads as a different tree")),
            Err(e) => Err(self.report(&format!("reading a folded base: {e}"))),
        }
    }

    /// `base` and the `deltas` after it, the last taken now, folded into
    /// a whole snapshot of the tree now.
    pub fn fold(&self, base: &[u8], deltas: &[Vec<u8>]) -> Result<Vec<u8>, String> {
        let mut base = base;
        let mut inputs = delta_inputs(deltas);
        let nodes = self.tree.snapshot_node_count();
        let mut folded = Vec::new();
        tree::fold_deltas(&mut base, read_each(&mut inputs), nodes, &mut folded)
            .map_err(|e| self.report(&format!("folding a base and its deltas: {e}")))?;
        Ok(folded)
    }

    fn report(&self, what: &str) -> String {
        let mut out = format!("{what}\ncommands:\n");
        for (i, command) in self.history.iter().enumerate() {
            let _ = writeln!(out, "  {i:3} {command:?}");
        }
        out
    }

    fn execute(&mut self, command: &Command) -> Result<(), String> {
        match command {
            Command::Write { session, op } => {
                self.zxid += 1;
                self.time_ms += 1;
                let txn = Txn {
                    time_ms: self.time_ms,
                    session_id: *session,
                    auth: Vec::new(),
                    enforce_quota: false,
                    op: op.clone(),
                };
                let got = self.tree.apply(self.zxid, &txn);
                let want = self.model.apply(self.zxid, self.time_ms, *session, op);
                same(format_args!("outcome"), &got.outcome, &want.outcome)?;
                same(
                    format_args!("watch triggers"),
                    &got.triggers,
                    &want.triggers,
                )
            }
            Command::Read { path } => self.compare_reads(path),
            Command::Sleep { ms } => {
                self.time_ms += i64::from(*ms);
                Ok(())
            }
        }
    }

    /// Every read on `path` by a client without auth ids.
    fn compare_reads(&self, path: &str) -> Result<(), String> {
        let (tree, model) = (&self.tree, &self.model);
        let stat = |perm| model.readable(path, perm).map(|()| model.stat(path));
        same(
            format_args!("getData({path:?})"),
            tree.get_data(path, &[])
                .map(|(d, s)| (d.as_deref().map(<[u8]>::to_vec), s)),
            stat(perms::READ).map(|s| (model.data(path).map(<[u8]>::to_vec), s)),
        )?;
        same(
            format_args!("exists({path:?}) unchecked"),
            tree.exists(path),
            model.exists(path).then(|| model.stat(path)),
        )?;
        let checked = if path.contains('\0') {
            Err(jute::ErrorCode::BadArguments)
        } else {
            stat(perms::READ)
        };
        same(
            format_args!("exists({path:?})"),
            tree.exists_checked(path, &[]),
            checked,
        )?;
        same(
            format_args!("getChildren({path:?})"),
            tree.get_children(path, &[]),
            stat(perms::READ).map(|s| (model.children(path), s)),
        )?;
        same(
            format_args!("getACL({path:?})"),
            tree.get_acl(path, &[]),
            stat(perms::READ | perms::ADMIN).map(|s| (model.acl(path).to_vec(), s)),
        )?;
        same(
            format_args!("getAllChildrenNumber({path:?})"),
            tree.all_children_number(path, &[]),
            stat(perms::READ).map(|_| model.all_children_number(path)),
        )?;
        for session in SESSIONS {
            same(
                format_args!("getEphemerals({session:#x}, {path:?})"),
                tree.get_ephemerals(session, path),
                model.ephemerals(session, path),
            )?;
        }
        Ok(())
    }

    /// The whole state, read with a `super` id so that ACLs hide nothing.
    fn compare_state(&self) -> Result<(), String> {
        let (tree, model) = (&self.tree, &self.model);
        let superuser = [Id::new("super", "")];
        let mut paths = Vec::new();
        let mut stack = vec!["/".to_owned()];
        while let Some(path) = stack.pop() {
            let (children, _) = tree
                .get_children(&path, &superuser)
                .map_err(|e| format!("getChildren({path:?}) as super: {e:?}"))?;
            for child in children {
                let parent = if path == "/" { "" } else { &path };
                stack.push(format!("{parent}/{child}"));
            }
            paths.push(path);
        }
        paths.sort();
        same(
            format_args!("paths"),
            paths.iter().map(String::as_str).collect(),
            model.paths(),
        )?;

        for path in model.paths() {
            let (data, stat) = tree
                .get_data(path, &superuser)
                .map_err(|e| format!("getData({path:?}) as super: {e:?}"))?;
            let (acl, _) = tree
                .get_acl(path, &superuser)
                .map_err(|e| format!("getACL({path:?}) as super: {e:?}"))?;
            same(
                format_args!("data, stat and ACL of {path}"),
                (data.as_deref().map(<[u8]>::to_vec), stat, acl),
                (
                    model.data(path).map(<[u8]>::to_vec),
                    model.stat(path),
                    model.acl(path).to_vec(),
                ),
            )?;
        }
        // ZooKeeper's node count includes the root's second key, "".
        same(
            format_args!("node count"),
            tree.node_count(),
            model.paths().len() + 1,
        )?;
        same(
            format_args!("approximate data size"),
            tree.approximate_data_bytes(),
            model.approximate_data_bytes(),
        )?;
        same(
            format_args!("ephemeral count"),
            tree.ephemeral_count(),
            model.ephemeral_count(),
        )?;
        for session in SESSIONS {
            same(
                format_args!("ephemerals of {session:#x}"),
                tree.get_ephemerals(session, "/"),
                model.ephemerals(session, "/"),
            )?;
        }
        same(
            format_args!("sessions"),
            tree.sessions()
                .map(|(id, info)| (id, info.timeout_ms))
                .collect(),
            model.sessions(),
        )?;
        for never_used_ms in [0, 100] {
            same(
                format_args!("reap candidates (never-used limit {never_used_ms} ms)"),
                tree.reap_candidates(self.time_ms, never_used_ms),
                model.reap_candidates(self.time_ms, never_used_ms),
            )?;
        }
        Ok(())
    }
}

fn delta_inputs(deltas: &[Vec<u8>]) -> Vec<&[u8]> {
    deltas.iter().map(Vec::as_slice).collect()
}

fn read_each<'a>(inputs: &'a mut [&[u8]]) -> Vec<&'a mut (dyn std::io::Read + Send)> {
    inputs
        .iter_mut()
        .map(|input| input as &mut (dyn std::io::Read + Send))
        .collect()
}
