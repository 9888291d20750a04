"""Start a replicated Paddock ensemble for tests, one process per server.

Each member gets its own work directory with a data dir holding `myid`, a
zoo.cfg listing every server (`server.N=127.0.0.1:PEER:ELECTION[:observer];CLIENT`)
and a log file.  Members run in their own process group, like
zkharness.Server, so a test can SIGKILL, SIGSTOP, SIGCONT or restart one of
them, or wipe its data directory (keeping myid).

    ens = Ensemble(tmp_path, voters=3, observers=1).start()
    leader = ens.leader()
    zk = ens.client(ens.members[1])          # kazoo, one server
    zk = ens.client(ens.members[1], all_hosts=True)   # that server first
    ens.assert_trees_identical()
    ens.close()

Only Paddock speaks this (Apache ZooKeeper's quorum needs its own election
port and dynamic-config handling), so ensemble tests are paddock-only.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional

sys.path.insert(0, str(Path(__file__).parent))

from zkharness import HOST, free_port, kill_group, paddock_bin  # noqa: E402
from zkwire import four_letter  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NoNodeError  # noqa: E402
from kazoo.retry import KazooRetry  # noqa: E402

TICK_TIME = 200          # sessions may last 400 .. 4000 ms
START_TIMEOUT = float(os.environ.get("PADDOCK_TEST_START_TIMEOUT", "30"))
# Stat fields that the replicated log fixes, so every server must agree on
# them.  (ctime/mtime are left out: the brief does not require them equal.)
STAT_FIELDS = ("czxid", "mzxid", "pzxid", "version", "cversion", "aversion",
               "ephemeralOwner", "dataLength", "numChildren")

NOT_SERVING = "not currently serving"


class EnsembleError(RuntimeError):
    pass


class Member:
    """One server of the ensemble."""

    def __init__(self, ensemble: "Ensemble", sid: int, observer: bool) -> None:
        self.ensemble = ensemble
        self.id = sid
        self.observer = observer
        self.workdir = ensemble.workdir / f"node{sid}"
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "myid").write_text(f"{sid}\n")
        self.host = HOST
        self.port = free_port()
        self.peer_port = free_port()
        self.election_port = free_port()
        self.proc: Optional[subprocess.Popen] = None
        self.stopped = False      # SIGSTOPped
        self.starts = 0
        # zoo.cfg keys of this member alone (its own HTTP ports, say).
        self.extra_config: Dict[str, str] = {}

    def __repr__(self) -> str:
        state = ("stopped" if self.stopped else "running") if self.running() else "down"
        kind = "observer" if self.observer else "voter"
        return f"<server.{self.id} {kind} :{self.port} {state}>"

    @property
    def name(self) -> str:
        return f"server.{self.id}"

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "paddock.log"

    @property
    def config_path(self) -> Path:
        return self.workdir / "zoo.cfg"

    def server_line(self) -> str:
        role = ":observer" if self.observer else ""
        return (f"server.{self.id}={self.host}:{self.peer_port}:"
                f"{self.election_port}{role};{self.port}")

    def log_text(self) -> Optional[str]:
        """The server's log without tracing's colours; None if unreadable."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return None
        return re.sub(r"\x1b\[[0-9;]*m", "", text)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_text()
        if text is None:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------ life

    def write_config(self) -> None:
        cfg = {
            "tickTime": str(self.ensemble.tick_time),
            "initLimit": "10",
            "syncLimit": "5",
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": HOST,
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
        }
        cfg.update(self.ensemble.config)
        cfg.update(self.extra_config)
        servers = [m.server_line() for m in self.ensemble.members]
        version = self.ensemble.dynamic_version
        if version is not None:
            # As ZooKeeper 3.5+ writes it: the server lines in a file of
            # their own, whose name's suffix is their version.
            dynamic = self.workdir / f"zoo.cfg.dynamic.{version}"
            dynamic.write_text("\n".join(servers) + "\n")
            cfg["dynamicConfigFile"] = str(dynamic)
            servers = []
        lines = [f"{k}={v}" for k, v in cfg.items()] + servers
        self.config_path.write_text("\n".join(lines) + "\n")

    def spawn(self) -> "Member":
        """Starts the process; returns without waiting for anything."""
        if self.running():
            raise EnsembleError(f"{self.name} already running")
        if not paddock_bin().exists():
            raise EnsembleError(f"{paddock_bin()} does not exist: run `cargo build -p paddock`")
        self.write_config()
        argv = [str(paddock_bin()), "serve", "--config", str(self.config_path)]
        env = dict(os.environ)
        env.setdefault("RUST_BACKTRACE", "1")
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== {time.strftime('%H:%M:%S')} start #{self.starts}: "
                      f"{' '.join(argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(argv, cwd=self.workdir, env=env,
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.stopped = False
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _signal(self, sig: int) -> None:
        if not self.running():
            raise EnsembleError(f"{self.name} is not running")
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL: no chance to flush or say goodbye."""
        if self.proc is None:
            return
        kill_group(self.proc)
        self.proc = None
        self.stopped = False
        self._note("SIGKILL")

    def terminate(self, grace: float = 10.0) -> None:
        """SIGTERM (after SIGCONT if stopped), then SIGKILL after `grace`."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if self.stopped:
                self._signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None
        self.stopped = False

    def stop(self) -> None:
        """SIGSTOP: the process freezes with its sockets open. Returns once
        every thread has stopped: the kernel hands the signal to one thread,
        and until that one runs the others go on serving (seen on a loaded
        machine: a request sent after the signal was answered)."""
        self._signal(signal.SIGSTOP)
        wait_for(lambda: all_threads_stopped(self.proc.pid), timeout=10,
                 interval=0.005, what=f"{self.name} to stop")
        self.stopped = True
        self._note("SIGSTOP")

    def cont(self) -> None:
        self._note("SIGCONT")
        self._signal(signal.SIGCONT)
        self.stopped = False

    def _note(self, what: str) -> None:
        try:
            with open(self.log_path, "ab") as log:
                log.write(f"===== {time.strftime('%H:%M:%S')} test: {what}\n".encode())
        except OSError:
            pass

    def restart(self, wait: bool = True, timeout: float = START_TIMEOUT) -> "Member":
        """SIGKILL (if running) and start again on the same ports and data."""
        self.kill()
        self.spawn()
        if wait:
            self.wait_serving(timeout)
        return self

    def wipe(self) -> None:
        """Deletes everything in the data dir except myid (server must be down)."""
        if self.running():
            raise EnsembleError(f"{self.name} must be down to wipe its data")
        for p in self.data_dir.iterdir():
            if p.name == "myid":
                continue
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink()
        self._note("data dir wiped (myid kept)")

    # ------------------------------------------------------------ talk

    def four_letter(self, word: str, timeout: float = 2.0) -> str:
        return four_letter(self.host, self.port, word, timeout)

    def srvr(self, timeout: float = 2.0) -> Optional[str]:
        """srvr output, or None when the port does not answer."""
        if self.proc is None or self.stopped:
            return None
        try:
            return self.four_letter("srvr", timeout)
        except OSError:
            return None

    def mode(self, timeout: float = 2.0) -> Optional[str]:
        out = self.srvr(timeout)
        if not out:
            return None
        m = re.search(r"^Mode: (\w+)", out, re.M)
        return m.group(1) if m else None

    def zxid(self) -> Optional[int]:
        out = self.srvr()
        m = re.search(r"^Zxid: (0x[0-9a-fA-F]+)", out or "", re.M)
        return int(m.group(1), 16) if m else None

    def wait_serving(self, timeout: float = START_TIMEOUT) -> str:
        """Waits until srvr reports a Mode; returns it."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise EnsembleError(
                    f"{self.name} exited with code {self.proc.returncode}\n"
                    f"--- log tail ---\n{self.log_tail()}")
            last = self.srvr(timeout=1.0)
            m = re.search(r"^Mode: (\w+)", last or "", re.M)
            if m:
                return m.group(1)
            time.sleep(0.1)
        raise EnsembleError(
            f"{self.name} did not report a Mode within {timeout}s "
            f"(last srvr: {last!r}); members: {self.ensemble.states()}\n"
            f"--- log tail ---\n{self.log_tail()}")


class Ensemble:
    """N voters + K observers on free loopback ports."""

    def __init__(self, workdir, voters: int = 3, observers: int = 0,
                 config: Optional[Dict[str, str]] = None,
                 tick_time: int = TICK_TIME,
                 dynamic_version: Optional[str] = None) -> None:
        """`dynamic_version`: the server lines go in a dynamic
        configuration file with this (hex) version, not in zoo.cfg."""
        self.workdir = Path(workdir)
        self.dynamic_version = dynamic_version
        self.tick_time = tick_time
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config = {k: str(v) for k, v in (config or {}).items()}
        self.members: List[Member] = []
        for sid in range(1, voters + observers + 1):
            self.members.append(Member(self, sid, observer=sid > voters))
        self._clients: List[KazooClient] = []
        self._lock = threading.Lock()

    def add_member(self, observer: bool = False) -> Member:
        """A new server with the next id, not started: its zoo.cfg lists
        the members and itself; the running members learn of it only from
        a reconfig that joins it."""
        member = Member(self, len(self.members) + 1, observer=observer)
        self.members.append(member)
        return member

    # ------------------------------------------------------------ lookup

    def __getitem__(self, sid: int) -> Member:
        """Member by server id (1-based, as in myid)."""
        return self.members[sid - 1]

    @property
    def voters(self) -> List[Member]:
        return [m for m in self.members if not m.observer]

    @property
    def observers(self) -> List[Member]:
        return [m for m in self.members if m.observer]

    @property
    def hosts(self) -> str:
        return ",".join(m.hosts for m in self.members)

    def hosts_from(self, first: Member) -> str:
        """All servers, `first` first (use with randomize_hosts=False)."""
        return ",".join([first.hosts] + [m.hosts for m in self.members if m is not first])

    def states(self) -> str:
        """Each member's process state, e.g. for error messages."""
        out = []
        for m in self.members:
            if m.proc is None:
                st = "down"
            elif m.proc.poll() is not None:
                st = f"EXITED with code {m.proc.returncode}"
            else:
                st = "stopped" if m.stopped else "running"
            out.append(f"{m.name}: {st}")
        return ", ".join(out)

    def check_alive(self) -> None:
        """Raises if a member that the test did not take down has exited."""
        for m in self.members:
            if m.proc is not None and m.proc.poll() is not None:
                raise EnsembleError(
                    f"{m.name} exited by itself with code {m.proc.returncode}; "
                    f"{self.states()}\n--- {m.name} log tail ---\n{m.log_tail(30)}")

    def live(self) -> List[Member]:
        return [m for m in self.members if m.running() and not m.stopped]

    # ------------------------------------------------------------ life

    def start(self, timeout: float = START_TIMEOUT) -> "Ensemble":
        for m in self.members:
            m.spawn()
        self.wait_all_serving(timeout)
        return self

    def wait_all_serving(self, timeout: float = START_TIMEOUT,
                         members: Optional[Iterable[Member]] = None) -> None:
        deadline = time.monotonic() + timeout
        for m in (self.live() if members is None else members):
            m.wait_serving(max(0.5, deadline - time.monotonic()))

    def leader(self, timeout: float = 20.0, exclude: Iterable[Member] = ()) -> Member:
        """The one live voter whose srvr says `Mode: leader`."""
        exclude = list(exclude)
        deadline = time.monotonic() + timeout
        seen = {}
        while time.monotonic() < deadline:
            seen = {m.id: m.mode(timeout=1.0) for m in self.live() if m not in exclude}
            leaders = [sid for sid, mode in seen.items() if mode == "leader"]
            if len(leaders) == 1:
                return self[leaders[0]]
            time.sleep(0.1)
        raise EnsembleError(f"no single leader within {timeout}s; modes: {seen}; "
                            f"{self.states()}\n" + self.log_tails())

    def followers(self) -> List[Member]:
        leader = self.leader()
        return [m for m in self.voters if m is not leader]

    def close_clients(self) -> None:
        """Stops every kazoo client made by client()."""
        with self._lock:
            clients, self._clients = self._clients, []
        for c in clients:
            try:
                c.stop()
                c.close()
            except Exception:
                pass

    def close(self) -> None:
        self.close_clients()
        for m in self.members:
            try:
                m.terminate(grace=5)
            except Exception as e:  # pragma: no cover
                sys.stderr.write(f"stopping {m.name}: {e}\n")

    def log_marks(self) -> Dict[int, int]:
        """Current size of each member's log, for log_since()."""
        marks = {}
        for m in self.members:
            try:
                marks[m.id] = m.log_path.stat().st_size
            except OSError:
                marks[m.id] = 0
        return marks

    def log_since(self, marks: Dict[int, int], limit: int = 60) -> str:
        """What each member logged after log_marks() (last `limit` lines each)."""
        out = []
        for m in self.members:
            try:
                with open(m.log_path, "rb") as f:
                    f.seek(marks.get(m.id, 0))
                    text = f.read().decode(errors="replace")
            except OSError:
                text = ""
            text = re.sub(r"\x1b\[[0-9;]*m", "", text)
            lines = text.splitlines()[-limit:]
            out.append(f"--- {m.name} (:{m.port}) logged during the test ---\n"
                       + "\n".join(lines))
        return "\n".join(out)

    def log_tails(self, lines: int = 25) -> str:
        return "\n".join(f"--- {m.name} log tail ---\n{m.log_tail(lines)}"
                         for m in self.members)

    def __enter__(self) -> "Ensemble":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ clients

    def client(self, member: Optional[Member] = None, all_hosts: bool = False,
               timeout: float = 4.0, start_timeout: float = 15.0,
               **kw) -> KazooClient:
        """A started kazoo client.  Only `member` unless all_hosts (then
        `member` first, hosts not shuffled); all servers shuffled when
        member is None.  Closed by Ensemble.close()."""
        if member is None:
            hosts = self.hosts
        elif all_hosts:
            hosts = self.hosts_from(member)
            kw.setdefault("randomize_hosts", False)
        else:
            hosts = member.hosts
        kw.setdefault("connection_retry",
                      KazooRetry(max_tries=-1, delay=0.05, max_delay=0.3))
        kw.setdefault("command_retry", None)
        c = KazooClient(hosts=hosts, timeout=timeout, **kw)
        c.start(timeout=start_timeout)
        with self._lock:
            self._clients.append(c)
        return c

    # ------------------------------------------------------------ trees

    def snapshot_tree(self, member: Member, root: str = "/",
                      timeout: float = 15.0) -> Dict[str, tuple]:
        """path -> (data, {stat field: value}, acl) as `member` sees it after
        a sync, walked with a kazoo client connected to `member` only."""
        c = KazooClient(hosts=member.hosts, timeout=4.0, command_retry=None,
                        connection_retry=KazooRetry(max_tries=-1, delay=0.05,
                                                    max_delay=0.3))
        c.start(timeout=timeout)
        try:
            c.sync_async(root).get(timeout=timeout)
            out: Dict[str, tuple] = {}
            stack = [root]
            while stack:
                path = stack.pop()
                try:
                    data, stat = c.get_async(path).get(timeout=timeout)
                    children = c.get_children_async(path).get(timeout=timeout)
                    acl, _ = c.get_acls_async(path).get(timeout=timeout)
                except NoNodeError:
                    continue
                out[path] = (data, {f: getattr(stat, f) for f in STAT_FIELDS},
                             sorted((a.perms, a.id.scheme, a.id.id) for a in acl))
                base = path.rstrip("/")
                stack.extend(f"{base}/{ch}" for ch in children)
            return out
        finally:
            try:
                c.stop()
                c.close()
            except Exception:
                pass

    def tree_differences(self, members: Optional[Iterable[Member]] = None,
                         root: str = "/") -> List[str]:
        members = list(self.live() if members is None else members)
        trees = {m.id: self.snapshot_tree(m, root) for m in members}
        ref_id = members[0].id
        ref = trees[ref_id]
        diffs = []
        for sid, tree in trees.items():
            if sid == ref_id:
                continue
            for path in sorted(set(ref) | set(tree)):
                a, b = ref.get(path), tree.get(path)
                if a is None or b is None:
                    diffs.append(f"{path}: on server.{ref_id}={a is not None}, "
                                 f"on server.{sid}={b is not None}")
                elif a != b:
                    what = []
                    if a[0] != b[0]:
                        what.append(f"data {a[0][:40]!r} vs {b[0][:40]!r}")
                    for f in STAT_FIELDS:
                        if a[1][f] != b[1][f]:
                            what.append(f"{f} {a[1][f]:#x} vs {b[1][f]:#x}"
                                        if "zxid" in f or f == "ephemeralOwner"
                                        else f"{f} {a[1][f]} vs {b[1][f]}")
                    if a[2] != b[2]:
                        what.append(f"acl {a[2]} vs {b[2]}")
                    diffs.append(f"{path}: server.{ref_id} vs server.{sid}: "
                                 + "; ".join(what))
        return diffs

    def assert_trees_identical(self, members: Optional[Iterable[Member]] = None,
                               root: str = "/", settle: float = 0.0) -> Dict[str, tuple]:
        """Every live member (or `members`) holds the same tree after sync.
        With `settle` > 0, retries that long (for callers whose walk may
        race with a change nobody waits for, e.g. a session expiring).
        A member that died by itself fails this rather than being skipped."""
        self.check_alive()
        deadline = time.monotonic() + settle
        while True:
            diffs = self.tree_differences(members, root)
            if not diffs or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        assert not diffs, ("trees differ:\n  " + "\n  ".join(diffs[:40])
                           + f"\n({len(diffs)} differences)")
        return self.snapshot_tree(list(self.live() if members is None else members)[0], root)

    def assert_paths_everywhere(self, paths: Iterable[str],
                                members: Optional[Iterable[Member]] = None) -> None:
        """Every path exists on every live member (checked after sync)."""
        self.check_alive()
        paths = sorted(set(paths))
        for m in list(self.live() if members is None else members):
            tree = self.snapshot_tree(m)
            missing = [p for p in paths if p not in tree]
            assert not missing, (f"{len(missing)} acknowledged writes missing on "
                                 f"{m.name}: {missing[:10]}")


