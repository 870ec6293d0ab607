"""Issue 15, `dais gateway` over gRPC, and a node killed under load: Python grpcio stubs (as
tritonclient's gRPC client uses them) call the gateway exactly as they would call a node, through
the same routes, tenants and retries as HTTP. Real etcd, real `dais node` processes, a real
gateway process."""

from __future__ import annotations

import base64
import json
import os
import queue
import signal
import threading
import time

import grpc
import numpy as np
import pytest
import requests

import grpc_client
from cluster_util import TTL, instances
from conftest import wait_for
from grpc_client import GrpcClient, decode_outputs
from test_gateway import CANARY, apply_route, body, gateway, two_versions  # noqa: F401 fixtures

SC = grpc.StatusCode
X = {"INPUT__0": np.arange(16, dtype=np.float32).reshape(1, 16) / 16}


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    return grpc_client.generate_stubs(tmp_path_factory.mktemp("grpc_stubs"))


def infer(c, model="ranker", metadata=(), version="", timeout=10):
    """(response, {initial metadata}) of one ModelInfer through the gateway."""
    resp, call = c.stub.ModelInfer.with_call(c.request(model, X, version=version),
                                             metadata=metadata, timeout=timeout)
    return resp, dict(call.initial_metadata())


def test_grpc_clients_work_through_the_gateway(two_versions, etcd_server, gateway,  # noqa: F811
                                               dais_bin, tmp_path, stubs):
    apply_route(dais_bin, etcd_server, tmp_path, CANARY)
    g = gateway()
    assert g.grpc_port, g.log()
    c = GrpcClient(stubs, g.grpc_port)
    direct = GrpcClient(stubs, two_versions["n1"].grpc_port)
    try:
        wait_for(lambda: infer(c)[0].model_name == "mlp_small", 20, "the route over gRPC")
        expected = decode_outputs(direct.infer("mlp_small", X, version="1"))["OUTPUT__0"]
        # Weights and sticky users: each user stays on one version; the answer is the node's.
        seen = {}
        for i in range(400):
            resp, md = infer(c, metadata=(("x-user", f"user-{i % 40}"),))
            assert resp.model_name == "mlp_small" and resp.model_version == md["x-dais-version"]
            assert md["x-dais-node"] == {"1": "n1", "2": "n2"}[resp.model_version]
            seen.setdefault(i % 40, set()).add(resp.model_version)
            np.testing.assert_allclose(decode_outputs(resp)["OUTPUT__0"], expected, rtol=1e-5)
        assert all(len(v) == 1 for v in seen.values()), "a sticky user changed version"
        # An explicit version and the A/B rule.
        assert infer(c, version="2")[0].model_version == "2"
        assert infer(c, metadata=(("x-group", "beta"),))[0].model_version == "2"
        # Model methods by alias; the server's own methods and health answered by the gateway.
        assert c.stub.ModelReady(c.pb.ModelReadyRequest(name="ranker"), timeout=10).ready
        meta = c.stub.ModelMetadata(c.pb.ModelMetadataRequest(name="ranker"), timeout=10)
        assert meta.name == "mlp_small" and meta.inputs[0].name == "INPUT__0"
        assert c.stub.ServerLive(c.pb.ServerLiveRequest(), timeout=10).live
        assert c.stub.ServerReady(c.pb.ServerReadyRequest(), timeout=10).ready
        health = c.health.Check(c.s.health_pb.HealthCheckRequest(), timeout=10)
        assert health.status == c.s.health_pb.HealthCheckResponse.SERVING
        # Bad requests: named, never forwarded.
        with pytest.raises(grpc.RpcError) as e:
            infer(c, model="nosuch")
        assert e.value.code() == SC.NOT_FOUND and "nosuch" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            infer(c, version="abc")
        assert e.value.code() == SC.INVALID_ARGUMENT and "abc" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            c.stub.ModelInfer(c.pb.ModelInferRequest(), timeout=10)
        assert e.value.code() == SC.INVALID_ARGUMENT and "no model" in e.value.details()
        # A stream: every request of it on the first request's version and node.
        reqs = [c.request("ranker", X, id=f"s{i}") for i in range(6)]
        resps = list(c.stub.ModelStreamInfer(iter(reqs), metadata=(("x-user", "user-7"),),
                                             timeout=30))
        assert [r.error_message for r in resps] == [""] * 6, resps
        assert sorted(r.infer_response.id for r in resps) == [f"s{i}" for i in range(6)]
        assert {r.infer_response.model_version for r in resps} == seen[7]
        # A stream naming a second model is ended naming both.
        mixed = [c.request("ranker", X), c.request("other", X)]
        with pytest.raises(grpc.RpcError) as e:
            list(c.stub.ModelStreamInfer(iter(mixed), timeout=30))
        assert e.value.code() == SC.INVALID_ARGUMENT and "'other'" in e.value.details()
    finally:
        c.close()
        direct.close()
    metrics = requests.get(g.url + "/metrics", timeout=5).text
    assert 'dais_gateway_requests_total{route="ranker",version="2",tenant="anonymous",code="200"}' \
        in metrics


