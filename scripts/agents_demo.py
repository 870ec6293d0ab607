#!/usr/bin/python3
"""The two example agents (examples/agents/, docs/agents.md) on a loopback cluster, then
everything stopped.

Starts redis-server, etcd, one `dais node` (the example models, the agents' feature spec, vector
memory), a `dais scheduler` and a `dais gateway` on free loopback ports; deploys mlp_small behind
the route `demand` and xgb_binary behind `churn`, creates the `users` collection; pushes the
products' stock and the users' profiles to the feature store and the users' embeddings (half of
them churned) to vector memory; then applies the two agents. The scheduler places each agent's
runtime on the node, which runs it. Orders and inactivity events are published to their streams;
the demo prints what the agents wrote (inventory alerts, retention offers), `dais ctl get agents`,
the last runs of each, and the time from `apply` to the agent's first run.

usage: scripts/agents_demo.py [--build build/release] [--orders 60] [--inactive 30] [--keep]
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "agents"
SEED = 38


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def http(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def redis_cmd(port, *args):
    """One command over RESP (enough for XADD / XRANGE / XLEN)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        out = b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a) for a in (str(x).encode() for x in args))
        s.sendall(out)
        f = s.makefile("rb")

        def read():
            line = f.readline()
            kind, rest = line[:1], line[1:-2]
            if kind == b"+":
                return rest.decode()
            if kind == b"-":
                raise RuntimeError(rest.decode())
            if kind == b":":
                return int(rest)
            if kind == b"$":
                n = int(rest)
                return None if n < 0 else f.read(n + 2)[:-2].decode()
            if kind == b"*":
                n = int(rest)
                return None if n < 0 else [read() for _ in range(n)]
            raise RuntimeError(f"unexpected reply {line!r}")
        return read()


def entries(port, stream):
    """[(id, {field: value})], oldest first."""
    return [(i, dict(zip(kv[::2], kv[1::2]))) for i, kv in
            redis_cmd(port, "XRANGE", stream, "-", "+")]


