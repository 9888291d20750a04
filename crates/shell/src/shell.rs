//! [`Shell`]: runs zkCli commands against a [`Client`] and writes what
//! zkCli would write.
//!
//! Command output goes to the `out` and `err` writers each call is given
//! (zkCli's split: results on stdout; errors, warnings and `Created /x`
//! on stderr); watch and session events go to the [`EventSink`] the shell
//! was made with, from the `watches` hub, whenever they come.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use client::{
    child_path, quota_path, Acl, Client, ConnectOptions, CreateOptions, Error, ErrorCode, Op,
    SessionState, Stat,
};

use sasl::jaas::Login;

use crate::format;
use crate::parse::{self, CliError, Command};
use crate::watches::{EventSink, Watches};

/// Where an ensemble's servers publish its membership.
const CONFIG_NODE: &str = "/zookeeper/config";

/// How a shell connects and what it says about it.
#[derive(Debug, Clone)]
pub struct ShellOptions {
    /// The session timeout to ask for (zkCli's `-timeout`, 30 s by
    /// default). Connecting gives up after this or [`CONNECT_TIMEOUT`],
    /// whichever is shorter.
    pub session_timeout: Duration,
    /// Report session events (`state:SyncConnected type:None`, `Closed`,
    /// ...) as zkCli's default watcher does. The interactive and piped
    /// modes do; one-shot commands print only their own results.
    pub session_events: bool,
    /// Log in with SASL DIGEST-MD5, as zkCli does with the `Client`
    /// section of its JAAS file.
    pub sasl: Option<Login>,
    /// Connect with TLS (zkCli's `zookeeper.client.secure=true`).
    pub tls: Option<Arc<client::rustls::ClientConfig>>,
}

impl Default for ShellOptions {
    fn default() -> Self {
        Self {
            session_timeout: Duration::from_secs(30),
            session_events: true,
            sasl: None,
            tls: None,
        }
    }
}

/// The longest a connect may take: zkCli would retry forever, but a
/// person at a prompt or a script wants to hear that nothing answers.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What to do after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// `quit`: the session is closed; exit with [`Shell::last_code`].
    Quit,
}

/// The client, shared with the line editor's completer, which lists
/// children between commands.
pub type ClientSlot = Arc<Mutex<Option<Client>>>;

/// One zkCli session: the connection, the history and the last exit code.
pub struct Shell {
    host: String,
    client: Option<Client>,
    slot: ClientSlot,
    options: ShellOptions,
    watches: Watches,
    /// Every command line run interactively or piped, numbered from 0 as
    /// zkCli's `history` and `redo` number them.
    history: Vec<String>,
    last_code: i32,
}

/// Writes, ignoring failures: output that cannot be written (a closed
/// pipe) has nowhere better to go, and the command's effect stands.
fn put(w: &mut dyn Write, text: &str) {
    let _ = w.write_all(text.as_bytes());
}

fn failed(error: Error) -> CliError {
    CliError::new(format::error(&error))
}

/// zkCli prints a quota command's refusal as its message alone.
fn quota_failed(error: Error) -> CliError {
    match error {
        Error::InvalidArgument { reason } => CliError::new(reason),
        other => failed(other),
    }
}

/// A path checked before use, with Java's messages.
fn checked(path: &str, sequential: bool) -> Result<(), CliError> {
    format::validate_path(path, sequential).map_err(CliError::new)
}

/// A child's path, as ZooKeeper's `ZKUtil` builds it.
/// What a recursive walk does at each node.
enum Visit<'a> {
    /// `ls -R`: print its path.
    Print,
    /// `setAcl -R`: set its ACL, reporting failures and going on.
    SetAcl {
        acl: &'a [Acl],
        version: Option<i32>,
    },
}

impl Shell {
    /// A shell that is not connected yet (see [`Shell::connect`]); `host`
    /// is the connect string `connect` without arguments reuses. Must be
    /// called within a tokio runtime: the event printer is a task.
    pub fn new(host: &str, options: ShellOptions, sink: Arc<dyn EventSink>) -> Self {
        Self {
            host: host.to_owned(),
            client: None,
            slot: Arc::new(Mutex::new(None)),
            options,
            watches: Watches::start(sink),
            history: Vec::new(),
            last_code: 0,
        }
    }

