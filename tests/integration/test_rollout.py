"""Issue 15, rollouts: `dais ctl rollout start` steps a route's canary weight, the leading
`dais scheduler` analyses each step on what the gateway measured and promotes the canary, or
rolls a slow canary back by itself within one interval; `dais ctl rollback` acts at once. Real
etcd, two `dais node` (mlp_small v1 and v2 as deployments), a scheduler and a gateway."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time

import pytest
import requests

from cluster_util import TTL, Gateway, Prometheus, Scheduler, apply, ctl, instances
from conftest import free_port, wait_for

BODY = {"inputs": [{"name": "INPUT__0", "shape": [1, 16], "datatype": "FP32",
                    "data": [0.0] * 16}]}

SLOW_MODEL = """
import sys, torch
class Slow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(16, 4))
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.ones(400, 400)
        for _ in range(48):
            z = torch.mm(z, z) / 400.0
        return torch.mm(x, self.w) + 0.0 * z.sum()
torch.jit.script(Slow()).save(sys.argv[1])
"""


@pytest.fixture
def rollout_cluster(etcd_server, start_server, repo_copy, dais_bin, tmp_path, request):
    """mlp_small v1 and v2 (v2 slow when the test asks for it) as deployments on n1 / n2, a
    scheduler, a gateway, and a route 'ranker' at v1 100 %."""
    v2 = repo_copy / "mlp_small" / "2"
    param = getattr(request, "param", "")
    if param.startswith("slow"):
        v2.mkdir()
        script = tmp_path / "slow_model.py"  # TorchScript needs the class's source in a file
        script.write_text(SLOW_MODEL)
        subprocess.run(["/usr/bin/python3", str(script), str(v2 / "model.pt")], check=True,
                       timeout=120)
    else:
        shutil.copytree(repo_copy / "mlp_small" / "1", v2)
    for i in (1, 2):
        start_server(repo_copy, "--etcd", etcd_server.endpoint, "--node-id", f"n{i}",
                     "--lease-ttl-secs", str(TTL), command="node")
    prometheus_port = free_port() if param.endswith("prometheus") else None
    sched = Scheduler(dais_bin, etcd_server, "s1", tmp_path,
                      *(["--prometheus", f"127.0.0.1:{prometheus_port}"] if prometheus_port else []))
    for v in (1, 2):
        apply(dais_bin, etcd_server, tmp_path,
              f"name: ranker-v{v}\nmodel: mlp_small\nversion: {v}\nreplicas: 1\n")
    wait_for(lambda: sorted((i["version"], i["state"]) for i in
                            instances(etcd_server, "mlp_small").values()) ==
             [("1", "READY"), ("2", "READY")], 60, "v1 and v2 READY")
    apply(dais_bin, etcd_server, tmp_path,
          "kind: route\nname: ranker\nmodel: mlp_small\nversions: [{version: 1, weight: 100}]\n")
    gw = Gateway(dais_bin, etcd_server, tmp_path)
    prometheus = Prometheus(prometheus_port, [gw.url.split("//")[1]], tmp_path) \
        if prometheus_port else None
    wait_for(lambda: etcd_server.get_prefix("/dais/gateways/"), 20, "the gateway registered")
    wait_for(lambda: requests.post(gw.url + "/v2/models/ranker/infer", json=BODY,
                                   timeout=5).status_code == 200, 20, "the route served")
    yield {"etcd": etcd_server, "gateway": gw, "scheduler": sched}
    if prometheus:
        prometheus.stop()
    gw.stop()
    sched.stop()
    print(f"--- scheduler log:\n{sched.log()[-4000:]}\n--- gateway log:\n{gw.log()[-2000:]}")


class Traffic:
    """Requests to the route from a thread until stopped; counts answers by version."""

    def __init__(self, url):
        self.url, self.stop_flag, self.versions, self.failures = url, False, {}, []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        s = requests.Session()
        while not self.stop_flag:
            r = s.post(self.url, json=BODY, timeout=10)
            if r.status_code != 200:
                self.failures.append((r.status_code, r.text))
            else:
                v = r.headers["x-dais-version"]
                self.versions[v] = self.versions.get(v, 0) + 1

    def stop(self):
        self.stop_flag = True
        self.thread.join(20)


def rollout(etcd):
    raw = etcd.get_prefix("/dais/rollouts/ranker").get("/dais/rollouts/ranker")
    return json.loads(raw) if raw else None


def route(etcd):
    return json.loads(etcd.get_prefix("/dais/routes/ranker")["/dais/routes/ranker"])


def test_a_good_canary_is_promoted_step_by_step(rollout_cluster, dais_bin, tmp_path):
    etcd, gw = rollout_cluster["etcd"], rollout_cluster["gateway"]
    gw2 = Gateway(dais_bin, etcd, tmp_path, "--id", "g2", name="g2")  # both analysed, both follow
    try:
        wait_for(lambda: len(etcd.get_prefix("/dais/gateways/")) == 2, 20,
                 "two gateways registered")
        traffic = Traffic(gw.url + "/v2/models/ranker/infer")
        traffic2 = Traffic(gw2.url + "/v2/models/ranker/infer")
        try:
            out = ctl(dais_bin, etcd, "rollout", "start", "ranker", "--to", "2", "--steps",
                      "20,60,100", "--interval", "1s", "--min-requests", "10", "--max-p99-ms",
                      "500").stdout
            assert "started: 20 %" in out, out
            assert [v["weight"] for v in route(etcd)["versions"]] == [80, 20]
            done = wait_for(lambda: (r := rollout(etcd)) and r["state"] != "running" and r, 60,
                            "the rollout finished")
        finally:
            traffic.stop()
            traffic2.stop()
        assert done["state"] == "promoted", done
        assert [h["decision"] for h in done["history"]] == ["next step", "next step", "promoted"]
        assert all(h["requests"] >= 10 for h in done["history"]), done["history"]
        r = route(etcd)
        assert r["versions"] == [{"version": 2, "weight": 100}] and r["stable"] == 2
        failures = traffic.failures + traffic2.failures
        assert not failures, failures[:3]
        assert traffic2.versions.get("2", 0) > 0, "the second gateway followed the steps too"
        status = ctl(dais_bin, etcd, "rollout", "status", "ranker").stdout
        print(status)
        assert "promoted" in status and "next step" in status, status
        # A promoted rollout can be rolled back by hand; both gateways follow.
        out = ctl(dais_bin, etcd, "rollback", "ranker").stdout
        assert "rolled back to v1" in out
        assert route(etcd)["versions"] == [{"version": 1, "weight": 100}]
        for g in (gw, gw2):
            wait_for(lambda: requests.post(g.url + "/v2/models/ranker/infer", json=BODY, timeout=5)
                     .headers.get("x-dais-version") == "1", 5, "both gateways on v1 again")
    finally:
        gw2.stop()


@pytest.mark.parametrize("rollout_cluster", ["slow", "slow-prometheus"], indirect=True)
def test_a_slow_canary_is_rolled_back_within_one_interval(rollout_cluster, dais_bin):
    """Analysed on the gateway's own metrics, and through a real Prometheus (PromQL). The slow
    canary runs 48 400x400 matrix products a request (~40+ ms on these machines), four times the
    10 ms limit, so it is slow beyond any bucket's doubt (issue 31: at 12 products and a 25 ms
    limit a fresh machine's Prometheus interpolated 24.85 ms and promoted it)."""
    etcd, gw = rollout_cluster["etcd"], rollout_cluster["gateway"]
    traffic = Traffic(gw.url + "/v2/models/ranker/infer")
    try:
        ctl(dais_bin, etcd, "rollout", "start", "ranker", "--to", "2", "--steps", "50,100",
            "--interval", "20s", "--min-requests", "5", "--max-p99-ms", "10")
        t0 = time.monotonic()
        done = wait_for(lambda: (r := rollout(etcd)) and r["state"] != "running" and r, 60,
                        "the rollout decided")
        took = time.monotonic() - t0
    finally:
        traffic.stop()
    assert done["state"] == "rolled_back", done
    assert "p99" in done["reason"], done["reason"]
    assert took < 20, f"rolled back after {took:.1f} s: not within the 20 s interval"
    print(f"slow canary rolled back {took:.1f} s after the start: {done['reason']}")
    assert route(etcd)["versions"] == [{"version": 1, "weight": 100}]
    out = ctl(dais_bin, etcd, "rollout", "start", "ranker", "--to", "2", "--steps", "150",
              check=False)
    assert out.returncode != 0 and "steps" in out.stderr, out.stderr


