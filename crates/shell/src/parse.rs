//! From a line of text to a [`Command`], as zkCli does it.
//!
//! A line is split into words by zkCli's `ARGS_PATTERN` (words are runs
//! of non-blanks, or text in matching single or double quotes, which are
//! stripped); then each command's words go through a parser with the
//! rules of commons-cli's `DefaultParser`, which zkCli uses: options may
//! come anywhere among the arguments (`set /a x -v 3`), flags combine
//! (`-sw`), an option's value may be glued to it (`-v3`) or be the next
//! word, `--` ends the options, and an unknown option is an error. The
//! command's name is the first argument, as in zkCli, so `args[1]` is the
//! path everywhere below.

use client::{AddWatchMode, CreateMode, QuotaLimits, WatcherType, MAX_TTL};

/// Every command with its usage as zkCli prints it (3.8, less the version
/// command), plus
/// `help` and `exit`. Sorted, because `help` lists them in this order.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "addWatch",
        "[-m mode] path # optional mode is one of [PERSISTENT, PERSISTENT_RECURSIVE] - default is PERSISTENT_RECURSIVE",
    ),
    ("addauth", "scheme auth"),
    ("close", ""),
    ("config", "[-c] [-w] [-s]"),
    ("connect", "host:port"),
    ("create", "[-s] [-e] [-c] [-t ttl] path [data] [acl]"),
    ("delete", "[-v version] path"),
    ("deleteall", "path [-b batch size]"),
    ("delquota", "[-n|-b|-N|-B] path"),
    ("exit", ""),
    ("get", "[-s] [-w] path"),
    ("getAcl", "[-s] path"),
    ("getAllChildrenNumber", "path"),
    ("getEphemerals", "path"),
    ("help", ""),
    ("history", ""),
    ("listquota", "path"),
    ("ls", "[-s] [-w] [-R] path"),
    ("printwatches", "on|off"),
    ("quit", ""),
    (
        "reconfig",
        "[-s] [-v version] [[-file path] | [-members serverID=host:port1:port2;port3[,...]*]] | [-add serverId=host:port1:port2;port3[,...]]* [-remove serverId[,...]*]",
    ),
    ("redo", "cmdno"),
    ("removewatches", "path [-c|-d|-a] [-l]"),
    ("set", "[-s] [-v version] path data"),
    ("setAcl", "[-s] [-v version] [-R] path acl"),
    ("setquota", "-n|-b|-N|-B val path"),
    ("stat", "[-w] path"),
    ("sync", "path"),
    ("whoami", ""),
];

/// Options zkCli does not have, listed after its commands so that every
/// usage line zkCli prints stays the same here.
const EXTENSIONS: &[&str] =
    &["ls [-s] -p pageSize path # the children page by page, a name a line (Paddock only)"];

/// The first line of the command list.
const USAGE_HEADER: &str =
    "paddock shell [host:port[,host:port...][/chroot]] [-c \"cmd args\"]... | [cmd args]";

/// The names of every command, sorted.
pub fn command_names() -> impl Iterator<Item = &'static str> {
    COMMANDS.iter().map(|(name, _)| *name)
}

/// Whether `word` names a command.
pub fn is_command(word: &str) -> bool {
    command_names().any(|name| name == word)
}

/// The command list zkCli prints for `help` and unknown commands.
pub fn usage() -> String {
    let mut text = format!("{USAGE_HEADER}\n");
    for (name, options) in COMMANDS {
        text.push_str(&format!("\t{name} {options}\n"));
    }
    text.push_str("Paddock extensions:\n");
    for line in EXTENSIONS {
        text.push_str(&format!("\t{line}\n"));
    }
    text
}

/// One command's usage line, as zkCli's `getUsageStr` (the trailing space
/// of option-less commands included).
fn usage_of(name: &str) -> String {
    let options = COMMANDS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, options)| options);
    format!("{name} {options}")
}

/// A failed command: what to print on stderr, and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    pub message: String,
    pub code: i32,
}

impl CliError {
    /// zkCli's `CliException`: exit code 1.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }

    /// A refusal zkCli prints on stderr while its command still
    /// "succeeds": exit code 0, which scripts written for zkCli expect.
    pub fn printed(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 0,
        }
    }

    fn usage(name: &str) -> Self {
        Self::new(usage_of(name))
    }
}

