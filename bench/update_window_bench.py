#!/usr/bin/python3
"""Update-window benchmark (issue 5): N `dais serve` nodes x M models whose load takes T seconds,
updated to a new version with the lock hierarchy versus with one global lock.

One run starts its own redis-server on a free loopback port (--save '' --appendonly no) and a
shared model repository of M identity-backend models (`creation_delay_sec` T: each load sleeps T;
their version directories are empty). For each policy (--coordination hierarchy, global):
  1. FLUSHALL; the repository holds version 1 of every model; N nodes start at once
     (`dais serve --redis --node-id nodeK --model-control-mode poll --repository-poll-secs P`)
     and the script waits until each one is ready;
  2. light traffic starts: one client thread per node sends unversioned inferences to its
     models in turn (20 ms apart) and records every answer's model_version and every failure;
  3. version 2 of every model appears at once (mkdir of M directories); the clock starts just
     before the first mkdir;
  4. the window ends when every node serves version 2 of every model: GET /v2/models/<m> lists
     only "2" and an unversioned inference answers from version 2 (checked every 50 ms);
  5. from the nodes' logs: every load of version 2 (start = "loading model", end = "... ready"):
     the load window (first start to last end), the most loads running at once in the fleet,
     double loads (two loads of the same version of a model overlapping on one node) and
     repeated loads (more than one load of it on a node at all);
  6. conflicting versions: a client that got version 2 from a node and then version 1 from the
     same node and model (two versions serving unversioned traffic at once).
Prints a markdown table; --json-out writes every measurement.

usage: bench/update_window_bench.py [--nodes 4] [--models 4] [--delay 1.0] [--poll-secs 1]
                                    [--policies hierarchy,global] [--quick] [--json-out FILE]
                                    [--dais build/release/src/cmd/dais]
"""
import argparse
import calendar
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORTS_RE = re.compile(r"ports: http=(\d+) metrics=(\d+) grpc=(\d+)")
LOG_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z \w \S+\] (.*)$")
START_RE = re.compile(r"loading model '([^']+)' version (\d+)")
END_RE = re.compile(r"model '([^']+)' version (\d+) (ready:|failed to load)")
BODY = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 2], "data": [1, 2]}]}
CONFIG = """\
name: "{name}"
backend: "identity"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
parameters [ {{ key: "creation_delay_sec" value: {{ string_value: "{delay}" }} }} ]
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_cmd(port, *args):
    """One command over a fresh connection (inline protocol is enough for FLUSHALL/PING)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall((" ".join(args) + "\r\n").encode())
        return s.recv(4096).decode().strip()


def start_redis(tmp):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            if redis_cmd(port, "PING") == "+PONG":
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


class Node:
    def __init__(self, binary, repo, redis_port, node_id, policy, poll_secs, log_path):
        self.node_id = node_id
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "serve", "--model-repository", repo, "--http-port", "0", "--metrics-port",
             "0", "--grpc-port", "0", "--redis", f"127.0.0.1:{redis_port}", "--node-id", node_id,
             "--model-control-mode", "poll", "--repository-poll-secs", str(poll_secs),
             "--coordination", policy,
             # identity loads are sleeps: no load check process (it would load each one twice)
             "--model-load-isolation", "none"], stdin=subprocess.DEVNULL, stdout=self.log,
            stderr=subprocess.STDOUT)
        self.url = None

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while self.url is None:
            m = PORTS_RE.search(self.log_text())
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}"
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.node_id} did not start:\n{self.log_text()[-3000:]}")
            else:
                time.sleep(0.05)
        while True:
            try:
                if requests.get(self.url + "/v2/health/ready", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.node_id} not ready:\n{self.log_text()[-3000:]}")
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def serves_only(session, node, model, version):
    try:
        r = session.get(f"{node.url}/v2/models/{model}", timeout=10)
        if r.status_code != 200 or r.json().get("versions") != [version]:
            return False
        r = session.post(f"{node.url}/v2/models/{model}/infer", json=BODY, timeout=10)
        return r.status_code == 200 and r.json().get("model_version") == version
    except requests.RequestException:
        return False


