//! One server process.

use std::fs::File;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::probe::{self, Mode};
use crate::spec::{self, Plan, Spec};

/// Lines of a server's log shown when it fails to start.
pub(crate) const LOG_LINES_ON_FAILURE: usize = 20;

/// A server of a deployment; its process is killed when dropped.
pub struct Server {
    plan: Plan,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    child: Option<Child>,
    paused: bool,
    /// How the last process ended on its own, once reaped.
    ended: Option<ExitStatus>,
    /// CPU time the server's earlier processes spent, counted as each is
    /// reaped: the kernel tells it only to the call that reaps the process.
    spent_by_ended: Duration,
}

impl Server {
    pub(crate) fn start(spec: &Spec, plan: Plan, all: &[Plan]) -> anyhow::Result<Server> {
        spec::check_installed(&spec.flavor)?;
        let argv = spec::prepare(spec, &plan, all)?;
        let id = plan.id.to_string();
        let env = spec
            .env
            .iter()
            .map(|(key, value)| (key.clone(), value.replace("{id}", &id)))
            .collect();
        let mut server = Server {
            plan,
            argv,
            env,
            child: None,
            paused: false,
            ended: None,
            spent_by_ended: Duration::ZERO,
        };
        server.spawn()?;
        Ok(server)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let log_path = self.log_path();
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        let child = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting server {} ({})", self.plan.id, self.argv[0]))?;
        self.child = Some(child);
        self.paused = false;
        self.ended = None;
        Ok(())
    }

    /// The server's id (`server.N`, `myid`), from 1.
    pub fn id(&self) -> usize {
        self.plan.id
    }

    pub fn client_port(&self) -> u16 {
        self.plan.client_port
    }

    pub fn peer_port(&self) -> u16 {
        self.plan.peer_port
    }

    pub fn election_port(&self) -> u16 {
        self.plan.election_port
    }

    /// The server's `server.N` line as a reconfig joins it: its own ports,
    /// as a participant.
    pub fn joining_line(&self) -> String {
        format!(
            "server.{}=127.0.0.1:{}:{}:participant;127.0.0.1:{}",
            self.plan.id, self.plan.peer_port, self.plan.election_port, self.plan.client_port
        )
    }

    /// The server's `server.N` line as a reconfig makes it an observer.
    pub fn observing_line(&self) -> String {
        format!(
            "server.{}=127.0.0.1:{}:{}:observer;127.0.0.1:{}",
            self.plan.id, self.plan.peer_port, self.plan.election_port, self.plan.client_port
        )
    }

    pub fn client_address(&self) -> String {
        format!("127.0.0.1:{}", self.plan.client_port)
    }

