"""Apache Kafka brokers (ZooKeeper mode) against the server under test.

- ensure_jars(): the broker and client jars, fetched from Maven Central
  with `mvn dependency:copy-dependencies` (pom.xml here) into a cache
  directory, once.
- ensure_tool(): KafkaTool.java compiled against those jars, once per
  version of its source.
- Broker: one `java kafka.Kafka server.properties` process.
- ZkMember: a member of tests/e2e/ensemble.py's Ensemble that, when
  PADDOCK_TEST_SERVER=zookeeper, runs Apache ZooKeeper's QuorumPeerMain on
  the same zoo.cfg (Ensemble itself only starts Paddock).
- Cluster: ZooKeeper-protocol servers (one Server, or an Ensemble of three)
  plus two brokers, with the waits the tests need.

Environment: PADDOCK_KAFKA_CACHE (default ~/.cache/paddock-kafka) holds the
jars and the compiled tool.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))

from zkharness import (  # noqa: E402
    HOST, KIND, Server, free_port, kill_group, terminate, zookeeper_classpath)
from ensemble import Ensemble, EnsembleError, Member  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NoNodeError  # noqa: E402
from kazoo.retry import KazooRetry  # noqa: E402

KAFKA_VERSION = re.search(r"<kafka.version>([^<]+)</kafka.version>",
                          (HERE / "pom.xml").read_text()).group(1)
CACHE = Path(os.environ.get("PADDOCK_KAFKA_CACHE",
                            Path.home() / ".cache" / "paddock-kafka"))
JARS = CACHE / f"kafka-{KAFKA_VERSION}" / "jars"
CHROOT = "/kafka"
# Long enough for a SIGKILLed ZooKeeper leader to be replaced (the brokers'
# sessions must survive that), short enough for a SIGKILLed broker's
# registration to go quickly.
SESSION_TIMEOUT_MS = 6000
BROKER_START_TIMEOUT = 90.0


def log(msg: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def wait_for(predicate: Callable, timeout: float, what,
             detail: Callable[[], str] = lambda: "", interval: float = 0.2):
    """Polls predicate() until truthy and returns its value; fails naming
    what was waited for (a string, or a callable giving one then), the last
    error and detail() (e.g. log tails)."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = predicate()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - the polled condition may fail
            last_exc = e
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    if callable(what):
        what = what()
    raise AssertionError(
        f"timed out after {timeout:.0f}s waiting for {what}"
        + (f" (last error: {last_exc!r})" if last_exc else "") + "\n" + detail())


# ------------------------------------------------------------ jars and tool

