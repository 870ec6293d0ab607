"""Vector memory in a cluster (issue 34, docs/memory.md "In a cluster"): a collection declared with
`dais ctl apply` (kind: collection), its shard replicas placed by the scheduler on different
nodes, each node loading its shards from Redis; searches through the gateway fanned out over
the shards and merged, tenancy by the gateway's JWT tenants, and a node killed with SIGKILL under
search load: no search fails, the lost replicas are placed again on the node left and the answers
stay the same. Real etcd, Redis, scheduler, nodes and gateway."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest
import requests

from cluster_util import TTL, Gateway, Scheduler, apply, ctl
from conftest import wait_for

DIM = 16


def spec(name="items", tenant="shop", shards=2, replicas=2, extra=""):
    return (f"kind: collection\nname: {name}\ntenant: {tenant}\ndimension: {DIM}\n"
            f"metric: cosine\nshards: {shards}\nreplicas: {replicas}\n"
            "payload: {category: string, price: number}\n"
            "resources: {cpu_milli: 100, memory_mib: 64}\n" + extra)


def points(n, seed=3):
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    return [{"id": f"p{i}", "vector": vecs[i].tolist(),
             "payload": {"category": "ab"[i % 2], "price": float(i)}} for i in range(n)], vecs


def exact(vecs, q, k, allowed=lambda i: True):
    v = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    scores = v @ (q / np.linalg.norm(q))
    return [f"p{i}" for i in np.argsort(-scores) if allowed(i)][:k]


def shard_of(point_id, shards):
    """memory::ShardOf: FNV-1a 64 of the id's bytes modulo the shard count."""
    h = 14695981039346656037
    for b in point_id.encode():
        h = ((h ^ b) * 1099511628211) % (1 << 64)
    return h % shards


def caught_up(servers, ids, shards=2, name="items"):
    """Every live node holds, for the shards it holds, exactly the points of `ids` there."""
    for srv in servers:
        d = srv.get(f"/v2/memory/collections/{name}")
        if d.status_code == 404:
            continue  # holds no shard of it
        if d.status_code != 200:
            return False
        held = d.json()["held_shards"]
        if d.json()["points"] != sum(1 for i in ids if shard_of(i, shards) in held):
            return False
    return True


def shard_nodes(etcd, name):
    """{shard: sorted READY nodes} from the instance states."""
    out = {}
    for value in etcd.get_prefix("/dais/instances/").values():
        v = json.loads(value)
        if v["model"].startswith(f"memory:{name}:") and v["state"] == "READY":
            out.setdefault(int(v["model"].rsplit(":", 1)[1]), []).append(v["node"])
    return {s: sorted(n) for s, n in out.items()}


@pytest.fixture
def cluster(etcd_server, redis_server, start_server, dais_bin, tmp_path):
    def start(nodes, *gateway_args):
        repo = tmp_path / "repo"
        repo.mkdir(exist_ok=True)
        sched = Scheduler(dais_bin, etcd_server, "s1", tmp_path)
        servers = {n: start_server(repo, "--etcd", etcd_server.endpoint, "--node-id", n,
                                   "--lease-ttl-secs", str(TTL), "--memory", "--redis",
                                   redis_server.addr, command="node") for n in nodes}
        g = Gateway(dais_bin, etcd_server, tmp_path, *gateway_args)
        started.extend([sched, g])
        wait_for(lambda: requests.get(g.url + "/v2/health/ready", timeout=5).status_code == 200,
                 20, "the gateway ready")
        return servers, g
    started = []
    yield start
    for p in started:
        p.stop()


def hs256_jwks(tmp_path):
    secret = os.urandom(32)
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{
        "kty": "oct", "kid": "k1", "alg": "HS256",
        "k": base64.urlsafe_b64encode(secret).rstrip(b"=").decode()}]}))
    return path, secret


