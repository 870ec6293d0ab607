"""Issue 33, part 5: quality-gated rollouts. `dais ctl rollout start --max-psi` compares the
canary's score distribution with the stable version's over the same step (the nodes'
dais_inference_score histograms, scraped by the leading scheduler): a canary that answers fast
but scores differently is rolled back. Real etcd, two `dais node` (xgb_binary v1 and a shifted
v2 as deployments), a scheduler and a gateway; the models are trained here with XGBoost."""

from __future__ import annotations

import json
import subprocess
import threading

import numpy as np
import requests

from cluster_util import TTL, Gateway, Scheduler, apply, ctl, instances
from conftest import wait_for

TRAIN = """
import sys
import numpy as np
import xgboost as xgb
rng = np.random.default_rng(5)
x = rng.random((2000, 8), dtype=np.float32)
shifted = sys.argv[2] == "shifted"
# v1: fraud when the first feature is high (half the traffic scores near 1, half near 0);
# the shifted v2: nearly everything looks like fraud.
y = (rng.random(2000) < 0.97) if shifted else (x[:, 0] > 0.5)
b = xgb.train({"objective": "binary:logistic", "max_depth": 3, "eta": 0.5, "nthread": 1,
               "seed": 5}, xgb.DMatrix(x, label=y.astype(np.float32)), num_boost_round=20)
b.save_model(sys.argv[1])
"""


class Traffic:
    """Requests with random inputs to the route from a thread until stopped; with `labels_url`,
    each request has an id and its label (fraud when the first feature is above 0.5) is posted
    there after its answer."""

    def __init__(self, url, labels_url=None):
        self.url, self.labels_url = url, labels_url
        self.stop_flag, self.failures, self.count = False, [], 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        s, rng = requests.Session(), np.random.default_rng(9)
        while not self.stop_flag:
            x = rng.random(8).round(4)
            body = {"id": f"q-{self.count}", "inputs": [
                {"name": "input__0", "shape": [1, 8], "datatype": "FP32", "data": x.tolist()}]}
            r = s.post(self.url, json=body, timeout=10)
            if r.status_code != 200:
                self.failures.append((r.status_code, r.text))
            elif self.labels_url:
                label = {"request_id": body["id"], "labels": {"fraud": int(x[0] > 0.5)},
                         "source": "test"}
                lr = s.post(self.labels_url, json=label, timeout=10)
                if lr.status_code != 200:
                    self.failures.append((lr.status_code, lr.text))
            self.count += 1

    def stop(self):
        self.stop_flag = True
        self.thread.join(20)


def decided(etcd_server):
    """The fraud route's rollout record once it is no longer running, else None."""
    raw = etcd_server.get_prefix("/dais/rollouts/fraud").get("/dais/rollouts/fraud")
    r = json.loads(raw) if raw else None
    return r if r and r["state"] != "running" else None