def ensure_jars() -> Path:
    """The directory of every jar a broker and the clients need."""
    done = JARS / ".complete"
    if done.exists():
        return JARS
    if shutil.which("mvn") is None:
        raise RuntimeError("mvn not found: apt-get install maven")
    tmp = JARS.with_name("jars.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"fetching Kafka {KAFKA_VERSION} jars from Maven Central into {JARS}")
    p = subprocess.run(
        ["mvn", "-B", "-q", "-f", str(HERE / "pom.xml"),
         "dependency:copy-dependencies", "-DincludeScope=runtime",
         f"-DoutputDirectory={tmp}"],
        cwd=HERE, capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or not list(tmp.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"mvn dependency:copy-dependencies failed ({p.returncode}):\n"
                           f"{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    shutil.rmtree(JARS, ignore_errors=True)
    tmp.rename(JARS)
    done.write_text(KAFKA_VERSION + "\n")
    return JARS


def ensure_tool() -> Path:
    """KafkaTool.java compiled; the directory of its classes."""
    src = HERE / "KafkaTool.java"
    digest = hashlib.sha1(src.read_bytes()).hexdigest()[:12]
    classes = CACHE / f"tool-{KAFKA_VERSION}-{digest}"
    if (classes / "KafkaTool.class").exists():
        return classes
    tmp = classes.with_name(classes.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    p = subprocess.run(["javac", "-proc:none", "-cp", f"{ensure_jars()}/*",
                        "-d", str(tmp), str(src)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"javac KafkaTool.java failed:\n{p.stdout}{p.stderr}")
    shutil.rmtree(classes, ignore_errors=True)
    tmp.rename(classes)
    for old in CACHE.glob(f"tool-{KAFKA_VERSION}-*"):   # earlier versions of the source
        if old != classes:
            shutil.rmtree(old, ignore_errors=True)
    return classes


JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
             "-Djava.net.preferIPv4Stack=true"]


# ------------------------------------------------------------ ZooKeeper ensemble

class ZkMember(Member):
    """An Ensemble member that runs Apache ZooKeeper when the server under
    test is ZooKeeper; Member's zoo.cfg (`server.N=host:peer:election;client`)
    is valid for both."""

    @property
    def log_path(self) -> Path:
        return self.workdir / ("paddock.log" if KIND == "paddock" else "zookeeper.log")

    def write_config(self) -> None:
        super().write_config()
        if KIND != "paddock":
            # ZooKeeper wants each server's client address to match
            # clientPortAddress: `;127.0.0.1:PORT`, not `;PORT`.
            text = self.config_path.read_text()
            text = re.sub(r"^(server\.\d+=.*);(\d+)$", rf"\1;{HOST}:\2", text, flags=re.M)
            self.config_path.write_text(text)

    def spawn(self) -> "Member":
        if KIND == "paddock":
            return super().spawn()
        if self.running():
            raise EnsembleError(f"{self.name} already running")
        self.write_config()
        argv = (["java", "-Xmx256m"] + JVM_FLAGS
                + ["-Dzookeeper.admin.enableServer=false",
                   "-cp", zookeeper_classpath(),
                   "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                   str(self.config_path)])
        self.starts += 1
        with open(self.log_path, "ab") as f:
            f.write(f"\n===== {time.strftime('%H:%M:%S')} start #{self.starts}: "
                    f"{' '.join(argv)}\n".encode())
            f.flush()
            self.proc = subprocess.Popen(argv, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                         stdout=f, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.stopped = False
        return self


def make_ensemble(workdir: Path) -> Ensemble:
    # tickTime 200 elects quickly, but caps sessions at 20 ticks (4 s):
    # allow the brokers' 6 s.
    ens = Ensemble(workdir, voters=3, config={"maxSessionTimeout": "30000"})
    for m in ens.members:
        m.__class__ = ZkMember
    return ens


# ------------------------------------------------------------ brokers

LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.Target=System.err
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
"""


class Broker:
    """One Kafka broker, id `bid`, on a free loopback port, with its log dir
    and output under `workdir`."""

    def __init__(self, workdir: Path, bid: int, zk_connect: str) -> None:
        self.id = bid
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.zk_connect = zk_connect
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    def __repr__(self) -> str:
        return f"<broker {self.id} :{self.port} {'running' if self.running() else 'down'}>"

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "broker.log"

    def properties(self) -> Dict[str, str]:
        return {
            "broker.id": str(self.id),
            "listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "log.dirs": str(self.workdir / "data"),
            "zookeeper.connect": self.zk_connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "zookeeper.connection.timeout.ms": "30000",
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "num.partitions": "1",
            "default.replication.factor": "2",
            "offsets.topic.replication.factor": "2",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "2",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "2",
            "log.cleaner.dedupe.buffer.size": str(4 << 20),
            "controlled.shutdown.max.retries": "3",
            "unclean.leader.election.enable": "false",
        }

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> "Broker":
        """Starts the process; wait_started() waits for it."""
        if self.running():
            raise RuntimeError(f"broker {self.id} already running")
        props = self.workdir / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.workdir / "log4j.properties").write_text(LOG4J)
        argv = (["java", "-Xmx512m", "-Xms64m"] + JVM_FLAGS
                + [f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
                   f"-Dkafka.logs.dir={self.workdir}",
                   "-cp", f"{ensure_jars()}/*", "kafka.Kafka", str(props)])
        self.starts += 1
        self._log_mark = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as f:
            f.write(f"\n===== {time.strftime('%H:%M:%S')} start #{self.starts}\n".encode())
            f.flush()
            self.proc = subprocess.Popen(argv, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                         stdout=f, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self

    def started(self) -> bool:
        """Whether this run of the broker logged that it started."""
        if not self.running():
            raise AssertionError(f"broker {self.id} exited with code {self.proc.returncode}")
        with open(self.log_path, "rb") as f:
            f.seek(self._log_mark)
            return f"[KafkaServer id={self.id}] started".encode() in f.read()

    def wait_started(self, timeout: float = BROKER_START_TIMEOUT) -> None:
        wait_for(self.started, timeout, f"broker {self.id} to log that it started",
                 lambda: self.log_tail())

    def stop(self, grace: float = 40.0) -> None:
        """SIGTERM: a controlled shutdown, which closes the ZooKeeper session."""
        if self.proc is None:
            return
        stopped = terminate(self.proc, grace)
        self.proc = None
        if not stopped:
            raise AssertionError(f"broker {self.id} did not stop within {grace}s of "
                                 f"SIGTERM; killed\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL: the ZooKeeper session is left to expire."""
        if self.proc is None:
            return
        kill_group(self.proc)
        self.proc = None

    def _lines(self) -> List[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def log_tail(self, lines: int = 20) -> str:
        """The last `lines` log lines, a run of lines that differ only in
        their timestamp shown once with a count."""
        out: List[str] = []
        last_key, repeats = None, 0
        for line in self._lines():
            key = _TIMESTAMP.sub("", line)
            if key == last_key:
                repeats += 1
                continue
            if repeats:
                out.append(f"    (and {repeats} more like it)")
            out.append(line)
            last_key, repeats = key, 0
        if repeats:
            out.append(f"    (and {repeats} more like it)")
        return (f"--- broker {self.id} log tail ({self.log_path}) ---\n"
                + "\n".join(out[-lines:]))

    def errors(self, limit: int = 8) -> List[str]:
        """The last `limit` distinct ERROR/FATAL log messages, each with how
        many times it was logged."""
        counts: Dict[str, int] = {}
        last: Dict[str, str] = {}
        for line in self._lines():
            if re.search(r"\] (ERROR|FATAL) ", line):
                key = _TIMESTAMP.sub("", line)
                counts[key] = counts.get(key, 0) + 1
                last.pop(key, None)
                last[key] = line
        return [f"{line}  (x{counts[key]})" for key, line in list(last.items())[-limit:]]

    def log_lines(self, pattern: str, limit: int = 15) -> List[str]:
        """The last `limit` log lines matching the regex `pattern`."""
        rx = re.compile(pattern)
        return [line for line in self._lines() if rx.search(line)][-limit:]


_TIMESTAMP = re.compile(r"^\[[0-9-]+ [0-9:,]+\] ")


# ------------------------------------------------------------ cluster

class Cluster:
    """The server(s) under test plus two brokers using them under CHROOT."""

    def __init__(self, workdir: Path, topology: str) -> None:
        self.workdir = Path(workdir)
        self.topology = topology
        self.server: Optional[Server] = None
        self.ensemble: Optional[Ensemble] = None
        if topology == "standalone":
            self.server = Server(self.workdir / "zk", name=KIND)
            hosts = None
        else:
            self.ensemble = make_ensemble(self.workdir / "zk")
            hosts = self.ensemble.hosts
        self._hosts = hosts
        self.brokers: List[Broker] = []
        self.zk: Optional[KazooClient] = None
        self.tool_classes = ensure_tool()
        self.topics: List[str] = []     # created by the tests, deleted last

    @property
    def hosts(self) -> str:
        return self.server.hosts if self.server else self._hosts

    def start(self) -> "Cluster":
        t0 = time.monotonic()
        if self.server:
            self.server.start()
        else:
            self.ensemble.start()
            self.ensemble.leader()
        self.zk = KazooClient(hosts=self.hosts, timeout=10.0,
                              connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=0.5),
                              command_retry=KazooRetry(max_tries=20, delay=0.1, max_delay=0.5))
        self.zk.start(timeout=30)
        self.brokers = [Broker(self.workdir / f"broker{i}", i, self.hosts + CHROOT)
                        for i in (1, 2)]
        for b in self.brokers:
            b.start()
        for b in self.brokers:
            b.wait_started()
        self.wait_registered([1, 2])
        log(f"{self.topology} {KIND} and brokers 1, 2 up in {time.monotonic() - t0:.1f}s")
        return self

    def close(self) -> None:
        for b in self.brokers:
            try:
                b.kill()
            except Exception as e:  # noqa: BLE001 - teardown goes on
                log(f"killing broker {b.id}: {e}")
        if self.zk:
            try:
                self.zk.stop()
                self.zk.close()
            except Exception:  # noqa: BLE001
                pass
        if self.server:
            self.server.stop()
        if self.ensemble:
            self.ensemble.close()

    # ---------------------------------------------------------- lookup

    def broker(self, bid: int) -> Broker:
        return self.brokers[bid - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.running()) or \
            ",".join(b.bootstrap for b in self.brokers)

    def server_log_tail(self) -> str:
        if self.server:
            return f"--- {KIND} log tail ---\n{self.server.stderr_tail(30)}"
        return self.ensemble.log_tails(20)

    def logs(self) -> str:
        """Broker log tails and their recent errors, for failure messages."""
        out = []
        for b in self.brokers:
            errors = b.errors()
            if errors:
                out.append(f"--- broker {b.id}: distinct ERROR messages ---\n" + "\n".join(errors))
            out.append(b.log_tail())
        return "\n".join(out)

    def znode(self, path: str):
        """(data, stat) of CHROOT + path, or None."""
        try:
            return self.zk.get(CHROOT + path)
        except NoNodeError:
            return None

    def children(self, path: str) -> List[str]:
        try:
            return sorted(self.zk.get_children(CHROOT + path))
        except NoNodeError:
            return []

    def controller(self) -> Optional[int]:
        """The broker id in /controller, or None."""
        node = self.znode("/controller")
        return json.loads(node[0])["brokerid"] if node else None

    def registered(self) -> List[int]:
        return sorted(int(c) for c in self.children("/brokers/ids"))

    def wait_registered(self, ids: List[int], timeout: float = 60.0) -> None:
        wait_for(lambda: self.registered() == sorted(ids), timeout,
                 lambda: f"/brokers/ids to hold exactly {sorted(ids)} "
                         f"(it holds {self.registered()})",
                 self.logs)

    def heal(self) -> None:
        """Every server and broker running again (after a failed test)."""
        if self.ensemble:
            for m in self.ensemble.members:
                if not m.running():
                    log(f"restarting {m.name} left down")
                    m.restart()
        elif not self.server.running():
            log(f"restarting the {KIND} server left down")
            self.server.start()
        down = [b for b in self.brokers if not b.running()]
        for b in down:
            log(f"restarting broker {b.id} left down")
            wait_for(lambda: b.id not in self.registered(), 30,
                     f"the old registration of broker {b.id} to go", self.logs)
            b.start()
        for b in down:
            b.wait_started()
        self.wait_registered([1, 2])

    # ---------------------------------------------------------- clients

    def tool_argv(self, cmd: str, *args: str, bootstrap: Optional[str] = None,
                  timeout: float = 120) -> List[str]:
        return (["java", "-Xmx256m"] + JVM_FLAGS
                + ["-Dlog4j.configuration=file:" + str(self.workdir / "tool-log4j.properties"),
                   "-cp", f"{self.tool_classes}:{ensure_jars()}/*", "KafkaTool", cmd,
                   bootstrap or self.bootstrap, *args, "--timeout", str(int(timeout))])

    def _tool_log4j(self) -> None:
        p = self.workdir / "tool-log4j.properties"
        if not p.exists():
            p.write_text(LOG4J.replace("rootLogger=INFO", "rootLogger=WARN"))

    def tool(self, cmd: str, *args: str, timeout: float = 120, check: bool = True,
             bootstrap: Optional[str] = None) -> subprocess.CompletedProcess:
        """Runs KafkaTool; with `check`, fails with its output and the logs
        unless it exits 0."""
        self._tool_log4j()
        argv = self.tool_argv(cmd, *args, bootstrap=bootstrap, timeout=timeout)
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 30)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"KafkaTool {cmd} {' '.join(args)} did not finish in "
                                 f"{timeout + 30:.0f}s\nstderr: {e.stderr}\n{self.logs()}")
        log(f"KafkaTool {cmd} {' '.join(args)[:80]}: exit {p.returncode} in "
            f"{time.monotonic() - t0:.1f}s: {p.stdout.strip().splitlines()[-1:] or ''}")
        if check and p.returncode != 0:
            raise AssertionError(
                f"KafkaTool {cmd} {' '.join(args)} exited {p.returncode}\n"
                f"--- stdout ---\n{p.stdout[-3000:]}\n--- stderr ---\n{p.stderr[-6000:]}\n"
                + self.logs())
        return p

    def spawn_tool(self, cmd: str, *args: str, timeout: float = 300) -> subprocess.Popen:
        """KafkaTool in the background (stdout/stderr to files in workdir)."""
        self._tool_log4j()
        argv = self.tool_argv(cmd, *args, timeout=timeout)
        n = len(list(self.workdir.glob("tool-*.out")))
        out = open(self.workdir / f"tool-{n}.out", "w")
        err = open(self.workdir / f"tool-{n}.err", "w")
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        p.out_path, p.err_path = out.name, err.name
        out.close()
        err.close()
        return p

    def create_topics(self, *specs: str) -> None:
        self.tool("create-topics", *specs)
        self.topics += [s.split(":")[0] for s in specs]