def test_rollout_cli_limits_status_and_rollback_without_rollout(etcd_server, dais_bin, tmp_path):
    """Issue 31: `rollout start` warns about a p99 limit the gateways' buckets cannot resolve,
    `rollout status` shows the limit's bucket resolution (and "p99 unchecked", not "unchecked
    ms"), and `ctl rollback` of a route without a rollout sends all traffic to stable."""
    etcd = etcd_server
    apply(dais_bin, etcd, tmp_path, "kind: route\nname: ranker\nmodel: mlp_small\n"
          "versions: [{version: 1, weight: 50}, {version: 2, weight: 50}]\nstable: 1\n")
    out = ctl(dais_bin, etcd, "rollback", "ranker")
    assert "all traffic on the stable v1" in out.stdout, out.stdout
    assert route(etcd)["versions"] == [{"version": 1, "weight": 100}]
    assert rollout(etcd) is None, "no rollout record is invented"
    out = ctl(dais_bin, etcd, "rollback", "nosuch", check=False)
    assert out.returncode == 2 and "no route 'nosuch'" in out.stderr, out.stderr

    out = ctl(dais_bin, etcd, "rollout", "start", "ranker", "--to", "2", "--max-p99-ms", "0.05")
    assert "warning: --max-p99-ms 0.05 is below the first bucket bound (0.1 ms)" in out.stderr, \
        out.stderr
    status = ctl(dais_bin, etcd, "rollout", "status", "ranker").stdout
    assert "p99 0.05 ms (below the first bucket bound (0.1 ms): not resolved" in status, status
    assert "P99 BUCKET MS" in status, status
    ctl(dais_bin, etcd, "rollback", "ranker")

    out = ctl(dais_bin, etcd, "rollout", "start", "ranker", "--to", "2", "--max-p99-ms", "25")
    assert "warning" not in out.stderr, out.stderr
    status = ctl(dais_bin, etcd, "rollout", "status", "ranker").stdout
    assert "p99 25 ms (a bucket bound)" in status, status
    ctl(dais_bin, etcd, "rollback", "ranker")

    out = ctl(dais_bin, etcd, "rollout", "start", "ranker", "--to", "2")
    status = ctl(dais_bin, etcd, "rollout", "status", "ranker").stdout
    assert "p99 unchecked" in status and "unchecked ms" not in status, status