    fn socket_address(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.plan.client_port))
    }

    /// The server's own directory: zoo.cfg, myid, its data and its log.
    pub fn dir(&self) -> &Path {
        &self.plan.dir
    }

    /// Where the server's stdout and stderr go.
    pub fn log_path(&self) -> PathBuf {
        self.plan.dir.join("server.log")
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&mut self) -> bool {
        !self.reap(false)
    }

    /// How the process ended, if it was started and has exited on its
    /// own (not if it was killed through this handle, which forgets it).
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.reap(false);
        self.ended
    }

    /// The CPU time (user + system) the server's processes have spent
    /// since it was first started: the ended ones' and the running one's.
    /// None when the running one's cannot be read.
    pub fn cpu_time(&self) -> Option<Duration> {
        match self.pid() {
            Some(pid) => Some(self.spent_by_ended + cpu_time(pid)?),
            None => Some(self.spent_by_ended),
        }
    }

    /// Reaps the process if it has ended (`wait`: once it ends), keeping
    /// how it ended and the CPU time it spent. True when no process runs.
    fn reap(&mut self, wait: bool) -> bool {
        let Some(child) = &self.child else {
            return true;
        };
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: rusage is plain data, for which all zeros is valid.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if wait { 0 } else { libc::WNOHANG };
        let reaped = loop {
            // SAFETY: `pid` is this handle's child, not yet reaped (whoever
            // reaps it drops the handle's `Child`, so that no signal can
            // reach a process that took its PID); the pointers are to locals.
            let reaped = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
            if reaped != -1 || std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
                break reaped;
            }
        };
        if reaped == 0 {
            return false;
        }
        if reaped == pid {
            self.ended = Some(ExitStatus::from_raw(status));
            self.spent_by_ended += time_of(usage.ru_utime) + time_of(usage.ru_stime);
        }
        self.child = None;
        true
    }

    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// The role `srvr` reports now; None while it does not serve.
    pub fn mode(&self) -> Option<Mode> {
        probe::mode(self.answering_address()?)
    }

    /// Waits until the server says it serves, failing early if its process
    /// exits.
    pub fn wait_serving(&mut self, timeout: Duration) -> anyhow::Result<Mode> {
        self.wait_for("start serving", timeout, Server::mode)
    }

    /// The zxid of the newest txn the server applied, as `srvr` reports
    /// it; None while it does not serve.
    pub fn zxid(&self) -> Option<i64> {
        probe::zxid(self.answering_address()?)
    }

    /// The client address, while a process runs there unpaused: a paused
    /// one would leave a probe waiting for its timeout.
    fn answering_address(&self) -> Option<SocketAddr> {
        (!self.paused && self.child.is_some()).then(|| self.socket_address())
    }

    /// Waits until the server has applied `zxid` (a server that rejoined
    /// has caught up), failing early if its process exits.
    pub fn wait_applied(&mut self, zxid: i64, timeout: Duration) -> anyhow::Result<()> {
        let applied = |server: &Server| server.zxid().filter(|&applied| applied >= zxid);
        self.wait_for(&format!("apply zxid {zxid:#x}"), timeout, applied)
            .map(drop)
    }

    /// Polls `ready` until it answers, failing if the process exits or
    /// `timeout` passes first; `what` names the wait in the error.
    fn wait_for<T>(
        &mut self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&Server) -> Option<T>,
    ) -> anyhow::Result<T> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.is_running() {
                bail!(
                    "server {} exited before it could {what}; the end of {}:\n{}",
                    self.plan.id,
                    self.log_path().display(),
                    log_tail(&self.log_path(), LOG_LINES_ON_FAILURE)
                );
            }
            if let Some(answer) = ready(self) {
                return Ok(answer);
            }
            if Instant::now() >= deadline {
                bail!(
                    "server {} did not {what} within {timeout:?}; the end of {}:\n{}",
                    self.plan.id,
                    self.log_path().display(),
                    log_tail(&self.log_path(), LOG_LINES_ON_FAILURE)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Resident memory of the process, from /proc.
    pub fn rss_bytes(&self) -> Option<u64> {
        rss_bytes(self.pid()?)
    }

    /// SIGKILL: the process dies at once, as in a crash or power loss of
    /// the process (the OS keeps what reached the page cache).
    pub fn kill(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
        }
        self.reap(true);
        self.ended = None;
        self.paused = false;
    }

    /// SIGTERM (after SIGCONT if paused), without waiting: the server shuts
    /// down gracefully on its own while the caller watches the others.
    /// [`Server::stop`] or [`Server::kill`] reaps it.
    pub fn terminate(&mut self) {
        self.resume();
        if let Some(pid) = self.pid() {
            signal(pid, libc::SIGTERM);
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub fn stop(&mut self, grace: Duration) {
        self.terminate();
        let deadline = Instant::now() + grace;
        while self.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    /// SIGSTOP: the process freezes, as in a long GC pause. Returns once
    /// every thread has stopped: the kernel hands the signal to one thread,
    /// and on a loaded machine the others serve on until that one runs.
    pub fn pause(&mut self) {
        if let Some(pid) = self.pid() {
            signal(pid, libc::SIGSTOP);
            self.paused = true;
            let deadline = Instant::now() + Duration::from_secs(10);
            while !all_threads_stopped(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    /// SIGCONT after [`Server::pause`].
    pub fn resume(&mut self) {
        if let Some(pid) = self.pid() {
            if self.paused {
                signal(pid, libc::SIGCONT);
            }
            self.paused = false;
        }
    }

    /// Starts the process again (after kill or stop) with the same
    /// configuration; does not wait for it to serve.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.spawn()
    }

    /// Removes the server's data, keeping its zoo.cfg, myid and log: as if
    /// its disk had been replaced. Only while the process is down.
    pub fn wipe(&mut self) -> anyhow::Result<()> {
        self.set_data_aside()?.remove()
    }

    /// Moves the server's data out of its directory, as [`Self::wipe`]
    /// removes it, at the cost of a rename: deleting gigabytes on the disk
    /// the other servers share can wait until it disturbs nothing being
    /// measured ([`SetAside::remove`]; dropped, it is removed too). Only
    /// while the process is down.
    pub fn set_data_aside(&mut self) -> anyhow::Result<SetAside> {
        if self.is_running() {
            bail!("server {} must be down to wipe its data", self.plan.id);
        }
        let dir = &self.plan.dir;
        let mut aside_name = dir.file_name().unwrap_or_default().to_owned();
        aside_name.push("-wiped");
        let aside = SetAside {
            dir: dir.with_file_name(aside_name),
        };
        aside.remove_dir()?;
        std::fs::create_dir(&aside.dir)
            .with_context(|| format!("creating {}", aside.dir.display()))?;
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            if is_kept_without_data(&entry.file_name()) {
                continue;
            }
            let path = entry.path();
            std::fs::rename(&path, aside.dir.join(entry.file_name()))
                .with_context(|| format!("moving {} aside", path.display()))?;
        }
        Ok(aside)
    }
}

/// What a server's directory keeps when its data goes: its configuration
/// and its log.
const KEPT_WITHOUT_DATA: [&str; 3] = ["zoo.cfg", "myid", "server.log"];

fn is_kept_without_data(name: &std::ffi::OsStr) -> bool {
    KEPT_WITHOUT_DATA.iter().any(|kept| name == *kept)
}

/// Removes the data of every server directory in `deployment` (the
/// directory a deployment's servers were given), keeping what
/// [`Server::wipe`] keeps, once they are all down: a failed run's logs
/// stay to be read without the gigabytes beside them, which would leave
/// the next runs on the same disk no room. A deployment whose directory
/// was never made has nothing to remove.
pub fn remove_data_under(deployment: &Path) -> anyhow::Result<()> {
    if !deployment.exists() {
        return Ok(());
    }
    let entries =
        |dir: &Path| std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()));
    for server in entries(deployment)? {
        let server = server?.path();
        if !server.is_dir() {
            continue;
        }
        for entry in entries(&server)? {
            let entry = entry?;
            if is_kept_without_data(&entry.file_name()) {
                continue;
            }
            let path = entry.path();
            let removed = if entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// A wiped server's former data, beside its directory until removed.
#[derive(Debug)]
pub struct SetAside {
    dir: PathBuf,
}

impl SetAside {
    pub fn remove(self) -> anyhow::Result<()> {
        self.remove_dir()
    }

    fn remove_dir(&self) -> anyhow::Result<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", self.dir.display()))
            }
            _ => Ok(()),
        }
    }
}

impl Drop for SetAside {
    fn drop(&mut self) {
        let _ = self.remove_dir();
    }
}

/// Resident memory of any process, from /proc.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    status_bytes(pid, "VmRSS:")
}

/// The most resident memory the process has had since it started (its
/// high-water mark), from /proc.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    status_bytes(pid, "VmHWM:")
}

