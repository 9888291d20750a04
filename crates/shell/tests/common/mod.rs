//! A real Paddock server for the shell's tests, and a shell whose output
//! is captured.
//!
//! The server is `target/debug/paddock serve` (or `PADDOCK_BIN`): run
//! `cargo build -p paddock` first. Each [`Server`] has a free port and its
//! own data directory, and is killed when dropped.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shell::{EventSink, Flow, Shell, ShellOptions};

const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long any one test may take.
pub const TEST_LIMIT: Duration = Duration::from_secs(60);

fn paddock_bin() -> PathBuf {
    match std::env::var_os("PADDOCK_BIN") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/paddock"),
    }
}

pub struct Server {
    _dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
}

impl Server {
    pub fn start() -> Server {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = launch::port::free().expect("a free port");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("the data directory");
        let cfg = dir.path().join("zoo.cfg");
        std::fs::write(
            &cfg,
            format!(
                "tickTime=200\nmaxSessionTimeout=10000\nclientPort={port}\n\
                 clientPortAddress=127.0.0.1\ndataDir={}\n4lw.commands.whitelist=*\n\
                 extendedTypesEnabled=true\n",
                data.display()
            ),
        )
        .expect("zoo.cfg");
        let bin = paddock_bin();
        assert!(
            bin.exists(),
            "{} does not exist: run `cargo build -p paddock` first",
            bin.display()
        );
        let log = std::fs::File::create(dir.path().join("server.log")).expect("the log");
        let child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("spawning paddock");
        let server = Server {
            _dir: dir,
            port,
            child,
        };
        server.wait_ready();
        server
    }

    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if four_letter_word(self.port, "ruok").is_ok_and(|answer| answer == "imok") {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("paddock did not answer ruok within {START_TIMEOUT:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn four_letter_word(port: u16, word: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(word.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

/// Events, as printed.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<String>>);

impl Captured {
    /// Everything printed since the last call.
    pub fn take(&self) -> String {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl EventSink for Captured {
    fn print(&self, text: &str) {
        self.0.lock().unwrap().push_str(text);
    }
}

/// What one command printed, and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub out: String,
    pub err: String,
    pub code: i32,
}

/// A shell connected to `server`, with its events captured.
pub struct TestShell {
    pub shell: Shell,
    pub events: Captured,
}

impl TestShell {
    /// Must be called within a tokio runtime.
    pub async fn connect(server: &Server) -> TestShell {
        let events = Captured::default();
        let options = ShellOptions {
            session_timeout: Duration::from_secs(10),
            session_events: true,
            sasl: None,
            tls: None,
        };
        let mut shell = Shell::new(&server.connect_string(), options, Arc::new(events.clone()));
        shell
            .connect(&server.connect_string())
            .await
            .unwrap_or_else(|e| panic!("connecting: {}", e.message));
        shell.flush_events().await;
        TestShell { shell, events }
    }

    /// Runs `line` as typed at the prompt.
    pub async fn run(&mut self, line: &str) -> Output {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let flow = self.shell.execute_line(line, &mut out, &mut err).await;
        assert_eq!(flow, Flow::Continue, "{line}");
        self.shell.flush_events().await;
        Output {
            out: String::from_utf8(out).expect("utf-8 output"),
            err: String::from_utf8(err).expect("utf-8 errors"),
            code: self.shell.last_code(),
        }
    }

    /// Runs `line`, which must succeed; returns its stdout.
    pub async fn ok(&mut self, line: &str) -> String {
        let output = self.run(line).await;
        assert_eq!(output.code, 0, "{line}: {output:?}");
        output.out
    }

    /// Runs `line`, which must fail with code 1; returns its stderr.
    pub async fn fails(&mut self, line: &str) -> String {
        let output = self.run(line).await;
        assert_eq!(output.code, 1, "{line}: {output:?}");
        output.err
    }
}

/// Runs `test`, failing if it takes longer than [`TEST_LIMIT`].
pub async fn bounded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(TEST_LIMIT, test)
        .await
        .expect("the test took too long")
}