class Cluster:
    """redis-server, etcd, one node, a scheduler and a gateway on free loopback ports."""

    def __init__(self, build, tmp, scheduler_args=()):
        self.dais = str(Path(build) / "src/cmd/dais")
        self.tmp = tmp
        self.procs = []
        self.scheduler_args = list(scheduler_args)

    def spawn(self, name, args):
        log = open(self.tmp / f"{name}.log", "w")
        self.procs.append(subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=subprocess.STDOUT))
        return self.tmp / f"{name}.log"

    def port_of(self, log, what):
        def ready():
            text = log.read_text()
            m = re.search(r"ports: http=(\d+)", text)
            return int(m.group(1)) if what in text and m else None
        return wait_for(ready, 90, f"{log.stem} started")

    def ctl(self, *args, check=True):
        r = subprocess.run([self.dais, "ctl", "--etcd", self.etcd, *args], capture_output=True,
                           text=True, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError(f"dais ctl {' '.join(args)}: {r.stdout}{r.stderr}")
        return r.stdout

    def etcd_get_prefix(self, prefix):
        """The keys under `prefix` (etcdctl)."""
        r = subprocess.run(["etcdctl", "--endpoints", f"http://{self.etcd}", "get", "--prefix",
                            "--keys-only", prefix], capture_output=True, text=True, timeout=10)
        return [k for k in r.stdout.split() if k]

    def apply(self, text, quiet=False):
        path = self.tmp / f"spec-{time.monotonic_ns()}.yaml"
        path.write_text(text.replace("127.0.0.1:6379", f"127.0.0.1:{self.redis_port}"))
        out = self.ctl("apply", "-f", str(path)).strip()
        if not quiet:
            print(out)

    def start(self, repo):
        self.redis_port = free_port()
        self.spawn("redis", ["redis-server", "--port", str(self.redis_port), "--bind",
                             "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                             str(self.tmp)])
        client, peer = free_port(), free_port()
        self.etcd = f"127.0.0.1:{client}"
        self.spawn("etcd", ["etcd", "--name", "demo", "--data-dir", str(self.tmp / "etcd"),
                            "--listen-client-urls", f"http://{self.etcd}",
                            "--advertise-client-urls", f"http://{self.etcd}",
                            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                            "--initial-cluster", f"demo=http://127.0.0.1:{peer}"])
        wait_for(lambda: subprocess.run([self.dais, "ctl", "--etcd", self.etcd, "get", "nodes"],
                                        capture_output=True).returncode == 0, 30, "etcd")
        log = self.spawn("gateway", [self.dais, "gateway", "--etcd", self.etcd, "--http-port",
                                     "0", "--grpc-port", "-1"])
        self.gateway = f"http://127.0.0.1:{self.port_of(log, 'ports')}"
        log = self.spawn("n1", [self.dais, "node", "--etcd", self.etcd, "--node-id", "n1",
                                "--lease-ttl-secs", "2", "--model-repository", str(repo),
                                "--http-port", "0", "--allow-grpc", "false",
                                "--feature-spec", str(EXAMPLES / "features.yaml"),
                                "--redis", f"127.0.0.1:{self.redis_port}", "--memory",
                                "--agent-gateway", self.gateway])
        self.node = f"http://127.0.0.1:{self.port_of(log, 'dais serve ready')}"
        self.spawn("scheduler", [self.dais, "scheduler", "--etcd", self.etcd, "--id", "s1",
                                 "--lease-ttl-secs", "2", *self.scheduler_args])

    def deploy(self):
        """The routes and the collection the example agents need, ready."""
        for name, model in (("demand", "mlp_small"), ("churn", "xgb_binary")):
            self.apply(f"name: {name}\nmodel: {model}\nreplicas: 1\n"
                       "resources: {cpu_milli: 100, memory_mib: 64}\n")
            self.apply(f"kind: route\nname: {name}\nmodel: {model}\n"
                       "versions: [{version: 1, weight: 100}]\n")
        self.apply((EXAMPLES / "users-collection.yaml").read_text())
        for name, model in (("demand", "mlp_small"), ("churn", "xgb_binary")):
            wait_for(lambda: http("GET", f"{self.gateway}/v2/models/{name}/ready")[0] == 200,
                     90, f"route {name} ready")
        wait_for(lambda: http("POST", f"{self.gateway}/v2/memory/collections/users/search",
                              {"vector": [1] * 8, "k": 1})[0] == 200, 90, "collection users")

    def load_data(self, rng, users=200, skus=20):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        code, body = http("POST", f"{self.node}/push", {
            "push_source_name": "stock", "to": "online", "df": {
                "sku": list(range(1, skus + 1)), "event_timestamp": [now] * skus,
                "on_hand": [float(x) for x in rng.integers(0, 40, skus)],
                "daily_sales": [float(x) for x in rng.integers(1, 10, skus)]}})
        assert code == 200, body
        emb = rng.normal(size=(users, 8)).astype(np.float32)
        code, body = http("POST", f"{self.node}/push", {
            "push_source_name": "user", "to": "online", "df": {
                "user_id": list(range(1, users + 1)), "event_timestamp": [now] * users,
                "embedding": emb.tolist(),
                "spend_30d": [round(float(x), 2) for x in rng.gamma(2.0, 0.4, users)]}})
        assert code == 200, body
        code, body = http("POST", f"{self.gateway}/v2/memory/collections/users/upsert", {
            "points": [{"id": f"user-{i + 1}", "vector": emb[i].tolist(),
                        "payload": {"churned": bool(i % 2), "user": f"user-{i + 1}"}}
                       for i in range(users)]})
        assert code == 200, body

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def first_run_after_apply(c, spec_text, name, publish):
    """Seconds from `dais ctl apply` to the agent's first recorded run (a trigger waiting)."""
    publish()
    t0 = time.time()
    c.apply(spec_text)
    wait_for(lambda: redis_cmd(c.redis_port, "XLEN", f"dais:agent:{name}:runs"), 60,
             f"{name}'s first run")
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    ap.add_argument("--orders", type=int, default=60)
    ap.add_argument("--inactive", type=int, default=30)
    ap.add_argument("--keep", action="store_true", help="keep the processes' logs (printed)")
    args = ap.parse_args()
    repo = ROOT / "examples/model_repository"
    if not (repo / "mlp_small").exists():
        subprocess.run([str(ROOT / "scripts/gen_examples.sh")], check=True)
    rng = np.random.default_rng(SEED)
    tmp = Path(tempfile.mkdtemp(prefix="dais-agents-demo-"))
    if args.keep:
        print(f"logs in {tmp}")
    c = Cluster(args.build, tmp)
    try:
        c.start(repo)
        c.deploy()
        c.load_data(rng)
        port = c.redis_port
        orders = [(int(rng.integers(1, 21)), int(rng.integers(1, 30))) for _ in range(args.orders)]
        inactive = [(int(rng.integers(1, 201)), round(float(rng.uniform(0.2, 3.0)), 1))
                    for _ in range(args.inactive)]
        took = {}
        took["inventory-alert"] = first_run_after_apply(
            c, (EXAMPLES / "inventory-alert.yaml").read_text(), "inventory-alert",
            lambda: [redis_cmd(port, "XADD", "orders", "*", "sku", s, "qty", q)
                     for s, q in orders[:1]])
        took["user-retention"] = first_run_after_apply(
            c, (EXAMPLES / "user-retention.yaml").read_text(), "user-retention",
            lambda: [redis_cmd(port, "XADD", "user-inactive", "*", "user_id", u,
                               "months_inactive", d) for u, d in inactive[:1]])
        for s, q in orders[1:]:
            redis_cmd(port, "XADD", "orders", "*", "sku", s, "qty", q)
        for u, d in inactive[1:]:
            redis_cmd(port, "XADD", "user-inactive", "*", "user_id", u, "months_inactive", d)
        for name, n in (("inventory-alert", len(orders)), ("user-retention", len(inactive))):
            wait_for(lambda: redis_cmd(port, "XLEN", f"dais:agent:{name}:runs") >= n, 120,
                     f"{name}'s runs")
        print("\n$ dais ctl get agents\n" + c.ctl("get", "agents"))
        print("$ dais ctl get instances n1\n" + c.ctl("get", "instances", "n1"))
        for name in ("inventory-alert", "user-retention"):
            print(f"$ dais ctl get runs {name}   (the newest 5)")
            print("\n".join(c.ctl("get", "runs", name).splitlines()[:6]) + "\n")
        alerts = entries(port, "inventory-alerts")
        offers = entries(port, "offers")
        print(f"inventory alerts: {len(alerts)} of {len(orders)} orders ran short")
        for _, f in alerts[:5]:
            print(f"  sku {f['sku']}: ordered {f['ordered']}, on hand {f['on_hand']} "
                  f"(forecast {float(f['forecast']):.3f})")
        print(f"retention offers: {len(offers)} of {len(inactive)} inactive users at risk")
        for _, f in offers[:5]:
            print(f"  user {f['user_id']}: churn {float(f['churn']):.2f}, like {f['like']} "
                  f"-> {f['offer']}")
        print("\napply -> first run: " + ", ".join(f"{k} {v:.2f} s" for k, v in took.items()))
        return 0
    finally:
        c.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
