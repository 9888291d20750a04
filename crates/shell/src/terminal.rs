//! The three ways to run the shell (one-shot, piped, interactive), and
//! the interactive line editor's tab completion.
//!
//! The shell runs on a tokio runtime with one worker thread: the client's
//! session and reader tasks and the event printer live there, so the
//! session keeps pinging while the main thread sits in the line editor
//! waiting for a key, and the copies of one notification reach the event
//! printer together (see `watches`). The main thread runs each command
//! with `block_on`, and so does the completer when it lists children.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustyline::completion::{Completer, Pair};
use rustyline::config::{CompletionType, Config};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, ExternalPrinter, Helper};
use sasl::jaas::Login;
use tokio::runtime::{Handle, Runtime};

use crate::parse::{self, is_space};
use crate::shell::{ClientSlot, Flow, Shell, ShellOptions};
use crate::watches::{EventSink, StdoutSink};

/// zkCli's default server.
pub const DEFAULT_SERVER: &str = "localhost:2181";

/// How long tab completion waits for the server before offering nothing.
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(2);

/// What `paddock shell` was asked to do.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// `host:port[,host:port...][/chroot]`; [`DEFAULT_SERVER`] if `None`.
    pub server: Option<String>,
    /// `-c` commands, each a line as typed at the prompt, run in order.
    pub commands: Vec<String>,
    /// zkCli-style trailing words: one command, its words as given (the
    /// shell that ran us already split them), run after `commands`.
    pub words: Vec<String>,
    /// The session timeout to ask for.
    pub session_timeout: Duration,
    /// Log in with SASL DIGEST-MD5.
    pub sasl: Option<Login>,
    /// Connect with TLS.
    pub tls: Option<Arc<client::rustls::ClientConfig>>,
}

impl Default for Invocation {
    fn default() -> Self {
        Self {
            server: None,
            commands: Vec::new(),
            words: Vec::new(),
            session_timeout: ShellOptions::default().session_timeout,
            sasl: None,
            tls: None,
        }
    }
}

/// Sorts out the first positional word: `paddock shell ls /` runs `ls /`
/// against the default server, `paddock shell host:2181 ls /` against
/// `host:2181`. A word that names a command is never a connect string.
pub fn resolve(first: Option<String>, rest: Vec<String>) -> (Option<String>, Vec<String>) {
    match first {
        Some(word) if parse::is_command(&word) => {
            let mut words = vec![word];
            words.extend(rest);
            (None, words)
        }
        server => (server, rest),
    }
}

/// Runs the shell; returns the process's exit code.
pub fn run(invocation: Invocation) -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("paddock shell: cannot start the async runtime: {error}");
            return 1;
        }
    };
    let server = invocation
        .server
        .clone()
        .unwrap_or_else(|| DEFAULT_SERVER.to_owned());
    let options = ShellOptions {
        session_timeout: invocation.session_timeout,
        session_events: true,
        sasl: invocation.sasl.clone(),
        tls: invocation.tls.clone(),
    };
    let code = if !invocation.commands.is_empty() || !invocation.words.is_empty() {
        let options = ShellOptions {
            session_events: false,
            ..options
        };
        one_shot(&runtime, &server, &invocation, options)
    } else if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        interactive(&runtime, &server, options)
    } else {
        piped(&runtime, &server, options)
    };
    // Nothing left to wait for: the session is closed.
    runtime.shutdown_background();
    code
}

