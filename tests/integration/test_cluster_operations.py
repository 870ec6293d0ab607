"""Issue 14, operating the cluster: the scheduler's events (`dais ctl get events`, `dais ctl
watch`) and Prometheus metrics, priority classes with preemption, pinned versions loaded by the
nodes and the GPUs an assignment names. Real etcd, real `dais node` / `dais scheduler`."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time

import pytest
import requests

from cluster_util import TTL, Scheduler, apply, assigned, ctl, instances, ready, status
from conftest import wait_for

GPU_SPEC = "resources: {cpu_milli: 500, memory_mib: 256, gpus: 1}\n"


def start_nodes(start_server, repo, etcd, count):
    return [start_server(repo, "--etcd", etcd.endpoint, "--node-id", f"n{i}",
                         "--lease-ttl-secs", str(TTL), "--gpus", "1xA100:80GiB", command="node")
            for i in range(1, count + 1)]


@pytest.fixture
def scheduler(etcd_server, dais_bin, tmp_path):
    s = Scheduler(dais_bin, etcd_server, "s1", tmp_path, "--metrics-port", "0")
    yield s
    s.stop()
    print(f"--- scheduler log:\n{s.log()[-3000:]}")


def metric(text: str, name: str) -> float:
    """The value of the sample `name` (with its labels, as exposed), 0 when absent."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def read_lines_until(proc, pred, timeout: float, lines: list[str]) -> str:
    """Reads proc's stdout lines into `lines` until one satisfies pred; returns that line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready_fds, _, _ = select.select([proc.stdout], [], [], 0.2)
        if not ready_fds:
            continue
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if pred(lines[-1]):
            return lines[-1]
    raise AssertionError("not seen in time; output so far:\n" + "\n".join(lines))


def test_events_watch_and_metrics(etcd_server, start_server, model_repo, scheduler, dais_bin,
                                  tmp_path):
    etcd = etcd_server
    start_nodes(start_server, model_repo, etcd, 2)
    wait_for(lambda: len(etcd.get_prefix("/dais/nodes/")) == 2, 20, "2 nodes registered")
    port = scheduler.metrics_port()
    url = f"http://127.0.0.1:{port}/metrics"
    wait_for(lambda: metric(requests.get(url, timeout=5).text, "dais_scheduler_leader") == 1, 20,
             "the scheduler leads")
    watch = subprocess.Popen([str(dais_bin), "ctl", "--etcd", etcd.endpoint, "watch", "--for",
                              "120"], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        read_lines_until(watch, lambda l: "instance(s) at revision" in l, 20, lines)
        apply(dais_bin, etcd, tmp_path, "name: ranker\nmodel: mlp_small\nreplicas: 2\n" + GPU_SPEC)
        read_lines_until(watch, lambda l: "event placed ranker" in l, 30, lines)
        read_lines_until(watch, lambda l: "/mlp_small  version 1  READY  gpus 0" in l, 60, lines)
    finally:
        watch.terminate()
        watch.wait(10)
    wait_for(lambda: sorted(ready(etcd, "mlp_small").values()) == ["READY", "READY"], 60,
             "2 READY")
    # The instance states name the GPU the assignment gave (each node has one: index 0).
    assert all(i["gpus"] == [0] for i in instances(etcd, "mlp_small").values())
    assert "GPUS" in ctl(dais_bin, etcd, "get", "instances").stdout
    events = json.loads(ctl(dais_bin, etcd, "get", "events", "-o", "json").stdout)
    kinds = [(e["kind"], e["deployment"], e["node"]) for e in events]
    assert ("leader", "", "") in kinds
    assert sorted(k for k in kinds if k[0] == "placed") == [("placed", "ranker", "n1"),
                                                            ("placed", "ranker", "n2")]
    table = ctl(dais_bin, etcd, "get", "events").stdout
    assert "placed on n1 GPU 0 by the dais policy" in table, table
    # Unplaceable: pending, counted by reason, told once in the events.
    apply(dais_bin, etcd, tmp_path, "name: big\nmodel: mlp_heavy\nreplicas: 2\n"
          "resources: {gpus: 2}\n")
    wait_for(lambda: (status(etcd, "big") or {}).get("pending") == 2, 20, "big pending")
    text = wait_for(lambda: (t := requests.get(url, timeout=5).text) and metric(
        t, "dais_scheduler_pending_instances") == 2 and t, 20, "the pending gauge")
    assert metric(text, 'dais_scheduler_placements_total{policy="dais"}') == 2, text
    assert metric(text, 'dais_scheduler_placement_failures_total{reason="gpus"}') >= 1, text
    assert metric(text, "dais_scheduler_unallocated_gpus") == 0
    assert metric(text, "dais_scheduler_decision_duration_seconds_count") >= 3
    assert metric(text, "dais_scheduler_reconcile_duration_seconds_count") >= 2
    pending = [e for e in json.loads(ctl(dais_bin, etcd, "get", "events", "-o", "json").stdout)
               if e["kind"] == "pending"]
    assert len(pending) == 1 and "largest free: 0" in pending[0]["message"], pending
    promtool = shutil.which("promtool")
    if promtool:
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr
    elif os.environ.get("DAIS_REQUIRE_PROMTOOL", "") not in ("", "0"):
        pytest.fail("promtool not found (Debian package `prometheus`)")


def test_latency_sensitive_preempts_best_effort(etcd_server, start_server, model_repo, scheduler,
                                                dais_bin, tmp_path):
    etcd = etcd_server
    start_nodes(start_server, model_repo, etcd, 2)
    wait_for(lambda: len(etcd.get_prefix("/dais/nodes/")) == 2, 20, "2 nodes registered")
    apply(dais_bin, etcd, tmp_path, "name: batch\nmodel: mlp_heavy\nreplicas: 2\n"
          "priority: best-effort\n" + GPU_SPEC)
    wait_for(lambda: len(assigned(etcd, "mlp_heavy")) == 2, 30, "batch on both GPUs")
    # Latency-sensitive without may_preempt: waits.
    apply(dais_bin, etcd, tmp_path, "name: polite\nmodel: xgb_binary\nreplicas: 1\n" + GPU_SPEC)
    wait_for(lambda: (status(etcd, "polite") or {}).get("pending") == 1, 20, "polite pending")
    assert len(assigned(etcd, "mlp_heavy")) == 2
    # With may_preempt: one best-effort instance goes, the ranker takes its GPU.
    apply(dais_bin, etcd, tmp_path, "name: ranker\nmodel: mlp_small\nreplicas: 1\n"
          "may_preempt: true\n" + GPU_SPEC)
    wait_for(lambda: list(ready(etcd, "mlp_small").values()) == ["READY"], 60, "ranker READY")
    assert len(assigned(etcd, "mlp_heavy")) == 1, "exactly one victim"
    assert assigned(etcd, "mlp_small")[0] not in assigned(etcd, "mlp_heavy")
    batch = wait_for(lambda: (s := status(etcd, "batch")) and s["pending"] == 1 and s, 20,
                     "batch: 1 pending")
    assert "without 1 free GPU(s)" in batch["reason"], batch
    events = json.loads(ctl(dais_bin, etcd, "get", "events", "-o", "json").stdout)
    preempted = [e for e in events if e["kind"] == "preempted"]
    assert len(preempted) == 1 and preempted[0]["deployment"] == "batch", preempted
    assert "preempted by ranker" in preempted[0]["message"]
    assert (status(etcd, "polite") or {}).get("pending") == 1, "the polite one still waits"
    # Deleting the ranker gives the GPU back to a waiting deployment.
    ctl(dais_bin, etcd, "delete", "deployment", "ranker")
    wait_for(lambda: len(assigned(etcd, "mlp_heavy")) + len(assigned(etcd, "xgb_binary")) == 2,
             30, "the freed GPU is used again")


def test_nodes_load_the_pinned_version(etcd_server, start_server, repo_copy, scheduler, dais_bin,
                                       tmp_path):
    etcd = etcd_server
    shutil.copytree(repo_copy / "mlp_small" / "1", repo_copy / "mlp_small" / "2")
    (node,) = start_nodes(start_server, repo_copy, etcd, 1)
    wait_for(lambda: len(etcd.get_prefix("/dais/nodes/")) == 1, 20, "the node registered")
    def spec(version):
        return f"name: r\nmodel: mlp_small\nreplicas: 1\nversion: {version}\n" + GPU_SPEC

    apply(dais_bin, etcd, tmp_path, spec(1))
    wait_for(lambda: [(i["version"], i["state"]) for i in instances(etcd, "mlp_small").values()]
             == [("1", "READY")], 60, "version 1 READY (the policy alone would serve 2)")
    meta = requests.get(f"{node.url}/v2/models/mlp_small", timeout=5).json()
    assert meta["versions"] == ["1"], meta
    apply(dais_bin, etcd, tmp_path, spec(2))
    wait_for(lambda: [(i["version"], i["state"]) for i in instances(etcd, "mlp_small").values()]
             == [("2", "READY")], 60, "moved to version 2")
    meta = requests.get(f"{node.url}/v2/models/mlp_small", timeout=5).json()
    assert meta["versions"] == ["2"], meta
    # A version the repository lacks: FAILED with the reason, told in the events, not retried
    # there at once.
    apply(dais_bin, etcd, tmp_path, spec(9))
    failed = wait_for(lambda: [e for e in json.loads(ctl(dais_bin, etcd, "get", "events", "-o",
                                                         "json").stdout) if e["kind"] == "failed"],
                      60, "a failed event")
    assert "no version 9" in failed[0]["message"] and "versions there: 1, 2" in failed[0]["message"]
    wait_for(lambda: (status(etcd, "r") or {}).get("pending") == 1, 20, "pending after the failure")


def test_apply_takes_every_document_a_directory_and_stdin(etcd_server, dais_bin, tmp_path):
    """Issue 31: a multi-document YAML applied only its first document and exited 0."""
    etcd = etcd_server

    def keys():
        return sorted(k for k in etcd.get_prefix("/dais/")
                      if k.startswith(("/dais/deployments/", "/dais/routes/", "/dais/tenants/")))

    three = tmp_path / "three.yaml"
    three.write_text("name: a\nmodel: mlp_small\nreplicas: 1\n---\n"
                     "kind: route\nname: r\nmodel: mlp_small\nversions: [{version: 1, weight: 100}]\n"
                     "---\nkind: tenant\nname: t\n")
    out = ctl(dais_bin, etcd, "apply", "-f", str(three)).stdout
    assert "deployment a applied" in out and "route r applied" in out and \
        "tenant t applied" in out, out
    assert keys() == ["/dais/deployments/a", "/dais/routes/r", "/dais/tenants/t"]

    # One bad document: every refusal named by document and field, and nothing written.
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nmodel: mlp_small\nreplicas: 1\n---\n"
                   "name: c\nmodel: mlp_small\nreplicas: -3\n---\n"
                   "kind: route\nname: r2\nmodel: m\nversions: [{version: 1, weight: 80}]\n")
    r = ctl(dais_bin, etcd, "apply", "-f", str(bad), check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{bad} document 2: replicas" in r.stderr, r.stderr
    assert f"{bad} document 3:" in r.stderr and "sum to 80" in r.stderr, r.stderr
    assert "nothing applied (2 refused)" in r.stderr, r.stderr
    assert keys() == ["/dais/deployments/a", "/dais/routes/r", "/dais/tenants/t"], \
        "a refused apply wrote nothing"

    # A directory (*.yaml, *.yml, sorted; other files ignored) and stdin.
    d = tmp_path / "specs"
    d.mkdir()
    (d / "1.yaml").write_text("name: d1\nmodel: mlp_small\nreplicas: 1\n")
    (d / "2.yml").write_text("---\nname: d2\nmodel: mlp_small\nreplicas: 1\n...\n")
    (d / "notes.txt").write_text("not a spec")
    out = ctl(dais_bin, etcd, "apply", "-f", str(d)).stdout
    assert out.index("deployment d1") < out.index("deployment d2"), out
    r = subprocess.run([str(dais_bin), "ctl", "--etcd", etcd.endpoint, "apply", "-f", "-"],
                       input="kind: tenant\nname: t2\n---\nkind: tenant\nname: t3\n",
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "tenant t2 applied" in r.stdout and "tenant t3" in r.stdout, \
        r.stdout + r.stderr
    assert "/dais/tenants/t3" in keys()
    # A directory without specs, and a key given twice, are refused.
    empty = tmp_path / "empty"
    empty.mkdir()
    r = ctl(dais_bin, etcd, "apply", "-f", str(empty), check=False)
    assert r.returncode == 2 and "no *.yaml or *.yml file" in r.stderr, r.stderr
    r = subprocess.run([str(dais_bin), "ctl", "--etcd", etcd.endpoint, "apply", "-f", "-"],
                       input="kind: tenant\nname: t4\n---\nkind: tenant\nname: t4\n",
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "given twice" in r.stderr, r.stderr


def test_a_deployment_without_version_runs_one_version_everywhere(
        etcd_server, start_server, model_repo, scheduler, dais_bin, tmp_path):
    """Issue 31: without `version:` each placement loaded its node's latest, so after a
    repository change one replica served v1 and another v2. The scheduler now resolves one
    version from the nodes' repositories and moves every replica when they all have a newer one."""
    etcd = etcd_server
    repos = []
    for i in (1, 2):
        repo = tmp_path / f"repo{i}"
        shutil.copytree(model_repo / "mlp_small", repo / "mlp_small")
        repos.append(repo)
    for i, repo in enumerate(repos, 1):
        start_server(repo, "--etcd", etcd.endpoint, "--node-id", f"n{i}", "--lease-ttl-secs",
                     str(TTL), "--gpus", "1xA100:80GiB", command="node")
    wait_for(lambda: len(etcd.get_prefix("/dais/nodes/")) == 2, 20, "two nodes registered")

    def versions():
        return sorted((i["version"], i["state"]) for i in instances(etcd, "mlp_small").values())

    def spec(replicas):
        return f"name: r\nmodel: mlp_small\nreplicas: {replicas}\n" + GPU_SPEC

    apply(dais_bin, etcd, tmp_path, spec(1))
    wait_for(lambda: versions() == [("1", "READY")], 60, "one replica on v1")
    # A newer version on one node only, then a second replica: it must not come up on v2.
    (first,) = [n for n in ("n1", "n2") if etcd.get_prefix(f"/dais/assignments/{n}/")]
    other = repos[1] if first == "n1" else repos[0]
    shutil.copytree(other / "mlp_small" / "1", other / "mlp_small" / "2")
    wait_for(lambda: "2" in etcd.get_prefix("/dais/nodes/")[
        f"/dais/nodes/{'n2' if first == 'n1' else 'n1'}"], 20, "the node published v2")
    apply(dais_bin, etcd, tmp_path, spec(2))
    wait_for(lambda: versions() == [("1", "READY"), ("1", "READY")], 60, "both replicas on v1")
    table = ctl(dais_bin, etcd, "get", "deployments").stdout
    assert "1 (latest)" in table, table
    # Every repository has v2 now: every replica moves, in place.
    mine = repos[0] if first == "n1" else repos[1]
    shutil.copytree(mine / "mlp_small" / "1", mine / "mlp_small" / "2")
    wait_for(lambda: versions() == [("2", "READY"), ("2", "READY")], 60, "both replicas on v2")
    table = ctl(dais_bin, etcd, "get", "deployments").stdout
    assert "2 (latest)" in table, table
    events = json.loads(ctl(dais_bin, etcd, "get", "events", "-o", "json").stdout)
    assert sum(e["kind"] == "version" and "1 -> 2" in e["message"] for e in events) == 2, events