/// A field of `/proc/PID/status` given in kB, such as `VmRSS:`.
fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

/// CPU time the process has spent, user and system, all threads, from
/// /proc (utime + stime of `/proc/PID/stat`).
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: the
    // fields that follow start after its last ')'. utime and stime are
    // fields 14 and 15, so the 12th and 13th after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    clock_ticks(utime + stime)
}

/// CPU time the hypervisor ran something else while this machine's CPUs
/// were ready to run (`steal`, the 8th figure of /proc/stat's `cpu`
/// line), summed over the CPUs since boot. A virtual machine's latency
/// stalls show here when they are not the guest's own doing: on this
/// project's CI machines, a host taking back memory the guest freed
/// (virtio-balloon's free page reporting) stole up to 130 ms of a 100 ms
/// window whenever the guest touched such memory again.
pub fn stolen_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    let steal: u64 = cpu.split_whitespace().nth(7)?.parse().ok()?;
    clock_ticks(steal)
}

/// A count of /proc's clock ticks (`USER_HZ`) as a duration.
fn clock_ticks(ticks: u64) -> Option<Duration> {
    // SAFETY: sysconf only reads a constant of the running system.
    let ticks_per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks_per_sec = u64::try_from(ticks_per_sec).ok().filter(|&t| t > 0)?;
    Some(Duration::from_secs_f64(ticks as f64 / ticks_per_sec as f64))
}

