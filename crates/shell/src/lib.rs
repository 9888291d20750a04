//! `paddock shell`: a replacement for ZooKeeper's `zkCli.sh`, over the
//! async [`client`].
//!
//! zkCli's behaviour is the specification, as Apache ZooKeeper 3.8 (the
//! version Debian ships, which the end-to-end tests compare against)
//! shows it: the same commands and flags, parsed the way its commons-cli
//! parser does; the same output, byte for byte where a script could depend
//! on it (`Stat` with Java's `Date.toString`, ACLs in jute's `toString`
//! form, `Created /x` on stderr, error messages such as `Node does not
//! exist: /x`, watch events as `WATCHER::` blocks); and the same exit
//! codes (1 for a failed command, 127 for an unknown one). Where zkCli
//! crashes with a Java stack trace (`set -v abc`) or leaks a Java class
//! name into a message, this shell says what was wrong instead.
//!
//! Three ways to run, chosen by [`run`]:
//! - one-shot: `-c "cmd"` (any number) or zkCli's trailing command words;
//!   runs them, then exits with the last failure's code (0 if none);
//! - piped: commands read from a standard input that is not a terminal,
//!   without prompts, as zkCli does with a script on its stdin;
//! - interactive: a line editor (`rustyline`) with the zkCli prompt
//!   `[zk: HOST(STATE) N] `, history, and tab completion of command names
//!   and of znode paths (the children of the typed parent, from the
//!   server).
//!
//! Layout:
//! - `parse`: splitting a line into words as zkCli does, and each
//!   command's flags and arguments into a [`parse::Command`].
//! - `format`: what zkCli prints: stats, dates, ACLs, events, errors, and
//!   its path validation (whose messages it prints).
//! - `shell`: [`Shell`], which runs commands against a [`client::Client`]
//!   and writes their output.
//! - `watches`: the task that prints watch and session events as they
//!   come, once per notification as zkCli's single default watcher does.
//! - `terminal`: the three modes: the line editor and its completion, the
//!   piped loop and one-shot runs.
//! - `date`: Java's `Date.toString` in the local time zone.

mod date;
pub mod format;
pub mod parse;
mod shell;
mod terminal;
mod watches;

pub use shell::{ClientSlot, Flow, Shell, ShellOptions, CONNECT_TIMEOUT};
pub use terminal::{resolve, run, Invocation, DEFAULT_SERVER};
pub use watches::{EventSink, StdoutSink};
