"""Start, stop, kill and restart a ZooKeeper-protocol server for tests.

The server kind comes from PADDOCK_TEST_SERVER:
  paddock    (default) target/debug/paddock serve --config DIR/zoo.cfg
             (PADDOCK_BIN overrides the binary path)
  zookeeper  Apache ZooKeeper from Debian's `zookeeper` package, run in the
             foreground as org.apache.zookeeper.server.ZooKeeperServerMain

Tests describe the configuration once, as zoo.cfg keys; this module
translates the few keys that Apache ZooKeeper only reads as JVM system
properties (jute.maxbuffer, znode.container.checkIntervalMs, the JAAS file).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, Optional

from zkwire import four_letter, read_until_close

REPO = Path(__file__).resolve().parents[2]
KIND = os.environ.get("PADDOCK_TEST_SERVER", "paddock").strip().lower()
if KIND not in ("paddock", "zookeeper"):
    raise RuntimeError(f"PADDOCK_TEST_SERVER must be paddock or zookeeper, not {KIND!r}")

HOST = "127.0.0.1"
START_TIMEOUT = float(os.environ.get("PADDOCK_TEST_START_TIMEOUT", "30"))
# After this many servers failed to come up, stop waiting for more: fail
# every later start at once instead of timing out test after test.
MAX_START_TIMEOUTS = 3
_start_timeouts = []

ZK_JARS = "/usr/share/java"
ZK_CLI = "/usr/share/zookeeper/bin/zkCli.sh"

# Keys that Apache ZooKeeper reads only as JVM system properties.
JVM_PROPERTY_KEYS = ("jute.maxbuffer", "znode.container.checkIntervalMs",
                     "znode.container.maxPerMinute",
                     "znode.container.maxNeverUsedIntervalMs",
                     "zookeeper.snapCount", "zookeeper.snapshot.compression.method",
                     "zookeeper.enforceQuota", "zookeeper.audit.enable")


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a process started with start_new_session (its whole process
    group) if it still runs, and reap it."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def terminate(proc: subprocess.Popen, grace: float) -> bool:
    """SIGTERM, then up to `grace` seconds for the process to exit. True if
    it did; False if it had to be killed (its whole group, see kill_group)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            return False
    return True