/// Prints on stdout, ignoring a closed stdout (`println!` would panic):
/// the commands still run, as zkCli's do.
fn say(text: &str) {
    let mut out = std::io::stdout();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn new_shell(
    runtime: &Runtime,
    server: &str,
    options: ShellOptions,
    sink: Arc<dyn EventSink>,
) -> Shell {
    // `Shell::new` spawns the event printer, so it needs the runtime.
    runtime.block_on(async { Shell::new(server, options, sink) })
}

/// `-c` commands and trailing words: run them, print their events as they
/// come, exit with the last failure's code (0 if all succeeded).
fn one_shot(
    runtime: &Runtime,
    server: &str,
    invocation: &Invocation,
    options: ShellOptions,
) -> i32 {
    let mut shell = new_shell(runtime, server, options, Arc::new(StdoutSink));
    if let Err(error) = runtime.block_on(shell.connect(server)) {
        eprintln!("{}", error.message);
        return 1;
    }
    let mut batches: Vec<Vec<String>> = invocation
        .commands
        .iter()
        .map(|line| parse::tokenize(line))
        .filter(|words| !words.is_empty())
        .collect();
    if !invocation.words.is_empty() {
        batches.push(invocation.words.clone());
    }
    let mut code = 0;
    for words in batches {
        let flow = runtime.block_on(async {
            let flow = shell
                .execute(&words, &mut std::io::stdout(), &mut std::io::stderr())
                .await;
            shell.flush_events().await;
            flow
        });
        if shell.last_code() != 0 {
            code = shell.last_code();
        }
        if flow == Flow::Quit {
            break;
        }
    }
    runtime.block_on(shell.disconnect());
    code
}

/// Commands from a standard input that is not a terminal, one per line,
/// without prompts, as zkCli runs a script fed to it. Exits with the last
/// command's code.
fn piped(runtime: &Runtime, server: &str, options: ShellOptions) -> i32 {
    let mut shell = new_shell(runtime, server, options, Arc::new(StdoutSink));
    say(&format!("Connecting to {server}\n"));
    if let Err(error) = runtime.block_on(shell.connect(server)) {
        eprintln!("{}", error.message);
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else {
            break;
        };
        let flow = runtime.block_on(async {
            let flow = shell
                .execute_line(&line, &mut std::io::stdout(), &mut std::io::stderr())
                .await;
            shell.flush_events().await;
            flow
        });
        if flow == Flow::Quit {
            break;
        }
    }
    runtime.block_on(shell.disconnect());
    shell.last_code()
}

/// The line editor, with history and completion.
fn interactive(runtime: &Runtime, server: &str, options: ShellOptions) -> i32 {
    let config = Config::builder()
        // Bash-like: complete the common prefix, list the choices on a
        // second Tab.
        .completion_type(CompletionType::List)
        .auto_add_history(false)
        .build();
    let mut editor: Editor<ShellHelper, DefaultHistory> = match Editor::with_config(config) {
        Ok(editor) => editor,
        Err(error) => {
            eprintln!("paddock shell: cannot set up the terminal: {error}");
            return 1;
        }
    };
    // Events are printed through the editor, which redraws the line being
    // typed below them.
    let sink: Arc<dyn EventSink> = match editor.create_external_printer() {
        Ok(printer) => Arc::new(PrinterSink(Mutex::new(printer))),
        Err(_) => Arc::new(StdoutSink),
    };
    let mut shell = new_shell(runtime, server, options, sink);
    say(&format!(
        "Connecting to {server}\nWelcome to the Paddock shell. Type help for the commands.\n"
    ));
    if let Err(error) = runtime.block_on(shell.connect(server)) {
        eprintln!("{}", error.message);
    }
    // The connected event before the first prompt, not over it.
    runtime.block_on(shell.flush_events());
    editor.set_helper(Some(ShellHelper {
        slot: shell.client_slot(),
        runtime: runtime.handle().clone(),
    }));
    loop {
        match editor.readline(&shell.prompt()) {
            Ok(line) => {
                if !line.trim_matches(is_space).is_empty() {
                    // A history that cannot grow is no reason to stop.
                    let _ = editor.add_history_entry(line.as_str());
                }
                let flow = runtime.block_on(shell.execute_line(
                    &line,
                    &mut std::io::stdout(),
                    &mut std::io::stderr(),
                ));
                if flow == Flow::Quit {
                    break;
                }
            }
            // Ctrl-C drops the line being typed, as in a Unix shell.
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => {
                eprintln!("paddock shell: {error}");
                break;
            }
        }
    }
    runtime.block_on(shell.disconnect());
    shell.last_code()
}

/// Events through the line editor's printer.
struct PrinterSink<P>(Mutex<P>);

impl<P: ExternalPrinter + Send + 'static> EventSink for PrinterSink<P> {
    fn print(&self, text: &str) {
        let mut printer = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Nowhere to report a terminal that cannot be written to.
        let _ = printer.print(text.to_owned());
    }
}