def test_a_collection_is_placed_searched_through_the_gateway_and_survives_a_node_kill(
        cluster, etcd_server, dais_bin, tmp_path):
    import jwt  # Debian python3-jwt
    jwks, secret = hs256_jwks(tmp_path)
    apply(dais_bin, etcd_server, tmp_path, "kind: tenant\nname: shop\n")
    apply(dais_bin, etcd_server, tmp_path,
          "kind: tenant\nname: lab\nrequests_per_second: 0.01\nburst: 3\n")
    servers, g = cluster(["n1", "n2", "n3"], "--jwks", str(jwks))

    def token(tenant):
        claims = {"exp": int(time.time()) + 600, "tenant": tenant}
        return {"authorization": "Bearer " + jwt.encode(claims, secret, algorithm="HS256",
                                                        headers={"kid": "k1"})}
    shop, lab = token("shop"), token("lab")
    out = apply(dais_bin, etcd_server, tmp_path, spec()).stdout
    assert "collection items applied (2 shard(s) x 2 replica(s))" in out
    # Two READY replicas of each shard, never two of one shard on the same node.
    wait_for(lambda: [len(n) for n in shard_nodes(etcd_server, "items").values()] == [2, 2], 60,
             "both shards on two nodes each")
    table = ctl(dais_bin, etcd_server, "get", "collections").stdout
    assert "items" in table and "2/2" in table, table
    base = g.url + "/v2/memory/collections/items"
    s = requests.Session()
    # Nodes refuse to create collections of their own: the control plane places them.
    node = next(iter(servers.values()))
    r = node.post("/v2/memory/collections", json={"name": "x", "dimension": 2})
    assert r.status_code == 400 and "dais ctl apply" in r.json()["error"]

    pts, vecs = points(400)
    for i in range(0, 400, 100):
        r = s.post(base + "/upsert", json={"points": pts[i:i + 100]}, headers=shop, timeout=10)
        assert r.status_code == 200 and r.json() == {"upserted": 100}, r.text
    q = np.random.default_rng(9).normal(size=DIM).astype(np.float32)
    want = exact(vecs, q, 10)

    def ids(body, headers=shop):
        r = s.post(base + "/search", json=body, headers=headers, timeout=10)
        assert r.status_code == 200, r.text
        return [h["id"] for h in r.json()["results"]]
    # Every replica follows the shards' logs (every 100 ms): then the merged answer is the exact
    # top 10, whichever replicas answer.
    wait_for(lambda: caught_up(servers.values(), [p["id"] for p in pts]), 20,
             "the points on every replica")
    for _ in range(10):  # whichever replicas are picked
        assert ids({"vector": q.tolist(), "k": 10}) == want
    got = ids({"vector": q.tolist(), "k": 5,
               "filter": {"category": {"eq": "a"}, "price": {"lt": 200}}})
    assert got == exact(vecs, q, 5, lambda i: i % 2 == 0 and i < 200)
    r = s.post(base + "/get", json={"ids": ["p1", "p2", "nope"]}, headers=shop, timeout=10)
    assert sorted(h["id"] for h in r.json()["results"]) == ["p1", "p2"]
    # Tenancy: another tenant's token is refused, and so is no token.
    r = s.post(base + "/search", json={"vector": q.tolist(), "k": 3}, headers=lab, timeout=10)
    assert r.status_code == 403 and "lab" in r.json()["error"]
    assert s.post(base + "/search", json={"vector": q.tolist()}, timeout=10).status_code == 401
    listed = s.get(g.url + "/v2/memory/collections", headers=lab, timeout=10).json()
    assert listed == {"collections": []}
    check_grpc(g, shop, lab, q, want, vecs, tmp_path)
    # lab's requests count against its rate (burst 3, then 429).
    codes = [s.post(base + "/search", json={"vector": q.tolist()}, headers=lab,
                    timeout=10).status_code for _ in range(3)]
    assert codes[-1] == 429, codes

    # SIGKILL a node holding replicas while searches run: none fails, answers unchanged.
    held = shard_nodes(etcd_server, "items")
    victim = held[0][0]
    failures, done, stop = [], [0], threading.Event()

    def load():
        local = requests.Session()
        while not stop.is_set():
            r = local.post(base + "/search", json={"vector": q.tolist(), "k": 10},
                           headers=shop, timeout=10)
            got = [h["id"] for h in r.json().get("results", [])] if r.status_code == 200 else []
            if got != want:
                failures.append((r.status_code, r.text[:200]))
            done[0] += 1
    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    wait_for(lambda: done[0] >= 20, 20, "searches running")
    servers[victim].proc.kill()
    before = done[0]
    # The scheduler sees the node's lease expire and places its replicas on the node left.
    wait_for(lambda: all(len(n) == 2 and victim not in n
                         for n in shard_nodes(etcd_server, "items").values())
             and len(shard_nodes(etcd_server, "items")) == 2, 60,
             "the lost replicas placed again and READY")
    wait_for(lambda: done[0] >= before + 50, 30, "searches after the rebuild")
    stop.set()
    for t in threads:
        t.join(15)
    assert failures == [], failures[:5]
    assert ids({"vector": q.tolist(), "k": 10}) == want
    # The point writes after the kill reach the rebuilt replica too.
    r = s.post(base + "/delete", json={"ids": [want[0]]}, headers=shop, timeout=10)
    assert r.status_code == 200, r.text
    alive = [srv for n, srv in servers.items() if n != victim]
    wait_for(lambda: caught_up(alive, [p["id"] for p in pts if p["id"] != want[0]]), 20,
             "the delete on every replica")
    assert ids({"vector": q.tolist(), "k": 10}) == want[1:] + [exact(vecs, q, 11)[10]]
    metrics = s.get(g.url + "/metrics", timeout=10).text
    assert 'dais_gateway_memory_requests_total{collection="items",op="search",code="200"}' \
        in metrics


