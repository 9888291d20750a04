//! Real servers for the client's integration tests.
//!
//! Every client test runs against each server kind available: Paddock
//! (`target/debug/paddock`, or `PADDOCK_BIN`; run `cargo build -p paddock`
//! first) and Apache ZooKeeper from Debian's `zookeeper` package when Java
//! and its jars are installed (skipped with a note otherwise, or with
//! `PADDOCK_CLIENT_TESTS_SKIP_ZOOKEEPER=1`). ZooKeeper is the
//! specification: a test that passes on Paddock only is a bug in one of
//! the two.
//!
//! A [`Server`] is one process on a free port with its own temporary data
//! directory, killed when dropped.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::task::Poll;
use std::time::{Duration, Instant};

use client::{Client, ConnectOptions};

/// The session timeout tests ask for; the servers allow up to 10 s.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to answer `ruok` after starting.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const ZK_JARS: &str = "/usr/share/java";
/// The JAAS file of a server started with one, in its directory.
const JAAS_FILE: &str = "jaas.conf";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Paddock,
    ZooKeeper,
}

/// The server kinds to run every test against, in order.
pub fn kinds() -> Vec<Kind> {
    let mut kinds = vec![Kind::Paddock];
    match zookeeper_missing() {
        None => kinds.push(Kind::ZooKeeper),
        Some(why) => eprintln!("note: skipping Apache ZooKeeper: {why}"),
    }
    kinds
}

fn zookeeper_missing() -> Option<String> {
    if std::env::var_os("PADDOCK_CLIENT_TESTS_SKIP_ZOOKEEPER").is_some() {
        return Some("PADDOCK_CLIENT_TESTS_SKIP_ZOOKEEPER is set".into());
    }
    if !Path::new(ZK_JARS).join("zookeeper.jar").exists() {
        return Some(format!(
            "{ZK_JARS}/zookeeper.jar is missing (apt-get install zookeeper)"
        ));
    }
    let java = Command::new("java")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match java {
        Ok(status) if status.success() => None,
        _ => Some("no working `java` on PATH".into()),
    }
}

pub fn paddock_bin() -> PathBuf {
    match std::env::var_os("PADDOCK_BIN") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/paddock"),
    }
}

/// One server process.
pub struct Server {
    pub kind: Kind,
    dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
}

impl Server {
    /// Starts a server of `kind` and waits until it serves.
    pub fn start(kind: Kind) -> Server {
        Self::start_with_jaas(kind, None)
    }

    /// Starts a server whose SASL users are the `Server` section of the
    /// JAAS file `jaas` (Paddock's `jaasLoginConfig`, ZooKeeper's
    /// `java.security.auth.login.config`).
    pub fn start_with_jaas(kind: Kind, jaas: Option<&str>) -> Server {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = launch::port::free().expect("a free port");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("the data directory");
        let cfg = format!(
            "tickTime=200\n\
             maxSessionTimeout=10000\n\
             clientPort={port}\n\
             clientPortAddress=127.0.0.1\n\
             dataDir={}\n\
             4lw.commands.whitelist=*\n\
             extendedTypesEnabled=true\n\
             admin.enableServer=false\n",
            data.display()
        );
        let mut cfg = cfg;
        if let Some(jaas) = jaas {
            let path = dir.path().join(JAAS_FILE);
            std::fs::write(&path, jaas).expect("the JAAS file");
            cfg.push_str(&format!("jaasLoginConfig={}\n", path.display()));
        }
        std::fs::write(dir.path().join("zoo.cfg"), cfg).expect("zoo.cfg");
        let mut server = Server {
            kind,
            dir,
            port,
            child: None,
        };
        server.spawn();
        server
    }

    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Connects a client with the tests' session timeout.
    pub async fn client(&self) -> Client {
        self.client_with(&self.connect_string(), ConnectOptions::new())
            .await
    }

    /// Connects with `options` (the session timeout defaults to the
    /// tests').
    pub async fn client_with(&self, connect_string: &str, options: ConnectOptions) -> Client {
        Client::connect(
            connect_string,
            options
                .session_timeout(SESSION_TIMEOUT)
                .connect_timeout(Duration::from_secs(20)),
        )
        .await
        .unwrap_or_else(|e| panic!("connecting to {:?} at {connect_string}: {e}", self.kind))
    }

