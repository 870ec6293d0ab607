"""Issue 33, part 4: `kind: training`. A training job applied with `dais ctl apply` is placed by
the scheduler on a node, which runs `dais train` when enough labels arrived on the label stream;
the version it publishes gets its own deployment and a canary rollout started by itself; when the
job's node is killed the job is placed on the other node, which keeps its schedule (the run
records live in etcd). A job whose training.yaml the node cannot read is FAILED with the reason.
Real etcd, redis-server, two `dais node`, a scheduler, XGBoost."""

from __future__ import annotations

import json
import signal

import numpy as np

from cluster_util import TTL, Scheduler, apply, assigned, ctl, instances
from conftest import wait_for
from test_train import MODEL, archive, write_spec

JOB = "fraud-retrain"
TASK = f"training:{JOB}"


def job_instance(etcd):
    """The job's instance state ({node, state, reason}) as its node published it, or None."""
    for key, value in etcd.get_prefix("/dais/instances/").items():
        if key.endswith("/" + TASK):
            return json.loads(value)
    return None


def runs(etcd):
    raw = etcd.get_prefix(f"/dais/training-runs/{JOB}").get(f"/dais/training-runs/{JOB}")
    return json.loads(raw) if raw else {}


def rollout(etcd):
    raw = etcd.get_prefix("/dais/rollouts/fraud").get("/dais/rollouts/fraud")
    return json.loads(raw) if raw else {}


