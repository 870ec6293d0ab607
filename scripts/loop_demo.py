#!/usr/bin/python3
"""The learning loop end to end (docs/learning-loop.md), on a loopback cluster, then everything
stopped.

Starts redis-server, etcd, two `dais node` (with --feedback-stream and --label-stream), a
`dais scheduler`, a `dais gateway` and two `dais archive` (feedback, labels), all on free
loopback ports. The fraud model of the `dais txn` example (scripts/gen_fraud_model.py: version 1,
trained on the old fraud patterns) is deployed (`fraud-v1`) behind the route `fraud`, and a
training job is applied (`kind: training`): run `dais train` once 2 x --orders labels arrived,
release by canary. A seeded generator replays orders through the gateway: first with the old
patterns only, then, from a known moment, with a new fraud ring as well (mid-size orders of 4-5
items from accounts 30-90 days old) that version 1 never saw; each batch's labels (fraud or not)
are posted to /labels after it, as chargebacks come. The labels trigger the job on the node the
scheduler placed it on: it joins the archived predictions and labels point in time, trains a
candidate, compares it with version 1 on the newest 30 % of the orders (all after the change),
publishes version 2, deploys it (`fraud-v2`) and starts the route's canary. Live traffic goes on
through the gateway, its labels posted as they come, while the leading scheduler analyses each
step (errors, p99, and the live accuracy of v2 against v1 on the labels of their own answers,
joined from the feedback and label streams) and promotes v2. A fresh batch of new-ring orders is then scored
through the gateway again.

Prints `dais ctl get trainings`, `dais ctl rollout status fraud` and a table: AUC of v1 and v2 on
the held-out post-change window, frauds of the new ring caught before and after, the time from
the first labelled new-ring fraud to v2 serving 100 %, records archived and files written.

usage: scripts/loop_demo.py [--build build/release] [--orders 3000] [--max-psi 0]
"""
import argparse
import gzip
import json
import os
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
sys.path.insert(0, str(ROOT / "scripts"))
from gen_fraud_model import synthetic  # noqa: E402