/// A parsed command. Paths are as typed: they are checked when the
/// command runs, as zkCli does, so the error is the same either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Ls {
        path: String,
        stat: bool,
        watch: bool,
        recursive: bool,
        /// `-p`, Paddock's paginated listing: this many names per request,
        /// printed one per line as the pages arrive.
        page: Option<i32>,
    },
    Get {
        path: String,
        stat: bool,
        watch: bool,
    },
    Set {
        path: String,
        data: String,
        stat: bool,
        version: Option<i32>,
    },
    Create {
        path: String,
        /// `None` when not given: zkCli sends null, which is empty data.
        data: Option<String>,
        /// An ACL in zkCli's `scheme:id:perms[,...]` form; open to all
        /// when not given.
        acl: Option<String>,
        mode: CreateMode,
        /// Milliseconds, for the TTL modes only; already checked.
        ttl: Option<i64>,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    DeleteAll {
        path: String,
        /// Deletes per `multi`; 0 or less deletes one node at a time.
        batch: i32,
    },
    Stat {
        path: String,
        watch: bool,
    },
    GetAcl {
        path: String,
        stat: bool,
    },
    SetAcl {
        path: String,
        acl: String,
        stat: bool,
        version: Option<i32>,
        recursive: bool,
    },
    AddAuth {
        scheme: String,
        auth: String,
    },
    Sync {
        path: String,
    },
    /// A change of the ensemble's membership, as zkCli's (values lower
    /// cased, as zkCli does).
    Reconfig {
        joining: Option<String>,
        leaving: Option<String>,
        members: Option<String>,
        /// The configuration version it applies to (`-v`, hexadecimal).
        version: Option<i64>,
        stat: bool,
    },
    /// The ensemble's membership, from `/zookeeper/config`.
    Config {
        /// `-c`: the version and the client addresses only.
        client: bool,
        stat: bool,
        watch: bool,
    },
    AddWatch {
        path: String,
        mode: AddWatchMode,
    },
    RemoveWatches {
        path: String,
        kind: WatcherType,
        /// `-l`: if the server cannot be reached, forget the watches here.
        local: bool,
    },
    GetEphemerals {
        /// `None`: all of the session's ephemeral nodes.
        path: Option<String>,
    },
    GetAllChildrenNumber {
        path: String,
    },
    /// One limit to set, as zkCli takes one per command.
    SetQuota {
        path: String,
        limits: QuotaLimits,
    },
    ListQuota {
        path: String,
    },
    /// `None`: remove the whole quota; else the limit named.
    DelQuota {
        path: String,
        limits: Option<QuotaLimits>,
    },
    WhoAmI,
    Close,
    /// `None`: reconnect to the current servers.
    Connect {
        host: Option<String>,
    },
    Quit,
    Help,
    History,
    /// The history number as typed (zkCli takes `Integer.decode` forms).
    Redo {
        index: String,
    },
    /// `None` shows the setting; anything but `on` turns printing off, as
    /// in zkCli.
    PrintWatches {
        on: Option<bool>,
    },
}

/// A command and the deprecation warnings its parse printed (zkCli's old
/// `get path watch` forms are still accepted, with a warning on stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub command: Command,
    pub warnings: Vec<String>,
}

/// Java's `\s`: note that it is ASCII only, and includes vertical tab.
pub fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