    /// The connect string of the current (or last) session.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The exit code of the last command: 0, 1 for a failure, 127 for an
    /// unknown command.
    pub fn last_code(&self) -> i32 {
        self.last_code
    }

    /// The client the completer should use.
    pub fn client_slot(&self) -> ClientSlot {
        self.slot.clone()
    }

    /// zkCli's prompt: `[zk: HOST(STATE) N] `, the state as the Java
    /// client's `ZooKeeper.States` names it.
    pub fn prompt(&self) -> String {
        let state = match self.client.as_ref().map(Client::state) {
            None => "NOT_CONNECTED",
            Some(SessionState::Connected) => "CONNECTED",
            Some(SessionState::Disconnected) => "CONNECTING",
            Some(SessionState::AuthFailed) => "AUTH_FAILED",
            Some(SessionState::Expired | SessionState::Closed) => "CLOSED",
        };
        format!("[zk: {}({state}) {}] ", self.host, self.history.len())
    }

    /// Closes the current session, if any, and opens one to `host`.
    pub async fn connect(&mut self, host: &str) -> Result<(), CliError> {
        self.disconnect().await;
        self.host = host.to_owned();
        let mut options = ConnectOptions::new()
            .session_timeout(self.options.session_timeout)
            .connect_timeout(self.options.session_timeout.min(CONNECT_TIMEOUT));
        if let Some(login) = &self.options.sasl {
            options = options.sasl_digest_md5(&login.username, &login.password);
        }
        if let Some(tls) = &self.options.tls {
            options = options.tls(tls.clone());
        }
        let client = Client::connect(host, options)
            .await
            .map_err(|error| match error {
                // What went wrong and with which server, which zkCli's
                // "KeeperErrorCode = AuthFailed" does not say.
                Error::SaslFailed { .. } => CliError::new(error.to_string()),
                error => failed(error),
            })?;
        if self.options.session_events {
            self.watches
                .notice(format::event("SyncConnected", "None", None));
            if self.options.sasl.is_some() {
                self.watches
                    .notice(format::event("SaslAuthenticated", "None", None));
            }
            self.watches.session(client.state_changes());
        }
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(client.clone());
        self.client = Some(client);
        Ok(())
    }