def test_grpc_authentication_and_limits(two_versions, etcd_server, gateway,  # noqa: F811
                                        dais_bin, tmp_path, stubs):
    import jwt
    secret = os.urandom(32)
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{
        "kty": "oct", "kid": "k1", "alg": "HS256",
        "k": base64.urlsafe_b64encode(secret).rstrip(b"=").decode()}]}))
    apply_route(dais_bin, etcd_server, tmp_path, CANARY)
    apply_route(dais_bin, etcd_server, tmp_path, "kind: tenant\nname: shop\nmodels: [ranker]\n"
                "requests_per_second: 1\nburst: 3\n")
    g = gateway("--jwks", str(jwks))
    claims = {"exp": int(time.time()) + 600, "tenant": "shop"}
    token = jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "k1"})
    bearer = (("authorization", f"Bearer {token}"),)
    c = GrpcClient(stubs, g.grpc_port)
    try:
        with pytest.raises(grpc.RpcError) as e:
            infer(c)
        assert e.value.code() == SC.UNAUTHENTICATED and "bearer token" in e.value.details()
        forged = jwt.encode(claims, os.urandom(32), algorithm="HS256", headers={"kid": "k1"})
        with pytest.raises(grpc.RpcError) as e:
            infer(c, metadata=(("authorization", f"Bearer {forged}"),))
        assert e.value.code() == SC.UNAUTHENTICATED and "signature" in e.value.details()
        wait_for(lambda: infer(c, metadata=bearer)[0].model_name == "mlp_small", 20,
                 "the token accepted")
        codes = []
        for _ in range(8):
            try:
                infer(c, metadata=bearer)
                codes.append(SC.OK)
            except grpc.RpcError as err:
                codes.append(err.code())
                if err.code() == SC.RESOURCE_EXHAUSTED:
                    trailing = dict(err.trailing_metadata() or ())
                    assert int(trailing["retry-after"]) >= 1, trailing
        assert SC.RESOURCE_EXHAUSTED in codes and codes.count(SC.OK) <= 5, codes
    finally:
        c.close()
    metrics = requests.get(g.url + "/metrics", timeout=5).text
    assert 'dais_gateway_auth_failures_total{reason="missing"} 1' in metrics
    assert 'dais_gateway_auth_failures_total{reason="bad_signature"} 1' in metrics
    assert 'dais_gateway_rate_limited_total{tenant="shop"}' in metrics


@pytest.fixture
def two_nodes_one_version(etcd_server, start_server, repo_copy):
    """n1 and n2 both serve mlp_small version 1, READY in etcd."""
    nodes = {}
    for node in ("n1", "n2"):
        nodes[node] = start_server(repo_copy, "--etcd", etcd_server.endpoint, "--node-id", node,
                                   "--lease-ttl-secs", str(TTL), command="node")
        etcd_server.ctl("put", f"/dais/assignments/{node}/mlp_small", json.dumps(
            {"deployment": "ranker", "model": "mlp_small", "version": 1}))
    wait_for(lambda: sorted((i["node"], i["state"]) for i in
                            instances(etcd_server, "mlp_small").values()) ==
             [("n1", "READY"), ("n2", "READY")], 60, "v1 on n1 and n2 READY")
    return nodes