def log_loads(text, version):
    """[(model, start, end)] of the loads of `version` in a node's log (unix seconds)."""
    loads, open_ = [], {}
    for line in text.splitlines():
        m = LOG_RE.match(line)
        if not m:
            continue
        t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + \
            float(m.group(2) or 0)
        s = START_RE.match(m.group(3))
        if s and int(s.group(2)) == version:
            open_.setdefault(s.group(1), []).append(len(loads))
            loads.append([s.group(1), t, None])
            continue
        e = END_RE.match(m.group(3))
        if e and int(e.group(2)) == version and open_.get(e.group(1)):
            loads[open_[e.group(1)].pop(0)][2] = t
    return loads


def max_concurrent(intervals):
    points = sorted([(s, 1) for s, e in intervals] + [(e, -1) for s, e in intervals],
                    key=lambda p: (p[0], p[1]))
    cur = best = 0
    for _, d in points:
        cur += d
        best = max(best, cur)
    return best


def run_policy(args, policy, redis_port, tmp):
    repo = os.path.join(tmp, f"repo-{policy}")
    models = [f"model{j}" for j in range(args.models)]
    for m in models:
        os.makedirs(os.path.join(repo, m, "1"))
        with open(os.path.join(repo, m, "config.pbtxt"), "w") as f:
            f.write(CONFIG.format(name=m, delay=args.delay))
    redis_cmd(redis_port, "FLUSHALL")
    nodes = [Node(args.dais, repo, redis_port, f"node{k}", policy, args.poll_secs,
                  os.path.join(tmp, f"{policy}-node{k}.log")) for k in range(args.nodes)]
    result = {"policy": policy}
    try:
        t_start = time.monotonic()
        with ThreadPoolExecutor(len(nodes)) as ex:
            list(ex.map(lambda n: n.wait_ready(60 + 2 * args.nodes * args.models * args.delay),
                        nodes))
        result["startup_s"] = time.monotonic() - t_start

        # Light traffic: one client per node, its models in turn.
        stop = threading.Event()
        answers = {(n.node_id, m): [] for n in nodes for m in models}
        failures, lock = [], threading.Lock()

        def client(node):
            s = requests.Session()
            k = 0
            while not stop.is_set():
                m = models[k % len(models)]
                k += 1
                try:
                    r = s.post(f"{node.url}/v2/models/{m}/infer", json=BODY, timeout=30)
                    ok = r.status_code == 200 and r.json()["outputs"][0]["data"] == [1, 2]
                    why = None if ok else f"{r.status_code} {r.text[:200]}"
                except requests.RequestException as e:
                    ok, why = False, repr(e)
                with lock:
                    if ok:
                        answers[(node.node_id, m)].append(r.json().get("model_version"))
                    else:
                        failures.append((node.node_id, m, why))
                time.sleep(0.02)

        clients = [threading.Thread(target=client, args=(n,), daemon=True) for n in nodes]
        for c in clients:
            c.start()
        time.sleep(0.5)

        t0_wall, t0 = time.time(), time.monotonic()
        for m in models:
            os.mkdir(os.path.join(repo, m, "2"))
        pending = {(i, m) for i in range(len(nodes)) for m in models}
        session = requests.Session()
        deadline = t0 + 60 + 2 * args.nodes * args.models * args.delay
        while pending:
            for i, m in sorted(pending):
                if serves_only(session, nodes[i], m, "2"):
                    pending.discard((i, m))
            if time.monotonic() > deadline:
                raise RuntimeError(f"{policy}: not converged: {sorted(pending)}")
            if pending:
                time.sleep(0.05)
        result["window_s"] = time.monotonic() - t0
        time.sleep(0.5)
        stop.set()
        for c in clients:
            c.join(60)

        # From the logs: the loads of version 2.
        loads, double, repeated = [], 0, 0
        for n in nodes:
            per_node = log_loads(n.log_text(), 2)
            for m in models:
                iv = sorted((s, e if e is not None else time.time())
                            for mm, s, e in per_node if mm == m)
                repeated += max(0, len(iv) - 1)
                double += sum(1 for a, b in zip(iv, iv[1:]) if b[0] < a[1])
            loads += [(s, e) for _, s, e in per_node if e is not None]
        result["loads"] = len(loads)
        result["load_window_s"] = max(e for _, e in loads) - min(s for s, _ in loads)
        result["first_load_after_s"] = min(s for s, _ in loads) - t0_wall
        result["max_concurrent_loads"] = max_concurrent(loads)
        result["double_loads"] = double
        result["repeated_loads"] = repeated
        conflicts = 0
        for vs in answers.values():
            if "2" in vs and "1" in vs[vs.index("2"):]:
                conflicts += 1
        result["conflicting_versions"] = conflicts
        result["requests"] = sum(len(v) for v in answers.values()) + len(failures)
        result["failed_requests"] = len(failures)
        result["failures_sample"] = failures[:5]
    finally:
        for n in nodes:
            n.stop()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--models", type=int, default=4)
    ap.add_argument("--delay", type=float, default=None,
                    help="creation_delay_sec of every model (default 1.0; --quick: 0.5)")
    ap.add_argument("--poll-secs", type=int, default=1)
    ap.add_argument("--policies", default="hierarchy,global")
    ap.add_argument("--quick", action="store_true", help="load time 0.5 s (a smoke run)")
    ap.add_argument("--json-out")
    ap.add_argument("--dais", default=os.path.join(ROOT, "build", "release", "src", "cmd",
                                                   "dais"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    args = ap.parse_args()
    if args.delay is None:
        args.delay = 0.5 if args.quick else 1.0
    if not os.access(args.dais, os.X_OK):
        sys.exit(f"dais binary not found at {args.dais} (--dais)")

    tmp = tempfile.mkdtemp(prefix="update-window-")
    redis, port = start_redis(tmp)
    results = []
    try:
        for policy in args.policies.split(","):
            print(f"{policy}: {args.nodes} nodes x {args.models} models, load {args.delay} s ...",
                  flush=True)
            results.append(run_policy(args, policy, port, tmp))
    finally:
        redis.terminate()
        redis.wait(10)
        if args.keep:
            print(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    serial = args.nodes * args.models * args.delay
    by = {r["policy"]: r for r in results}
    print(f"\n{args.nodes} nodes x {args.models} models, load {args.delay} s each (serial sum "
          f"{serial:.1f} s), --repository-poll-secs {args.poll_secs}, default "
          f"--model-load-thread-count 4\n")
    print("| policy | window (s) | loads: first start → last ready (s) | most loads at once | "
          "window / serial sum | failed requests | double loads | repeated loads | "
          "conflicting versions |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['policy']} | {r['window_s']:.2f} | {r['load_window_s']:.2f} | "
              f"{r['max_concurrent_loads']} | {r['window_s'] / serial:.2f} | "
              f"{r['failed_requests']} / {r['requests']} | {r['double_loads']} | "
              f"{r['repeated_loads']} | {r['conflicting_versions']} |")
    if "hierarchy" in by and "global" in by:
        ratio = by["global"]["window_s"] / by["hierarchy"]["window_s"]
        lratio = by["global"]["load_window_s"] / by["hierarchy"]["load_window_s"]
        print(f"\nglobal / hierarchy: window {ratio:.1f}x, load window {lratio:.1f}x "
              f"(goal >= 4x at 4 nodes x 4 models)")
        for r in results:
            r["serial_s"] = serial
        results.append({"ratio_window": ratio, "ratio_load_window": lratio})
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"nodes": args.nodes, "models": args.models, "delay_s": args.delay,
                       "poll_secs": args.poll_secs, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