/// Splits a line into words as zkCli's `ARGS_PATTERN` does: a word is a
/// run of non-blanks not starting with a quote, or a quoted string (its
/// quotes removed). zkCli silently drops an unmatched quote character;
/// here an unmatched quote runs to the end of the line instead, which is
/// what a person who forgot the closing quote meant.
pub fn tokenize(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = line;
    loop {
        rest = rest.trim_start_matches(is_space);
        let Some(first) = rest.chars().next() else {
            break;
        };
        if first == '"' || first == '\'' {
            let body = &rest[1..];
            match body.find(first) {
                Some(end) => {
                    words.push(body[..end].to_owned());
                    rest = &body[end + 1..];
                }
                None => {
                    words.push(body.to_owned());
                    rest = "";
                }
            }
        } else {
            let end = rest.find(is_space).unwrap_or(rest.len());
            words.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    words
}

/// The options of one command line, as commons-cli's `DefaultParser`
/// reads them.
#[derive(Debug, Default)]
struct Options {
    /// The non-option words, the command's name first.
    args: Vec<String>,
    /// Each option given, with its value if it takes one, in order.
    given: Vec<(char, Option<String>)>,
}

impl Options {
    fn has(&self, option: char) -> bool {
        self.given.iter().any(|(c, _)| *c == option)
    }

    /// The first value of `option`, as commons-cli's `getOptionValue`.
    fn value(&self, option: char) -> Option<&str> {
        self.given
            .iter()
            .find(|(c, _)| *c == option)
            .and_then(|(_, value)| value.as_deref())
    }

    fn arg(&self, index: usize) -> Option<&str> {
        self.args.get(index).map(String::as_str)
    }

    /// `args[index]`, which the usage check before made sure exists.
    fn path(&self, index: usize) -> String {
        self.args[index].clone()
    }
}

/// Parses `words` with single-letter `flags` and `valued` options (which
/// take a value).
fn options(words: &[String], flags: &str, valued: &str) -> Result<Options, CliError> {
    let known = |c: char| flags.contains(c) || valued.contains(c);
    // commons-cli's `isArgument`: a word that does not look like one of
    // the command's options (negative numbers never do: no option is a
    // digit) can be an option's value.
    let looks_like_option = |word: &str| {
        word.starts_with("--")
            || (word.len() >= 2 && word.starts_with('-') && word[1..].starts_with(known))
    };
    let mut parsed = Options::default();
    let mut waiting: Option<char> = None;
    let mut only_args = false;
    for word in words {
        if only_args {
            parsed.args.push(word.clone());
            continue;
        }
        if let Some(option) = waiting.take() {
            if !looks_like_option(word) {
                parsed.given.push((option, Some(word.clone())));
                continue;
            }
            return Err(missing_argument(option));
        }
        if word == "--" {
            only_args = true;
        } else if word == "-" || !word.starts_with('-') {
            parsed.args.push(word.clone());
        } else if word.starts_with("--") {
            // None of zkCli's commands has a long option.
            return Err(unrecognized(word));
        } else {
            // One or more short options: -s, -sw, -v3, -sv3.
            for (at, c) in word.char_indices().skip(1) {
                if flags.contains(c) {
                    parsed.given.push((c, None));
                } else if valued.contains(c) {
                    let glued = &word[at + c.len_utf8()..];
                    if glued.is_empty() {
                        waiting = Some(c);
                    } else {
                        parsed.given.push((c, Some(glued.to_owned())));
                    }
                    break;
                } else {
                    return Err(unrecognized(word));
                }
            }
        }
    }
    match waiting {
        Some(option) => Err(missing_argument(option)),
        None => Ok(parsed),
    }
}

/// zkCli's `ReconfigCommand.parse`: options of several letters, checked
/// in its order.
fn reconfig(words: &[String]) -> Result<Command, CliError> {
    let mut given: Vec<(&str, Option<String>)> = Vec::new();
    let mut rest = words[1..].iter();
    while let Some(word) = rest.next() {
        let name = word.strip_prefix('-').unwrap_or("");
        match name {
            "s" => given.push(("s", None)),
            "v" | "file" | "members" | "add" | "remove" => match rest.next() {
                Some(value) => given.push((name, Some(value.clone()))),
                None => {
                    return Err(CliError::new(format!(
                        "Missing argument for option: {name}"
                    )))
                }
            },
            _ if word.starts_with('-') => return Err(unrecognized(word)),
            _ => {}
        }
    }
    let value = |name: &str| {
        given
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.clone())
    };
    let has = |name: &str| given.iter().any(|(n, _)| *n == name);
    let whole = has("file") || has("members");
    if !whole && !has("add") && !has("remove") {
        return Err(CliError::usage("reconfig"));
    }
    let version =
        match value("v") {
            Some(v) => Some(i64::from_str_radix(&v, 16).map_err(|_| {
                CliError::new("-v must be followed by a long (configuration version)")
            })?),
            None => None,
        };
    if whole && (has("add") || has("remove")) {
        return Err(CliError::new(
            "Can't use -file or -members together with -add or -remove (mixing incremental and \
             non-incremental modes is not allowed)",
        ));
    }
    if has("file") && has("members") {
        return Err(CliError::new(
            "Can't use -file and -members together (conflicting non-incremental modes)",
        ));
    }
    let members = match value("file") {
        Some(path) => Some(members_of_file(&path)?),
        None => value("members").map(|m| m.to_lowercase()),
    };
    Ok(Command::Reconfig {
        joining: value("add").map(|v| v.to_lowercase()),
        leaving: value("remove").map(|v| v.to_lowercase()),
        members,
        version,
        stat: has("s"),
    })
}

/// `-file`: the `server.N` lines of a dynamic configuration file, as one
/// comma-separated membership.
fn members_of_file(path: &str) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::new(format!("Error processing {path}{e}")))?;
    let servers: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("server."))
        .collect();
    Ok(servers.join(","))
}

