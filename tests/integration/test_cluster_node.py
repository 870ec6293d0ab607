"""Issue 14, `dais node`: registration under a lease, assignments loaded and reported, etcd
outages survived (the node keeps serving, registers again and resumes its watch), a killed node
leaving within its lease TTL, a stopped one at once. Real etcd, real dais processes."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pytest

from conftest import wait_for

TTL = 2  # --lease-ttl-secs of the nodes here


def start_node(start_server, model_repo, etcd, node_id="n1", *extra):
    return start_server(model_repo, "--etcd", etcd.endpoint, "--node-id", node_id,
                        "--lease-ttl-secs", str(TTL), *extra, command="node")


def instance(etcd, node, model):
    v = etcd.get_prefix(f"/dais/instances/{node}/{model}").get(f"/dais/instances/{node}/{model}")
    return json.loads(v) if v else None


def test_node_registers_with_capacity_and_labels(etcd_server, start_server, model_repo):
    srv = start_node(start_server, model_repo, etcd_server, "n1", "--gpus", "2xA100:80GiB",
                     "--labels", "zone=a,tier=gpu")
    reg = wait_for(lambda: etcd_server.get_prefix("/dais/nodes/"), 15, "registration")
    node = json.loads(reg["/dais/nodes/n1"])
    assert node["node"] == "n1"
    assert node["gpus"] == [{"model": "A100", "memory_mib": 81920}] * 2
    assert node["labels"] == {"zone": "a", "tier": "gpu"}
    assert node["cpu_milli"] >= 1000 and node["memory_mib"] > 0
    assert node["http"] == f"127.0.0.1:{srv.http_port}"
    assert node["grpc"] == f"127.0.0.1:{srv.grpc_port}"


def test_assignments_are_loaded_reported_and_unloaded(etcd_server, start_server, model_repo,
                                                      refs, kv):
    srv = start_node(start_server, model_repo, etcd_server)
    assert srv.index_entry("mlp_small") is None or \
        srv.index_entry("mlp_small")["state"] != "READY", "nothing loads before it is assigned"
    etcd_server.ctl("put", "/dais/assignments/n1/mlp_small", '{"deployment": "d1"}')
    st = wait_for(lambda: (instance(etcd_server, "n1", "mlp_small") or {}).get("state") == "READY"
                  and instance(etcd_server, "n1", "mlp_small"), 30, "mlp_small READY in etcd")
    assert st["version"] == "1" and st["node"] == "n1"
    x = np.random.default_rng(3).normal(size=(2, 16)).astype(np.float32)
    out = kv.json_outputs(srv.infer("mlp_small", {"INPUT__0": x}))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x),
                               rtol=1e-5, atol=1e-5)
    # A model that does not exist is reported FAILED with the reason.
    etcd_server.ctl("put", "/dais/assignments/n1/no_such_model", "{}")
    failed = wait_for(lambda: (instance(etcd_server, "n1", "no_such_model") or {}).get("state")
                      == "FAILED" and instance(etcd_server, "n1", "no_such_model"), 30,
                      "no_such_model FAILED")
    assert failed["reason"], failed
    etcd_server.ctl("del", "/dais/assignments/n1/mlp_small")
    wait_for(lambda: instance(etcd_server, "n1", "mlp_small") is None, 30, "instance key removed")
    wait_for(lambda: (srv.index_entry("mlp_small") or {}).get("state") != "READY", 30,
             "mlp_small unloaded")


def test_killed_node_leaves_within_the_lease_and_stopped_one_at_once(etcd_server, start_server,
                                                                     model_repo):
    a = start_node(start_server, model_repo, etcd_server, "na")
    b = start_node(start_server, model_repo, etcd_server, "nb")
    wait_for(lambda: len(etcd_server.get_prefix("/dais/nodes/")) == 2, 15, "two nodes")
    a.signal(9)
    t0 = time.monotonic()
    wait_for(lambda: "/dais/nodes/na" not in etcd_server.get_prefix("/dais/nodes/"), TTL + 5,
             "killed node gone")
    assert time.monotonic() - t0 <= TTL + 2
    b.signal()  # SIGTERM: the lease is revoked
    t0 = time.monotonic()
    wait_for(lambda: "/dais/nodes/nb" not in etcd_server.get_prefix("/dais/nodes/"), 10,
             "stopped node gone")
    assert time.monotonic() - t0 < TTL, "a graceful stop leaves at once, not at the lease's end"


def test_node_serves_through_an_etcd_outage_and_catches_up(etcd_server, start_server,
                                                           model_repo, kv):
    srv = start_node(start_server, model_repo, etcd_server)
    etcd_server.ctl("put", "/dais/assignments/n1/mlp_small", "{}")
    wait_for(lambda: (instance(etcd_server, "n1", "mlp_small") or {}).get("state") == "READY",
             30, "READY")
    etcd_server.kill()
    x = np.zeros((1, 16), np.float32)
    time.sleep(TTL + 1)  # longer than the lease: it expires on etcd's side meanwhile
    assert srv.infer("mlp_small", {"INPUT__0": x}).status_code == 200, \
        "the request path does not need etcd"
    etcd_server.start()
    # Registered again (new lease), instance reported again, and the watch resumed: an
    # assignment made after the outage is loaded.
    wait_for(lambda: "/dais/nodes/n1" in etcd_server.get_prefix("/dais/nodes/"), 20,
             "registered again")
    wait_for(lambda: (instance(etcd_server, "n1", "mlp_small") or {}).get("state") == "READY",
             20, "instance reported again")
    etcd_server.ctl("put", "/dais/assignments/n1/xgb_binary", "{}")
    wait_for(lambda: (instance(etcd_server, "n1", "xgb_binary") or {}).get("state") == "READY",
             30, "a new assignment after the outage")
    assert "etcd unreachable" in srv.log_text()


def test_node_starts_before_etcd_and_registers_when_it_comes(start_server, model_repo, tmp_path):
    from conftest import EtcdServer, free_port
    port = free_port()
    srv = start_server(model_repo, "--etcd", f"127.0.0.1:{port}", "--node-id", "early",
                       "--lease-ttl-secs", str(TTL), command="node")
    assert srv.get("/v2/health/live").status_code == 200
    etcd = EtcdServer(tmp_path, client_port=port)
    try:
        wait_for(lambda: "/dais/nodes/early" in etcd.get_prefix("/dais/nodes/"), 20,
                 "registered once etcd is up")
    finally:
        etcd.stop()


@pytest.mark.parametrize("args,why", [
    (["--gpus", "2xA100"], "--gpus '2xA100'"),
    (["--labels", "zone"], "--labels 'zone'"),
])
def test_bad_node_flags_are_refused(dais_bin, model_repo, args, why):
    r = subprocess.run([str(dais_bin), "node", "--model-repository", str(model_repo),
                        "--http-port", "0", "--grpc-port", "0", "--etcd", "127.0.0.1:1",
                        "--node-id", "x", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert why in r.stdout + r.stderr