def all_threads_stopped(pid: int) -> bool:
    """Whether every thread of `pid` is in the stopped state (T)."""
    tasks = Path(f"/proc/{pid}/task")
    for task in tasks.iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue              # the thread exited meanwhile
        # The state follows the command name, which may hold spaces.
        if stat[stat.rindex(")") + 2] != "T":
            return False
    return True


def wait_for(predicate, timeout: float, interval: float = 0.1, what: str = "condition"):
    """Polls until predicate() is truthy; returns its value or raises."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            v = predicate()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - polled condition may fail
            last_exc = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                         + (f" (last error: {last_exc!r})" if last_exc else ""))


class Writer(threading.Thread):
    """Writes continuously through one kazoo client until stopped: creates
    `{root}/{name}-{n}` (and, with `sets`, alternately sets `{root}/{name}`),
    each synchronously, and records what was acknowledged.

    acked:   [(path, data, monotonic ack time)] for every write the server
             acknowledged; these must survive anything.
    unknown: [(path, repr(error))] for writes that failed or timed out; their
             outcome is unknown (ConnectionLoss) and either is fine.
    """

    def __init__(self, client: KazooClient, root: str, name: str,
                 sets: bool = False, op_timeout: float = 10.0,
                 pause: float = 0.0) -> None:
        super().__init__(daemon=True, name=f"writer-{name}")
        self.client = client
        self.root = root
        self.wname = name
        self.sets = sets
        self.op_timeout = op_timeout
        self.pause = pause
        self.acked: List[tuple] = []
        self.set_acked: List[tuple] = []     # (value, ack time) of sets
        self.unknown: List[tuple] = []
        self.states: List[tuple] = []
        self.session_at_start = client.client_id
        self._stop_event = threading.Event()
        client.add_listener(lambda st: self.states.append((time.monotonic(), st)))

    def run(self) -> None:
        n = 0
        counter = f"{self.root}/{self.wname}"
        if self.sets:
            try:
                self.client.create_async(counter, b"-1").get(timeout=self.op_timeout)
            except Exception as e:  # noqa: BLE001
                self.unknown.append((counter, repr(e)))
        while not self._stop_event.is_set():
            n += 1
            if self.sets and n % 2 == 0:
                data = str(n).encode()
                try:
                    self.client.set_async(counter, data).get(timeout=self.op_timeout)
                    self.set_acked.append((n, time.monotonic()))
                    self.acked.append((counter, None, time.monotonic()))
                except Exception as e:  # noqa: BLE001
                    self.unknown.append((f"{counter}={n}", repr(e)))
                    time.sleep(0.02)
            else:
                path = f"{self.root}/{self.wname}-{n:07d}"
                data = f"{self.wname}:{n}".encode()
                try:
                    self.client.create_async(path, data).get(timeout=self.op_timeout)
                    self.acked.append((path, data, time.monotonic()))
                except Exception as e:  # noqa: BLE001
                    self.unknown.append((path, repr(e)))
                    time.sleep(0.02)
            if self.pause:
                time.sleep(self.pause)

    def stop(self, timeout: float = 20.0) -> None:
        self._stop_event.set()
        self.join(timeout)
        if self.is_alive():
            raise EnsembleError(f"{self.name} did not stop within {timeout}s")

    def acked_paths(self) -> List[str]:
        return [p for p, d, _ in self.acked if d is not None]

    def acked_since(self, t: float) -> int:
        return sum(1 for *_, at in self.acked if at >= t)

    def ack_times(self) -> List[float]:
        return [at for *_, at in self.acked]