fn time_of(time: libc::timeval) -> Duration {
    Duration::new(time.tv_sec as u64, time.tv_usec as u32 * 1000)
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// SIGKILL to any process, such as a server this crate did not start.
pub fn kill(pid: u32) {
    signal(pid, libc::SIGKILL);
}

/// SIGTERM to any process: a graceful stop of a server this crate did not
/// start.
pub fn terminate(pid: u32) {
    signal(pid, libc::SIGTERM);
}

/// Whether `pid` has exited, such as a server this crate did not start:
/// gone, or a zombie its parent has not reaped yet.
pub fn has_exited(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    state_of(&stat).is_none_or(|state| matches!(state, 'Z' | 'X'))
}

/// The state letter of a `/proc/.../stat` line: it follows the command
/// name, which may hold spaces and parentheses.
fn state_of(stat: &str) -> Option<char> {
    stat.rfind(')').and_then(|end| stat[end..].chars().nth(2))
}

/// Whether every thread of `pid` is in the stopped state (T); true when
/// the process is gone, as there is nothing left to wait for.
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.flatten().all(|task| {
        // A thread that exited meanwhile has no stat left to read.
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            return true;
        };
        state_of(&stat).is_none_or(|state| state == 'T')
    })
}

fn signal(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) takes any pid and signal number; the worst a
        // stale pid does is fail with ESRCH, which we ignore.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// The last `lines` lines of a log file, for an error message; empty if it
