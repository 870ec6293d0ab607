#!/usr/bin/python3
"""Agents under overload (issue 38): a high-priority agent keeps its SLA while a low-priority one
gives way, then catches up; and the time from `dais ctl apply` to an agent's first run.

On a loopback cluster (scripts/agents_demo.py's: redis-server, etcd, one `dais node` with the
example models, a `dais scheduler`, a `dais gateway`), agents with the inventory-alert pipeline
(a feature lookup, mlp_small through the gateway, a branch, an emit) run on the node:
  1. capacity: one agent alone working off a backlog of --probe triggers (C1 runs/s), then two at
     once (C runs/s together: what the cluster does for this pipeline), 8 workers each;
  2. overload, --seconds long, twice the capacity offered: `urgent` (high priority, SLA p99
     --sla-ms) at --urgent-share x C1, which it could carry alone but not on the half of the
     cluster an even share leaves it; `bulk` (low priority) at the rest of 2 C. The
     orchestrator (the leading scheduler) pauses bulk while urgent's p99 nears its SLA and
     resumes it when calm; after the overload bulk works off its backlog;
  3. the same overload with both agents of high priority (nobody gives way): the reference.
Per agent and phase: triggers, runs, within SLA, deferred (still waiting when the overload ended),
the time its backlog took to drain after the overload, lost (triggers never run). Latency is from
the trigger's publication (its stream entry id) to the run's end (start_ms + duration in the run
record).

usage: bench/agents_bench.py [--seconds 5] [--sla-ms 500] [--urgent-share 0.9] [--probe 20000]
                             [--concurrency 8]
                             [--pause-fraction 0.5] [--build build/release]
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from agents_demo import EXAMPLES, Cluster, redis_cmd, wait_for  # noqa: E402

PIPELINE = (EXAMPLES / "inventory-alert.yaml").read_text()


def agent_spec(name, priority, sla_ms, stream, concurrency):
    """The inventory-alert pipeline, every run ending in an alert (so alerts count the runs)."""
    text = PIPELINE.replace("name: inventory-alert", f"name: {name}")
    text = text.replace("max_attempts: 3", f"max_attempts: 3\nconcurrency: {concurrency}")
    text = text.replace('branch: {if: "${event.qty} > ${stock.on_hand}"}',
                        'branch: {if: "${event.qty} > -1"}')
    text = text.replace("priority: high", f"priority: {priority}")
    text = text.replace("sla: {p99_ms: 500, window: 10s}",
                        f"sla: {{p99_ms: {sla_ms}, window: 5s}}" if sla_ms else "")
    text = text.replace("/orders}", f"/{stream}}}")
    text = text.replace("inventory-alerts", f"alerts-{name}")
    return text


def xadd_orders(port, stream, numbers, conn=None):
    """Pipelined XADDs of orders (sku, qty derived from each number) to `stream`."""
    numbers = list(numbers)
    s = conn or socket.create_connection(("127.0.0.1", port))
    cmds = b""
    for i in numbers:
        args = [b"XADD", stream.encode(), b"*", b"sku", str(1 + i % 20).encode(), b"qty",
                str(1 + i % 30).encode()]
        cmds += b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    s.sendall(cmds)
    f = s.makefile("rb")
    for _ in numbers:
        f.readline()
    if conn is None:
        s.close()


class Publisher(threading.Thread):
    """XADDs to `stream` at `rate` per second for `seconds`, pipelined every 10 ms."""

    def __init__(self, port, stream, rate, seconds):
        super().__init__(daemon=True)
        self.port, self.stream, self.rate, self.seconds = port, stream, rate, seconds
        self.sent = 0

    def run(self):
        s = socket.create_connection(("127.0.0.1", self.port))
        start = time.time()
        while True:
            elapsed = time.time() - start
            if elapsed >= self.seconds:
                break
            due = int(self.rate * elapsed) - self.sent
            if due > 0:
                xadd_orders(self.port, self.stream, range(self.sent, self.sent + due), s)
                self.sent += due
            time.sleep(0.01)
        s.close()


def alerted(port, name):
    """The distinct triggers an agent's runs alerted for (every run alerts here)."""
    return {dict(zip(kv[::2], kv[1::2]))["order"]
            for _, kv in redis_cmd(port, "XRANGE", f"alerts-{name}", "-", "+")}


