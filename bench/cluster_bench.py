#!/usr/bin/python3
"""Cluster recovery benchmark (issue 14): a real etcd, 3 `dais node` (1 declared A100 each) and
2 `dais scheduler` on loopback, lease TTL --ttl seconds.

  - node recovery: a 1-replica deployment of mlp_small; `kill -9` the node running it; time until
    its instance is READY on another node (the node is restarted between runs). Goal: at most
    TTL + model load time + 1 s.
  - leader failover: `kill -9` the leading scheduler; time until the standby holds the leader key.
  - etcd load at steady state: gRPC messages etcd received (its own /metrics,
    grpc_server_msg_received_total) over --idle seconds with nothing changing, per member per
    minute.
Prints p50 and max over --runs runs.

usage: bench/cluster_bench.py [--runs 10] [--ttl 2] [--idle 60] [--build build/release]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise SystemExit(f"timed out waiting for {what}")


class Cluster:
    def __init__(self, dais, repo, tmp, ttl):
        self.dais, self.repo, self.tmp, self.ttl = dais, repo, tmp, ttl
        self.port, peer = free_port(), free_port()
        self.etcd = subprocess.Popen(
            ["etcd", "--name", "m", "--data-dir", str(tmp / "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{self.port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"m=http://127.0.0.1:{peer}"],
            stdout=open(tmp / "etcd.log", "wb"), stderr=subprocess.STDOUT)
        self.endpoint = f"127.0.0.1:{self.port}"
        wait_for(lambda: self.ctl_ok(), 30, "etcd")
        self.nodes, self.schedulers = {}, {}

    def ctl_ok(self):
        return subprocess.run(["etcdctl", "--endpoints", self.endpoint, "endpoint", "health"],
                              capture_output=True, env={**os.environ, "ETCDCTL_API": "3"}
                              ).returncode == 0

    def get(self, prefix):
        out = subprocess.run(["etcdctl", "--endpoints", self.endpoint, "get", "--prefix", prefix],
                             capture_output=True, text=True,
                             env={**os.environ, "ETCDCTL_API": "3"}).stdout.splitlines()
        return {out[i]: out[i + 1] for i in range(0, len(out) - 1, 2)}

    def start_node(self, name):
        self.nodes[name] = subprocess.Popen(
            [self.dais, "node", "--model-repository", str(self.repo), "--http-port", "0",
             "--grpc-port", "0", "--etcd", self.endpoint, "--node-id", name,
             "--lease-ttl-secs", str(self.ttl), "--gpus", "1xA100:80GiB"],
            stdout=open(self.tmp / f"{name}.log", "ab"), stderr=subprocess.STDOUT)
        wait_for(lambda: f"/dais/nodes/{name}" in self.get("/dais/nodes/"), 30, f"node {name}")

    def start_scheduler(self, name):
        self.schedulers[name] = subprocess.Popen(
            [self.dais, "scheduler", "--etcd", self.endpoint, "--id", name,
             "--lease-ttl-secs", str(self.ttl)],
            stdout=open(self.tmp / f"sched-{name}.log", "ab"), stderr=subprocess.STDOUT)

    def leader(self):
        return self.get("/dais/scheduler/leader").get("/dais/scheduler/leader")

    def ready_nodes(self, model):
        return sorted(json.loads(v)["node"] for v in self.get("/dais/instances/").values()
                      if json.loads(v)["model"] == model and json.loads(v)["state"] == "READY")

    def msgs_received(self):
        text = urllib.request.urlopen(f"http://{self.endpoint}/metrics", timeout=5).read().decode()
        return sum(float(m.group(1)) for m in
                   re.finditer(r"^grpc_server_msg_received_total\{[^}]*\} (\S+)$", text, re.M))

    def stop(self):
        for p in list(self.nodes.values()) + list(self.schedulers.values()) + [self.etcd]:
            if p.poll() is None:
                p.kill()
                p.wait(10)


def summary(xs):
    return f"p50 {statistics.median(xs):.2f} s, max {max(xs):.2f} s (n={len(xs)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--ttl", type=int, default=2)
    ap.add_argument("--idle", type=int, default=60)
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    args = ap.parse_args()
    dais = str(Path(args.build) / "src/cmd/dais")
    repo = ROOT / "examples/model_repository"
    if not (repo / "mlp_small/1/model.pt").exists():
        subprocess.run(["/usr/bin/python3", str(ROOT / "scripts/gen_models.py"), str(repo)],
                       check=True)
    tmp = Path(tempfile.mkdtemp(prefix="dais-cluster-bench-"))
    c = Cluster(dais, repo, tmp, args.ttl)
    try:
        for n in ("n1", "n2", "n3"):
            c.start_node(n)
        for s in ("s1", "s2"):
            c.start_scheduler(s)
        wait_for(c.leader, 30, "a leader")
        spec = tmp / "spec.yaml"
        spec.write_text("name: rec\nmodel: mlp_small\nreplicas: 1\nresources: {gpus: 1}\n")
        subprocess.run([dais, "ctl", "--etcd", c.endpoint, "apply", "-f", str(spec)], check=True,
                       capture_output=True)
        wait_for(lambda: c.ready_nodes("mlp_small"), 60, "first READY")
        recovery = []
        for _ in range(args.runs):
            victim = wait_for(lambda: c.ready_nodes("mlp_small"), 60, "READY")[0]
            c.nodes[victim].send_signal(signal.SIGKILL)
            c.nodes[victim].wait()
            t0 = time.monotonic()
            wait_for(lambda: [n for n in c.ready_nodes("mlp_small") if n != victim], 60,
                     "READY elsewhere")
            recovery.append(time.monotonic() - t0)
            wait_for(lambda: f"/dais/nodes/{victim}" not in c.get("/dais/nodes/"), 30, "gone")
            c.start_node(victim)
        failover = []
        for _ in range(args.runs):
            old = wait_for(c.leader, 30, "leader")
            c.schedulers[old].send_signal(signal.SIGKILL)
            c.schedulers[old].wait()
            t0 = time.monotonic()
            wait_for(lambda: (c.leader() or old) != old, 30, "new leader")
            failover.append(time.monotonic() - t0)
            c.start_scheduler(old)
        time.sleep(2 * args.ttl)  # settle
        m0, t0 = c.msgs_received(), time.monotonic()
        time.sleep(args.idle)
        rate = (c.msgs_received() - m0) / (time.monotonic() - t0) * 60
        members = len(c.nodes) + len(c.schedulers)
        print(f"\nlease TTL {args.ttl} s, 3 nodes, 2 schedulers, etcd 3.4 on loopback\n")
        print("| measure | result | goal |")
        print("|---|---|---|")
        print(f"| node kill -9 -> instance READY elsewhere | {summary(recovery)} | "
              f"≤ TTL + load + 1 s |")
        print(f"| leader kill -9 -> standby leads | {summary(failover)} | ≤ TTL |")
        print(f"| etcd messages at steady state | {rate:.0f}/min for {members} members = "
              f"{rate / members:.1f} per member per minute | keep-alives only |")
    finally:
        c.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
