"""Issue 14, the live scheduler: real etcd, real `dais node` and `dais scheduler` processes on
loopback. Deployments applied with `dais ctl` become READY instances where the scheduler puts
them; a killed node's instances come back elsewhere; a killed or frozen leader is replaced and a
deposed one cannot write; scaling; an unplaceable deployment says why; bad specs are refused."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from cluster_util import TTL, Scheduler, apply, assigned, ctl, leader, ready
from conftest import wait_for

@pytest.fixture
def cluster(etcd_server, start_server, model_repo, dais_bin, tmp_path):
    """etcd, 3 nodes (1 declared A100 each, zone labels), 2 schedulers."""
    nodes = {}
    for i, zone in ((1, "a"), (2, "a"), (3, "b")):
        nodes[f"n{i}"] = start_server(
            model_repo, "--etcd", etcd_server.endpoint, "--node-id", f"n{i}", "--lease-ttl-secs",
            str(TTL), "--gpus", "1xA100:80GiB", "--labels", f"zone={zone}", command="node")
    schedulers = [Scheduler(dais_bin, etcd_server, f"s{i}", tmp_path) for i in (1, 2)]
    wait_for(lambda: len(etcd_server.get_prefix("/dais/nodes/")) == 3, 20, "3 nodes registered")
    wait_for(lambda: leader(etcd_server), 20, "a leader")
    yield {"etcd": etcd_server, "nodes": nodes, "schedulers": schedulers}
    for s in schedulers:
        s.stop()
        print(f"--- scheduler {s.name} log:\n{s.log()[-3000:]}")


def test_deployments_placed_ready_and_recovered(cluster, dais_bin, tmp_path, kv):
    etcd, nodes = cluster["etcd"], cluster["nodes"]
    apply(dais_bin, etcd, tmp_path, "name: ranker\nmodel: mlp_small\nreplicas: 2\n"
          "resources: {cpu_milli: 500, memory_mib: 256, gpus: 1}\n")
    apply(dais_bin, etcd, tmp_path, "name: fraud\nmodel: xgb_binary\nreplicas: 2\n"
          "resources: {cpu_milli: 500, memory_mib: 256}\nconstraints: {node_labels: {zone: a}}\n")
    wait_for(lambda: sorted(ready(etcd, "mlp_small").values()) == ["READY", "READY"], 60,
             "ranker: 2 READY")
    wait_for(lambda: sorted(ready(etcd, "xgb_binary").values()) == ["READY", "READY"], 60,
             "fraud: 2 READY")
    assert assigned(etcd, "xgb_binary") == ["n1", "n2"], "the zone=a constraint"
    table = ctl(dais_bin, etcd, "get", "deployments").stdout
    assert "ranker" in table and "fraud" in table, table
    assert json.loads(ctl(dais_bin, etcd, "get", "instances", "-o", "json").stdout)
    # Each READY instance answers on its node.
    for node in assigned(etcd, "mlp_small"):
        r = nodes[node].infer("mlp_small", {"INPUT__0": [[0.0] * 16]})
        assert r.status_code == 200, r.text
    # kill -9 a node with a ranker instance: the instance comes back on the node left.
    victim = assigned(etcd, "mlp_small")[0]
    nodes[victim].signal(signal.SIGKILL)
    t0 = time.monotonic()
    wait_for(lambda: victim not in assigned(etcd, "mlp_small") and
             sorted(ready(etcd, "mlp_small").values()) == ["READY", "READY"], 60,
             "ranker re-placed and READY")
    recovery = time.monotonic() - t0
    assert len(assigned(etcd, "mlp_small")) == 2
    print(f"recovery after kill -9 of {victim}: {recovery:.2f} s")
    # Scale down: never more than the replicas.
    apply(dais_bin, etcd, tmp_path, "name: ranker\nmodel: mlp_small\nreplicas: 1\n"
          "resources: {cpu_milli: 500, memory_mib: 256, gpus: 1}\n")
    wait_for(lambda: len(assigned(etcd, "mlp_small")) == 1, 30, "scaled down to 1")
    ctl(dais_bin, etcd, "delete", "deployment", "ranker")
    wait_for(lambda: not assigned(etcd, "mlp_small") and not ready(etcd, "mlp_small"), 30,
             "deleted: unassigned and unloaded")


def test_leader_failover_and_a_deposed_leader_cannot_write(cluster, dais_bin, tmp_path):
    etcd, schedulers = cluster["etcd"], {s.name: s for s in cluster["schedulers"]}
    first = leader(etcd)
    # Frozen past its lease: the standby leads; the frozen one, resumed, writes nothing.
    schedulers[first].proc.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    second = wait_for(lambda: (leader(etcd) or first) != first and leader(etcd), TTL + 10,
                      "the standby leads")
    failover = time.monotonic() - t0
    apply(dais_bin, etcd, tmp_path, "name: a\nmodel: mlp_small\nreplicas: 2\n"
          "resources: {gpus: 1}\n")
    wait_for(lambda: len(assigned(etcd, "mlp_small")) == 2, 30, "placed by the new leader")
    schedulers[first].proc.send_signal(signal.SIGCONT)
    wait_for(lambda: "lost leadership" in schedulers[first].log(), 20, "the old leader steps down")
    time.sleep(1)  # the old leader had its chance to write
    assert len(assigned(etcd, "mlp_small")) == 2, "no duplicate instance"
    assert leader(etcd) == second
    print(f"failover after SIGSTOP: {failover:.2f} s")
    # kill -9 the leader: the other one leads again.
    schedulers[second].proc.kill()
    wait_for(lambda: leader(etcd) == first, TTL + 10, "the first leads again")
    apply(dais_bin, etcd, tmp_path, "name: a\nmodel: mlp_small\nreplicas: 3\n"
          "resources: {gpus: 1}\n")
    wait_for(lambda: len(assigned(etcd, "mlp_small")) == 3, 30, "scaled up by the new leader")


def test_unplaceable_deployment_says_why(cluster, dais_bin, tmp_path):
    etcd = cluster["etcd"]
    apply(dais_bin, etcd, tmp_path, "name: big\nmodel: mlp_heavy\nreplicas: 2\n"
          "resources: {gpus: 2}\n")
    status = wait_for(lambda: json.loads(etcd.get_prefix("/dais/status/big").get(
        "/dais/status/big", "null") or "null"), 20, "a status")
    assert status["pending"] == 2 and status["assigned"] == 0, status
    assert "without 2 free GPU(s)" in status["reason"] and "largest free: 1" in status["reason"]
    table = ctl(dais_bin, etcd, "get", "deployments").stdout
    assert "largest free: 1" in table, table
    assert not assigned(etcd, "mlp_heavy")


def test_bad_specs_are_refused_and_nothing_is_written(etcd_server, dais_bin, tmp_path):
    for spec, why in [("name: x\nmodel: m\nreplica: 2\n", "replica: unknown field"),
                      ("name: x\nmodel: m\nresources: {gpu_milli: 2000}\n", "gpu_milli: 2000")]:
        path = tmp_path / "bad.yaml"
        path.write_text(spec)
        r = ctl(dais_bin, etcd_server, "apply", "-f", str(path), check=False)
        assert r.returncode != 0 and why in r.stderr, r.stderr
    assert etcd_server.get_prefix("/dais/deployments/") == {}


def test_cordon_and_drain(cluster, dais_bin, tmp_path):
    etcd = cluster["etcd"]
    apply(dais_bin, etcd, tmp_path, "name: r\nmodel: mlp_small\nreplicas: 2\n"
          "resources: {gpus: 1}\n")
    wait_for(lambda: len(assigned(etcd, "mlp_small")) == 2, 30, "2 placed")
    free = ({"n1", "n2", "n3"} - set(assigned(etcd, "mlp_small"))).pop()
    ctl(dais_bin, etcd, "cordon", free)
    assert "cordoned" in ctl(dais_bin, etcd, "get", "nodes").stdout
    apply(dais_bin, etcd, tmp_path, "name: r\nmodel: mlp_small\nreplicas: 3\n"
          "resources: {gpus: 1}\n")
    status = wait_for(lambda: json.loads(etcd.get_prefix("/dais/status/r").get(
        "/dais/status/r", "null") or "null") if "cordoned" in etcd.get_prefix(
        "/dais/status/r").get("/dais/status/r", "") else None, 20, "pending on the cordon")
    assert status["pending"] == 1, status
    ctl(dais_bin, etcd, "uncordon", free)
    wait_for(lambda: len(assigned(etcd, "mlp_small")) == 3, 30, "placed once uncordoned")
    # Drain: its instance moves (scale to 2 first so that there is room elsewhere).
    apply(dais_bin, etcd, tmp_path, "name: r\nmodel: mlp_small\nreplicas: 2\n"
          "resources: {gpus: 1}\n")
    wait_for(lambda: len(assigned(etcd, "mlp_small")) == 2, 30, "back to 2")
    victim = assigned(etcd, "mlp_small")[0]
    ctl(dais_bin, etcd, "drain", victim)
    wait_for(lambda: victim not in assigned(etcd, "mlp_small") and
             len(assigned(etcd, "mlp_small")) == 2 and
             sorted(ready(etcd, "mlp_small").values()) == ["READY", "READY"], 60,
             "moved off the drained node")


def test_one_etcd_member_killed_does_not_stop_the_cluster(etcd_cluster, start_server, model_repo,
                                                          dais_bin, tmp_path):
    for i in (1, 2):
        start_server(model_repo, "--etcd", etcd_cluster.endpoint, "--node-id", f"n{i}",
                     "--lease-ttl-secs", str(TTL), "--gpus", "1xA100:80GiB", command="node")
    sched = Scheduler(dais_bin, etcd_cluster, "s1", tmp_path)
    try:
        wait_for(lambda: leader(etcd_cluster), 20, "a leader")
        etcd_cluster.members[0].kill()  # one member of three: the quorum holds
        # The write may meet the election that follows the kill (Deadline Exceeded on a loaded
        # machine): etcd answers again once the two others agree on a leader, so retry until then.
        spec = tmp_path / "q.yaml"
        spec.write_text("name: q\nmodel: mlp_small\nreplicas: 2\nresources: {gpus: 1}\n")
        wait_for(lambda: ctl(dais_bin, etcd_cluster, "apply", "-f", str(spec),
                             check=False).returncode == 0, 30, "the spec applied with a member down")
        wait_for(lambda: sorted(ready(etcd_cluster, "mlp_small").values()) == ["READY", "READY"],
                 60, "placed and READY with a member down")
        assert len(etcd_cluster.get_prefix("/dais/nodes/")) == 2, "membership held"
    finally:
        sched.stop()


def test_a_standby_scheduler_publishes_its_metrics(etcd_server, dais_bin, tmp_path):
    """Issue 31: a standby served no dais_scheduler_* series until it had led once; alerts on
    "no leader" need the standbys' zeros."""
    import requests
    schedulers = [Scheduler(dais_bin, etcd_server, f"m{i}", tmp_path, "--metrics-port", "0")
                  for i in (1, 2)]
    try:
        who = wait_for(lambda: leader(etcd_server), 20, "a leader")
        standby = next(s for s in schedulers if s.name != who)
        port = standby.metrics_port()
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        lines = text.splitlines()
        assert "dais_scheduler_leader 0" in lines, text
        assert 'dais_scheduler_placements_total{policy="dais"} 0' in lines, text
        assert "dais_scheduler_pending_instances 0" in lines, text
        active = next(s for s in schedulers if s.name == who)
        text = requests.get(f"http://127.0.0.1:{active.metrics_port()}/metrics", timeout=5).text
        assert "dais_scheduler_leader 1" in text.splitlines(), text
    finally:
        for s in schedulers:
            s.stop()