def check_grpc(g, shop, lab, q, want, vecs, tmp_path):
    """dais.memory.v1.Memory through the gateway: the same fan-out, merge and tenancy."""
    import grpc
    import grpc_client
    stubs = grpc_client.generate_stubs(tmp_path / "stubs")
    pb = stubs.memory_pb
    meta = [("authorization", shop["authorization"])]
    with grpc.insecure_channel(f"127.0.0.1:{g.grpc_port}") as ch:
        stub = stubs.memory_grpc.MemoryStub(ch)
        r = stub.Search(pb.SearchRequest(collection="items", vector=q.tolist(), k=10),
                        metadata=meta, timeout=10)
        assert [h.id for h in r.results] == want
        scores = [h.score for h in r.results]
        assert scores == sorted(scores, reverse=True)
        r = stub.Get(pb.GetRequest(collection="items", ids=["p3", "p4", "nope"]), metadata=meta,
                     timeout=10)
        assert sorted(h.id for h in r.results) == ["p3", "p4"]
        r = stub.Upsert(pb.UpsertRequest(collection="items", points=[
            pb.Point(id="p3", vector=vecs[3].tolist())]), metadata=meta, timeout=10)
        assert r.upserted == 1
        for call, req, metadata, code, named in [
                (stub.Search, pb.SearchRequest(collection="items", vector=[1.0, 2.0]), meta,
                 grpc.StatusCode.INVALID_ARGUMENT, "dimension"),
                (stub.Search, pb.SearchRequest(collection="items", vector=q.tolist()),
                 [("authorization", lab["authorization"])], grpc.StatusCode.PERMISSION_DENIED,
                 "lab"),
                (stub.Search, pb.SearchRequest(collection="nope", vector=q.tolist()), meta,
                 grpc.StatusCode.NOT_FOUND, "nope"),
                (stub.Search, pb.SearchRequest(collection="items", vector=q.tolist()), [],
                 grpc.StatusCode.UNAUTHENTICATED, "bearer")]:
            with pytest.raises(grpc.RpcError) as e:
                call(req, metadata=metadata, timeout=10)
            assert e.value.code() == code and named in e.value.details(), e.value.details()