fn unrecognized(word: &str) -> CliError {
    CliError::new(format!("Unrecognized option: {word}"))
}

fn missing_argument(option: char) -> CliError {
    CliError::new(format!("Missing argument for option: {option}"))
}

/// An `int` option value. zkCli dies with a `NumberFormatException` stack
/// trace on a bad one; this says which option was wrong.
fn int_option(options: &Options, option: char) -> Result<Option<i32>, CliError> {
    options
        .value(option)
        .map(|value| {
            value
                .parse::<i32>()
                .map_err(|_| CliError::new(format!("-{option} argument must be an int value")))
        })
        .transpose()
}

/// Parses a command's words (the command's name first). The command must
/// be non-empty.
pub fn parse(words: &[String]) -> Result<Parsed, CliError> {
    let name = words.first().map(String::as_str).unwrap_or_default();
    let mut warnings = Vec::new();
    let at_least = |options: &Options, n: usize| {
        if options.args.len() < n {
            Err(CliError::usage(name))
        } else {
            Ok(())
        }
    };
    // zkCli's `retainCompatibility`: `get path watch` (any third word)
    // still means `get -w path`, with a warning.
    let mut old_watch_form = |options: &Options, new_form: &str| {
        let old = options.args.len() > 2;
        if old {
            warnings.push(format!(
                "'{name} path [watch]' has been deprecated. Please use '{new_form}' instead."
            ));
        }
        old
    };
    let command = match name {
        "ls" => {
            let o = options(words, "swR", "p")?;
            at_least(&o, 2)?;
            let old = old_watch_form(&o, "ls [-w] path");
            let page = int_option(&o, 'p')?;
            if page.is_some_and(|size| size < 1) {
                return Err(CliError::new(
                    "-p argument must be a page size of 1 or more",
                ));
            }
            if page.is_some() && (o.has('w') || o.has('R') || old) {
                return Err(CliError::new(
                    "-p lists one node's children page by page; it takes neither -w nor -R",
                ));
            }
            Command::Ls {
                path: o.path(1),
                stat: o.has('s'),
                watch: o.has('w') || old,
                recursive: o.has('R'),
                page,
            }
        }
        "get" => {
            let o = options(words, "sw", "")?;
            at_least(&o, 2)?;
            let old = old_watch_form(&o, "get [-s] [-w] path");
            Command::Get {
                path: o.path(1),
                stat: o.has('s'),
                watch: o.has('w') || old,
            }
        }
        "stat" => {
            let o = options(words, "w", "")?;
            at_least(&o, 2)?;
            let old = old_watch_form(&o, "stat [-w] path");
            Command::Stat {
                path: o.path(1),
                watch: o.has('w') || old,
            }
        }
        "set" => {
            let o = options(words, "s", "v")?;
            at_least(&o, 3)?;
            Command::Set {
                path: o.path(1),
                data: o.path(2),
                stat: o.has('s'),
                version: int_option(&o, 'v')?,
            }
        }
        "create" => parse_create(words)?,
        "delete" => {
            let o = options(words, "", "v")?;
            at_least(&o, 2)?;
            let mut version = int_option(&o, 'v')?;
            if let Some(old) = o.arg(2) {
                warnings.push(
                    "'delete path [version]' has been deprecated. \
                     Please use 'delete [-v version] path' instead."
                        .to_owned(),
                );
                // zkCli warns and then ignores the version; the warning
                // says what was meant, so honour it.
                if version.is_none() {
                    version = Some(
                        old.parse()
                            .map_err(|_| CliError::new("version argument must be an int value"))?,
                    );
                }
            }
            Command::Delete {
                path: o.path(1),
                version,
            }
        }
        "deleteall" => {
            let o = options(words, "", "b")?;
            at_least(&o, 2)?;
            Command::DeleteAll {
                path: o.path(1),
                batch: int_option(&o, 'b')?.unwrap_or(1000),
            }
        }
        "getAcl" => {
            let o = options(words, "s", "")?;
            at_least(&o, 2)?;
            Command::GetAcl {
                path: o.path(1),
                stat: o.has('s'),
            }
        }
        "setAcl" => {
            let o = options(words, "sR", "v")?;
            at_least(&o, 3)?;
            Command::SetAcl {
                path: o.path(1),
                acl: o.path(2),
                stat: o.has('s'),
                version: int_option(&o, 'v')?,
                recursive: o.has('R'),
            }
        }
        "addauth" => {
            let o = options(words, "", "")?;
            at_least(&o, 2)?;
            Command::AddAuth {
                scheme: o.path(1),
                auth: o.arg(2).unwrap_or_default().to_owned(),
            }
        }
        "sync" => {
            let o = options(words, "", "")?;
            at_least(&o, 2)?;
            Command::Sync { path: o.path(1) }
        }
        "reconfig" => reconfig(words)?,
        "config" => {
            let o = options(words, "cws", "")?;
            Command::Config {
                client: o.has('c'),
                stat: o.has('s'),
                watch: o.has('w'),
            }
        }
        "addWatch" => {
            let o = options(words, "", "m")?;
            if o.args.len() != 2 {
                return Err(CliError::usage(name));
            }
            let mode = match o.value('m').map(str::to_uppercase).as_deref() {
                None | Some("PERSISTENT_RECURSIVE") => AddWatchMode::PersistentRecursive,
                Some("PERSISTENT") => AddWatchMode::Persistent,
                Some(_) => return Err(CliError::usage(name)),
            };
            Command::AddWatch {
                path: o.path(1),
                mode,
            }
        }
        "removewatches" => {
            let o = options(words, "cdpral", "")?;
            at_least(&o, 2)?;
            // The first of these flags wins, in zkCli's order.
            let kind = [
                ('c', WatcherType::Children),
                ('d', WatcherType::Data),
                ('p', WatcherType::Persistent),
                ('r', WatcherType::PersistentRecursive),
            ]
            .into_iter()
            .find(|(flag, _)| o.has(*flag))
            .map_or(WatcherType::Any, |(_, kind)| kind);
            Command::RemoveWatches {
                path: o.path(1),
                kind,
                local: o.has('l'),
            }
        }
        "getEphemerals" => {
            let o = options(words, "", "")?;
            Command::GetEphemerals {
                path: o.arg(1).map(str::to_owned),
            }
        }
        "getAllChildrenNumber" => {
            let o = options(words, "", "")?;
            at_least(&o, 2)?;
            Command::GetAllChildrenNumber { path: o.path(1) }
        }
        "setquota" => {
            let o = options(words, "", "nbNB")?;
            // commons-cli checks the required option group before zkCli
            // counts the arguments.
            let Some((option, value)) = quota_option(&o)? else {
                return Err(CliError::new(
                    "Missing required option: [-n num soft quota, -b bytes soft quota, \
                     -N num hard quota, -B bytes hard quota]",
                ));
            };
            at_least(&o, 2)?;
            let value = value.unwrap_or_default();
            let parsed = match option {
                'n' | 'N' => value.parse::<i32>().map(i64::from).ok(),
                _ => value.parse::<i64>().ok(),
            };
            let Some(value) = parsed else {
                return Err(CliError::printed(
                    "NumberFormatException happens when parsing the option value",
                ));
            };
            Command::SetQuota {
                path: o.path(1),
                limits: quota_limits(option, value),
            }
        }
        "listquota" => {
            let o = options(words, "", "")?;
            at_least(&o, 2)?;
            Command::ListQuota { path: o.path(1) }
        }
        "delquota" => {
            let o = options(words, "nbNB", "")?;
            let limit = quota_option(&o)?;
            at_least(&o, 2)?;
            Command::DelQuota {
                path: o.path(1),
                limits: limit.map(|(option, _)| quota_limits(option, 1)),
            }
        }
        // zkCli does not parse these commands' arguments at all.
        "whoami" => Command::WhoAmI,
        "close" => Command::Close,
        "quit" | "exit" => Command::Quit,
        "help" => Command::Help,
        "history" => Command::History,
        "connect" => Command::Connect {
            host: words.get(1).cloned(),
        },
        "redo" => match words.get(1) {
            Some(index) => Command::Redo {
                index: index.clone(),
            },
            None => return Err(CliError::usage(name)),
        },
        "printwatches" => Command::PrintWatches {
            on: words.get(1).map(|word| word == "on"),
        },
        _ => {
            return Err(CliError {
                message: format!("{}Command not found: {name}", usage()),
                code: 127,
            })
        }
    };
    Ok(Parsed { command, warnings })
}