def test_a_deployment_written_around_apply_is_read_as_strictly(etcd_server, scheduler, dais_bin):
    """Issue 32: `replicas: "5"` and `replicas: 4294967297` written straight into etcd were
    scheduled as 1 while `ctl get` showed 5 and 4294967297. Both are refused now, said in the
    scheduler's log and in `ctl get deployments`."""
    etcd = etcd_server
    etcd.ctl("put", "/dais/deployments/quoted",
             '{"name": "quoted", "model": "mlp_small", "replicas": "5"}')
    etcd.ctl("put", "/dais/deployments/huge",
             '{"name": "huge", "model": "mlp_small", "replicas": 4294967297}')
    wait_for(lambda: "ignoring the deployment at /dais/deployments/quoted: replicas: expected an "
             "integer" in scheduler.log() and "/dais/deployments/huge: replicas" in
             scheduler.log(), 20, "both refused in the scheduler's log")
    table = ctl(dais_bin, etcd, "get", "deployments").stdout
    rows = {line.split()[0]: line for line in table.splitlines()[1:] if line.strip()}
    assert "invalid, not scheduled: replicas" in rows["quoted"], table
    assert "invalid, not scheduled: replicas" in rows["huge"], table
    assert not etcd.get_prefix("/dais/assignments/"), "nothing scheduled"