def runs(port, name):
    """{run_id: record} of an agent's recorded runs (the newest ~10,000)."""
    out = {}
    for _, kv in redis_cmd(port, "XRANGE", f"dais:agent:{name}:runs", "-", "+"):
        fields = dict(zip(kv[::2], kv[1::2]))
        out[fields["run_id"]] = json.loads(fields["trace"])
    return out


def backlog(port, stream, group):
    for g in redis_cmd(port, "XINFO", "GROUPS", stream):
        d = dict(zip(g[::2], g[1::2]))
        if d["name"] == group:
            return (d.get("lag") or 0) + d["pending"]
    return -1


def measure_capacity(c, args, names):
    """Runs per second of `names` (agents applied afresh, 8 workers, a backlog of --probe each)
    together, over 2 s from 0.5 s after all started; then their backlogs are worked off."""
    port = c.redis_port
    for n in names:
        xadd_orders(port, f"in-{n}", range(args.probe))
    for n in names:
        c.apply(agent_spec(n, "normal", 0, f"in-{n}", args.concurrency), quiet=True)
    for n in names:
        wait_for(lambda: redis_cmd(port, "XLEN", f"alerts-{n}"), 60, f"{n} running")
    time.sleep(0.5)
    before, t0 = sum(redis_cmd(port, "XLEN", f"alerts-{n}") for n in names), time.time()
    time.sleep(2)
    after = sum(redis_cmd(port, "XLEN", f"alerts-{n}") for n in names)
    rate = (after - before) / (time.time() - t0)
    assert all(backlog(port, f"in-{n}", n) > 0 for n in names), \
        "a probe ran out of backlog while measured: raise --probe"
    for n in names:
        wait_for(lambda: backlog(port, f"in-{n}", n) == 0, 300, f"{n} drained")
    return rate