/// The one quota option given (`-n`, `-b`, `-N` or `-B`, which zkCli
/// puts in one commons-cli `OptionGroup`), with its value if it has one.
fn quota_option(o: &Options) -> Result<Option<(char, Option<String>)>, CliError> {
    let first = o.given.first().cloned();
    if let Some((first, _)) = &first {
        if let Some((other, _)) = o.given.iter().find(|(c, _)| c != first) {
            return Err(CliError::new(format!(
                "The option '{other}' was specified but an option from this group has already \
                 been selected: '{first}'"
            )));
        }
    }
    Ok(first)
}

/// The limits a quota option names, set to `value`.
fn quota_limits(option: char, value: i64) -> QuotaLimits {
    let mut limits = QuotaLimits::default();
    let slot = match option {
        'n' => &mut limits.count,
        'b' => &mut limits.bytes,
        'N' => &mut limits.count_hard,
        _ => &mut limits.bytes_hard,
    };
    *slot = Some(value);
    limits
}

/// `create`, with zkCli's checks of the mode flags, in its order.
fn parse_create(words: &[String]) -> Result<Command, CliError> {
    let o = options(words, "esc", "t")?;
    if o.args.len() < 2 {
        return Err(CliError::usage("create"));
    }
    let (ephemeral, sequential, container) = (o.has('e'), o.has('s'), o.has('c'));
    if container && (ephemeral || sequential) {
        return Err(CliError::new(
            "-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential.",
        ));
    }
    let ttl = o
        .value('t')
        .map(|value| {
            value
                .parse::<i64>()
                .map_err(|_| CliError::new("-t argument must be a long value"))
        })
        .transpose()?;
    if ttl.is_some() && ephemeral {
        return Err(CliError::new("TTLs cannot be used with Ephemeral znodes"));
    }
    if ttl.is_some() && container {
        return Err(CliError::new("TTLs cannot be used with Container znodes"));
    }
    let mode = match (ephemeral, sequential, container, ttl.is_some()) {
        (true, true, _, _) => CreateMode::EphemeralSequential,
        (true, false, _, _) => CreateMode::Ephemeral,
        (false, true, _, true) => CreateMode::PersistentSequentialWithTtl,
        (false, true, _, false) => CreateMode::PersistentSequential,
        (false, false, true, _) => CreateMode::Container,
        (false, false, false, true) => CreateMode::PersistentWithTtl,
        (false, false, false, false) => CreateMode::Persistent,
    };
    let max_ttl = i64::try_from(MAX_TTL.as_millis()).unwrap_or(i64::MAX);
    if let Some(ttl) = ttl {
        if ttl <= 0 || ttl > max_ttl {
            return Err(CliError::new(format!(
                "ttl must be positive and cannot be larger than: {max_ttl}"
            )));
        }
    }
    Ok(Command::Create {
        path: o.path(1),
        data: o.arg(2).map(str::to_owned),
        acl: o.arg(3).map(str::to_owned),
        mode,
        ttl,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        tokenize(line)
    }

    fn command(line: &str) -> Command {
        parse(&words(line)).expect(line).command
    }

    fn error(line: &str) -> String {
        parse(&words(line)).expect_err(line).message
    }

    #[test]
    fn splits_like_zkcli() {
        assert_eq!(tokenize("  ls   /a  "), ["ls", "/a"]);
        assert_eq!(
            tokenize(r#"create /a "hello world" 'it''s'"#),
            ["create", "/a", "hello world", "it", "s"]
        );
        // A quote inside a word is part of it.
        assert_eq!(tokenize(r#"set /a x"y z""#), ["set", "/a", "x\"y", "z\""]);
        // Quotes right after a quoted word start a new word.
        assert_eq!(tokenize(r#""a"b"#), ["a", "b"]);
        assert_eq!(tokenize(r#"set /a """#), ["set", "/a", ""]);
        assert_eq!(
            tokenize("set /a 'unterminated x"),
            ["set", "/a", "unterminated x"]
        );
        assert!(tokenize(" \t ").is_empty());
    }

    #[test]
    fn options_go_anywhere_and_combine() {
        assert_eq!(
            command("set /a x -s -v 3"),
            Command::Set {
                path: "/a".into(),
                data: "x".into(),
                stat: true,
                version: Some(3)
            }
        );
        assert_eq!(
            command("set -sv3 /a x"),
            command("set /a -s x -v3"),
            "glued and separate values"
        );
        assert_eq!(
            command("ls -sRw /"),
            Command::Ls {
                path: "/".into(),
                stat: true,
                watch: true,
                recursive: true,
                page: None,
            }
        );
        // After `--`, words that look like options are data.
        assert_eq!(
            command("set /a -- -1"),
            Command::Set {
                path: "/a".into(),
                data: "-1".into(),
                stat: false,
                version: None
            }
        );
        // A negative number can be an option's value.
        assert_eq!(
            command("delete -v -1 /a"),
            Command::Delete {
                path: "/a".into(),
                version: Some(-1)
            }
        );
    }

    #[test]
    fn option_errors_are_zkclis() {
        assert_eq!(error("get -x /a"), "Unrecognized option: -x");
        assert_eq!(error("ls --s /a"), "Unrecognized option: --s");
        assert_eq!(error("set /a -1"), "Unrecognized option: -1");
        assert_eq!(error("set /a x -v"), "Missing argument for option: v");
        assert_eq!(error("set -v -s /a x"), "Missing argument for option: v");
        assert_eq!(error("set -v abc /a x"), "-v argument must be an int value");
        assert_eq!(error("get"), "get [-s] [-w] path");
        assert_eq!(error("ls -s"), "ls [-s] [-w] [-R] path");
        assert_eq!(
            error("ls -p 0 /"),
            "-p argument must be a page size of 1 or more"
        );
        assert!(error("ls -p 5 -R /").starts_with("-p lists one node's children"));
        assert_eq!(error("set /a"), "set [-s] [-v version] path data");
        assert_eq!(error("setAcl /a"), "setAcl [-s] [-v version] [-R] path acl");
        assert_eq!(
            error("addWatch -m foo /a"),
            "addWatch [-m mode] path # optional mode is one of \
             [PERSISTENT, PERSISTENT_RECURSIVE] - default is PERSISTENT_RECURSIVE"
        );
        let unknown = parse(&words("bogus /a")).unwrap_err();
        assert_eq!(unknown.code, 127);
        assert!(unknown.message.ends_with("Command not found: bogus"));
        assert!(unknown.message.contains("\tls [-s] [-w] [-R] path\n"));
    }

    #[test]
    fn create_modes_and_checks() {
        let mode = |line: &str| match command(line) {
            Command::Create { mode, .. } => mode,
            other => panic!("{other:?}"),
        };
        assert_eq!(mode("create /a"), CreateMode::Persistent);
        assert_eq!(mode("create -e /a"), CreateMode::Ephemeral);
        assert_eq!(mode("create -s /a"), CreateMode::PersistentSequential);
        assert_eq!(mode("create -es /a"), CreateMode::EphemeralSequential);
        assert_eq!(mode("create -c /a"), CreateMode::Container);
        assert_eq!(mode("create -t 10 /a"), CreateMode::PersistentWithTtl);
        assert_eq!(
            mode("create -s -t 10 /a"),
            CreateMode::PersistentSequentialWithTtl
        );
        assert_eq!(
            command("create /a data world:anyone:r"),
            Command::Create {
                path: "/a".into(),
                data: Some("data".into()),
                acl: Some("world:anyone:r".into()),
                mode: CreateMode::Persistent,
                ttl: None
            }
        );
        assert_eq!(
            error("create -c -s /a"),
            "-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential."
        );
        assert_eq!(
            error("create -t abc /a"),
            "-t argument must be a long value"
        );
        assert_eq!(
            error("create -t 5 -e /a"),
            "TTLs cannot be used with Ephemeral znodes"
        );
        assert_eq!(
            error("create -t 0 /a"),
            "ttl must be positive and cannot be larger than: 1099511627775"
        );
        assert_eq!(
            error("create"),
            "create [-s] [-e] [-c] [-t ttl] path [data] [acl]"
        );
    }

    #[test]
    fn quota_commands_take_one_limit_as_zkcli_does() {
        let limits = |count_hard| QuotaLimits {
            count_hard,
            ..QuotaLimits::default()
        };
        assert_eq!(
            command("setquota -N 5 /a"),
            Command::SetQuota {
                path: "/a".into(),
                limits: limits(Some(5)),
            }
        );
        assert_eq!(
            command("setquota /a -b 1024"),
            Command::SetQuota {
                path: "/a".into(),
                limits: QuotaLimits {
                    bytes: Some(1024),
                    ..QuotaLimits::default()
                },
            }
        );
        assert_eq!(
            error("setquota -n 1 -b 2 /a"),
            "The option 'b' was specified but an option from this group has already been \
             selected: 'n'"
        );
        assert_eq!(
            error("setquota -n x /a"),
            "NumberFormatException happens when parsing the option value"
        );
        assert!(error("setquota /a").starts_with("Missing required option: [-n num soft quota"));
        assert_eq!(error("setquota -n 1"), "setquota -n|-b|-N|-B val path");
        assert_eq!(
            command("delquota -N /a"),
            Command::DelQuota {
                path: "/a".into(),
                limits: Some(limits(Some(1))),
            }
        );
        assert_eq!(
            command("delquota /a"),
            Command::DelQuota {
                path: "/a".into(),
                limits: None,
            }
        );
        assert_eq!(
            command("listquota /a"),
            Command::ListQuota { path: "/a".into() }
        );
    }

    #[test]
    fn old_forms_warn() {
        let parsed = parse(&words("get /a watch")).unwrap();
        assert_eq!(
            parsed.command,
            Command::Get {
                path: "/a".into(),
                stat: false,
                watch: true
            }
        );
        assert_eq!(
            parsed.warnings,
            ["'get path [watch]' has been deprecated. Please use 'get [-s] [-w] path' instead."]
        );
        let parsed = parse(&words("delete /a 4")).unwrap();
        assert_eq!(
            parsed.command,
            Command::Delete {
                path: "/a".into(),
                version: Some(4)
            }
        );
        assert_eq!(parsed.warnings.len(), 1);
    }

    #[test]
    fn watch_commands() {
        assert_eq!(
            command("addWatch -m persistent /a"),
            Command::AddWatch {
                path: "/a".into(),
                mode: AddWatchMode::Persistent
            }
        );
        assert_eq!(
            command("addWatch /a"),
            Command::AddWatch {
                path: "/a".into(),
                mode: AddWatchMode::PersistentRecursive
            }
        );
        assert_eq!(
            command("removewatches /a -d -l"),
            Command::RemoveWatches {
                path: "/a".into(),
                kind: WatcherType::Data,
                local: true
            }
        );
        assert_eq!(
            command("removewatches /a"),
            Command::RemoveWatches {
                path: "/a".into(),
                kind: WatcherType::Any,
                local: false
            }
        );
        assert_eq!(
            command("printwatches off"),
            Command::PrintWatches { on: Some(false) }
        );
        assert_eq!(
            command("getEphemerals"),
            Command::GetEphemerals { path: None }
        );
    }

    #[test]
    fn usage_lists_every_command_sorted() {
        let names: Vec<&str> = command_names().collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert!(usage().contains("\twhoami \n"));
        assert!(usage().ends_with("Paddock extensions:\n\tls [-s] -p pageSize path # the children page by page, a name a line (Paddock only)\n"));
        assert!(is_command("getAllChildrenNumber") && !is_command("127.0.0.1:2181"));
    }

    #[test]
    fn reconfig_takes_zookeeper_s_options() {
        assert_eq!(
            command("reconfig -s -v 1a -remove 3 -add server.4=H:1:2;3"),
            Command::Reconfig {
                joining: Some("server.4=h:1:2;3".into()),
                leaving: Some("3".into()),
                members: None,
                version: Some(0x1a),
                stat: true,
            }
        );
        assert_eq!(error("reconfig"), usage_of("reconfig"));
        assert_eq!(
            error("reconfig -members server.1=a:1:2;3 -remove 2"),
            "Can't use -file or -members together with -add or -remove (mixing incremental and \
             non-incremental modes is not allowed)"
        );
        assert_eq!(
            error("reconfig -remove 2 -v xyz"),
            "-v must be followed by a long (configuration version)"
        );
        assert_eq!(
            error("reconfig -remove"),
            "Missing argument for option: remove"
        );
        assert_eq!(error("reconfig -x"), "Unrecognized option: -x");
    }
}
