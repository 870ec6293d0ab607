"""Issue 15, the gateway's faults: a slow node (per-try timeout, retried elsewhere, ejected; a gRPC
client's deadline kept), and etcd away (the gateway keeps routing with what it last saw and
picks up changes once etcd is back). Real etcd, real `dais node` processes (identity models made
slow by their config), a real gateway process."""

from __future__ import annotations

import json

import grpc
import numpy as np
import pytest
import requests

import grpc_client
from cluster_util import TTL, instances
from conftest import IDENTITY_BODY, wait_for, write_identity_model
from grpc_client import GrpcClient
from test_gateway import CANARY, apply_route, body, gateway, two_versions  # noqa: F401 fixtures


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    return grpc_client.generate_stubs(tmp_path_factory.mktemp("grpc_stubs"))


@pytest.fixture
def fast_and_slow(etcd_server, start_server, tmp_path):
    """`ident` v1 on n1 (answers at once) and on n2 (each batch takes 400 ms); `ident_slow` v1
    on n2 only."""
    nodes = {}
    for node, delay in (("n1", 0), ("n2", 400)):
        repo = tmp_path / f"repo-{node}"
        write_identity_model(repo, "ident", 0, execute_delay_ms=delay)
        write_identity_model(repo, "ident_slow", 0, execute_delay_ms=400)
        nodes[node] = start_server(repo, "--etcd", etcd_server.endpoint, "--node-id", node,
                                   "--lease-ttl-secs", str(TTL), command="node")
        etcd_server.ctl("put", f"/dais/assignments/{node}/ident", json.dumps(
            {"deployment": "ident", "model": "ident", "version": 1}))
    etcd_server.ctl("put", "/dais/assignments/n2/ident_slow", json.dumps(
        {"deployment": "ident-slow", "model": "ident_slow", "version": 1}))
    wait_for(lambda: sorted((i["node"], i["state"]) for i in
                            instances(etcd_server, "ident").values()) ==
             [("n1", "READY"), ("n2", "READY")] and
             [i["state"] for i in instances(etcd_server, "ident_slow").values()] == ["READY"],
             60, "ident on n1 and n2, ident_slow on n2, READY")
    return nodes


def test_a_slow_node_is_tried_around_ejected_and_deadlines_hold(
        fast_and_slow, etcd_server, gateway, dais_bin, tmp_path, stubs):  # noqa: F811
    apply_route(dais_bin, etcd_server, tmp_path, "kind: route\nname: ident\n"
                "versions: [{version: 1, weight: 100}]\ntimeout_ms: 3000\ntry_timeout_ms: 100\n")
    g = gateway("--eject-after", "2")
    url = g.url + "/v2/models/ident/infer"
    s = requests.Session()
    wait_for(lambda: s.post(url, json=IDENTITY_BODY, timeout=5).status_code == 200, 20,
             "the route")
    nodes = []
    for _ in range(30):
        r = s.post(url, json=IDENTITY_BODY, timeout=10)
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["data"] == [1, 2]
        nodes.append(r.headers["x-dais-node"])
    # Every answer came from the fast node: n2's tries were abandoned after 100 ms.
    assert set(nodes) == {"n1"}, nodes
    metrics = s.get(g.url + "/metrics", timeout=5).text
    assert 'dais_gateway_upstream_requests_total{node="n2",outcome="timeout"}' in metrics
    assert 'dais_gateway_ejections_total{node="n2"}' in metrics, "two timeouts in a row eject n2"
    assert 'dais_gateway_retries_total{route="ident"}' in metrics
    # A model only the slow node serves: the request's own timeout (no other node) is a 504.
    apply_route(dais_bin, etcd_server, tmp_path, "kind: route\nname: ident_slow\n"
                "versions: [{version: 1, weight: 100}]\ntimeout_ms: 150\n")
    wait_for(lambda: s.post(g.url + "/v2/models/ident_slow/infer", json=IDENTITY_BODY,
                            timeout=5).status_code == 504, 20, "a 504 from the route's timeout")
    # A gRPC client's deadline shorter than the route's timeout is the one kept.
    apply_route(dais_bin, etcd_server, tmp_path, "kind: route\nname: ident_slow\n"
                "versions: [{version: 1, weight: 100}]\ntimeout_ms: 5000\n")
    c = GrpcClient(stubs, g.grpc_port)
    try:
        req = c.request("ident_slow", {"INPUT0": np.array([[1, 2]], dtype=np.int32)},
                        datatype="INT32")
        wait_for(lambda: c.stub.ModelReady(c.pb.ModelReadyRequest(name="ident_slow"),
                                           timeout=5).ready, 20, "ident_slow through gRPC")
        before = timeouts(s, g, "n2", ("timeout", "cancelled"))
        with pytest.raises(grpc.RpcError) as e:
            c.stub.ModelInfer(req, timeout=0.15)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # The gateway gave up on the node too: by its own timer (from the client's grpc-timeout)
        # or by the client's RST_STREAM at its deadline, whichever reached it first.
        wait_for(lambda: timeouts(s, g, "n2", ("timeout", "cancelled")) > before, 10,
                 "the gateway's try on n2 ended")
        assert c.stub.ModelInfer(req, timeout=5).model_name == "ident_slow"
    finally:
        c.close()


def timeouts(s, g, node, outcomes=("timeout",)):
    """The gateway's tries on `node` that ended with one of `outcomes`."""
    total = 0.0
    for line in s.get(g.url + "/metrics", timeout=5).text.splitlines():
        for outcome in outcomes:
            if line.startswith('dais_gateway_upstream_requests_total'
                               f'{{node="{node}",outcome="{outcome}"}}'):
                total += float(line.split()[-1])
    return total


def test_with_etcd_away_the_gateway_keeps_routing_and_catches_up(
        two_versions, etcd_server, gateway, dais_bin, tmp_path):  # noqa: F811
    apply_route(dais_bin, etcd_server, tmp_path, CANARY)
    g = gateway()
    url = g.url + "/v2/models/ranker/infer"
    s = requests.Session()
    wait_for(lambda: s.post(url, json=body(), timeout=5).status_code == 200, 20, "the route")
    etcd_server.kill()
    versions = set()
    for _ in range(200):
        r = s.post(url, json=body(), timeout=5)
        assert r.status_code == 200, r.text
        versions.add(r.headers["x-dais-version"])
    assert versions == {"1", "2"}, "the last routes and endpoints kept: both versions answer"
    assert s.get(g.url + "/v2/health/ready", timeout=5).status_code == 200
    etcd_server.start()
    apply_route(dais_bin, etcd_server, tmp_path, "kind: route\nname: ranker\nmodel: mlp_small\n"
                "versions: [{version: 2, weight: 100}]\n")
    # The watch reconnects and sees the change: everyone on version 2.
    wait_for(lambda: all(s.post(url, json=body(), timeout=5).headers.get("x-dais-version") == "2"
                         for _ in range(20)), 30, "the route change after etcd came back")