/// cannot be read.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_counts_what_the_process_spends() {
        let me = std::process::id();
        let before = cpu_time(me).expect("this process has a /proc stat");
        let mut spent = Duration::ZERO;
        let mut sum = 0u64;
        // Until the kernel's tick-granular count moves at least once.
        while spent < Duration::from_millis(50) {
            for i in 0..1_000_000u64 {
                sum = sum.wrapping_add(std::hint::black_box(i));
            }
            spent = cpu_time(me).expect("still running") - before;
        }
        assert!(std::hint::black_box(sum) > 0);
        assert!(cpu_time(u32::MAX).is_none(), "no such process");
    }

    #[test]
    fn the_machines_stolen_time_is_read_and_never_goes_back() {
        let first = stolen_time().expect("/proc/stat has a cpu line with steal");
        let second = stolen_time().expect("and still has");
        assert!(second >= first);
    }

    #[test]
    fn a_process_has_exited_once_a_zombie_or_gone() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(!has_exited(pid), "sleeping");
        signal(pid, libc::SIGKILL);
        // Not reaped yet: a zombie until `wait`.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !has_exited(pid) {
            assert!(Instant::now() < deadline, "still running after SIGKILL");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.wait().unwrap();
        assert!(has_exited(pid), "reaped");
        assert_eq!(state_of("7 (a) b) (c) S 1 7"), Some('S'));
    }

    /// A server of one process running `argv` in `dir`, not started.
    fn unstarted(dir: &Path, argv: Vec<String>) -> Server {
        Server {
            plan: Plan {
                id: 2,
                client_port: 0,
                peer_port: 0,
                election_port: 0,
                observer: false,
                dir: dir.to_path_buf(),
            },
            argv,
            env: Vec::new(),
            child: None,
            paused: false,
            ended: None,
            spent_by_ended: Duration::ZERO,
        }
    }

    /// What a process spent is still counted once it has ended, whether
    /// on its own or killed, and the next process's adds to it.
    #[test]
    fn a_servers_cpu_time_keeps_what_ended_processes_spent() {
        let dir = tempfile::tempdir().unwrap();
        let busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
        let mut server = unstarted(dir.path(), ["sh", "-c", busy].map(String::from).to_vec());
        server.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.is_running() {
            assert!(Instant::now() < deadline, "the loop did not end");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(server.exit_status().unwrap().success());
        let first = server.cpu_time().unwrap();
        assert!(first >= Duration::from_millis(50), "{first:?}");
        assert_eq!(server.pid(), None);

        server.restart().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.cpu_time().unwrap() < first + Duration::from_millis(20) {
            assert!(
                Instant::now() < deadline,
                "the second process spent nothing"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        server.kill();
        let both = server.cpu_time().unwrap();
        assert!(both >= first + Duration::from_millis(20), "{both:?}");
        assert_eq!(server.exit_status(), None, "killed through the handle");
        assert_eq!(server.cpu_time(), Some(both), "nothing runs");
    }

    #[test]
    fn data_set_aside_leaves_the_configuration_and_goes_once_removed() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("node2");
        std::fs::create_dir_all(dir.join("version-paddock/log")).unwrap();
        for kept in ["zoo.cfg", "myid", "server.log"] {
            std::fs::write(dir.join(kept), kept).unwrap();
        }
        std::fs::write(dir.join("version-paddock/log/wal"), b"entries").unwrap();
        let mut server = unstarted(&dir, Vec::new());
        let names = |dir: &Path| {
            let mut names: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };

        let aside = server.set_data_aside().unwrap();
        assert_eq!(names(&dir), ["myid", "server.log", "zoo.cfg"]);
        assert_eq!(names(base.path()), ["node2", "node2-wiped"]);
        let wal = base.path().join("node2-wiped/version-paddock/log/wal");
        assert_eq!(std::fs::read(wal).unwrap(), b"entries");
        aside.remove().unwrap();
        assert_eq!(names(base.path()), ["node2"]);

        std::fs::create_dir(dir.join("version-paddock")).unwrap();
        server.wipe().unwrap();
        assert_eq!(names(base.path()), ["node2"]);
        assert_eq!(names(&dir), ["myid", "server.log", "zoo.cfg"]);
    }

    #[test]
    fn removing_a_deployments_data_keeps_each_servers_configuration_and_log() {
        let base = tempfile::tempdir().unwrap();
        for node in ["node1", "node2"] {
            let dir = base.path().join(node);
            std::fs::create_dir_all(dir.join("version-2")).unwrap();
            std::fs::write(dir.join("version-2/snapshot.1"), b"tree").unwrap();
            std::fs::write(dir.join("java.hprof"), b"heap").unwrap();
            for kept in KEPT_WITHOUT_DATA {
                std::fs::write(dir.join(kept), kept).unwrap();
            }
        }
        std::fs::write(base.path().join("notes"), b"beside the servers").unwrap();

        remove_data_under(base.path()).unwrap();

        for node in ["node1", "node2"] {
            let dir = base.path().join(node);
            let mut names: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(names, ["myid", "server.log", "zoo.cfg"], "{node}");
        }
        assert!(base.path().join("notes").exists());
    }
}