SEED = 33


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def http(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


def orders(n, rng, new_ring):
    """Orders (5 features, as the fraud model takes) and their true labels; with `new_ring`, a
    share of them come from the new fraud ring (fraud the old rules do not catch)."""
    x, y = synthetic(n, rng)
    ring = np.zeros(n, dtype=bool)
    if new_ring:
        ring = rng.random(n) < 0.15
        k = int(ring.sum())
        x[ring, 0] = rng.uniform(200, 400, k)   # amount
        x[ring, 1] = rng.integers(4, 6, k)      # quantity
        x[ring, 2] = rng.uniform(30, 90, k)     # account age
        x[ring, 3] = 0                          # no chargebacks yet
        x[ring, 4] = rng.poisson(2.0, k)        # ordinary order rate
        y[ring] = 1
    return x.astype(np.float32), y, ring


class Demo:
    def __init__(self, build, tmp):
        self.dais = str(Path(build) / "src/cmd/dais")
        self.tmp = tmp
        self.procs = []

    def spawn(self, name, args):
        log = open(self.tmp / f"{name}.log", "w")
        self.procs.append(subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=subprocess.STDOUT))
        return self.tmp / f"{name}.log"

    def port_of(self, log, what):
        """The http port a dais role logged ('ports: http=N')."""
        found = []

        def ready():
            text = log.read_text()
            if what in text and "ports: http=" in text:
                found.append(int(text.split("ports: http=")[1].split()[0]))
            return found
        wait_for(ready, 60, f"{log.stem} started")
        return found[0]

    def ctl(self, *args, check=True):
        r = subprocess.run([self.dais, "ctl", "--etcd", self.etcd, *args], capture_output=True,
                           text=True, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError(f"dais ctl {' '.join(args)}: {r.stdout}{r.stderr}")
        return r.stdout

    def apply(self, text):
        path = self.tmp / f"spec-{time.monotonic_ns()}.yaml"
        path.write_text(text)
        print(self.ctl("apply", "-f", str(path)).strip())

    def start(self):
        self.repo = self.tmp / "models"
        subprocess.run(["/usr/bin/python3", str(ROOT / "scripts/gen_fraud_model.py"),
                        str(self.repo)], check=True, stdout=subprocess.DEVNULL)
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
        redis = f"redis://127.0.0.1:{self.redis_port}"
        self.nodes = []
        for n in ("n1", "n2"):
            log = self.spawn(n, [self.dais, "node", "--etcd", self.etcd, "--node-id", n,
                                 "--lease-ttl-secs", "2", "--model-repository", str(self.repo),
                                 "--http-port", "0", "--allow-grpc", "false",
                                 "--feedback-stream", f"{redis}/feedback",
                                 "--label-stream", f"{redis}/labels"])
            self.nodes.append(f"http://127.0.0.1:{self.port_of(log, 'dais serve ready')}")
        self.spawn("scheduler", [self.dais, "scheduler", "--etcd", self.etcd, "--id", "s1",
                                 "--lease-ttl-secs", "2", "--feedback-stream",
                                 f"{redis}/feedback", "--label-stream", f"{redis}/labels"])
        log = self.spawn("gateway", [self.dais, "gateway", "--etcd", self.etcd, "--http-port",
                                     "0", "--grpc-port", "-1"])
        self.url = f"http://127.0.0.1:{self.port_of(log, 'ports')}"
        for stream in ("feedback", "labels"):
            self.spawn(f"archive-{stream}", [
                self.dais, "archive", "--redis", f"127.0.0.1:{self.redis_port}", "--stream",
                stream, "--consumer", "demo", "--root", str(self.tmp / "offline"), "--dataset",
                stream, "--max-age-ms", "500"])

    def score(self, x, ids):
        p = []
        for row, rid in zip(x, ids):
            code, body = http("POST", f"{self.url}/v2/models/fraud/infer", {
                "id": rid, "inputs": [{"name": "input__0", "datatype": "FP32", "shape": [1, 5],
                                       "data": row.tolist()}]})
            if code != 200:
                raise RuntimeError(f"inference {rid}: HTTP {code}")
            p.append(body["outputs"][0]["data"][1])
        return np.array(p)

    def label(self, ids, y):
        code, body = http("POST", f"{self.nodes[0]}/labels", {"labels": [
            {"request_id": rid, "labels": {"fraud": int(v)}, "source": "chargebacks"}
            for rid, v in zip(ids, y)]})
        if code != 200:
            raise RuntimeError(f"labels: HTTP {code}")

    def replay(self, n, rng, new_ring, prefix, first_ring_label):
        """Scores n orders in batches of 100, each batch's labels posted after it."""
        ring_all = []
        for start in range(0, n, 100):
            x, y, ring = orders(min(100, n - start), rng, new_ring)
            ids = [f"{prefix}-{start + i}" for i in range(len(y))]
            self.score(x, ids)
            self.label(ids, y)
            if ring.any() and first_ring_label[0] is None:
                first_ring_label[0] = time.time()
            ring_all.append(ring)
        return int(np.concatenate(ring_all).sum())

    def rollout(self):
        r = subprocess.run([self.dais, "ctl", "--etcd", self.etcd, "rollout", "status", "fraud"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout if r.returncode == 0 else ""

    def archived(self, dataset):
        files = list((self.tmp / "offline" / dataset).glob("dt=*/*.jsonl.gz"))
        records = sum(sum(1 for _ in gzip.open(f, "rt")) for f in files)
        return records, len(files)

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


TRAINING_YAML = """model: fraud
repository: {repo}
feedback: {tmp}/offline/feedback
labels: {tmp}/offline/labels
label: fraud
input: input__0
window: 1h
holdout: 30%
metric: auc
min_improvement: 0.02
xgboost: {{rounds: 40, params: {{max_depth: 4, eta: 0.3, objective: 'binary:logistic'}}}}
"""

TRAINING_JOB = """kind: training
name: fraud-retrain
config: {config}
schedule: {{after_labels: {labels}, label_stream: redis://127.0.0.1:{port}/labels}}
resources: {{cpu_milli: 1000, memory_mib: 512}}
release:
  strategy: canary
  route: fraud
  deployment: fraud-v1
  steps: [50, 100]
  interval: 3s
  min_requests: 300
  max_error_rate: 1%
  accuracy_label: fraud
  min_accuracy_delta: 0
  max_psi: {max_psi}
  ready_timeout: 2m
"""


def canary(demo, rng, first):
    """Live traffic through the gateway, labelled as chargebacks come, until the job's canary
    ends; its end state."""
    state = ""
    deadline = time.time() + 600
    while time.time() < deadline:
        x, y, _ = orders(50, rng, True)
        ids = [f"live-{time.monotonic_ns()}-{i}" for i in range(len(x))]
        demo.score(x, ids)
        demo.label(ids, y)
        status = demo.rollout()
        for end in ("promoted", "rolled_back", "aborted"):
            if f", {end};" in status:
                return end, time.time()
        if "running" in status and not state:
            state = "running"
            print(f"the training job started the canary {time.time() - first[0]:.1f} s after "
                  "the first labelled new-ring fraud ...")
    raise RuntimeError("the canary did not end within 600 s:\n" + demo.rollout())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    ap.add_argument("--orders", type=int, default=3000,
                    help="orders before and after the change, each")
    ap.add_argument("--max-psi", type=float, default=0,
                    help="the canary's limit on the score PSI of v2 against v1 (0: unchecked; "
                    "the canary is judged on live accuracy)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dais-loop-demo-"))
    demo = Demo(args.build, tmp)
    rng = np.random.default_rng(SEED)
    try:
        print("starting redis-server, etcd, 2 dais node, dais scheduler, dais gateway and "
              "2 dais archive ...")
        demo.start()
        demo.apply("name: fraud-v1\nmodel: fraud\nversion: 1\nreplicas: 1\n")
        demo.apply("kind: route\nname: fraud\nmodel: fraud\nversions: [{version: 1, weight: 100}]\n")
        wait_for(lambda: http("POST", f"{demo.url}/v2/models/fraud/infer", {
            "inputs": [{"name": "input__0", "datatype": "FP32", "shape": [1, 5],
                        "data": [1, 1, 1, 1, 1]}]})[0] == 200, 60, "fraud v1 behind the gateway")
        config = tmp / "training.yaml"
        config.write_text(TRAINING_YAML.format(repo=demo.repo, tmp=tmp))
        demo.apply(TRAINING_JOB.format(config=config, labels=2 * args.orders,
                                       port=demo.redis_port, max_psi=args.max_psi))
        first = [None]
        print(f"replaying {args.orders} orders with the old fraud patterns ...")
        demo.replay(args.orders, rng, False, "old", first)
        change_ms = int(time.time() * 1000)
        print(f"the new fraud ring starts; replaying {args.orders} more orders ...")
        ring_n = demo.replay(args.orders, rng, True, "new", first)
        print("live traffic until the training job's canary ends ...")
        end, ended = canary(demo, rng, first)
        print(demo.ctl("get", "trainings"))
        print(demo.rollout())
        if end != "promoted":
            raise RuntimeError(f"the canary was {end}")
        metrics = json.loads((demo.repo / "fraud/2/metrics.json").read_text())
        # A fresh batch of new-ring orders, scored through the gateway (now v2) and by v1 offline.
        x, y, ring = orders(1000, np.random.default_rng(SEED + 1), True)
        p2 = demo.score(x, [f"check-{i}" for i in range(len(y))])
        import xgboost as xgb
        v1 = xgb.Booster(model_file=str(demo.repo / "fraud/1/xgboost.json"))
        p1 = v1.predict(xgb.DMatrix(x))
        caught1, caught2 = int((p1[ring] > 0.5).sum()), int((p2[ring] > 0.5).sum())
        fb_records, fb_files = demo.archived("feedback")
        lb_records, lb_files = demo.archived("labels")
    finally:
        demo.stop()
    rows = [
        ("AUC on the post-change held-out window, v1", f"{metrics['serving']['auc']:.3f}"),
        ("AUC on the post-change held-out window, v2", f"{metrics['candidate']['auc']:.3f}"),
        ("held-out orders", f"{metrics['data']['holdout_rows']}"),
        ("new-ring frauds caught in a fresh batch, v1", f"{caught1} of {int(ring.sum())}"),
        ("new-ring frauds caught in a fresh batch, v2 (served)", f"{caught2} of {int(ring.sum())}"),
        ("first labelled new-ring fraud -> v2 serving 100 %", f"{ended - first[0]:.1f} s"),
        ("records archived (feedback + labels)", f"{fb_records} + {lb_records}"),
        ("files written (feedback + labels)", f"{fb_files} + {lb_files}"),
        ("new-ring orders replayed before the cut-off", f"{ring_n}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"\n| {'what'.ljust(width)} | value |\n|{'-' * (width + 2)}|---:|")
    for k, v in rows:
        print(f"| {k.ljust(width)} | {v} |")
    print(f"\n(the change at {change_ms} ms; files under {tmp})")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