def test_pause_resume_promote_and_status_watch(rollout_cluster, dais_bin):
    """Issue 35: an operator holds a rollout, lets it go on, promotes it; `rollout status
    --watch` follows and exits 0 at the promotion; -o json is the rollout's record."""
    etcd = rollout_cluster["etcd"]
    ctl(dais_bin, etcd, "rollout", "start", "ranker", "--to", "2", "--steps", "10,100",
        "--interval", "1h", "--min-requests", "100000")

    def status():
        return json.loads(ctl(dais_bin, etcd, "rollout", "status", "ranker", "-o",
                              "json").stdout)
    assert status()["state"] == "running" and status()["step"] == 0
    ctl(dais_bin, etcd, "rollout", "pause", "ranker")
    assert status()["state"] == "paused"
    again = ctl(dais_bin, etcd, "rollout", "pause", "ranker", check=False)
    assert again.returncode == 2 and "is paused, not running" in again.stderr, again.stderr
    refused = ctl(dais_bin, etcd, "rollout", "start", "ranker", "--to", "2", check=False)
    assert refused.returncode == 2 and "already rolling out" in refused.stderr, refused.stderr
    watcher = subprocess.Popen([str(dais_bin), "ctl", "--etcd", etcd.endpoint, "rollout",
                                "status", "ranker", "--watch"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        before = status()["step_started_ms"]
        ctl(dais_bin, etcd, "rollout", "resume", "ranker")
        resumed = status()
        assert resumed["state"] == "running" and resumed["step_started_ms"] > before
        assert [v["weight"] for v in route(etcd)["versions"]] == [90, 10]
        out = ctl(dais_bin, etcd, "rollout", "promote", "ranker").stdout
        assert "promoted at 100 %" in out, out
        assert route(etcd)["versions"] == [{"version": 2, "weight": 100}]
        done = status()
        assert done["state"] == "promoted", done
        assert [h["decision"] for h in done["history"]] == [
            "paused by dais ctl", "resumed by dais ctl", "promoted by dais ctl"]
        watched, _ = watcher.communicate(timeout=30)
        assert watcher.returncode == 0, watched
        assert "paused" in watched and "promoted" in watched, watched
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait(10)
