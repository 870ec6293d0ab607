#!/usr/bin/python3
"""The learning loop end to end (docs/learning-loop.md), on loopback, then everything stopped.

Starts redis-server and `dais serve` (poll mode) with the fraud model of the `dais txn` example
(scripts/gen_fraud_model.py: version 1, trained on the old fraud patterns), with
--feedback-stream and --label-stream. A seeded generator replays orders: first with the old
patterns only, then, from a known moment, with a new fraud ring as well (mid-size orders of 4-5
items from accounts 30-90 days old) that version 1 never saw. Every order is scored by the
server with its id; its label (fraud or not) is posted to /labels a little later, as
chargebacks come. Then `dais archive --drain` archives both streams, `dais train` joins them
point in time, trains a candidate and compares it with version 1 on the newest orders (after
the change), and publishes version 2 when better; the server, polling its repository, loads it
and unloads version 1. A fresh batch of new-ring orders is then scored by the server again.

Prints a table: AUC of v1 and v2 on the held-out post-change window, frauds of the new ring
caught before and after, the time from the first labelled new-ring fraud to v2 serving 100 %,
records archived and files written.

Not shown (not built): a canary analysed on quality (v2 replaces v1 at once, by the
repository's version policy) and a training job scheduled by the control plane.

usage: scripts/loop_demo.py [--build build/release] [--orders 3000]
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

    def start(self):
        repo = self.tmp / "models"
        subprocess.run(["/usr/bin/python3", str(ROOT / "scripts/gen_fraud_model.py"), str(repo)],
                       check=True, stdout=subprocess.DEVNULL)
        self.repo = repo
        self.redis_port = free_port()
        self.procs.append(subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.tmp)], stdout=subprocess.DEVNULL))
        redis = f"redis://127.0.0.1:{self.redis_port}"
        log = open(self.tmp / "serve.log", "w")
        self.procs.append(subprocess.Popen(
            [self.dais, "serve", "--model-repository", str(repo), "--model-control-mode", "poll",
             "--repository-poll-secs", "1", "--http-port", "0", "--allow-grpc", "false",
             "--feedback-stream", f"{redis}/feedback", "--label-stream", f"{redis}/labels"],
            stdout=log, stderr=subprocess.STDOUT))

        def port():
            text = (self.tmp / "serve.log").read_text()
            return "dais serve ready" in text and "ports: http=" in text
        wait_for(port, 60, "dais serve ready")
        text = (self.tmp / "serve.log").read_text()
        self.url = f"http://127.0.0.1:{text.split('ports: http=')[1].split()[0]}"

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
        code, body = http("POST", f"{self.url}/labels", {"labels": [
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

    def archive(self, stream, dataset):
        r = subprocess.run([self.dais, "archive", "--redis", f"127.0.0.1:{self.redis_port}",
                            "--stream", stream, "--consumer", "demo", "--root",
                            str(self.tmp / "offline"), "--dataset", dataset, "--drain"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    ap.add_argument("--orders", type=int, default=3000,
                    help="orders before and after the change, each")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dais-loop-demo-"))
    demo = Demo(args.build, tmp)
    rng = np.random.default_rng(SEED)
    try:
        print("starting redis-server and dais serve (fraud model v1, poll mode) ...")
        demo.start()
        first = [None]
        print(f"replaying {args.orders} orders with the old fraud patterns ...")
        demo.replay(args.orders, rng, False, "old", first)
        change_ms = int(time.time() * 1000)
        print(f"the new fraud ring starts; replaying {args.orders} more orders ...")
        ring_n = demo.replay(args.orders, rng, True, "new", first)
        holdout_from_ms = int(time.time() * 1000)
        demo.replay(args.orders // 2, rng, True, "late", first)
        cutoff_ms = int(time.time() * 1000) + 1
        fb_records, fb_files = demo.archive("feedback", "feedback")
        lb_records, lb_files = demo.archive("labels", "labels")
        spec = tmp / "training.yaml"
        spec.write_text("\n".join([
            "model: fraud", f"repository: {demo.repo}", f"feedback: {tmp}/offline/feedback",
            f"labels: {tmp}/offline/labels", "label: fraud", "input: input__0", "window: 1h",
            f"holdout: {cutoff_ms - holdout_from_ms}ms", "metric: auc", "min_improvement: 0.02",
            "xgboost: {rounds: 40, params: {max_depth: 4, eta: 0.3, "
            "objective: 'binary:logistic'}}"]) + "\n")
        print("dais train ...")
        t = subprocess.run([demo.dais, "train", "--config", str(spec), "--cutoff-ms",
                            str(cutoff_ms)], capture_output=True, text=True, timeout=600)
        print(t.stdout + t.stderr)
        if t.returncode != 0:
            raise RuntimeError(f"dais train exited {t.returncode}")
        wait_for(lambda: http("GET", f"{demo.url}/v2/models/fraud/versions/2/ready")[0] == 200
                 and http("GET", f"{demo.url}/v2/models/fraud/versions/1/ready")[0] != 200,
                 60, "version 2 serving alone")
        v2_serving = time.time()
        metrics = json.loads((demo.repo / "fraud/2/metrics.json").read_text())
        # A fresh batch of new-ring orders, scored by the server (now v2) and by v1 offline.
        x, y, ring = orders(1000, np.random.default_rng(SEED + 1), True)
        p2 = demo.score(x, [f"check-{i}" for i in range(len(y))])
        import xgboost as xgb
        v1 = xgb.Booster(model_file=str(demo.repo / "fraud/1/xgboost.json"))
        p1 = v1.predict(xgb.DMatrix(x))
        caught1, caught2 = int((p1[ring] > 0.5).sum()), int((p2[ring] > 0.5).sum())
    finally:
        demo.stop()
    rows = [
        ("AUC on the post-change held-out window, v1", f"{metrics['serving']['auc']:.3f}"),
        ("AUC on the post-change held-out window, v2", f"{metrics['candidate']['auc']:.3f}"),
        ("held-out orders", f"{metrics['data']['holdout_rows']}"),
        ("new-ring frauds caught in a fresh batch, v1", f"{caught1} of {int(ring.sum())}"),
        ("new-ring frauds caught in a fresh batch, v2 (served)", f"{caught2} of {int(ring.sum())}"),
        ("first labelled new-ring fraud -> v2 serving 100 %", f"{v2_serving - first[0]:.1f} s"),
        ("records archived (feedback + labels)", f"{fb_records} + {lb_records}"),
        ("files written (feedback + labels)", f"{fb_files} + {lb_files}"),
        ("new-ring orders replayed before the cut-off", f"{ring_n} (+ those after)"),
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