def test_bad_input_ttl_and_an_unplaceable_shard_through_the_gateway(
        cluster, etcd_server, dais_bin, tmp_path):
    servers, g = cluster(["n1"])
    # Refused at apply: nothing written.
    path = tmp_path / "bad.yaml"
    path.write_text(spec(name="bad", extra="").replace(f"dimension: {DIM}", "dimension: 0"))
    r = ctl(dais_bin, etcd_server, "apply", "-f", str(path), check=False)
    assert r.returncode != 0 and "dimension" in r.stderr + r.stdout
    assert etcd_server.get_prefix("/dais/collections/") == {}
    # replicas 2 on one node: one replica per shard placed, the other pending with a reason.
    apply(dais_bin, etcd_server, tmp_path,
          spec(name="recent", shards=2, replicas=2, extra="ttl: 2s\n"))
    wait_for(lambda: [len(n) for n in shard_nodes(etcd_server, "recent").values()] == [1, 1], 60,
             "each shard on the one node")
    out = subprocess.run([str(dais_bin), "memory", "stats", "--url", g.url], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0 and "recent" in out.stdout and "0:n1 1:n1" in out.stdout, \
        out.stdout + out.stderr
    status = json.loads(etcd_server.get_prefix("/dais/status/memory:recent:0")
                        ["/dais/status/memory:recent:0"])
    assert status["pending"] == 1 and status["reason"], status
    base = g.url + "/v2/memory/collections/recent"
    s = requests.Session()
    vec = [0.1] * DIM
    cases = [
        ("/upsert", {"points": [{"id": "a", "vector": [1.0, 2.0]}]}, "dimension"),
        ("/search", {"vector": vec, "k": 0}, "k"),
        ("/search", {"vector": vec, "k": 100000}, "k"),
        ("/search", {"vector": vec, "filter": {"colour": {"eq": "red"}}}, "colour"),
        ("/upsert", '{"points": [{"id": "a", "vector": [NaN' + ", 0" * (DIM - 1) + "]}]}", ""),
    ]
    for path, body, named in cases:
        kw = {"data": body} if isinstance(body, str) else {"json": body}
        r = s.post(base + path, timeout=10, **kw)
        assert r.status_code == 400, (path, body, r.status_code, r.text)
        assert named in r.json()["error"], r.text
    r = s.post(g.url + "/v2/memory/collections/nope/search", json={"vector": vec}, timeout=10)
    assert r.status_code == 404 and "nope" in r.json()["error"]
    r = s.post(g.url + "/v2/memory/collections", json={"name": "x"}, timeout=10)
    assert r.status_code == 400 and "dais ctl apply" in r.json()["error"]
    # TTL through the cluster: a point is found, then gone after 2 s.
    r = s.post(base + "/upsert", json={"points": [{"id": "t1", "vector": vec}]}, timeout=10)
    assert r.status_code == 200, r.text
    found = lambda: [h["id"] for h in s.post(base + "/search", json={"vector": vec, "k": 1},  # noqa
                                             timeout=10).json()["results"]]
    wait_for(lambda: found() == ["t1"], 10, "the point found")
    wait_for(lambda: found() == [], 10, "the point expired")
    # Deleting the collection lets its shards go on the node.
    ctl(dais_bin, etcd_server, "delete", "collection", "recent")
    wait_for(lambda: shard_nodes(etcd_server, "recent") == {}, 30, "the shards let go")
    node = servers["n1"]
    wait_for(lambda: node.get("/v2/memory/collections").json() == {"collections": []}, 10,
             "the node holds nothing")


def test_a_shard_redis_lost_is_rebuilt_from_the_cold_tier(
        cluster, etcd_server, redis_server, start_server, dais_bin, tmp_path):
    from conftest import redis_call
    snapshots = tmp_path / "cold"
    servers, g = cluster([])  # the node is started here, with the cold tier
    node_args = ["--etcd", etcd_server.endpoint, "--node-id", "n1", "--lease-ttl-secs", str(TTL),
                 "--memory", "--redis", redis_server.addr, "--memory-snapshot-dir",
                 str(snapshots), "--memory-snapshot-secs", "1"]
    repo = tmp_path / "repo"
    node = start_server(repo, *node_args, command="node")
    apply(dais_bin, etcd_server, tmp_path, spec(name="kept", shards=2, replicas=1))
    wait_for(lambda: [len(n) for n in shard_nodes(etcd_server, "kept").values()] == [1, 1], 60,
             "both shards held")
    base = g.url + "/v2/memory/collections/kept"
    pts, vecs = points(60)
    assert requests.post(base + "/upsert", json={"points": pts}, timeout=10).status_code == 200
    q = vecs[7]
    want = exact(vecs, q, 5)
    search = lambda: [h["id"] for h in requests.post(  # noqa: E731
        base + "/search", json={"vector": q.tolist(), "k": 5}, timeout=10).json()["results"]]
    assert search() == want
    node.stop()  # a clean stop writes the snapshots too
    assert sorted(p.name for p in snapshots.glob("kept/dt=*/shard-*.jsonl.gz")) == \
        ["shard-0.jsonl.gz", "shard-1.jsonl.gz"]
    assert redis_call(redis_server.port, "FLUSHALL") == "OK"
    node = start_server(repo, *node_args, command="node")
    wait_for(lambda: [len(n) for n in shard_nodes(etcd_server, "kept").values()] == [1, 1], 60,
             "both shards held again")
    assert "rebuilt from the cold tier" in node.log_text()
    wait_for(lambda: search() == want, 20, "the same answers through the gateway")
    # And the points are back in Redis: a node started on it later finds them there.
    assert redis_call(redis_server.port, "HLEN", "dais:shop:mem:{kept/0}:points") + \
        redis_call(redis_server.port, "HLEN", "dais:shop:mem:{kept/1}:points") == 60
