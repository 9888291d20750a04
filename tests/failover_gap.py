#!/usr/bin/env python3
"""How long do writes stop when the leader of a 3-server ensemble dies?

    .venv/bin/python tests/failover_gap.py --kills 5

Starts a 3-server Paddock ensemble (target/debug/paddock, or PADDOCK_BIN) on
free loopback ports, runs one writer — a kazoo client given all hosts, doing
synchronous creates and sets one after another and timing each
acknowledgement — and SIGKILLs the leader K times, restarting the killed
server each time once a new leader is serving writes.  For every kill it
prints the longest gap between consecutive acknowledged writes around the
kill, and at the end the median (and worst) of those gaps.  It also checks
that the writer kept its session and that every acknowledged write is on
every server.  Exit status 0 when those checks pass.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "e2e"))

from ensemble import Ensemble, EnsembleError, Writer, wait_for  # noqa: E402
from zkharness import REPO, paddock_bin  # noqa: E402

from kazoo.client import KazooClient, KazooState  # noqa: E402
from kazoo.retry import KazooRetry  # noqa: E402


def peer_port(client: KazooClient):
    """The client port of the server the kazoo client is connected to."""
    try:
        return client._connection._socket.getpeername()[1]
    except Exception:  # noqa: BLE001 - private kazoo detail, best effort
        return None


def describe_binary() -> str:
    b = paddock_bin()
    try:
        mtime = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(b.stat().st_mtime))
    except OSError:
        return f"{b} (missing)"
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        rev = "?"
    return f"{b} (built {mtime}, tree {rev or '?'})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=5, help="leader kills (default 5)")
    ap.add_argument("--tick-time", type=int, default=200,
                    help="tickTime of every server in ms (default 200)")
    ap.add_argument("--session-timeout", type=float, default=4.0,
                    help="kazoo session timeout asked for, s (default 4; "
                         "the servers allow 2..20 tickTimes)")
    ap.add_argument("--before", type=float, default=2.0,
                    help="seconds of steady writes before each kill (default 2)")
    ap.add_argument("--after", type=float, default=2.0,
                    help="seconds of writes after the killed server is back (default 2)")
    ap.add_argument("--op-timeout", type=float, default=10.0,
                    help="how long the writer waits for one reply, s (default 10)")
    ap.add_argument("--dir", help="work directory (default: a fresh temporary one, "
                                  "removed on success)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)

    print("command :", " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv))
    print(f"machine : nproc={os.cpu_count()} ({os.uname().sysname} {os.uname().release}, "
          f"{os.uname().machine}); load avg {os.getloadavg()[0]:.2f}")
    print("binary  :", describe_binary())

    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="failover-gap-"))
    ens = Ensemble(workdir, voters=3, tick_time=args.tick_time)
    ok = True
    try:
        ens.start()
        client = KazooClient(hosts=ens.hosts, timeout=args.session_timeout,
                             connection_retry=KazooRetry(max_tries=-1, delay=0.05,
                                                         max_delay=0.3),
                             command_retry=None)
        client.start(timeout=15)
        # ZooKeeper's rule, which Paddock follows: 2..20 tickTimes.
        negotiated = int(min(max(args.session_timeout * 1000, 2 * args.tick_time),
                             20 * args.tick_time))
        print(f"settings: 3 voters, tickTime={args.tick_time} ms, kazoo session timeout "
              f"asked {args.session_timeout:.1f} s"
              + f" (granted {negotiated} ms: kazoo reads time out after 2/3 of it)"
              + f", writer: synchronous create/set alternately, one outstanding, "
              f"reply timeout {args.op_timeout:.0f} s, reconnect delay 0.05..0.3 s; "
              f"{args.before:.1f} s of writes before each kill, {args.after:.1f} s after "
              f"the restart; work dir {workdir}")
        client.ensure_path("/gap")
        writer = Writer(client, "/gap", "w", sets=True, op_timeout=args.op_timeout)
        session = client.client_id
        writer.start()
        rows = []
        print("columns : leader = the server killed; client on = the writer's server at "
              "the kill; elected = s from the kill until srvr shows a new leader; "
              "resumed = s from the kill until the ack that ends the longest gap; "
              "longest gap = longest time between consecutive acks from the last ack "
              "before the kill until --after s past the restart; failed ops = writes "
              "that got an error (ConnectionLoss) in that window")
        print()
        print(f"{'kill':>4}  {'leader':>8}  {'client on':>9}  {'new leader':>10}  "
              f"{'elected':>8}  {'resumed':>8}  {'longest gap':>11}  {'failed ops':>10}")
        for k in range(1, args.kills + 1):
            t0 = time.monotonic()
            wait_for(lambda: writer.acked_since(t0) > 0, 30, what="writes before the kill")
            time.sleep(args.before)
            old = ens.leader()
            on = peer_port(client)
            on_name = next((m.name for m in ens.members if m.port == on), "?")
            failed_before = len(writer.unknown)
            t_kill = time.monotonic()
            old.kill()
            new = ens.leader(exclude=[old], timeout=30)
            t_elected = time.monotonic()
            wait_for(lambda: writer.acked_since(t_kill) > 0, 60,
                     what="a write acknowledged after the kill")
            old.restart(timeout=30)
            time.sleep(args.after)
            t_end = time.monotonic()
            times = sorted(writer.ack_times())
            before = [t for t in times if t < t_kill]
            window = ([before[-1]] if before else []) + \
                [t for t in times if t_kill <= t <= t_end]
            gaps = [(b - a, b) for a, b in zip(window, window[1:])]
            gap, resumed = max(gaps) if gaps else (float("nan"), float("nan"))
            failed = len(writer.unknown) - failed_before
            rows.append(gap)
            print(f"{k:>4}  {old.name:>8}  {on_name:>9}  {new.name:>10}  "
                  f"{t_elected - t_kill:>7.2f}s  {resumed - t_kill:>7.2f}s  "
                  f"{gap:>10.3f}s  {failed:>10}", flush=True)
        writer.stop()
        steady = sorted(b - a for a, b in zip(writer.ack_times(), writer.ack_times()[1:]))
        print()
        print(f"longest gap per kill (s): {', '.join(f'{g:.3f}' for g in rows)}")
        print(f"median longest gap: {statistics.median(rows):.3f} s over {len(rows)} kills "
              f"(worst {max(rows):.3f} s); {len(writer.acked)} writes acknowledged, "
              f"median ack interval {statistics.median(steady) * 1000:.1f} ms")

        if writer.unknown:
            from collections import Counter
            kinds = Counter(e.split("(")[0] for _, e in writer.unknown)
            print("failed ops by error: " + ", ".join(f"{k} x{n}" for k, n in kinds.items()))

        # The same checks as the tests: session kept, every ack everywhere.
        if client.client_id != session:
            ok = False
            print(f"FAIL: the writer's session changed: {session} -> {client.client_id}")
        if any(s == KazooState.LOST for _, s in writer.states):
            ok = False
            print("FAIL: the writer's session was lost")
        client.stop()
        client.close()
        ens.wait_all_serving(30)
        for m in ens.members:
            tree = ens.snapshot_tree(m)
            missing = [p for p in writer.acked_paths() if p not in tree]
            if missing:
                ok = False
                print(f"FAIL: {m.name} lacks {len(missing)} acknowledged writes, "
                      f"e.g. {missing[:3]}")
        diffs = ens.tree_differences()
        if diffs:
            ok = False
            print(f"FAIL: trees differ ({len(diffs)}): {diffs[:5]}")
        print("checks: " + ("session kept, every acknowledged write on every server, "
                            "trees identical" if ok else "FAILED (see above)"))
    except (EnsembleError, AssertionError) as e:
        ok = False
        print(f"FAIL: {e}")
    finally:
        ens.close()
    if ok and not args.dir:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    elif not ok:
        print(f"server logs kept in {workdir}/node*/paddock.log")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