def test_an_etcd_outage_is_logged_once_not_per_watch_and_retry(dais_bin, tmp_path):
    """Issue 35: a scheduler whose etcd is away logged ~20 lines a second (each watch, each
    retry). Now: one line, a summary every 30 s, and one line when etcd is back."""
    import requests
    from conftest import EtcdServer, free_port
    port = free_port()

    class Nowhere:  # what Scheduler needs of an etcd: its endpoint
        endpoint = f"127.0.0.1:{port}"
    sched = Scheduler(dais_bin, Nowhere, "s1", tmp_path, "--metrics-port", "0")
    etcd = None
    try:
        metrics = f"http://127.0.0.1:{sched.metrics_port()}/metrics"

        def failed_reads():
            text = requests.get(metrics, timeout=5).text
            found = re.search(r"^dais_etcd_unreachable_total (\d+)", text, re.M)
            return found and int(found.group(1)) >= 40
        wait_for(failed_reads, 60, "40 failed etcd reads")
        warnings = [line for line in sched.log().splitlines() if " W " in line]
        assert 1 <= len(warnings) <= 2, "\n".join(warnings)
        assert f"unreachable at 127.0.0.1:{port} (connection refused" in warnings[0], warnings
        etcd = EtcdServer(tmp_path, client_port=port)
        wait_for(lambda: "etcd watches: reading again" in sched.log(), 30,
                 "the line that says etcd is back")
        wait_for(lambda: leader(etcd) == "s1", 30, "s1 leading once etcd is there")
    finally:
        sched.stop()
        if etcd:
            etcd.stop()