/// Tab completion: command names for the first word, znode paths for a
/// word starting with `/` (the children of its parent that start with
/// what follows the last `/`, as zkCli's `JLineZNodeCompleter`).
pub(crate) struct ShellHelper {
    slot: ClientSlot,
    runtime: Handle,
}

impl ShellHelper {
    fn znodes(&self, word: &str) -> Vec<Pair> {
        let cut = word.rfind('/').unwrap_or(0);
        let (parent, prefix) = if cut == 0 {
            ("/", &word[1..])
        } else {
            (&word[..cut], &word[cut + 1..])
        };
        let client = self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(client) = client else {
            return Vec::new();
        };
        // The completer runs on the main thread, outside the runtime.
        let listed = self.runtime.block_on(async {
            tokio::time::timeout(COMPLETION_TIMEOUT, client.get_children(parent)).await
        });
        let Ok(Ok(mut children)) = listed else {
            return Vec::new();
        };
        children.retain(|child| child.starts_with(prefix));
        children.sort_by(|a, b| crate::format::java_cmp(a, b));
        children
            .into_iter()
            .map(|child| Pair {
                replacement: if parent == "/" {
                    format!("/{child}")
                } else {
                    format!("{parent}/{child}")
                },
                display: child,
            })
            .collect()
    }
}

/// The candidates for `line` with the cursor at `pos`: where the word
/// being completed starts, and what it could be.
pub(crate) fn complete_with(
    line: &str,
    pos: usize,
    znodes: impl FnOnce(&str) -> Vec<Pair>,
) -> (usize, Vec<Pair>) {
    let before = &line[..pos];
    let start = before.rfind(is_space).map_or(0, |at| at + 1);
    let word = &before[start..];
    if word.starts_with('/') {
        (start, znodes(word))
    } else if before[..start].trim_matches(is_space).is_empty() {
        let commands = parse::command_names()
            .filter(|name| name.starts_with(word))
            .map(|name| Pair {
                display: name.to_owned(),
                replacement: format!("{name} "),
            })
            .collect();
        (start, commands)
    } else {
        (start, Vec::new())
    }
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _context: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        Ok(complete_with(line, pos, |word| self.znodes(word)))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {}

impl Validator for ShellHelper {}

impl Helper for ShellHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    fn replacements(line: &str) -> (usize, Vec<String>) {
        let (start, pairs) = complete_with(line, line.len(), |word| {
            vec![Pair {
                display: String::new(),
                replacement: format!("znode:{word}"),
            }]
        });
        (start, pairs.into_iter().map(|p| p.replacement).collect())
    }

    #[test]
    fn completes_commands_then_paths() {
        assert_eq!(
            replacements("get"),
            (
                0,
                vec![
                    "get ".into(),
                    "getAcl ".into(),
                    "getAllChildrenNumber ".into(),
                    "getEphemerals ".into()
                ]
            )
        );
        assert_eq!(
            replacements("  del").1,
            ["delete ", "deleteall ", "delquota "]
        );
        assert_eq!(replacements("get -s /a/b"), (7, vec!["znode:/a/b".into()]));
        // Not the first word, not a path: nothing.
        assert_eq!(replacements("set /a da").1, Vec::<String>::new());
    }

    #[test]
    fn first_word_is_a_server_unless_it_is_a_command() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            resolve(Some("ls".into()), words(&["-s", "/"])),
            (None, words(&["ls", "-s", "/"]))
        );
        assert_eq!(
            resolve(Some("h:1".into()), words(&["get", "/a"])),
            (Some("h:1".into()), words(&["get", "/a"]))
        );
        assert_eq!(resolve(None, vec![]), (None, vec![]));
    }
}