def test_a_training_job_is_placed_releases_by_canary_and_moves_when_its_node_dies(
        etcd_server, redis_server, start_server, repo_copy, dais_bin, tmp_path):
    streams = ["--feedback-stream", f"redis://127.0.0.1:{redis_server.port}/fb",
               "--label-stream", f"redis://127.0.0.1:{redis_server.port}/labels"]
    nodes = {f"n{i}": start_server(repo_copy, "--etcd", etcd_server.endpoint, "--node-id",
                                   f"n{i}", "--lease-ttl-secs", str(TTL), *streams,
                                   command="node") for i in (1, 2)}
    sched = Scheduler(dais_bin, etcd_server, "s1", tmp_path)
    try:
        apply(dais_bin, etcd_server, tmp_path,
              f"name: fraud-v1\nmodel: {MODEL}\nversion: 1\nreplicas: 1\n")
        apply(dais_bin, etcd_server, tmp_path, f"kind: route\nname: fraud\nmodel: {MODEL}\n"
              "versions: [{version: 1, weight: 100}]\n")
        serving = wait_for(lambda: [i["node"] for i in instances(etcd_server, MODEL).values()
                                    if i["state"] == "READY"], 60, "v1 READY")[0]

        # Predictions on a pattern v1 never saw, and their labels; archived.
        rng = np.random.default_rng(11)
        x = rng.random((600, 8), dtype=np.float32)
        fraud = (x[:, 0] + x[:, 1] > 1.0).astype(int)
        for i in range(600):
            r = nodes[serving].infer(MODEL, {"input__0": x[i:i + 1]}, id=f"tx-{i}")
            assert r.status_code == 200, r.text
        labels = [{"request_id": f"tx-{i}", "labels": {"fraud": int(fraud[i])}, "source": "cb"}
                  for i in range(600)]
        assert nodes[serving].post("/labels", json={"labels": labels}).json() == {
            "accepted": 600}
        root = tmp_path / "offline"
        archive(dais_bin, redis_server, "fb", root, "feedback")
        archive(dais_bin, redis_server, "labels", root, "labels")
        spec = write_spec(tmp_path / "training.yaml", repo_copy, root, 1, min_improvement=0.02)
        spec.write_text(spec.read_text().replace("holdout: 1ms", "holdout: 30%"))

        # Bad input: refused at apply, naming the field; nothing written.
        path = tmp_path / "bad.yaml"
        path.write_text(f"kind: training\nname: bad\nconfig: {spec}\n"
                        "schedule: {after_labels: 10}\n")
        bad = ctl(dais_bin, etcd_server, "apply", "-f", str(path), check=False)
        assert bad.returncode != 0 and "schedule.label_stream" in bad.stderr, bad.stderr
        assert not etcd_server.get_prefix("/dais/trainings/")

        apply(dais_bin, etcd_server, tmp_path, f"""kind: training
name: {JOB}
config: {spec}
schedule: {{after_labels: 100, label_stream: redis://127.0.0.1:{redis_server.port}/labels}}
resources: {{cpu_milli: 500, memory_mib: 256}}
release:
  strategy: canary
  route: fraud
  deployment: fraud-v1
  steps: [10, 100]
  interval: 1h
  ready_timeout: 2m
""")
        # 600 labels are more than 100: the job runs at once, publishes v2 and starts its canary.
        r = wait_for(lambda: rollout(etcd_server).get("to") == 2 and rollout(etcd_server), 180,
                     "the canary of v2 started by the job")
        assert r["from"] == 1 and r["state"] == "running" and r["steps"] == [10, 100], r
        route = json.loads(etcd_server.get_prefix("/dais/routes/fraud")["/dais/routes/fraud"])
        assert {v["version"]: v["weight"] for v in route["versions"]} == {1: 90, 2: 10}, route
        assert (repo_copy / MODEL / "2" / "xgboost.json").exists()
        deployment = json.loads(etcd_server.get_prefix("/dais/deployments/fraud-v2")
                                ["/dais/deployments/fraud-v2"])
        assert deployment["version"] == 2 and deployment["model"] == MODEL, deployment
        state = runs(etcd_server)
        assert state["runs"] == 1 and state["last_exit"] == 0 and state["published"] == 2, state
        assert state["labels_seen"] == 600 and state["release_pending"] == 0, state
        assert "canary rollout of fraud v1 -> v2 started" in state["last_result"], state
        table = ctl(dais_bin, etcd_server, "get", "trainings").stdout
        assert JOB in table and "after 100 labels" in table and "canary fraud" in table, table
        events = ctl(dais_bin, etcd_server, "get", "events").stdout
        assert "run 1 started" in events and "published version 2" in events, events

        # The job's node dies: the job is placed on the other one, which keeps the schedule
        # (waits for 100 labels more than the 600 seen) and runs it when they arrive.
        first = assigned(etcd_server, TASK)
        assert len(first) == 1, first
        survivor = "n2" if first[0] == "n1" else "n1"
        nodes[first[0]].signal(signal.SIGKILL)
        moved = wait_for(lambda: (job_instance(etcd_server) or {}).get("node") == survivor and
                         job_instance(etcd_server), 60, "the job re-placed on the survivor")
        assert moved["state"] == "RUNNING", moved
        wait_for(lambda: "100 more labels" in job_instance(etcd_server)["reason"], 30,
                 "the survivor waiting for labels")
        assert runs(etcd_server)["runs"] == 1
        more = [{"request_id": f"tx-{i}", "labels": {"fraud": int(fraud[i])}, "source": "cb"}
                for i in range(100)]
        assert nodes[survivor].post("/labels", json={"labels": more}).json() == {"accepted": 100}
        archive(dais_bin, redis_server, "labels", root, "labels")  # the run waits for this
        state = wait_for(lambda: runs(etcd_server).get("runs") == 2 and
                         runs(etcd_server).get("last_end_ms", 0) > state["last_end_ms"] and
                         runs(etcd_server), 180, "run 2 on the survivor")
        assert state["node"] == survivor and state["labels_seen"] == 700, state
        assert state["last_exit"] in (0, 3), state

        # A job whose training.yaml the nodes cannot read: FAILED with the reason.
        apply(dais_bin, etcd_server, tmp_path, "kind: training\nname: broken\n"
              f"config: {tmp_path}/missing.yaml\nschedule: {{every: 1h}}\n")

        # The node reports it FAILED; the scheduler moves it off that node (backoff) and says why.
        wait_for(lambda: "missing.yaml" in ctl(dais_bin, etcd_server, "get", "events").stdout,
                 30, "the broken job's failure in the events")
        events = ctl(dais_bin, etcd_server, "get", "events").stdout
        assert any("training:broken" in line and "failed" in line and
                   "cannot read the training spec" in line for line in events.splitlines()), events
        ctl(dais_bin, etcd_server, "delete", "training", "broken")
        wait_for(lambda: not assigned(etcd_server, "training:broken"), 30, "broken unassigned")
    finally:
        sched.stop()