    /// Closes the session (the server drops its ephemeral nodes and
    /// watches) and prints what that triggers.
    pub async fn disconnect(&mut self) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = None;
        if let Some(old) = self.client.take() {
            old.close().await;
            self.watches.flush().await;
        }
    }

    /// Returns once every event received so far is printed.
    pub async fn flush_events(&self) {
        self.watches.flush().await;
    }

    /// Runs one line as typed: split into words, recorded in the history
    /// (unless blank), run.
    pub async fn execute_line(
        &mut self,
        line: &str,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Flow {
        let words = parse::tokenize(line);
        if words.is_empty() {
            return Flow::Continue;
        }
        self.history.push(line.to_owned());
        self.execute(&words, out, err).await
    }

    /// Runs one command given as words (the command's name first), as
    /// zkCli runs the words after its options. Not recorded in the
    /// history.
    pub async fn execute(
        &mut self,
        words: &[String],
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Flow {
        let result = self.dispatch(words.to_vec(), out, err).await;
        let flow = match result {
            // `quit` exits with the code of the command before it, as
            // zkCli's does.
            Ok(Flow::Quit) => Flow::Quit,
            Ok(Flow::Continue) => {
                self.last_code = 0;
                Flow::Continue
            }
            Err(error) => {
                if !error.message.is_empty() {
                    put(err, &format!("{}\n", error.message));
                }
                self.last_code = error.code;
                Flow::Continue
            }
        };
        let _ = out.flush();
        let _ = err.flush();
        flow
    }

    async fn dispatch(
        &mut self,
        mut words: Vec<String>,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<Flow, CliError> {
        loop {
            let parsed = parse::parse(&words)?;
            for warning in &parsed.warnings {
                put(err, &format!("{warning}\n"));
            }
            let command = match parsed.command {
                Command::Redo { index } => {
                    words = self.redo(&index)?;
                    continue;
                }
                command => command,
            };
            return self.run(command, out, err).await;
        }
    }

    /// The words of history entry `index`, which from now on is also the
    /// entry of the `redo` being run, as in zkCli.
    fn redo(&mut self, index: &str) -> Result<Vec<String>, CliError> {
        // zkCli's `Integer.decode` reads decimal and 0x hex.
        let parsed = match index
            .strip_prefix("0x")
            .or_else(|| index.strip_prefix("0X"))
        {
            Some(hex) => i64::from_str_radix(hex, 16),
            None => index.parse::<i64>(),
        }
        .map_err(|_| CliError::new(format!("redo: not a command number: {index}")))?;
        // The current command (this redo) is the last entry.
        let current = self.history.len().saturating_sub(1);
        let entry = usize::try_from(parsed)
            .ok()
            .filter(|&i| i < current)
            .ok_or_else(|| CliError::new("Command index out of range"))?;
        let line = self.history[entry].clone();
        let words = parse::tokenize(&line);
        if words.first().map(String::as_str) == Some("redo") {
            return Err(CliError::new("No redoing redos"));
        }
        if let Some(last) = self.history.last_mut() {
            *last = line;
        }
        Ok(words)
    }

    /// The client, if it can still talk to a server.
    fn live_client(&self) -> Result<Client, CliError> {
        match &self.client {
            Some(client) if !client.state().is_terminal() => Ok(client.clone()),
            _ => Err(CliError::new("Not connected")),
        }
    }

    async fn run(
        &mut self,
        command: Command,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<Flow, CliError> {
        match command {
            Command::Quit => {
                self.disconnect().await;
                return Ok(Flow::Quit);
            }
            Command::Help => put(out, &parse::usage()),
            Command::History => {
                let current = self.history.len().saturating_sub(1);
                for i in current.saturating_sub(10)..self.history.len() {
                    put(out, &format!("{i} - {}\n", self.history[i]));
                }
            }
            Command::PrintWatches { on: None } => {
                let on = if self.watches.printing() { "on" } else { "off" };
                put(out, &format!("printwatches is {on}\n"));
            }
            Command::PrintWatches { on: Some(on) } => self.watches.set_printing(on),
            Command::Connect { host } => {
                let host = host.unwrap_or_else(|| self.host.clone());
                self.connect(&host).await?;
            }
            Command::Redo { .. } => unreachable!("dispatch resolves redo"),
            remote => {
                let zk = self.live_client()?;
                self.remote(&zk, remote, out, err).await?;
            }
        }
        Ok(Flow::Continue)
    }

    /// The commands that talk to the server.
    async fn remote(
        &mut self,
        zk: &Client,
        command: Command,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<(), CliError> {
        match command {
            Command::Ls {
                path,
                stat,
                watch,
                recursive,
                page,
            } => {
                checked(&path, false)?;
                if recursive {
                    return self.walk(zk, &path, watch, Visit::Print, out).await;
                }
                if let Some(page) = page {
                    let node = list_paged(zk, &path, page, out).await?;
                    if stat {
                        put(out, &format::stat(&node));
                    }
                    return Ok(());
                }
                let (mut children, node) = if watch {
                    let (children, node, watch) =
                        zk.get_children_watched(&path).await.map_err(failed)?;
                    self.watches.once(&path, watch);
                    (children, node)
                } else if stat {
                    zk.get_children_with_stat(&path).await.map_err(failed)?
                } else {
                    (
                        zk.get_children(&path).await.map_err(failed)?,
                        Default::default(),
                    )
                };
                children.sort_by(|a, b| format::java_cmp(a, b));
                put(out, &format!("{}\n", format::list(&children)));
                if stat {
                    put(out, &format::stat(&node));
                }
            }
            Command::Get { path, stat, watch } => {
                checked(&path, false)?;
                let (data, node) = if watch {
                    let (data, node, watch) = zk.get_data_watched(&path).await.map_err(failed)?;
                    self.watches.once(&path, watch);
                    (data, node)
                } else {
                    zk.get_data(&path).await.map_err(failed)?
                };
                // zkCli prints null data as "null", and decodes the rest as
                // UTF-8, replacing what is not.
                let text = data
                    .as_deref()
                    .map_or("null".into(), String::from_utf8_lossy);
                put(out, &format!("{text}\n"));
                if stat {
                    put(out, &format::stat(&node));
                }
            }
            Command::Set {
                path,
                data,
                stat,
                version,
            } => {
                checked(&path, false)?;
                let node = zk
                    .set_data(&path, data.as_bytes(), version)
                    .await
                    .map_err(failed)?;
                if stat {
                    put(out, &format::stat(&node));
                }
            }
            Command::Create {
                path,
                data,
                acl,
                mode,
                ttl,
            } => {
                let acl = match acl {
                    None => Acl::open_unsafe(),
                    Some(text) => parsed_acl(&text, err),
                };
                checked(&path, mode.is_sequential())?;
                if acl.is_empty() {
                    // The Java client rejects an empty ACL itself, before
                    // it has a path to name.
                    put(err, "KeeperErrorCode = InvalidACL\n");
                    return Err(CliError::new("Acl is not valid : null"));
                }
                let mut options = CreateOptions::new(mode).acl(acl);
                if let Some(ttl) = ttl {
                    options = options.ttl(Duration::from_millis(ttl.unsigned_abs()));
                }
                // zkCli creates a node without a data argument with null data.
                match zk
                    .create(&path, data.as_deref().map(str::as_bytes), options)
                    .await
                {
                    Ok((created, _)) => put(err, &format!("Created {created}\n")),
                    Err(error) => {
                        // zkCli says more for these two.
                        match &error {
                            Error::EphemeralOnLocalSession { .. } => {
                                put(err, "Unable to create ephemeral node on a local session\n")
                            }
                            Error::InvalidAcl { .. } => {
                                put(err, &format!("{}\n", format::keeper_message(&error)))
                            }
                            _ => {}
                        }
                        return Err(failed(error));
                    }
                }
            }
            Command::Delete { path, version } => {
                checked(&path, false)?;
                zk.delete(&path, version).await.map_err(failed)?;
            }
            Command::DeleteAll { path, batch } => {
                checked(&path, false)?;
                delete_all(zk, &path, batch).await?;
            }
            Command::Stat { path, watch } => {
                checked(&path, false)?;
                let node = if watch {
                    // Left even if the node is missing: it then fires when
                    // the node is created.
                    let (node, watch) = zk.exists_watched(&path).await.map_err(failed)?;
                    self.watches.once(&path, watch);
                    node
                } else {
                    zk.exists(&path).await.map_err(failed)?
                };
                match node {
                    Some(node) => put(out, &format::stat(&node)),
                    None => return Err(failed(Error::NoNode { path })),
                }
            }
            Command::GetAcl { path, stat } => {
                checked(&path, false)?;
                let (acl, node) = zk.get_acl(&path).await.map_err(failed)?;
                for entry in &acl {
                    put(out, &format!("{}\n", format::acl(entry)));
                }
                if stat {
                    put(out, &format::stat(&node));
                }
            }
            Command::SetAcl {
                path,
                acl,
                stat,
                version,
                recursive,
            } => {
                let acl = parsed_acl(&acl, err);
                checked(&path, false)?;
                if acl.is_empty() {
                    return Err(CliError::new("Acl is not valid : null"));
                }
                if recursive {
                    let visit = Visit::SetAcl { acl: &acl, version };
                    return self.walk(zk, &path, false, visit, out).await;
                }
                let node = zk.set_acl(&path, &acl, version).await.map_err(failed)?;
                if stat {
                    put(out, &format::stat(&node));
                }
            }
            Command::AddAuth { scheme, auth } => {
                zk.add_auth(&scheme, auth.as_bytes())
                    .await
                    .map_err(failed)?;
            }
            Command::Reconfig {
                joining,
                leaving,
                members,
                version,
                stat,
            } => {
                let (config, node) = zk
                    .reconfig(
                        joining.as_deref(),
                        leaving.as_deref(),
                        members.as_deref(),
                        version,
                    )
                    .await
                    .map_err(failed)?;
                let text = String::from_utf8_lossy(&config);
                put(out, &format!("Committed new configuration:\n{text}\n"));
                if stat {
                    put(out, &format::stat(&node));
                }
            }
            Command::Config {
                client,
                stat,
                watch,
            } => {
                let (data, node) = if watch {
                    let (data, node, watch) = zk.get_config_watched().await.map_err(failed)?;
                    self.watches.once(CONFIG_NODE, watch);
                    (data, node)
                } else {
                    zk.get_config().await.map_err(failed)?
                };
                let text = String::from_utf8_lossy(data.as_deref().unwrap_or_default());
                match client {
                    true => put(out, &format!("{}\n", format::client_config(&text))),
                    false => put(out, &format!("{text}\n")),
                }
                if stat {
                    put(out, &format::stat(&node));
                }
            }
            Command::Sync { path } => {
                checked(&path, false)?;
                match zk.sync(&path).await {
                    Ok(()) => put(out, "Sync is OK\n"),
                    Err(error) => match error.code() {
                        // zkCli's wording, on stdout; still a failure.
                        Some(code) => {
                            put(out, &format!("Sync has failed. rc={}\n", code.code()));
                            return Err(CliError::new(""));
                        }
                        None => return Err(failed(error)),
                    },
                }
            }
            Command::AddWatch { path, mode } => {
                checked(&path, false)?;
                let stream = zk.add_watch(&path, mode).await.map_err(failed)?;
                self.watches.stream(&path, stream);
            }
            Command::RemoveWatches { path, kind, local } => {
                checked(&path, false)?;
                match zk.remove_watches(&path, kind).await {
                    Ok(()) => {}
                    // `-l`: without a server, at least stop printing them.
                    Err(error) if local && error.is_connection_loss() => {
                        self.watches.forget(&path);
                    }
                    Err(error) => return Err(failed(error)),
                }
            }
            Command::GetEphemerals { path } => {
                let prefix = path.as_deref().unwrap_or("/");
                checked(prefix, false)?;
                let ephemerals = zk.get_ephemerals(prefix).await.map_err(failed)?;
                put(out, &format!("{}\n", format::list(&ephemerals)));
            }
            Command::GetAllChildrenNumber { path } => {
                checked(&path, false)?;
                let count = zk.get_all_children_number(&path).await.map_err(failed)?;
                put(out, &format!("{count}\n"));
            }
            Command::SetQuota { path, limits } => {
                // zkCli prints these refusals and exits 0.
                let printed = |error| match error {
                    Error::InvalidArgument { reason } => CliError::printed(reason),
                    other => failed(other),
                };
                client::check_quota_target(&path).map_err(printed)?;
                limits.validate().map_err(printed)?;
                checked(&path, false)?;
                let quota = zk.set_quota(&path, limits).await.map_err(quota_failed)?;
                for warning in quota.warnings() {
                    put(out, &format!("{warning}\n"));
                }
            }
            Command::ListQuota { path } => {
                checked(&path, false)?;
                put(
                    err,
                    &format!("absolute path is {}/zookeeper_limits\n", quota_path(&path)),
                );
                match zk.list_quota(&path).await {
                    Ok(quota) => {
                        put(out, &format!("Output quota for {path} {}\n", quota.limits));
                        put(out, &format!("Output stat for {path} {}\n", quota.usage));
                    }
                    Err(Error::NoNode { .. }) => {
                        put(err, &format!("quota for {path} does not exist.\n"));
                    }
                    Err(error) => return Err(quota_failed(error)),
                }
            }
            Command::DelQuota { path, limits } => {
                checked(&path, false)?;
                if !zk.delete_quota(&path, limits).await.map_err(quota_failed)? {
                    put(out, &format!("Quota does not exist for {path}\n"));
                }
            }
            Command::WhoAmI => {
                let identities = zk.who_am_i().await.map_err(failed)?;
                put(out, "Auth scheme: User\n");
                for identity in identities {
                    put(
                        out,
                        &format!("{}: {}\n", identity.auth_scheme, identity.user),
                    );
                }
            }
            Command::Close => {
                zk.close().await;
                self.watches.flush().await;
            }
            Command::Quit
            | Command::Help
            | Command::History
            | Command::PrintWatches { .. }
            | Command::Connect { .. }
            | Command::Redo { .. } => unreachable!("local commands run in Shell::run"),
        }
        Ok(())
    }

    /// A depth-first, pre-order walk of the tree under `root`, as
    /// ZooKeeper's `ZKUtil.visitSubTreeDFS`: the root (which must exist),
    /// then each node's children in order, each listed before any of
    /// them is descended into. Nodes that vanish meanwhile are skipped.
    async fn walk(
        &mut self,
        zk: &Client,
        root: &str,
        watch: bool,
        visit: Visit<'_>,
        out: &mut dyn Write,
    ) -> Result<(), CliError> {
        if watch {
            let (_, _, watch) = zk.get_data_watched(root).await.map_err(failed)?;
            self.watches.once(root, watch);
        } else {
            zk.get_data(root).await.map_err(failed)?;
        }
        visit_node(zk, root, &visit, out).await;
        let mut stack = vec![root.to_owned()];
        while let Some(node) = stack.pop() {
            let listed = if watch {
                zk.get_children_watched(&node)
                    .await
                    .map(|(children, _, w)| {
                        self.watches.once(&node, w);
                        children
                    })
            } else {
                zk.get_children(&node).await
            };
            let mut children = match listed {
                Ok(children) => children,
                Err(error) if error.code() == Some(ErrorCode::NoNode) => continue,
                Err(error) => return Err(failed(error)),
            };
            children.sort_by(|a, b| format::java_cmp(a, b));
            let paths: Vec<String> = children.iter().map(|c| child_path(&node, c)).collect();
            for path in &paths {
                visit_node(zk, path, &visit, out).await;
            }
            // Reversed, so the first child is descended into first.
            stack.extend(paths.into_iter().rev());
        }
        Ok(())
    }
}

/// `ls -p`: the children of `path`, `page` names per request, printed one
/// per line as each page arrives (a node of millions of children never
/// sits whole in one reply or in memory); returns the node's stat.
async fn list_paged(
    zk: &Client,
    path: &str,
    page: i32,
    out: &mut dyn Write,
) -> Result<Stat, CliError> {
    let mut after = String::new();
    loop {
        let listed = zk
            .get_children_page(path, &after, page)
            .await
            .map_err(failed)?;
        for name in &listed.children {
            put(out, &format!("{name}\n"));
        }
        match listed.children.last() {
            Some(last) if listed.more => after.clone_from(last),
            _ => return Ok(listed.stat),
        }
    }
}

async fn visit_node(zk: &Client, path: &str, visit: &Visit<'_>, out: &mut dyn Write) {
    match visit {
        Visit::Print => put(out, &format!("{path}\n")),
        Visit::SetAcl { acl, version } => {
            if let Err(error) = zk.set_acl(path, acl, *version).await {
                // zkCli prints the failure without a newline; one is added.
                put(out, &format!("{}\n", format::keeper_message(&error)));
            }
        }
    }
}

/// An ACL argument, its complaints printed on stderr as zkCli does.
fn parsed_acl(text: &str, err: &mut dyn Write) -> Vec<Acl> {
    let (acl, complaints) = format::parse_acl(text);
    for complaint in complaints {
        put(err, &format!("{complaint}\n"));
    }
    acl
}

/// `deleteall`, as ZooKeeper's `ZKUtil.deleteRecursive`: list the tree
/// breadth first, then delete it deepest first, `batch` nodes per
/// `multi` (one by one if `batch` is 0 or less).
async fn delete_all(zk: &Client, root: &str, batch: i32) -> Result<(), CliError> {
    let mut tree = zk.subtree(root).await.map_err(failed)?;
    tree.reverse();
    match usize::try_from(batch) {
        Ok(size) if size > 0 => {
            for chunk in tree.chunks(size) {
                let ops = chunk.iter().map(|path| Op::delete(path, None));
                if zk.multi(ops).await.is_err() {
                    // zkCli's words; it then exits 0, but nodes are left.
                    return Err(CliError::new(
                        "Failed to delete some node(s) in the subtree!",
                    ));
                }
            }
        }
        _ => {
            for path in &tree {
                zk.delete(path, None).await.map_err(failed)?;
            }
        }
    }
    Ok(())
}