def run_load(send, workers, seconds_after, kill):
    """Runs `send()` in `workers` threads; calls kill() once 300 requests went through, keeps
    going `seconds_after` more seconds. Returns (ok count, [errors])."""
    stop = threading.Event()
    done, errors = queue.Queue(), queue.Queue()

    def worker():
        while not stop.is_set():
            try:
                send()
                done.put(1)
            except Exception as e:  # noqa: BLE001 - every failure is what the test counts
                errors.put(repr(e))

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    wait_for(lambda: done.qsize() >= 300 or not errors.empty(), 60, "300 requests")
    kill()
    deadline = time.monotonic() + seconds_after
    wait_for(lambda: time.monotonic() > deadline, seconds_after + 5, "load after the kill")
    stop.set()
    for t in threads:
        t.join(30)
    return done.qsize(), list(errors.queue)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_node_killed_under_load_fails_at_most_its_requests_in_flight(
        protocol, two_nodes_one_version, etcd_server, gateway, dais_bin, tmp_path,  # noqa: F811
        stubs):
    apply_route(dais_bin, etcd_server, tmp_path, "kind: route\nname: ranker\nmodel: mlp_small\n"
                "versions: [{version: 1, weight: 100}]\n")
    g = gateway()
    workers = 8
    local = threading.local()

    def send_http():
        s = getattr(local, "s", None) or requests.Session()
        local.s = s
        r = s.post(g.url + "/v2/models/ranker/infer", json=body(), timeout=10)
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.text}")

    clients = []

    def send_grpc():
        c = getattr(local, "c", None)
        if c is None:
            c = local.c = GrpcClient(stubs, g.grpc_port)
            clients.append(c)
        infer(c)

    send = send_http if protocol == "http" else send_grpc
    wait_for(lambda: requests.post(g.url + "/v2/models/ranker/infer", json=body(),
                                   timeout=5).status_code == 200, 20, "the route")
    victim = two_nodes_one_version["n2"]
    ok, errors = run_load(send, workers, 2.0, lambda: victim.signal(signal.SIGKILL))
    for c in clients:
        c.close()
    print(f"{protocol}: {ok} answered, {len(errors)} failed after kill -9 of n2: {errors[:3]}")
    assert ok > 300
    # At most what n2 had in flight: one request per worker at a time.
    assert len(errors) <= workers, errors
    metrics = requests.get(g.url + "/metrics", timeout=5).text
    assert 'dais_gateway_upstream_requests_total{node="n1",outcome="ok"}' in metrics


def test_a_cancelled_call_cancels_the_nodes_call(etcd_server, start_server, model_repo, gateway,
                                                 stubs, tmp_path):
    """Issue 37: a client that cancels its gRPC call through the gateway cancels the node's call
    too, so requests still queued there are dropped, not run (mlp_heavy holds a lone request
    400 ms in its queue)."""
    from conftest import metric_value, parse_prometheus
    from test_grpc import heavy_stats, make_slow_repo
    repo = make_slow_repo(model_repo, tmp_path)
    node = start_server(repo, "--etcd", etcd_server.endpoint, "--node-id", "n1",
                        "--lease-ttl-secs", str(TTL), command="node")
    etcd_server.ctl("put", "/dais/assignments/n1/mlp_heavy", json.dumps(
        {"deployment": "heavy", "model": "mlp_heavy", "version": 1}))
    wait_for(lambda: instances(etcd_server, "mlp_heavy").get("n1", {}).get("state") == "READY",
             60, "mlp_heavy READY on n1")
    g = gateway()
    c, direct = GrpcClient(stubs, g.grpc_port), GrpcClient(stubs, node.grpc_port)
    x = {"INPUT__0": np.linspace(0, 1, 256, dtype=np.float32).reshape(1, 256)}
    c.infer("mlp_heavy", x, timeout=20)  # routed: the gateway knows the instance
    before = heavy_stats(direct).success.count

    def pending():
        return metric_value(parse_prometheus(node.metrics()), "dais_pending_requests",
                            model="mlp_heavy") or 0

    futs = [c.stub.ModelInfer.future(c.request("mlp_heavy", x), timeout=20) for _ in range(4)]
    wait_for(lambda: pending() == 4, 10, "the four calls queued at the node")
    for f in futs:
        assert f.cancel(), "the call finished before it could be cancelled"
    wait_for(lambda: pending() == 0, 10, "the node's calls cancelled")
    assert heavy_stats(direct).success.count == before  # dropped from the queue, not run
    # Each try settled (the balancer's in-flight count released), not as the node's failure.
    wait_for(lambda: metric_value(parse_prometheus(requests.get(g.url + "/metrics", timeout=5)
                                                   .text), "dais_gateway_upstream_requests_total",
                                  node="n1", outcome="cancelled") == 4, 10,
             "four cancelled tries settled")
    assert c.infer("mlp_heavy", x, timeout=20).outputs  # still serving
    c.close()
    direct.close()
