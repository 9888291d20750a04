"""`paddock shell`, the zkCli replacement.

- one-shot mode (`paddock shell HOST -c CMD` and zkCli's trailing words) for
  every command, with zkCli's output and exit codes;
- the same commands through Debian's zkCli and through `paddock shell`
  against the same server, compared line for line (one-shot, and a piped
  session script with watches);
- the interactive mode through a pseudo-terminal: prompt, output, tab
  completion of commands and znode paths, history with the up arrow, and
  watch events printed while the prompt waits.

Every subprocess and every wait on the terminal is bounded in time.
"""

import errno
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
import uuid

import pytest
from kazoo.security import make_acl

from conftest import digest
from zkharness import ZK_CLI, ZK_JARS, paddock_bin

PROCESS_TIMEOUT = 60
ZKCLI_TIMEOUT = 120

# Both programs print times in the local zone; pin it so they agree.
SHELL_ENV = dict(os.environ, TZ="UTC")
ZKCLI_ENV = dict(os.environ, TZ="UTC", JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1")

pytestmark = pytest.mark.skipif(
    not paddock_bin().exists(),
    reason=f"{paddock_bin()} does not exist: run `cargo build -p paddock` first")

needs_zkcli = pytest.mark.skipif(
    not (os.path.exists(ZK_CLI) and os.path.exists(f"{ZK_JARS}/zookeeper.jar")),
    reason="Debian's zookeeper package is not installed (apt-get install zookeeper)")


# ---------------------------------------------------------------- running

def shell(server, *args, stdin=None):
    """`paddock shell HOST ARGS...`: (exit code, stdout, stderr)."""
    feed = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    p = subprocess.run([str(paddock_bin()), "shell", server.hosts, *args],
                       capture_output=True, text=True, timeout=PROCESS_TIMEOUT,
                       env=SHELL_ENV, **feed)
    return p.returncode, p.stdout, p.stderr


def shell_c(server, *lines):
    """Each line as a -c command."""
    args = []
    for line in lines:
        args += ["-c", line]
    return shell(server, *args)


# zkCli's own chatter, which `paddock shell` one-shot does not print.
ZK_NOISE_OUT = re.compile(
    r"^(Connecting to .*|Welcome to ZooKeeper!|JLine support is (en|dis)abled)\n", re.M)
# zkCli's watcher thread prints the session event as two lines, each its own
# println, so the command's output can come between them.
SESSION_EVENT = re.compile(
    r"\nWATCHER::\n|\nWatchedEvent state:\w+ type:None path:null\n")
# commons-cli's exception class, which zkCli prints before its message.
JAVA_EXCEPTION = re.compile(r"^org\.apache\.commons\.cli\.\w+Exception: ", re.M)


def zk_err(text):
    lines = [line for line in text.splitlines(keepends=True)
             if "SLF4J" not in line and not line.startswith("Picked up JAVA_TOOL_OPTIONS")]
    return JAVA_EXCEPTION.sub("", "".join(lines))


def zkcli(server, *words, script=None):
    """Debian's zkCli: one command as trailing words, or a script on stdin."""
    feed = {"input": script} if script is not None else {"stdin": subprocess.DEVNULL}
    p = subprocess.run([ZK_CLI, "-server", server.hosts, *words],
                       capture_output=True, text=True, timeout=ZKCLI_TIMEOUT,
                       env=ZKCLI_ENV, **feed)
    return p.returncode, ZK_NOISE_OUT.sub("", p.stdout), zk_err(p.stderr)


def stat_of(text):
    return dict(re.findall(r"^(\w+) = (.*)$", text, re.M))


JAVA_DATE = re.compile(r"^(Sun|Mon|Tue|Wed|Thu|Fri|Sat) [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d UTC \d{4}$")


# ---------------------------------------------------------------- one-shot

def test_one_shot_reads_and_writes(server, root):
    r = root
    assert shell(server, "create", f"{r}/a", "hello") == (0, "", f"Created {r}/a\n")
    # The trailing words are zkCli's: each is one argument, spaces and all.
    assert shell(server, "create", f"{r}/b", "two words") == (0, "", f"Created {r}/b\n")
    assert shell(server, "get", f"{r}/b") == (0, "two words\n", "")
    # A -c command is split as zkCli splits a typed line.
    assert shell_c(server, f"set {r}/b 'quoted words'", f"get {r}/b") == \
        (0, "quoted words\n", "")
    assert shell(server, "ls", r) == (0, "[a, b]\n", "")

    rc, out, err = shell(server, "get", "-s", f"{r}/a")
    assert (rc, err) == (0, "")
    data, stat_text = out.split("\n", 1)
    assert data == "hello"
    stat = stat_of(stat_text)
    assert list(stat) == ["cZxid", "ctime", "mZxid", "mtime", "pZxid", "cversion",
                          "dataVersion", "aclVersion", "ephemeralOwner", "dataLength",
                          "numChildren"]
    assert JAVA_DATE.match(stat["ctime"]), stat["ctime"]
    assert re.match(r"^0x[0-9a-f]+$", stat["cZxid"])
    assert (stat["dataVersion"], stat["dataLength"], stat["ephemeralOwner"]) == ("0", "5", "0x0")
    rc, out, _ = shell(server, "stat", f"{r}/a")
    assert rc == 0 and stat_of(out) == stat
    rc, out, _ = shell(server, "ls", "-s", r)
    assert rc == 0 and out.startswith("[a, b]\ncZxid = ")
    assert stat_of(out)["numChildren"] == "2"

    rc, out, _ = shell(server, "set", "-s", f"{r}/a", "world")
    assert rc == 0 and stat_of(out)["dataVersion"] == "1"
    assert shell(server, "set", "-v", "0", f"{r}/a", "x") == \
        (1, "", f"version No is not valid : {r}/a\n")
    assert shell(server, "get", f"{r}/a") == (0, "world\n", "")
    assert shell(server, "delete", r) == (1, "", f"Node not empty: {r}\n")
    assert shell(server, "delete", "-v", "1", f"{r}/a") == (0, "", "")
    assert shell(server, "get", f"{r}/a") == (1, "", f"Node does not exist: {r}/a\n")
    assert shell(server, "create", f"{r}/b") == (1, "", f"Node already exists: {r}/b\n")
    assert shell(server, "getAllChildrenNumber", r) == (0, "1\n", "")
    assert shell(server, "sync", r) == (0, "Sync is OK\n", "")
    assert shell(server, "deleteall", r) == (0, "", "")
    assert shell(server, "ls", r) == (1, "", f"Node does not exist: {r}\n")


def test_ls_page_by_page(server, root, zk):
    names = [f"c{i:03}" for i in range(25)]
    zk.create(f"{root}/big")
    for name in reversed(names):
        zk.create(f"{root}/big/{name}")
    if server.kind == "zookeeper":
        # ZooKeeper does not know the paginated request.
        rc, out, err = shell(server, "ls", "-p", "10", f"{root}/big")
        assert rc == 1 and "Unimplemented" in err, (rc, out, err)
        return
    rc, out, err = shell(server, "ls", "-p", "10", "-s", f"{root}/big")
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert lines[:25] == names, out
    assert "numChildren = 25" in lines[25:], out


def test_one_shot_node_kinds_and_session_commands(server, root):
    r = root
    rc, out, err = shell_c(server,
                           f"create -s {r}/s- x",
                           f"create -e {r}/e",
                           f"create -c {r}/c",
                           f"create -t 60000 {r}/ttl",
                           f"getEphemerals {r}",
                           "getEphemerals",
                           f"ls {r}")
    assert rc == 0, err
    assert err == (f"Created {r}/s-0000000000\nCreated {r}/e\nCreated {r}/c\n"
                   f"Created {r}/ttl\n")
    assert out == f"[{r}/e]\n[{r}/e]\n[c, e, s-0000000000, ttl]\n"
    # The ephemeral node went with the session.
    assert shell(server, "ls", r) == (0, "[c, s-0000000000, ttl]\n", "")

    rc, out, err = shell_c(server, "whoami", "addauth digest alice:pw", "whoami")
    assert (rc, err) == (0, "")
    assert out == "Auth scheme: User\nip: 127.0.0.1\nAuth scheme: User\nip: 127.0.0.1\ndigest: alice\n"

    assert shell_c(server, f"create {r}/ro x world:anyone:r", f"getAcl {r}/ro") == \
        (0, "'world,'anyone\n: r\n", f"Created {r}/ro\n")
    assert shell(server, "set", f"{r}/ro", "y") == (1, "", f"Insufficient permission : {r}/ro\n")
    rc, out, _ = shell(server, "setAcl", "-s", f"{r}/c", "world:anyone:cdrwa")
    assert rc == 0 and stat_of(out)["aclVersion"] == "1"
    assert shell(server, "setAcl", "-R", r, "world:anyone:cdrwa") == \
        (0, f"KeeperErrorCode = NoAuth for {r}/ro\n", "")

    # close, then nothing works until connect.
    assert shell_c(server, "close", f"ls {r}") == (1, "", "Not connected\n")
    assert shell_c(server, "close", "connect", f"getAllChildrenNumber {r}") == (0, "4\n", "")
    # quit stops the run; its exit code is the command's before it.
    assert shell_c(server, f"get {r}/nope", "quit", f"ls {r}") == \
        (1, "", f"Node does not exist: {r}/nope\n")


def test_one_shot_watches(server, root, zk):
    r = root
    zk.create(f"{r}/w", b"x")
    # A watch set by one command fires on a later command's change, and
    # prints once however many watches it triggers.
    rc, out, err = shell_c(server, f"get -w {r}/w", f"stat -w {r}/w", f"set {r}/w y",
                           f"ls -w {r}", f"create {r}/k", f"delete {r}/k")
    assert (rc, err) == (0, f"Created {r}/k\n")
    assert out.count("WATCHER::") == 2, out
    assert out.startswith("x\ncZxid = ")
    assert f"\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:{r}/w\n" in out
    assert out.endswith(
        f"[w]\n\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeChildrenChanged path:{r}\n")

    rc, out, err = shell_c(server, f"addWatch {r}", f"set {r}/w z", f"create {r}/w/c",
                           f"removewatches {r}", f"set {r}/w after")
    assert rc == 0, err
    events = re.findall(r"WatchedEvent state:SyncConnected type:(\w+) path:(\S+)", out)
    assert events == [("NodeDataChanged", f"{r}/w"), ("NodeCreated", f"{r}/w/c"),
                      ("PersistentWatchRemoved", r)]
    assert shell(server, "removewatches", r) == \
        (1, "", f"KeeperErrorCode = No such watcher for {r}\n")


def test_one_shot_errors_and_exit_codes(server):
    assert shell(server, "get") == (1, "", "get [-s] [-w] path\n")
    assert shell(server, "get", "-x", "/") == (1, "", "Unrecognized option: -x\n")
    assert shell(server, "get", "noslash") == (1, "", "Path must start with / character\n")
    rc, out, err = shell(server, "bogus")
    assert (rc, out) == (127, "")
    assert err.endswith("Command not found: bogus\n") and "\tls [-s] [-w] [-R] path\n" in err
    rc, out, err = shell(server, "help")
    assert rc == 0 and "\tgetAllChildrenNumber path\n" in out
    # No server there: a clear error, quickly.
    started = time.monotonic()
    p = subprocess.run([str(paddock_bin()), "shell", "--timeout", "2000", "127.0.0.1:1", "ls", "/"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=PROCESS_TIMEOUT)
    assert p.returncode == 1
    assert "could not connect to 127.0.0.1:1" in p.stderr
    assert time.monotonic() - started < 30


# ---------------------------------------------------------------- vs zkCli

@pytest.fixture
def tree(root, zk):
    """A small tree both programs read: data, no data, children, ACLs."""
    zk.create(f"{root}/a", b"hello")
    zk.create(f"{root}/a/b", b"")
    zk.create(f"{root}/a/b/c", b"deep")
    zk.create(f"{root}/a/d", "ünïcode".encode())
    zk.create(f"{root}/empty", b"")
    zk.create(f"{root}/null", None)
    zk.create(f"{root}/ro", b"x", acl=[make_acl("world", "anyone", read=True)])
    zk.create(f"{root}/secret", b"s", acl=[
        make_acl("digest", digest("u", "p"), read=True, write=True),
        make_acl("world", "anyone", read=True)])
    return root


# Commands whose output must be the same from both programs; @ is the
# tree's root. None of them changes the tree (the writes fail).
SAME_AS_ZKCLI = [
    "ls @", "ls -s @", "ls -R @", "ls @/a/b/c", "ls @/nope", "ls", "ls @ extra",
    "get @/a", "get -s @/a", "get @/empty", "get @/a/d", "get @/nope", "get",
    "get @/a/", "get a", "get -x @/a", "get @/null", "get -s @/null",
    "stat @/a", "stat @/nope", "stat -w @/a",
    "getAcl @/a", "getAcl -s @/ro", "getAcl @/secret", "getAcl @/nope",
    "getAllChildrenNumber @", "getAllChildrenNumber @/nope",
    "getEphemerals @", "sync @", "whoami",
    "set -v 99 @/a x", "set @/ro x", "set @/a", "set @/a -1", "set @/a x -v",
    "delete @", "delete @/nope", "deleteall @/nope",
    "create @/a", "create @/x/y", "create -c -e @/q", "create -t 0 @/q",
    "create -t abc @/q", "create -t 10 -e @/q",
    "setAcl @/ro world:anyone:cdrwa", "setAcl @/nope world:anyone:r", "setAcl @/a",
    "removewatches @", "addWatch -m foo @",
    "listquota @/a", "listquota @/nope", "delquota @/a", "delquota -n @/a",
    "setquota @/a", "setquota -n 0 @/a", "setquota -b -1 @/a", "setquota -n x @/a",
    "setquota -n 1 -b 2 @/a", "setquota -n 5 @/nope", "setquota -N 5 /zookeeper/quota/x",
    "ls //x", "get @/a/../b",
    "config", "config -s", "config -c", "config -x",
    "reconfig -remove 2", "reconfig", "reconfig -x", "reconfig -remove",
    "reconfig -members server.1=a:1:2;3 -remove 2", "reconfig -remove 2 -v xyz",
]


@needs_zkcli
@pytest.mark.parametrize("command", SAME_AS_ZKCLI)
def test_one_shot_matches_zkcli(server, tree, command):
    words = command.replace("@", tree).split()
    ours = shell(server, *words)
    theirs = zkcli(server, *words)
    theirs = (theirs[0], SESSION_EVENT.sub("", theirs[1]), theirs[2])
    assert ours == theirs, f"{command}\n paddock shell: {ours!r}\n zkCli:         {theirs!r}"


# A session fed on stdin, writes and watches included. Each program works
# under its own root (@), so the outputs differ only in the root's name,
# zxids, session ids and times, which are normalised.
SESSION_SCRIPT = """create @ hello
create @/child c1
ls @
get -s @
set -s @ world
create -e @/eph e
create -s @/seq- s
create -s @/seq- s
ls -R @
getEphemerals @
getAllChildrenNumber @
get -w @
set @ again
ls -w @
create @/kid
stat -w @/kid
delete @/kid
addWatch -m PERSISTENT_RECURSIVE @/child
set @/child c2
create @/child/grandchild g
delete @/child/grandchild
removewatches @/child
create @/acl x world:anyone:r
getAcl @/acl
setAcl -s @/acl world:anyone:cdrwa
addauth digest bob:pw
whoami
delete -v 5 @/child
deleteall @/child
printwatches
printwatches off
get -w @
set @ silent
get @
printwatches on
get -w @
delete @/eph
create @/child
sync @
ls @
quit
"""


def normalise(text, root):
    text = ZK_NOISE_OUT.sub("", text.replace(root, "@"))
    text = re.sub(r"0x[0-9a-f]+", lambda m: "0x0" if m.group(0) == "0x0" else "0xN", text)
    text = re.sub(r"= \w{3} \w{3} \d\d \d\d:\d\d:\d\d \w+ \d{4}", "= DATE", text)
    return text


def split_events(text):
    """(the other non-blank lines, the watch events), each in order. zkCli
    prints an event's two lines from its event thread while the main thread
    prints results, so the two may interleave: they are compared apart."""
    lines = text.splitlines()
    events = [line for line in lines if line.startswith("WatchedEvent ")]
    rest = [line for line in lines
            if line and line != "WATCHER::" and not line.startswith("WatchedEvent ")]
    return rest, events


@needs_zkcli
def test_session_script_matches_zkcli(server):
    ours_root = f"/shell-ours-{uuid.uuid4().hex[:8]}"
    theirs_root = f"/shell-zkcli-{uuid.uuid4().hex[:8]}"
    rc, out, err = shell(server, stdin=SESSION_SCRIPT.replace("@", ours_root))
    ours = (rc, split_events(normalise(out, ours_root)), normalise(err, ours_root))
    rc, out, err = zkcli(server, script=SESSION_SCRIPT.replace("@", theirs_root))
    theirs = (rc, split_events(normalise(out, theirs_root)), normalise(err, theirs_root))
    assert ours[0] == theirs[0] == 0, (ours, theirs)
    assert ours[1][0] == theirs[1][0], "stdout differs (events aside)"
    assert ours[1][1] == theirs[1][1], "watch events differ"
    assert ours[2] == theirs[2], "stderr differs"
    # The script exercised what it meant to.
    assert "WatchedEvent state:SyncConnected type:NodeCreated path:@/child/grandchild" in ours[1][1]
    assert "WatchedEvent state:SyncConnected type:PersistentWatchRemoved path:@/child" in ours[1][1]
    assert "WatchedEvent state:Closed type:None path:null" in ours[1][1]


# ---------------------------------------------------------------- interactive

ANSI = re.compile(r"\x1b(\[[0-9;?<=>]*[ -/]*[@-~]|[=>78]|\][^\x07]*\x07)")


class Terminal:
    """`paddock shell` on a pseudo-terminal: type keys, read the screen's text."""

    def __init__(self, server, cols=200, rows=50):
        self.fd, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        # TERM matters: the line editor turns itself off on a dumb terminal.
        self.proc = subprocess.Popen(
            [str(paddock_bin()), "shell", server.hosts],
            stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
            env=dict(SHELL_ENV, TERM="xterm"))
        os.close(slave)
        self.raw = b""
        self.seen = 0  # how much of the text `expect` has consumed
        self.ended = False

    @property
    def text(self):
        return ANSI.sub("", self.raw.decode("utf-8", "replace")).replace("\r", "")

    def _read(self, timeout):
        if self.ended:
            return
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return
        try:
            chunk = os.read(self.fd, 65536)
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            chunk = b""
        if chunk:
            self.raw += chunk
        else:  # EIO or EOF: the shell closed the terminal (it exited)
            self.ended = True

    def expect(self, pattern, timeout=20):
        """Waits until `pattern` appears after what was already matched."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = regex.search(self.text, self.seen)
            if m:
                self.seen = m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0 or self.ended:
                raise AssertionError(
                    f"{'the shell exited' if self.ended else 'timed out'} waiting for "
                    f"{pattern!r}; screen text after the last match:\n{self.text[self.seen:]!r}")
            self._read(min(left, 0.5))

    def type(self, keys):
        os.write(self.fd, keys.encode())

    def wait(self, timeout=20):
        """The exit code, once the shell has exited."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.1)
            code = self.proc.poll()
            if code is not None:
                return code
        raise AssertionError("the shell did not exit")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        os.close(self.fd)


@pytest.fixture
def term(server):
    t = Terminal(server)
    yield t
    t.close()


def prompt(server, n, state="CONNECTED"):
    return re.escape(f"[zk: {server.hosts}({state}) {n}] ")


UP = "\x1b[A"


def test_interactive_commands_history_and_events(server, root, zk, term):
    term.expect(r"WatchedEvent state:SyncConnected type:None path:null")
    term.expect(prompt(server, 0))
    term.type(f"create {root}/node hello\r")
    term.expect(f"Created {re.escape(root)}/node")
    term.expect(prompt(server, 1))
    term.type(f"get {root}/node\r")
    term.expect(r"\nhello\n")
    term.expect(prompt(server, 2))

    # Up arrow: the last command again.
    term.type(UP)
    term.expect(re.escape(f"get {root}/node"))
    term.type("\r")
    term.expect(r"\nhello\n")
    term.expect(prompt(server, 3))
    # Twice up: the one before.
    term.type(UP + UP)
    term.expect(re.escape(f"create {root}/node hello"))
    term.type("\r")
    term.expect(f"Node already exists: {re.escape(root)}/node")
    term.expect(prompt(server, 4))

    # A watch fires while the prompt waits for input.
    term.type(f"get -w {root}/node\r")
    term.expect(prompt(server, 5))
    zk.set(f"{root}/node", b"changed elsewhere")
    term.expect(re.escape(
        f"WATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:{root}/node"))
    term.expect(prompt(server, 5))

    term.type("history\r")
    term.expect(r"4 - get -w .*\n5 - history\n")
    term.type("quit\r")
    term.expect(r"WatchedEvent state:Closed type:None path:null")
    # quit exits with the code of the command before it (history: 0).
    assert term.wait() == 0


def test_interactive_tab_completion(server, root, zk, term):
    zk.create(f"{root}/completion-target", b"found by tab")
    zk.create(f"{root}/alpha", b"")
    zk.create(f"{root}/alps", b"")
    term.expect(prompt(server, 0))

    # One child matches: the path is completed.
    term.type(f"get {root}/compl\t")
    term.expect(re.escape(f"get {root}/completion-target"))
    term.type("\r")
    term.expect(r"\nfound by tab\n")
    term.expect(prompt(server, 1))

    # Two match: the common prefix, then the choices on a second Tab.
    term.type(f"ls {root}/al\t")
    term.expect(re.escape(f"ls {root}/alp"))
    term.type("\t")
    term.expect(r"alpha\s+alps")
    term.type("s\r")
    term.expect(r"\n\[\]\n")
    term.expect(prompt(server, 2))

    # Command names complete too.
    term.type("getAllC\t")
    term.expect(r"getAllChildrenNumber ")
    term.type(f"{root}\r")
    term.expect(r"\n3\n")
    term.expect(prompt(server, 3))

    # Ctrl-D at an empty prompt leaves.
    term.type("\x04")
    assert term.wait() == 0