def wait_until(pred, timeout: float = 10.0, interval: float = 0.05) -> bool:
    """Polls `pred` until it holds or `timeout` seconds pass; its last
    answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def paddock_bin() -> Path:
    return Path(os.environ.get("PADDOCK_BIN", REPO / "target" / "debug" / "paddock"))


# zookeeper.jar's manifest names most of its dependencies; the AdminServer
# also needs these two, and the server's log goes to stderr through the
# third (each optional).
ZK_EXTRA_JARS = ("servlet-api.jar", "jetty9-util-ajax.jar", "slf4j-simple.jar",
                 # Netty's TLS (NettyServerCnxnFactory), which Debian's
                 # zookeeper.jar manifest leaves out
                 "netty-codec.jar", "netty-resolver.jar",
                 # snapshots compressed with snapshot.compression.method=snappy
                 "snappy-java.jar")
PROMETHEUS_PROVIDER = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"
METRICS_POM = Path(__file__).parent / "zookeeper-metrics" / "pom.xml"
METRICS_JARS = Path(os.environ.get(
    "PADDOCK_ZK_METRICS_JARS", Path.home() / ".cache" / "paddock-zookeeper-metrics"))
ZK39_POM = Path(__file__).parent / "zookeeper-3.9" / "pom.xml"
ZK39_JARS = Path(os.environ.get(
    "PADDOCK_ZK39_JARS", Path.home() / ".cache" / "paddock-zookeeper-3.9"))


def maven_jars(pom: Path, directory: Path, expected: str, *args: str) -> Path:
    """`directory`, holding the jars `pom` depends on (copied from Maven
    Central once, with mvn's `args`), among them one matching `expected`."""
    done = directory / ".complete"
    if done.exists():
        return directory
    if shutil.which("mvn") is None:
        raise ServerError("mvn not found: apt-get install maven")
    tmp = directory.with_name(directory.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    p = subprocess.run(
        ["mvn", "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", *args,
         f"-DoutputDirectory={tmp}"],
        capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or not list(tmp.glob(expected)):
        raise ServerError(f"fetching the jars of {pom} failed ({p.returncode}):\n"
                          f"{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    done.write_text("done\n")
    return directory


def zookeeper_metrics_jars() -> Path:
    """The directory of ZooKeeper's Prometheus provider and its Prometheus
    client jars (Debian does not package them)."""
    return maven_jars(METRICS_POM, METRICS_JARS, "zookeeper-prometheus-metrics-*.jar",
                      "-DincludeGroupIds=io.prometheus,org.apache.zookeeper",
                      "-DexcludeArtifactIds=zookeeper,zookeeper-jute")


def zookeeper_39_classpath() -> str:
    """Apache ZooKeeper 3.9 and the jars its server runs with (Debian
    packages 3.8 only)."""
    jars = maven_jars(ZK39_POM, ZK39_JARS, "zookeeper-3.9.*.jar", "-DincludeScope=runtime")
    return ":".join(sorted(str(jar) for jar in jars.glob("*.jar")))


def zookeeper_classpath(metrics: bool = False) -> str:
    jars = [f"{ZK_JARS}/zookeeper.jar"]
    jars += [f"{ZK_JARS}/{jar}" for jar in ZK_EXTRA_JARS if os.path.exists(f"{ZK_JARS}/{jar}")]
    if metrics:
        jars += sorted(str(jar) for jar in zookeeper_metrics_jars().glob("*.jar"))
    return ":".join(jars)


def _ephemeral_start() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_ports(ports: range) -> range:
    """This pytest-xdist worker's share of `ports` (all of them without
    xdist): workers run tests side by side, and two that checked the same
    free port could both start a server on it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count <= 1:
        return ports
    return ports[int(worker[2:]) % count::count]


# Ports come from below the kernel's ephemeral range and are never handed
# out twice by this process: a port the kernel picked for port 0 may be
# picked again for the next caller, or taken by an outgoing connection
# before the server binds it (crates/launch/src/port.rs does the same).
_PORTS = _worker_ports(range(10000, max(_ephemeral_start(), 11000)))
_port_cursor = (os.getpid() * 7919 + time.time_ns()) % len(_PORTS)


def free_port() -> int:
    global _port_cursor
    for _ in range(len(_PORTS)):
        port = _PORTS[_port_cursor % len(_PORTS)]
        _port_cursor += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {_PORTS}")


def default_config() -> Dict[str, str]:
    return {
        "tickTime": "2000",
        "4lw.commands.whitelist": "*",
        # Apache ZooKeeper starts an HTTP admin server on 8080 by default;
        # tests run several servers at once, so keep it off.
        "admin.enableServer": "false",
    }


class ServerError(RuntimeError):
    pass


class Server:
    """One server process on a free port with its own data directory."""

    def __init__(self, workdir: Path, config: Optional[Dict[str, str]] = None,
                 name: str = "server", kind: str = KIND) -> None:
        self.kind = kind
        self.name = name
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.port = free_port()
        self.host = HOST
        self.config = default_config()
        for k, v in (config or {}).items():
            if v is None:  # None removes a default key
                self.config.pop(k, None)
            else:
                self.config[k] = str(v)
        self.config["clientPort"] = str(self.port)
        self.config["clientPortAddress"] = HOST
        self.config["dataDir"] = str(self.data_dir)
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        self._stderr = None
        # A quorum peer (server.N lines, myid) runs QuorumPeerMain instead.
        self.java_main = "org.apache.zookeeper.server.ZooKeeperServerMain"
        # Another release's jars instead of Debian's ZooKeeper.
        self.java_classpath: Optional[str] = None

    # ---------------------------------------------------------------- info

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def stderr_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # ---------------------------------------------------------------- config

    def _write_config(self) -> tuple:
        cfg = dict(self.config)
        cfg_path = self.workdir / "zoo.cfg"
        if self.kind == "paddock":
            argv = [str(paddock_bin()), "serve", "--config", str(cfg_path)]
            env = dict(os.environ)
            env.setdefault("RUST_BACKTRACE", "1")
        else:
            # ZooKeeper's own default heap (zkEnv.sh's ZK_SERVER_HEAP): a
            # znode with a million children does not fit in less.
            jvm = ["-Xmx1000m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                   "-Dzookeeper.admin.enableServer=false"]
            for key in JVM_PROPERTY_KEYS:
                if key in cfg:
                    jvm.append(f"-D{key}={cfg.pop(key)}")
            jaas = cfg.pop("jaasLoginConfig", None)
            if jaas:
                jvm += [f"-Djava.security.auth.login.config={jaas}",
                        "-Dzookeeper.authProvider.1="
                        "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"]
            metrics = cfg.get("metricsProvider.className") == PROMETHEUS_PROVIDER
            classpath = self.java_classpath or zookeeper_classpath(metrics)
            argv = (["java"] + jvm + ["-cp", classpath,
                    self.java_main, str(cfg_path)])
            env = dict(os.environ)
        cfg_path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
        return argv, env

    # ---------------------------------------------------------------- life

    def start(self, timeout: float = START_TIMEOUT, wait: bool = True) -> "Server":
        """Starts the server and, with `wait`, waits until it serves (a
        quorum peer serves only once a quorum of its peers runs)."""
        if self.proc is not None and self.proc.poll() is None:
            raise ServerError("server already running")
        if len(_start_timeouts) >= MAX_START_TIMEOUTS:
            raise ServerError(
                f"giving up: {len(_start_timeouts)} servers did not start in time; "
                f"the first one said:\n{_start_timeouts[0]}")
        if self.kind == "paddock" and not paddock_bin().exists():
            raise ServerError(f"{paddock_bin()} does not exist: run `cargo build` first")
        argv, env = self._write_config()
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n===== start #{self.starts}: {' '.join(argv)}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(argv, cwd=self.workdir, env=env,
                                     stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(
                    f"{self.kind} server exited with code {self.proc.returncode} "
                    f"before answering ruok\n--- log tail ---\n{self.stderr_tail()}")
            try:
                last = four_letter(self.host, self.port, "ruok", timeout=2)
                # A whitelist without ruok still proves the port is served.
                alive = last == "imok" or "not in the whitelist" in last
                # Apache ZooKeeper answers ruok while it is still loading its
                # database; srvr (always whitelisted) tells when it serves.
                if alive and "not currently serving" not in \
                        four_letter(self.host, self.port, "srvr", timeout=2):
                    return
            except OSError as e:
                last = repr(e)
            time.sleep(0.1)
        self.kill()
        msg = (f"{self.kind} server on port {self.port} did not answer ruok with "
               f"imok within {timeout}s (last answer: {last!r})\n"
               f"--- log tail ---\n{self.stderr_tail()}")
        _start_timeouts.append(msg)
        raise ServerError(msg)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds."""
        if self.proc is None:
            return
        terminate(self.proc, grace)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: no chance to flush or say goodbye."""
        if self.proc is None:
            return
        kill_group(self.proc)
        self.proc = None

    def restart(self, kill: bool = False) -> "Server":
        """Stop (or SIGKILL) and start again on the same port and data dir."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    # ---------------------------------------------------------------- talk

    def four_letter(self, word: str, timeout: float = 10.0) -> str:
        return four_letter(self.host, self.port, word, timeout)

    def send_raw(self, data: bytes, timeout: float = 5.0):
        """Send raw bytes on a fresh connection; returns (reply, closed)."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as s:
            s.sendall(data)
            return read_until_close(s, timeout)


def children_counts_while(reader, path, until_count, work):
    """Runs `work` while another thread lists `path` as fast as it can,
    until it sees `until_count` children; returns every count it saw."""
    seen = []
    done = threading.Event()

    def poll():
        while not done.is_set():
            seen.append(len(reader.get_children(path)))
            if seen[-1] == until_count:
                return

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        work()
        poller.join(10)
    finally:
        done.set()
        poller.join(10)
    return seen

