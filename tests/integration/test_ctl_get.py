"""Issue 35: `dais ctl get KIND [NAME] -o table|wide|json|yaml` and `dais ctl describe` on a
real cluster (etcd, one node, one scheduler): names, aliases, what -o json adds to the stored
object, and the errors."""

from __future__ import annotations

import json

import pytest
import yaml

from cluster_util import TTL, Scheduler, apply, ctl, ready
from conftest import wait_for


@pytest.fixture
def cluster(etcd_server, start_server, model_repo, dais_bin, tmp_path):
    start_server(model_repo, "--etcd", etcd_server.endpoint, "--node-id", "n1",
                 "--lease-ttl-secs", str(TTL), "--labels", "zone=a", command="node")
    sched = Scheduler(dais_bin, etcd_server, "s1", tmp_path)
    apply(dais_bin, etcd_server, tmp_path,
          "name: ranker\nmodel: mlp_small\nreplicas: 1\nresources: {cpu_milli: 100}\n")
    wait_for(lambda: ready(etcd_server, "mlp_small").get("n1") == "READY", 60, "ranker READY")
    yield etcd_server
    sched.stop()


def get(dais_bin, etcd, *args, check=True):
    return ctl(dais_bin, etcd, "get", *args, check=check)


def test_get_by_name_alias_and_output(cluster, dais_bin):
    etcd = cluster
    table = get(dais_bin, etcd, "deploy", "ranker").stdout.splitlines()
    assert table[0].split()[0] == "DEPLOYMENT" and len(table) == 2, table
    assert table[1].split()[:2] == ["ranker", "mlp_small"], table
    # -o json: one object for a name, with the status the table shows.
    d = json.loads(get(dais_bin, etcd, "deployment", "ranker", "-o", "json").stdout)
    assert d["name"] == "ranker" and d["status"]["assigned"] == 1, d
    # -o yaml of a node: its scheduling state, which the table shows and the stored key lacks.
    n = yaml.safe_load(get(dais_bin, etcd, "node", "n1", "-o", "yaml").stdout)
    assert n["node"] == "n1" and n["scheduling"] == "enabled" and n["labels"] == {"zone": "a"}
    ctl(dais_bin, etcd, "cordon", "n1")
    n = json.loads(get(dais_bin, etcd, "no", "n1", "-o", "json").stdout)
    assert n["scheduling"] == "cordoned", n
    # Lists stay lists; an assignment names its node.
    a = json.loads(get(dais_bin, etcd, "assignments", "-o", "json").stdout)
    assert [x["node"] for x in a] == ["n1"] and a[0]["deployment"] == "ranker", a
    inst = json.loads(get(dais_bin, etcd, "instances", "mlp_small", "-o", "json").stdout)
    assert [i["state"] for i in inst] == ["READY"], inst
    wide = get(dais_bin, etcd, "nodes", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-3:] == ["GRPC", "METRICS", "MODELS"], wide


def test_get_errors_name_what_was_wrong(cluster, dais_bin):
    etcd = cluster
    r = get(dais_bin, etcd, "deployment", "nope", check=False)
    assert r.returncode == 1 and "no deployment named 'nope'" in r.stderr, r.stderr
    r = get(dais_bin, etcd, "depolyments", check=False)
    assert r.returncode == 2 and "did you mean 'deployments'?" in r.stderr, r.stderr
    r = get(dais_bin, etcd, "nodes", "-o", "xml", check=False)
    assert r.returncode != 0 and "xml" in r.stdout + r.stderr


def test_describe_shows_the_object_its_assignments_and_events(cluster, dais_bin):
    etcd = cluster
    out = ctl(dais_bin, etcd, "describe", "deployment", "ranker").stdout
    head, _, rest = out.partition("\nAssignments:\n")
    obj = yaml.safe_load(head)
    assert obj["name"] == "ranker" and obj["status"]["assigned"] == 1, out
    assert "n1" in rest.split("\nEvents")[0], out
    assert "placed" in rest.split("\nEvents")[1].lower(), out
    node = ctl(dais_bin, etcd, "describe", "node", "n1").stdout
    assert "Instances:" in node and "mlp_small" in node.split("Instances:")[1], node