def overload(c, tag, urgent_prio, bulk_prio, args, rates):
    """One overload phase: both agents applied afresh (their own streams), the load, the drain."""
    port = c.redis_port
    names = {"urgent": f"urgent-{tag}", "bulk": f"bulk-{tag}"}
    c.apply(agent_spec(names["urgent"], urgent_prio, args.sla_ms, f"in-{names['urgent']}",
                       args.concurrency), quiet=True)
    c.apply(agent_spec(names["bulk"], bulk_prio, 0, f"in-{names['bulk']}",
                       args.concurrency), quiet=True)
    for n in names.values():
        wait_for(lambda: c.etcd_get_prefix(f"/dais/agent-status/{n}/"), 60, f"{n} running")
    pubs = {k: Publisher(port, f"in-{names[k]}", rates[k], args.seconds) for k in names}
    for p in pubs.values():
        p.start()
    for p in pubs.values():
        p.join()
    end = time.time()
    deferred = {k: backlog(port, f"in-{names[k]}", names[k]) for k in names}
    drained = {}
    for k, n in names.items():
        wait_for(lambda: backlog(port, f"in-{n}", n) == 0, 600, f"{n} drained")
        drained[k] = time.time() - end
    rows = []
    for k, n in names.items():
        done = len(alerted(port, n))
        r = runs(port, n)
        lat = [rec["start_ms"] + rec["duration_us"] / 1000 - int(rid.split("-")[0])
               for rid, rec in r.items() if rec["outcome"] != "failed"]
        within = sum(1 for x in lat if x <= args.sla_ms)
        share = 100.0 * within / max(len(lat), 1)
        rows.append((tag, k, pubs[k].sent, done, share, len(lat) < done, deferred[k], drained[k],
                     pubs[k].sent - done, sorted(lat)[int(0.99 * (len(lat) - 1))] if lat else 0))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--sla-ms", type=float, default=500)
    ap.add_argument("--urgent-share", type=float, default=0.9)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--probe", type=int, default=20000)
    ap.add_argument("--pause-fraction", type=float, default=0.5)
    ap.add_argument("--throttle-fraction", type=float, default=0.35,
                    help="the scheduler's --agent-throttle-fraction (at the pause's: none)")
    ap.add_argument("--cpu-busy", type=float, default=0.9,
                    help="the scheduler's --agent-cpu-busy (1: the CPU is no signal)")
    args = ap.parse_args()
    repo = ROOT / "examples/model_repository"
    tmp = Path(tempfile.mkdtemp(prefix="dais-agents-bench-"))
    c = Cluster(args.build, tmp, ["--agent-calm-ms", "2000",
                                  "--agent-pause-fraction", str(args.pause_fraction),
                                  "--agent-throttle-fraction", str(args.throttle_fraction),
                                  "--agent-cpu-busy", str(args.cpu_busy)])
    try:
        c.start(repo)
        c.deploy()
        c.load_data(__import__("numpy").random.default_rng(38))
        port = c.redis_port
        # Apply to first run: a trigger waits, the agent is applied.
        redis_cmd(port, "XADD", "in-first", "*", "sku", 1, "qty", 5)
        t0 = time.time()
        c.apply(agent_spec("first", "normal", 0, "in-first", 1), quiet=True)
        wait_for(lambda: redis_cmd(port, "XLEN", "dais:agent:first:runs"), 60, "the first run")
        first_run = time.time() - t0
        # Capacity: one agent alone, then two agents at once (the overload's runtimes and
        # workers), each with a backlog waiting.
        cap_one = measure_capacity(c, args, ["probe"])
        cap = measure_capacity(c, args, ["probe2", "probe3"])
        print(f"apply -> first run: {first_run:.2f} s (goal <= 5 s)")
        print(f"capacity: one agent alone {cap_one:.0f} runs/s; two agents at once, C = "
              f"{cap:.0f} runs/s\n")
        rates = {"urgent": args.urgent_share * cap_one}
        rates["bulk"] = 2 * cap - rates["urgent"]
        rows = overload(c, "prio", "high", "low", args, rates)
        rows += overload(c, "same", "high", "high", args, rates)
        print(f"overload: {args.seconds:g} s at 2.0 x C; urgent at {args.urgent_share:g} x one "
              f"agent's capacity ({rates['urgent']:.0f}/s = {rates['urgent'] / cap:.2f} x C; SLA "
              f"p99 {args.sla_ms:g} ms), bulk the rest ({rates['bulk']:.0f}/s); pause at "
              f"{args.pause_fraction:g} of the SLA")
        print(f"{'priorities':<22}{'agent':<8}{'triggers':>9}{'runs':>7}{'within SLA':>12}"
              f"{'p99 ms':>9}{'deferred':>10}{'drained in':>12}{'lost':>6}")
        for tag, k, sent, n, share, sampled, deferred, drained, lost, p99 in rows:
            label = "urgent high, bulk low" if tag == "prio" else "both high (reference)"
            within = f"{share:.2f}%" + ("*" if sampled else " ") if k == "urgent" else "(no SLA) "
            print(f"{label:<22}{k:<8}{sent:>9}{n:>7}{within:>12}{p99:>9.0f}{deferred:>10}"
                  f"{drained:>11.1f}s{lost:>6}")
        print("* of the newest ~10,000 runs (the runs stream is capped): raise --seconds with care")
        print("\n" + c.ctl("get", "events").strip()[-1500:])
        return 0
    finally:
        c.stop()


if __name__ == "__main__":
    sys.exit(main())
