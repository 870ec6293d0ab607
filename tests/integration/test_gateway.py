"""Issue 15, `dais gateway`: routes from etcd (weights, sticky users, A/B rules, a stable
fallback), balancing with retries, JWT authentication and tenants with limits. Real etcd, real
`dais node` processes serving two versions of mlp_small, a real gateway process; assignments are
written straight to etcd (the scheduler has its own tests)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import time

import numpy as np
import pytest
import requests

from cluster_util import TTL, Gateway, ctl, instances
from conftest import wait_for

X = {"INPUT__0": np.zeros((1, 16), dtype=np.float32)}


def body():
    return {"inputs": [{"name": "INPUT__0", "shape": [1, 16], "datatype": "FP32",
                        "data": [0.0] * 16}]}


@pytest.fixture
def two_versions(etcd_server, start_server, repo_copy):
    """n1 serves mlp_small version 1, n2 version 2 (a copy of 1), both READY in etcd."""
    shutil.copytree(repo_copy / "mlp_small" / "1", repo_copy / "mlp_small" / "2")
    nodes = {}
    for node, version in (("n1", 1), ("n2", 2)):
        nodes[node] = start_server(repo_copy, "--etcd", etcd_server.endpoint, "--node-id", node,
                                   "--lease-ttl-secs", str(TTL), command="node")
        etcd_server.ctl("put", f"/dais/assignments/{node}/mlp_small", json.dumps(
            {"deployment": f"ranker-v{version}", "model": "mlp_small", "version": version}))
    wait_for(lambda: sorted((i["node"], i["version"], i["state"]) for i in
                            instances(etcd_server, "mlp_small").values()) ==
             [("n1", "1", "READY"), ("n2", "2", "READY")], 60, "v1 on n1 and v2 on n2 READY")
    return nodes


@pytest.fixture
def gateway(etcd_server, dais_bin, tmp_path):
    started = []

    def start(*extra, name="g1"):
        g = Gateway(dais_bin, etcd_server, tmp_path, *extra, name=name)
        started.append(g)
        wait_for(lambda: requests.get(g.url + "/v2/health/ready", timeout=5).status_code == 200,
                 20, "the gateway ready")
        return g

    yield start
    for g in started:
        g.stop()
        print(f"--- gateway log:\n{g.log()[-3000:]}")


def apply_route(dais_bin, etcd, tmp_path, text):
    path = tmp_path / f"route-{time.monotonic_ns()}.yaml"
    path.write_text(text)
    return ctl(dais_bin, etcd, "apply", "-f", str(path))


CANARY = """kind: route
name: ranker
model: mlp_small
versions: [{version: 1, weight: 90}, {version: 2, weight: 10}]
stable: 1
sticky_header: x-user
match: [{header: x-group, value: beta, version: 2}]
"""


def test_weights_sticky_users_rules_and_path_versions(two_versions, etcd_server, gateway,
                                                      dais_bin, tmp_path, start_server,
                                                      repo_copy):
    # Three nodes (v1 on n1 and n3, v2 on n2), two gateways.
    two_versions["n3"] = start_server(repo_copy, "--etcd", etcd_server.endpoint, "--node-id",
                                      "n3", "--lease-ttl-secs", str(TTL), command="node")
    etcd_server.ctl("put", "/dais/assignments/n3/mlp_small", json.dumps(
        {"deployment": "ranker-v1b", "model": "mlp_small", "version": 1}))
    wait_for(lambda: instances(etcd_server, "mlp_small").get("n3", {}).get("state") == "READY",
             60, "v1 on n3 READY")
    apply_route(dais_bin, etcd_server, tmp_path, CANARY)
    gateways = [gateway(), gateway(name="g2")]
    g = gateways[0]
    url = g.url + "/v2/models/ranker/infer"
    s = requests.Session()
    for gw in gateways:
        wait_for(lambda: s.post(gw.url + "/v2/models/ranker/infer", json=body(),
                                timeout=5).status_code == 200, 20, "the route")
    counts = {"1": 0, "2": 0}
    nodes = {"1": set(), "2": set()}
    n = 10000
    for i in range(n):
        r = s.post(gateways[i % 2].url + "/v2/models/ranker/infer", json=body(), timeout=5)
        assert r.status_code == 200, r.text
        version = r.headers["x-dais-version"]
        counts[version] += 1
        nodes[version].add(r.headers["x-dais-node"])
    share = counts["2"] / n
    print(f"canary share over {n} requests through two gateways: {share:.3%} (configured 10 %)")
    assert abs(share - 0.10) <= 0.02, counts
    assert nodes == {"1": {"n1", "n3"}, "2": {"n2"}}, nodes
    # Sticky users: 300 users, 3 requests each, never change version.
    seen = {}
    for u in range(300):
        for _ in range(3):
            r = s.post(url, json=body(), headers={"x-user": f"user-{u}"}, timeout=5)
            seen.setdefault(u, set()).add(r.headers["x-dais-version"])
    assert all(len(v) == 1 for v in seen.values()), "a sticky user changed version"
    on_canary = sum(v == {"2"} for v in seen.values())
    assert 10 <= on_canary <= 60, on_canary
    # A/B rule and an explicit version.
    r = s.post(url, json=body(), headers={"x-group": "beta"}, timeout=5)
    assert r.headers["x-dais-version"] == "2"
    r = s.post(g.url + "/v2/models/ranker/versions/2/infer", json=body(), timeout=5)
    assert r.status_code == 200 and r.headers["x-dais-version"] == "2"
    # Metadata and readiness pass through; an unknown alias is 404 naming it.
    assert s.get(g.url + "/v2/models/ranker/ready", timeout=5).status_code == 200
    assert s.get(g.url + "/v2/models/ranker", timeout=5).json()["name"] == "mlp_small"
    r = s.post(g.url + "/v2/models/nosuch/infer", json=body(), timeout=5)
    assert r.status_code == 404 and "nosuch" in r.json()["error"]
    metrics = s.get(g.url + "/metrics", timeout=5).text
    assert 'dais_gateway_requests_total{route="ranker",version="2",tenant="anonymous",code="200"}' \
        in metrics


def test_a_killed_node_falls_back_to_the_stable_version(two_versions, etcd_server, gateway,
                                                        dais_bin, tmp_path):
    apply_route(dais_bin, etcd_server, tmp_path, CANARY.replace("weight: 90", "weight: 50")
                .replace("weight: 10", "weight: 50"))
    g = gateway("--eject-after", "2")
    url = g.url + "/v2/models/ranker/infer"
    s = requests.Session()
    wait_for(lambda: s.post(url, json=body(), timeout=5).status_code == 200, 20, "the route")
    two_versions["n2"].signal(signal.SIGKILL)  # v2's only node; etcd still says READY for a TTL
    two_versions["n2"].wait(10)  # dead: a request sent while it was dying could be lost
    failures, fallbacks = [], 0
    for _ in range(200):
        r = s.post(url, json=body(), timeout=10)
        if r.status_code != 200:
            failures.append((r.status_code, r.text))
        if r.status_code == 200:
            assert r.headers["x-dais-version"] == "1"
            fallbacks += r.headers.get("x-dais-fallback") == "stable"
    assert not failures, f"nothing was in flight on n2 when it died: no request may fail {failures}"
    assert fallbacks > 0
    metrics = s.get(g.url + "/metrics", timeout=5).text
    assert 'dais_gateway_fallbacks_total{route="ranker"}' in metrics
    assert 'outcome="connect_failed"' in metrics


def jwk_hs(kid, secret):
    return {"kty": "oct", "kid": kid, "alg": "HS256",
            "k": base64.urlsafe_b64encode(secret).rstrip(b"=").decode()}


def test_jwt_authentication_tenants_and_limits(two_versions, etcd_server, gateway, dais_bin,
                                               tmp_path):
    import jwt  # Debian python3-jwt (scripts/setup.sh installs it)
    from cryptography.hazmat.primitives.asymmetric import rsa
    secret = os.urandom(32)
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pub = rsa_key.public_key().public_numbers()

    def b64(n):
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [
        jwk_hs("hs-1", secret),
        {"kty": "RSA", "kid": "rs-1", "alg": "RS256", "n": b64(pub.n), "e": b64(pub.e)}]}))
    apply_route(dais_bin, etcd_server, tmp_path, CANARY)
    apply_route(dais_bin, etcd_server, tmp_path, "kind: tenant\nname: shop\nmodels: [ranker]\n"
                "requests_per_second: 2\nburst: 5\n")
    apply_route(dais_bin, etcd_server, tmp_path, "kind: tenant\nname: lab\nmodels: [other]\n")
    g = gateway("--jwks", str(jwks), "--jwt-issuer", "https://id.example", "--jwt-audience", "dais")
    url = g.url + "/v2/models/ranker/infer"
    now = int(time.time())
    claims = {"iss": "https://id.example", "aud": "dais", "exp": now + 600, "tenant": "shop",
              "sub": "u1"}

    def call(token, **kw):
        headers = {} if token is None else {"authorization": f"Bearer {token}"}
        return requests.post(url, json=body(), headers=headers, timeout=5, **kw)

    rs = jwt.encode(claims, rsa_key, algorithm="RS256", headers={"kid": "rs-1"})
    wait_for(lambda: call(rs).status_code == 200, 20, "an RS256 token accepted")
    # The attack set: each refused with 401 naming the reason, never forwarded.
    cases = {
        "missing": None,
        "expired": jwt.encode({**claims, "exp": now - 3600}, secret, algorithm="HS256",
                              headers={"kid": "hs-1"}),
        "wrong_audience": jwt.encode({**claims, "aud": "other"}, secret, algorithm="HS256",
                                     headers={"kid": "hs-1"}),
        "wrong_issuer": jwt.encode({**claims, "iss": "evil"}, secret, algorithm="HS256",
                                   headers={"kid": "hs-1"}),
        "unsupported_alg": jwt.encode(claims, None, algorithm="none", headers={"kid": "hs-1"}),
        "bad_signature": jwt.encode(claims, os.urandom(32), algorithm="HS256",
                                    headers={"kid": "hs-1"}),
        "unknown_key": jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "nope"}),
        "alg_mismatch": jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "rs-1"}),
        "no_tenant": jwt.encode({k: v for k, v in claims.items() if k != "tenant"}, secret,
                                algorithm="HS256", headers={"kid": "hs-1"}),
    }
    for reason, token in cases.items():
        r = call(token)
        assert r.status_code == 401, (reason, r.status_code, r.text)
        assert reason in r.headers.get("www-authenticate", ""), (reason, r.headers)
    metrics = requests.get(g.url + "/metrics", timeout=5).text
    for reason in cases:
        assert f'dais_gateway_auth_failures_total{{reason="{reason}"}} 1' in metrics, reason
    # A tenant may only call its models; an unknown tenant is refused.
    lab = jwt.encode({**claims, "tenant": "lab"}, secret, algorithm="HS256", headers={"kid": "hs-1"})
    r = call(lab)
    assert r.status_code == 403 and "may not call 'ranker'" in r.json()["error"]
    ghost = jwt.encode({**claims, "tenant": "ghost"}, secret, algorithm="HS256",
                       headers={"kid": "hs-1"})
    assert call(ghost).status_code == 403
    # The token bucket: burst 5 at 2/s, then 429 with Retry-After.
    hs = jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "hs-1"})
    codes = [call(hs).status_code for _ in range(12)]
    assert 429 in codes and codes.count(200) <= 7, codes
    limited = next(r for r in (call(hs) for _ in range(5)) if r.status_code == 429)
    assert int(limited.headers["retry-after"]) >= 1
    metrics = requests.get(g.url + "/metrics", timeout=5).text
    assert 'dais_gateway_rate_limited_total{tenant="shop"}' in metrics
    # Issue 31: refusals of a known alias count under that route, not route="-".
    assert 'dais_gateway_requests_total{route="ranker",version="-",tenant="shop",code="429"}' \
        in metrics, [m for m in metrics.splitlines() if "code=\"429\"" in m]
    # Issue 31: two Authorization headers are ambiguous (400), not use-first.
    import http.client
    conn = http.client.HTTPConnection(g.url.split("//")[1], timeout=5)
    conn.putrequest("POST", "/v2/models/ranker/infer")
    conn.putheader("Authorization", f"Bearer {hs}")
    conn.putheader("Authorization", "Bearer forged")
    payload = json.dumps(body()).encode()
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(payload)))
    conn.endheaders(payload)
    r2 = conn.getresponse()
    answer = json.loads(r2.read())
    conn.close()
    assert r2.status == 400 and "Authorization header came 2 times" in answer["error"], answer
    # Issue 31: a tenant without a rate has no limit, and `ctl get tenants` says so.
    tenants = ctl(dais_bin, etcd_server, "get", "tenants").stdout
    lab_row = next(line for line in tenants.splitlines() if line.startswith("lab"))
    assert "unlimited" in lab_row and lab_row.split()[-1] == "-", tenants
    shop_row = next(line for line in tenants.splitlines() if line.startswith("shop"))
    assert shop_row.split()[-2:] == ["2", "5"], tenants
    # The JWKS file is reloaded when it changes: a new key works without a restart.
    secret2 = os.urandom(32)
    jwks.write_text(json.dumps({"keys": [jwk_hs("hs-2", secret2)]}))
    token2 = jwt.encode({**claims, "tenant": "lab"}, secret2, algorithm="HS256",
                        headers={"kid": "hs-2"})
    wait_for(lambda: call(token2).status_code == 403, 10, "the new key accepted (lab: 403)")


def test_bad_routes_and_tenants_are_refused_naming_the_field(etcd_server, dais_bin, tmp_path):
    for text, why in [
        ("kind: route\nname: r\nversions: [{version: 1, weight: 80}]\n", "sum to 80"),
        ("kind: route\nname: r\nversions: [{version: 1, weight: 100}]\nstable: 3\n", "stable"),
        ("kind: tenant\nname: t\nrequests_per_second: -1\n", "requests_per_second"),
        ("kind: gizmo\nname: x\n", "kind: 'gizmo'"),
    ]:
        path = tmp_path / "bad.yaml"
        path.write_text(text)
        r = ctl(dais_bin, etcd_server, "apply", "-f", str(path), check=False)
        assert r.returncode != 0 and why in r.stderr, (text, r.stderr)
    assert etcd_server.get_prefix("/dais/routes/") == {}
    assert etcd_server.get_prefix("/dais/tenants/") == {}


def test_bad_rollouts_are_refused_naming_the_field(etcd_server, dais_bin, tmp_path):
    apply_route(dais_bin, etcd_server, tmp_path,
                "kind: route\nname: ranker\nmodel: mlp_small\nversions: [{version: 1, weight: 100}]\n")
    route_before = etcd_server.get_prefix("/dais/routes/")
    good = ["--to", "2", "--steps", "5,50,100", "--interval", "30s", "--max-error-rate", "1%",
            "--max-p99-ms", "150"]

    def with_arg(flag, value):
        args = list(good)
        args[args.index(flag) + 1] = value
        return args

    for route, args, why in [
        ("ranker", with_arg("--steps", "5,50"), "steps: must end at 100"),
        ("ranker", with_arg("--steps", "50,20,100"), "steps: 20"),
        ("ranker", with_arg("--interval", "soon"), "--interval 'soon'"),
        ("ranker", with_arg("--max-error-rate", "150%"), "max-error-rate: 0 to 100 %"),
        ("ranker", with_arg("--to", "1"), "already the stable one"),
        ("nosuch", good, "nosuch"),
    ]:
        r = ctl(dais_bin, etcd_server, "rollout", "start", route, *args, check=False)
        assert r.returncode != 0 and why in r.stderr, (args, r.stderr)
    assert etcd_server.get_prefix("/dais/rollouts/") == {}
    assert etcd_server.get_prefix("/dais/routes/") == route_before


def test_shadow_traffic_and_the_access_log(two_versions, etcd_server, gateway, dais_bin,
                                           tmp_path):
    apply_route(dais_bin, etcd_server, tmp_path,
                "kind: route\nname: ranker\nmodel: mlp_small\n"
                "versions: [{version: 1, weight: 100}]\nshadow: {version: 2, percent: 50}\n")
    log = tmp_path / "access.jsonl"
    g = gateway("--access-log", str(log))
    url = g.url + "/v2/models/ranker/infer"
    s = requests.Session()
    wait_for(lambda: s.post(url, json=body(), timeout=5).status_code == 200, 20, "the route")
    for _ in range(200):
        r = s.post(url, json=body(), timeout=5)
        assert r.status_code == 200 and r.headers["x-dais-version"] == "1", "answers come from v1"
    mirrored = wait_for(lambda: (m := [line for line in requests.get(
        g.url + "/metrics", timeout=5).text.splitlines() if line.startswith(
        'dais_gateway_shadow_requests_total{route="ranker",version="2",outcome="ok"}')]) and
        float(m[0].split()[-1]), 10, "mirrored requests counted")
    assert 60 <= mirrored <= 140, f"{mirrored} of ~200 mirrored at 50 %"
    r = s.post(g.url + "/v2/models/ranker/infer", data=b"{not json", timeout=5)
    assert r.status_code == 400
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(entries) >= 202, len(entries)
    ok = entries[-2]
    assert ok["route"] == "ranker" and ok["model"] == "mlp_small" and ok["version"] == 1
    assert ok["status"] == 200 and ok["node"] == "n1" and ok["tries"] == 1
    assert ok["tenant"] == "anonymous" and ok["duration_ms"] > 0 and ok["request_bytes"] > 0
    assert entries[-1]["status"] == 400


def test_a_gateway_that_never_reached_etcd_answers_503_naming_etcd(dais_bin, tmp_path):
    """Issue 31: it answered 404 "no route" (it knows no routes because it never read them)."""
    from types import SimpleNamespace

    from conftest import free_port
    nowhere = SimpleNamespace(endpoint=f"127.0.0.1:{free_port()}")  # nothing listens there
    gw = Gateway(dais_bin, nowhere, tmp_path)
    try:
        r = requests.post(gw.url + "/v2/models/ranker/infer", json=body(), timeout=10)
        assert r.status_code == 503, (r.status_code, r.text)
        assert "etcd" in r.json()["error"] and nowhere.endpoint in r.json()["error"], r.text
        assert requests.get(gw.url + "/v2/health/ready", timeout=5).status_code == 503
    finally:
        gw.stop()


def test_an_invalid_document_in_etcd_keeps_the_last_good_one(two_versions, etcd_server, gateway,
                                                             dais_bin, tmp_path):
    """Issue 32: a route or tenant written straight into etcd that does not parse replaced the
    last good one (the alias answered 404, the tenant vanished, nothing logged)."""
    apply_route(dais_bin, etcd_server, tmp_path, CANARY.replace("weight: 90", "weight: 100")
                .replace(", {version: 2, weight: 10}", "").replace(
                    "match: [{header: x-group, value: beta, version: 2}]\n", ""))
    g = gateway()
    url = g.url + "/v2/models/ranker/infer"
    wait_for(lambda: requests.post(url, json=body(), timeout=5).status_code == 200, 20,
             "the route served")
    etcd_server.ctl("put", "/dais/routes/ranker", '{"name": "ranker", "versions": "lots"}')
    etcd_server.ctl("put", "/dais/tenants/shop", '{"name": "shop", "requests_per_second": -1}')
    wait_for(lambda: 'dais_gateway_config_refused_total{kind="route"} 1' in
             requests.get(g.url + "/metrics", timeout=5).text, 10, "the bad route counted")
    assert requests.post(url, json=body(), timeout=5).status_code == 200, "the good route stays"
    metrics = requests.get(g.url + "/metrics", timeout=5).text
    assert 'dais_gateway_config_refused_total{kind="tenant"} 1' in metrics
    assert "refusing the route at /dais/routes/ranker" in g.log()


def test_a_forwarding_loop_is_refused_with_508(etcd_server, gateway):
    """Issue 32: a node entry pointing at the gateway made it forward to itself until the
    connection cap. Each gateway counts itself in x-dais-hops; at 4 the request is refused."""
    g = gateway()
    address = g.url.split("//")[1]
    etcd_server.ctl("put", "/dais/nodes/gw", json.dumps({"node": "gw", "http": address}))
    etcd_server.ctl("put", "/dais/instances/gw/loop", json.dumps(
        {"node": "gw", "model": "loop", "version": "1", "state": "READY"}))
    url = g.url + "/v2/models/loop/infer"
    # (a Response of a 5xx is falsy: wait for the pair)
    code, text = wait_for(lambda: (r := requests.post(url, json=body(), timeout=10)).status_code
                          != 404 and (r.status_code, r.text), 20, "the loop model routed")
    assert code == 508, (code, text)
    assert "forwarding loop" in json.loads(text)["error"], text
    r = requests.post(url, json=body(), headers={"x-dais-hops": "4"}, timeout=10)
    assert r.status_code == 508