def train_v1_and_shifted_v2(repo_copy, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    for v, kind in ((1, "v1"), (2, "shifted")):
        (repo_copy / "xgb_binary" / str(v)).mkdir(exist_ok=True)
        subprocess.run(["/usr/bin/python3", str(script),
                        str(repo_copy / "xgb_binary" / str(v) / "xgboost.json"), kind],
                       check=True, timeout=120)


def deploy_v1_v2_and_route(dais_bin, etcd_server, tmp_path):
    """fraud-v1 and fraud-v2 READY, the route fraud at v1 100 %, a gateway serving it."""
    for v in (1, 2):
        apply(dais_bin, etcd_server, tmp_path,
              f"name: fraud-v{v}\nmodel: xgb_binary\nversion: {v}\nreplicas: 1\n")
    wait_for(lambda: sorted((i["version"], i["state"]) for i in
                            instances(etcd_server, "xgb_binary").values()) ==
             [("1", "READY"), ("2", "READY")], 60, "v1 and v2 READY")
    apply(dais_bin, etcd_server, tmp_path, "kind: route\nname: fraud\nmodel: xgb_binary\n"
          "versions: [{version: 1, weight: 100}]\n")
    gw = Gateway(dais_bin, etcd_server, tmp_path)
    url = gw.url + "/v2/models/fraud/infer"
    try:
        wait_for(lambda: requests.post(url, json={"inputs": [{
            "name": "input__0", "shape": [1, 8], "datatype": "FP32", "data": [0.5] * 8}]},
            timeout=5).status_code == 200, 20, "the route served")
    except BaseException:
        gw.stop()
        raise
    return gw


def test_a_canary_whose_scores_shifted_is_rolled_back(etcd_server, start_server, repo_copy,
                                                      dais_bin, tmp_path):
    train_v1_and_shifted_v2(repo_copy, tmp_path)
    for i in (1, 2):
        start_server(repo_copy, "--etcd", etcd_server.endpoint, "--node-id", f"n{i}",
                     "--lease-ttl-secs", str(TTL), command="node")
    sched = Scheduler(dais_bin, etcd_server, "s1", tmp_path)
    gw = None
    try:
        gw = deploy_v1_v2_and_route(dais_bin, etcd_server, tmp_path)
        url = gw.url + "/v2/models/fraud/infer"
        traffic = Traffic(url)
        try:
            out = ctl(dais_bin, etcd_server, "rollout", "start", "fraud", "--to", "2", "--steps",
                      "50,100", "--interval", "30s", "--min-requests", "30", "--max-p99-ms",
                      "1000", "--max-psi", "0.25").stdout
            assert "started: 50 %" in out, out

            done = wait_for(lambda: decided(etcd_server), 60, "the rollout decided")
        finally:
            traffic.stop()
        assert done["state"] == "rolled_back", done
        assert "scores shifted" in done["reason"] and "PSI" in done["reason"], done["reason"]
        assert "p99" not in done["reason"].split("(")[0], done["reason"]  # latency was fine
        (step,) = done["history"]
        assert step["psi"] > 0.25 and step["decision"] == "rolled back", step
        assert not traffic.failures, traffic.failures[:3]
        route = json.loads(etcd_server.get_prefix("/dais/routes/fraud")["/dais/routes/fraud"])
        assert route["versions"] == [{"version": 1, "weight": 100}]
        status = ctl(dais_bin, etcd_server, "rollout", "status", "fraud").stdout
        assert "score PSI 0.25" in status and "scores shifted" in status, status
        print(status)
    finally:
        if gw:
            gw.stop()
        sched.stop()
        print(f"--- scheduler log:\n{sched.log()[-3000:]}")


def test_a_canary_less_accurate_on_its_labels_is_rolled_back(etcd_server, redis_server,
                                                             start_server, repo_copy, dais_bin,
                                                             tmp_path):
    """Live accuracy: the nodes stream their answers (feedback) and take labels; the leading
    scheduler joins the two and rolls back the canary whose answers the labels prove wrong, with
    the score PSI unchecked and latency fine."""
    train_v1_and_shifted_v2(repo_copy, tmp_path)
    streams = [f"redis://127.0.0.1:{redis_server.port}/fb",
               f"redis://127.0.0.1:{redis_server.port}/labels"]
    nodes = [start_server(repo_copy, "--etcd", etcd_server.endpoint, "--node-id", f"n{i}",
                          "--lease-ttl-secs", str(TTL), "--feedback-stream", streams[0],
                          "--label-stream", streams[1], command="node") for i in (1, 2)]
    sched = Scheduler(dais_bin, etcd_server, "s1", tmp_path, "--feedback-stream", streams[0],
                      "--label-stream", streams[1])
    gw = None
    try:
        gw = deploy_v1_v2_and_route(dais_bin, etcd_server, tmp_path)
        url = gw.url + "/v2/models/fraud/infer"
        traffic = Traffic(url, labels_url=nodes[0].url + "/labels")
        try:
            out = ctl(dais_bin, etcd_server, "rollout", "start", "fraud", "--to", "2", "--steps",
                      "50,100", "--interval", "30s", "--min-requests", "30",
                      "--accuracy-label", "fraud", "--min-accuracy-delta", "-0.05").stdout
            assert "started: 50 %" in out, out

            done = wait_for(lambda: decided(etcd_server), 60, "the rollout decided")
        finally:
            traffic.stop()
        assert done["state"] == "rolled_back", done
        assert "live accuracy is -" in done["reason"], done["reason"]
        (step,) = done["history"]
        assert step["accuracy_delta"] < -0.05 and step["decision"] == "rolled back", step
        assert not traffic.failures, traffic.failures[:3]
        status = ctl(dais_bin, etcd_server, "rollout", "status", "fraud").stdout
        assert "accuracy on 'fraud' -0.05" in status and "live accuracy" in status, status
        print(status)
    finally:
        if gw:
            gw.stop()
        sched.stop()
        print(f"--- scheduler log:\n{sched.log()[-3000:]}")