    /// SIGKILL: no goodbye to anyone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP / SIGCONT: the server keeps its sockets but answers nothing.
    /// Returns once every thread of the server has stopped: on a loaded
    /// machine a thread may run on for a while after the signal is sent.
    pub fn pause(&self) {
        self.signal("-STOP");
        let tasks = PathBuf::from(format!("/proc/{}/task", self.pid()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let all_stopped = std::fs::read_dir(&tasks)
                .map(|entries| {
                    entries.flatten().all(|task| {
                        std::fs::read_to_string(task.path().join("stat"))
                            // The state follows the parenthesised name.
                            // A thread inside a system call (D) stops when
                            // it returns, before running any server code.
                            .map(|stat| {
                                stat.rsplit(") ")
                                    .next()
                                    .and_then(|rest| rest.chars().next())
                                    .is_some_and(|state| "TtDZX".contains(state))
                            })
                            .unwrap_or(true)
                    })
                })
                .unwrap_or(false);
            if all_stopped {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let states: Vec<String> = std::fs::read_dir(&tasks)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|task| {
                        std::fs::read_to_string(task.path().join("stat")).unwrap_or_default()
                    })
                    .collect()
            })
            .unwrap_or_default();
        panic!("the server did not stop within 10 s of SIGSTOP: {states:?}");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("a running server").id()
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("a running server").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill(1)");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Starts the server again on the same port and data directory. Blocks
    /// the calling thread; call from a multi-threaded runtime through
    /// `block_in_place` (as [`Server::restart`] does).
    pub fn start_again(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Kills the server, waits `down`, starts it again, without blocking
    /// the runtime's other tasks (the client under test keeps running).
    pub async fn restart(&mut self, down: Duration) {
        self.kill();
        tokio::time::sleep(down).await;
        tokio::task::block_in_place(|| self.spawn());
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn spawn(&mut self) {
        let cfg = self.dir.path().join("zoo.cfg");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("the server log");
        let mut command = match self.kind {
            Kind::Paddock => {
                let bin = paddock_bin();
                assert!(
                    bin.exists(),
                    "{} does not exist: run `cargo build -p paddock` first",
                    bin.display()
                );
                let mut command = Command::new(bin);
                command.arg("serve").arg("--config").arg(&cfg);
                command
            }
            Kind::ZooKeeper => {
                let mut command = Command::new("java");
                command
                    .args(zookeeper_jaas_properties(self.dir.path()))
                    .args([
                        "-Xmx256m",
                        "-XX:+UseSerialGC",
                        "-XX:TieredStopAtLevel=1",
                        "-Dzookeeper.admin.enableServer=false",
                        "-Dzookeeper.extendedTypesEnabled=true",
                        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                        "-cp",
                    ])
                    .arg(format!(
                        "{ZK_JARS}/zookeeper.jar:{ZK_JARS}/slf4j-simple.jar"
                    ))
                    .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
                    .arg(&cfg);
                command
            }
        };
        command
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log);
        self.child = Some(command.spawn().expect("spawning the server"));
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "{:?} exited with {status} before serving\n{}",
                    self.kind,
                    self.log_tail()
                );
            }
            match four_letter_word(self.port, "ruok") {
                // ZooKeeper answers ruok while it is still loading its data;
                // srvr tells when it serves.
                Ok(answer) if answer == "imok" => match four_letter_word(self.port, "srvr") {
                    Ok(srvr) if !srvr.contains("not currently serving") => return,
                    Ok(srvr) => last = srvr,
                    Err(e) => last = e.to_string(),
                },
                Ok(answer) => last = answer,
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "{:?} did not answer ruok with imok within {START_TIMEOUT:?} (last: {last:?})\n{}",
            self.kind,
            self.log_tail()
        );
    }

    fn log_tail(&self) -> String {
        launch::log_tail(&self.log_path(), 40)
    }
}

/// The JVM options that give ZooKeeper the JAAS file in `dir`, if any:
/// ZooKeeper reads it from a system property, not from zoo.cfg.
fn zookeeper_jaas_properties(dir: &Path) -> Vec<String> {
    let path = dir.join(JAAS_FILE);
    if !path.exists() {
        return Vec::new();
    }
    vec![
        format!("-Djava.security.auth.login.config={}", path.display()),
        "-Dzookeeper.authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
            .to_owned(),
    ]
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends a four-letter word and returns the whole answer.
pub fn four_letter_word(port: u16, word: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(word.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

/// Runs a test body with a time limit, so a hang fails instead of blocking
/// the suite.
pub async fn bounded<F: Future>(limit: Duration, body: F) -> F::Output {
    tokio::time::timeout(limit, body)
        .await
        .unwrap_or_else(|_| panic!("test did not finish within {limit:?}"))
}

/// Awaits every future concurrently and returns their outputs in order.
/// (The crate has no `futures` dependency for `join_all`.)
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => done = false,
                }
            }
        }
        if done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outputs.into_iter().map(Option::unwrap).collect()
}

/// A TCP proxy in front of a server that a test can cut: while cut, it
/// drops every connection it carries and every new one, so a client
/// behind it loses the server while the server itself runs on (and
/// expires sessions it no longer hears from). Stalled, it drops the
/// connections it carries but takes new ones and never answers them, as
/// a server may while it starts.
pub struct Proxy {
    pub port: u16,
    mode: tokio::sync::watch::Sender<ProxyMode>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProxyMode {
    Open,
    Cut,
    Stalled,
}

impl Proxy {
    pub async fn start(target_port: u16) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mode, watch) = tokio::sync::watch::channel(ProxyMode::Open);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                let mut watch = watch.clone();
                match *watch.borrow() {
                    ProxyMode::Open => {}
                    ProxyMode::Cut => continue, // dropped: the client sees the connection close
                    ProxyMode::Stalled => {
                        // Read and never answer, until the proxy goes.
                        tokio::spawn(async move {
                            let _ = tokio::io::copy(&mut inbound, &mut tokio::io::sink()).await;
                        });
                        continue;
                    }
                }
                tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target_port)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = watch.wait_for(|mode| *mode != ProxyMode::Open) => {}
                    }
                });
            }
        });
        Proxy { port, mode, task }
    }

    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn cut(&self) {
        self.mode.send_replace(ProxyMode::Cut);
    }

    pub fn stall(&self) {
        self.mode.send_replace(ProxyMode::Stalled);
    }

    pub fn restore(&self) {
        self.mode.send_replace(ProxyMode::Open);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Defines a test that runs `$body(&mut Server)` against every server kind
/// available here (Paddock, and Apache ZooKeeper when installed), each
/// bounded in time (90 s unless given).
#[macro_export]
macro_rules! on_every_server {
    ($name:ident, $body:ident) => {
        on_every_server!($name, $body, std::time::Duration::from_secs(90));
    };
    ($name:ident, $body:ident, $limit:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            for kind in $crate::common::kinds() {
                eprintln!("--- {} on {kind:?}", stringify!($name));
                let mut server = $crate::common::Server::start(kind);
                $crate::common::bounded($limit, $body(&mut server)).await;
            }
        }
    };
}
