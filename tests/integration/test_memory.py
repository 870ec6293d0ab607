"""Vector memory on `dais serve` (docs/memory.md): collections created by the CLI and over HTTP,
points loaded from a file, search with payload filters and thresholds, get, delete, TTL expiry,
a restart that restores everything from Redis, the restricted-API group, and bad input refused
with a 4xx that names what was wrong while nothing changes."""
import json
import subprocess
import time

import numpy as np
import requests
import pytest

from conftest import dais_binary, redis_call, wait_for

SPEC = """\
kind: collection
name: items
tenant: shop
dimension: 8
metric: cosine
shards: 3
payload: {category: string, price: number, in_stock: bool}
"""


def points(n, seed=1):
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, 8)).astype(np.float32)
    return [{"id": f"item-{i}", "vector": vecs[i].tolist(),
             "payload": {"category": ["shoes", "hats", "bags"][i % 3], "price": float(i),
                         "in_stock": i % 2 == 0}} for i in range(n)], vecs


def exact(vecs, q, allowed, k):
    v = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    scores = v @ (q / np.linalg.norm(q))
    order = [i for i in np.argsort(-scores) if allowed(i)]
    return [f"item-{i}" for i in order[:k]], scores


def cli(srv, *args):
    return subprocess.run([str(dais_binary()), "memory", *args, "--url", srv.url],
                          capture_output=True, text=True, timeout=60)


def search(srv, body, collection="items"):
    return srv.post(f"/v2/memory/collections/{collection}/search", json=body)


def count(srv, collection="items"):
    return srv.get(f"/v2/memory/collections/{collection}").json()["points"]


@pytest.fixture
def empty_repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    return repo


def test_memory_on_redis_survives_a_restart(start_server, empty_repo, redis_server, tmp_path):
    flags = ("--memory", "--redis", redis_server.addr)
    srv = start_server(empty_repo, *flags)
    spec = tmp_path / "items.yaml"
    spec.write_text(SPEC)
    r = cli(srv, "create", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    assert "dimension 8, cosine, 3 shard(s)" in r.stdout
    pts, vecs = points(600)
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in pts))
    r = cli(srv, "load", "items", str(data), "--batch", "250")
    assert r.returncode == 0, r.stderr
    assert "600 points loaded" in r.stdout
    assert count(srv) == 600

    q = np.ones(8, dtype=np.float32)
    want, scores = exact(vecs, q, lambda i: True, 5)
    got = search(srv, {"vector": q.tolist(), "k": 5}).json()["results"]
    assert [h["id"] for h in got] == want
    assert got[0]["score"] == pytest.approx(float(scores[int(want[0][5:])]), abs=1e-5)
    assert got[0]["payload"]["price"] == float(want[0][5:])

    # Filters: equality and a range, ANDed; a minimum score.
    ok = lambda i: i % 3 == 1 and 100 <= i < 400  # noqa: E731 (hats priced 100..399)
    want_f, _ = exact(vecs, q, ok, 4)
    body = {"vector": q.tolist(), "k": 4,
            "filter": {"category": "hats", "price": {"gte": 100, "lt": 400}}}
    got = search(srv, body).json()["results"]
    assert [h["id"] for h in got] == want_f
    assert all(h["payload"]["category"] == "hats" for h in got)
    threshold = float(sorted(scores)[-3])  # the third best score
    got = search(srv, {"vector": q.tolist(), "k": 10, "min_score": threshold - 1e-6}).json()
    assert len(got["results"]) == 3

    # Get (with the stored, normalised vector) and delete.
    got = srv.post("/v2/memory/collections/items/get",
                   json={"ids": ["item-7", "nope"], "with_vector": True}).json()["results"]
    assert [h["id"] for h in got] == ["item-7"]
    np.testing.assert_allclose(got[0]["vector"], vecs[7] / np.linalg.norm(vecs[7]), rtol=1e-5)
    assert srv.post("/v2/memory/collections/items/delete",
                    json={"ids": [want[0]]}).json() == {"deleted": 1}
    got = search(srv, {"vector": q.tolist(), "k": 5}).json()["results"]
    assert [h["id"] for h in got] == want[1:] + [exact(vecs, q, lambda i: True, 6)[0][5]]

    # The hot tier: one hash per shard, keys with the tenant prefix and the shard's hash tag.
    keys = sorted(redis_call(redis_server.port, "KEYS", "dais:shop:mem:*"))
    assert keys == sorted([f"dais:shop:mem:{{items/{s}}}:{w}".encode()
                           for s in range(3) for w in ("log", "points", "seq")])
    stored = sum(redis_call(redis_server.port, "HLEN", f"dais:shop:mem:{{items/{s}}}:points")
                 for s in range(3))
    assert stored == 599

    # A restart restores the collection and its points from Redis (progress in the log).
    srv.stop()
    again = start_server(empty_repo, *flags)
    assert "vector memory: restoring items shard" in again.log_text()
    assert count(again) == 599
    got2 = search(again, {"vector": q.tolist(), "k": 5}).json()["results"]
    assert [h["id"] for h in got2] == [h["id"] for h in got]
    r = cli(again, "stats")
    assert r.returncode == 0 and "items" in r.stdout and "599" in r.stdout, r.stdout
    r = cli(again, "search", "items", "--vector", ",".join(["1"] * 8), "-k", "2")
    assert r.returncode == 0 and got[0]["id"] in r.stdout, r.stdout + r.stderr
    metrics = again.metrics()
    assert 'dais_memory_points{collection="items"} 599' in metrics
    r = cli(again, "drop", "items")
    assert r.returncode == 0, r.stderr
    assert redis_call(redis_server.port, "KEYS", "dais:shop:mem:*") == []


def test_bad_input_is_refused_naming_it_and_changes_nothing(start_server, empty_repo):
    srv = start_server(empty_repo, "--memory")
    spec = json.dumps({"name": "items", "dimension": 8, "payload": {"price": "number"}})
    assert srv.post("/v2/memory/collections", data=spec).status_code == 200
    pts, _ = points(10)
    for p in pts:
        p["payload"] = {"price": p["payload"]["price"]}
    assert srv.post("/v2/memory/collections/items/upsert", json={"points": pts}).status_code == 200
    v = [1.0] * 8
    bad_upserts = [
        ('{"points": [{"id": "x", "vector": [1, 2]}]}', "points[0].vector: has 2 values"),
        ('{"points": [{"id": "ok", "vector": [1,1,1,1,1,1,1,1]}, '
         '{"id": "x", "vector": [1, NaN, 1, 1, 1, 1, 1, 1]}]}', "points[1].vector[1]: NaN"),
        ('{"points": [{"id": "x", "vector": [0,0,0,0,0,0,0,0]}]}', "zero vector"),
        ('{"points": [{"id": "x", "vector": [1,1,1,1,1,1,1,1], "payload": {"colour": "red"}}]}',
         "points[0].payload.colour"),
        ('{"points": [{"id": "x", "vector": [1,1,1,1,1,1,1,1]', "malformed JSON"),
    ]
    for body, want in bad_upserts:
        r = srv.post("/v2/memory/collections/items/upsert", data=body)
        assert r.status_code == 400 and want in r.json()["error"], (body, r.text)
    bad_searches = [
        ({"vector": v, "k": 0}, "k: an integer from 1 to 1000"),
        ({"vector": v, "k": 10**9}, "k: an integer from 1 to 1000"),
        ({"vector": v, "filter": {"colour": "red"}}, "filter.colour: not a payload field"),
        ({"vector": v, "filter": {"price": {"near": 3}}}, "filter.price.near: unknown operator"),
        ({"vector": v, "max_distance": 1}, "max_distance: collection items uses metric cosine"),
        ({"vector": v[:3]}, "vector: has 3 values; collection items has dimension 8"),
    ]
    for body, want in bad_searches:
        r = search(srv, body)
        assert r.status_code == 400 and want in r.json()["error"], (body, r.text)
    r = search(srv, {"vector": v}, collection="nope")
    assert r.status_code == 404 and "collection nope does not exist" in r.json()["error"]
    r = srv.post("/v2/memory/collections", data='{"name": "x", "dimension": 99999}')
    assert r.status_code == 400 and "collection dimension" in r.json()["error"]
    r = srv.post("/v2/memory/collections", data=json.dumps(
        {"name": "items", "dimension": 9, "payload": {"price": "number"}}))
    assert r.status_code == 400 and "exists with a different spec" in r.json()["error"], r.text
    assert count(srv) == 10  # nothing changed, the half-good batch included
    got = srv.post("/v2/memory/collections/items/get", json={"ids": ["ok", "x"]}).json()
    assert got == {"results": []}


def test_points_expire_after_the_ttl(start_server, empty_repo, redis_server):
    srv = start_server(empty_repo, "--memory", "--redis", redis_server.addr)
    spec = {"name": "recent", "dimension": 2, "metric": "l2", "ttl": "2s"}
    assert srv.post("/v2/memory/collections", json=spec).status_code == 200
    assert srv.post("/v2/memory/collections/recent/upsert",
                    json={"points": [{"id": "a", "vector": [0, 1]}]}).status_code == 200
    got = search(srv, {"vector": [0, 0], "k": 1, "max_distance": 1.5}, "recent").json()
    assert got["results"][0]["id"] == "a" and got["results"][0]["score"] == pytest.approx(1.0)
    wait_for(lambda: search(srv, {"vector": [0, 0]}, "recent").json()["results"] == [], 15,
             "the point to expire")
    key = "dais:_:mem:{recent/0}:points"
    wait_for(lambda: redis_call(redis_server.port, "HLEN", key) == 0, 15,
             "the expired point to leave Redis")
    assert "dais_memory_expired_points_total{collection=\"recent\"} 1" in srv.metrics()


def test_memory_routes_need_the_flag_and_obey_restrictions(start_server, empty_repo):
    plain = start_server(empty_repo)
    r = plain.get("/v2/memory/collections")
    assert r.status_code == 404 and "--memory" in r.json()["error"]
    srv = start_server(empty_repo, "--memory", "--http-restricted-api", "memory:admin-key=s3cret")
    assert srv.get("/v2/memory/collections").status_code == 403
    r = srv.get("/v2/memory/collections", headers={"admin-key": "s3cret"})
    assert r.status_code == 200 and r.json() == {"collections": []}


def test_a_collection_redis_lost_is_rebuilt_from_the_cold_tier(start_server, empty_repo,
                                                                 redis_server, tmp_path):
    cold = tmp_path / "cold"
    flags = ("--memory", "--redis", redis_server.addr, "--memory-snapshot-dir", str(cold),
             "--memory-snapshot-secs", "0")
    srv = start_server(empty_repo, *flags)
    spec = {"name": "memories", "tenant": "agents", "dimension": 8, "shards": 2,
            "payload": {"category": "string", "price": "number", "in_stock": "bool"}}
    assert srv.post("/v2/memory/collections", json=spec).status_code == 200
    pts, vecs = points(300, seed=5)
    assert srv.post("/v2/memory/collections/memories/upsert",
                    json={"points": pts}).status_code == 200
    q = np.arange(8, dtype=np.float32)
    before = search(srv, {"vector": q.tolist(), "k": 5}, "memories").json()["results"]
    srv.stop()  # a clean stop writes the snapshot
    assert "vector memory: snapshot of" in srv.log_text()
    files = sorted(p.relative_to(cold).as_posix() for p in (cold / "memories").rglob("*.gz"))
    assert len(files) == 2 and all(f.startswith("memories/dt=") for f in files), files

    assert redis_call(redis_server.port, "FLUSHALL") == "OK"  # the hot tier loses everything
    again = start_server(empty_repo, *flags)
    assert "memories shard 0 rebuilt from the cold tier" in again.log_text()
    assert count(again, "memories") == 300
    after = search(again, {"vector": q.tolist(), "k": 5}, "memories").json()["results"]
    assert [(h["id"], h["payload"]) for h in after] == [(h["id"], h["payload"]) for h in before]
    # (the stored unit vectors are normalised again when read: the last bits may differ)
    np.testing.assert_allclose([h["score"] for h in after], [h["score"] for h in before],
                               rtol=1e-6)
    stored = sum(redis_call(redis_server.port, "HLEN", f"dais:agents:mem:{{memories/{s}}}:points")
                 for s in range(2))
    assert stored == 300  # written back to Redis
    assert redis_call(redis_server.port, "HEXISTS", "dais:mem:collections", "memories") == 1


KNN_MODEL = """\
name: "recommender"
backend: "identity"
max_batch_size: 8
input [
  { name: "SIMILAR_IDS" data_type: TYPE_INT64 dims: [ 3 ] },
  { name: "SIMILAR_SCORES" data_type: TYPE_FP32 dims: [ 3 ] },
  { name: "USER_ID" data_type: TYPE_INT64 dims: [ 1 ] }
]
output [
  { name: "IDS" data_type: TYPE_INT64 dims: [ 3 ] },
  { name: "SCORES" data_type: TYPE_FP32 dims: [ 3 ] }
]
"""

KNN_FEATURES = """\
domain: shop
entities: [{name: user_id, key_type: int64}]
feature_groups:
  - name: user_profile
    entity: user_id
    features:
      - {name: embedding, dtype: FP32, shape: [4], default: 0}
knn:
  - {name: similar_items, collection: items, query: user_profile:embedding, k: 3}
inputs:
  - {name: SIMILAR_IDS, knn: similar_items, output: ids}
  - {name: SIMILAR_SCORES, knn: similar_items, output: scores}
entity_input: USER_ID
"""


def test_knn_features_give_a_model_the_nearest_items(start_server, tmp_path):
    repo = tmp_path / "repo"
    (repo / "recommender" / "1").mkdir(parents=True)
    (repo / "recommender" / "config.pbtxt").write_text(KNN_MODEL)
    (repo / "recommender" / "features.yaml").write_text(KNN_FEATURES)
    spec = tmp_path / "items.yaml"
    spec.write_text("name: items\ndimension: 4\nmetric: cosine\nshards: 2\n")
    srv = start_server(repo, "--memory-collection", str(spec))
    rng = np.random.default_rng(9)
    items = rng.normal(size=(200, 4)).astype(np.float32)
    pts = [{"id": str(1000 + i), "vector": items[i].tolist()} for i in range(200)]
    assert srv.post("/v2/memory/collections/items/upsert", json={"points": pts}).status_code == 200
    users = rng.normal(size=(2, 4)).astype(np.float32)

    def push_users(server):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        r = server.post("/push", json={"push_source_name": "user_profile", "to": "online", "df": {
            "user_id": [1, 2], "event_timestamp": [now, now],
            "embedding": [users[0].tolist(), users[1].tolist()]}})
        assert r.status_code == 200, r.text

    push_users(srv)
    body = {"inputs": [{"name": "USER_ID", "datatype": "INT64", "shape": [3, 1],
                        "data": [1, 2, 3]}]}
    r = srv.post("/v2/models/recommender/infer", json=body)
    assert r.status_code == 200, r.text
    out = {o["name"]: o["data"] for o in r.json()["outputs"]}
    unit = items / np.linalg.norm(items, axis=1, keepdims=True)
    for row, u in enumerate(users):
        scores = unit @ (u / np.linalg.norm(u))
        best = np.argsort(-scores)[:3]
        assert out["IDS"][row * 3:row * 3 + 3] == [1000 + int(i) for i in best]
        np.testing.assert_allclose(out["SCORES"][row * 3:row * 3 + 3], scores[best], rtol=1e-4)
    # User 3 has no embedding: no neighbours (ids pad with -1, scores with 0).
    assert out["IDS"][6:] == [-1, -1, -1] and out["SCORES"][6:] == [0, 0, 0]
    assert "NOT_FOUND" in r.json()["parameters"]["feature_status"]

    # Without vector memory the knn input fails the request and says why.
    plain = start_server(repo)
    push_users(plain)
    r = plain.post("/v2/models/recommender/infer", json=body)
    assert r.status_code == 400 and "no vector memory" in r.json()["error"], r.text


# Searches on the I/O threads (the default), and on two search threads with the I/O threads
# bound to cores: the same answers and refusals over both protocols.
@pytest.mark.parametrize("threads", [(), ("--memory-search-threads", "2", "--io-cpu-affinity")],
                         ids=["on-io-threads", "search-threads"])
def test_memory_over_grpc(start_server, empty_repo, tmp_path, threads):
    import grpc
    import grpc_client

    stubs = grpc_client.generate_stubs(tmp_path / "stubs")
    srv = start_server(empty_repo, "--memory", *threads)
    assert srv.grpc_port, "the server logged grpc=0: the gRPC frontend was not built"
    spec = {"name": "items", "dimension": 3, "metric": "l2",
            "payload": {"category": "string", "price": "number"}}
    assert srv.post("/v2/memory/collections", json=spec).status_code == 200
    pb = stubs.memory_pb

    def val(x):
        return pb.Value(string_value=x) if isinstance(x, str) else pb.Value(number_value=x)

    with grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as ch:
        stub = stubs.memory_grpc.MemoryStub(ch)
        pts = [pb.Point(id=f"p{i}", vector=[float(i), 0, 0],
                        payload={"category": val("a" if i % 2 else "b"), "price": val(float(i))})
               for i in range(20)]
        assert stub.Upsert(pb.UpsertRequest(collection="items", points=pts), timeout=10) \
            .upserted == 20
        got = stub.Search(pb.SearchRequest(collection="items", vector=[4.2, 0, 0], k=3),
                          timeout=10).results
        assert [h.id for h in got] == ["p4", "p5", "p3"]
        assert got[0].score == pytest.approx(0.2, abs=1e-5)
        assert got[0].payload["category"].string_value == "b"
        cond = pb.Condition(field="price", op=pb.Condition.GTE, value=val(10.0))
        got = stub.Search(pb.SearchRequest(collection="items", vector=[4.2, 0, 0], k=2,
                                           filter=[cond], max_distance=6.0), timeout=10).results
        assert [h.id for h in got] == ["p10"]  # p11 is 6.8 away
        # The same answers over HTTP.
        http = search(srv, {"vector": [4.2, 0, 0], "k": 3}).json()["results"]
        assert [h["id"] for h in http] == ["p4", "p5", "p3"]
        assert stub.Delete(pb.DeleteRequest(collection="items", ids=["p4"]), timeout=10) \
            .deleted == 1
        got = stub.Get(pb.GetRequest(collection="items", ids=["p4", "p5"], with_vector=True),
                       timeout=10).results
        assert [h.id for h in got] == ["p5"] and list(got[0].vector) == [5.0, 0.0, 0.0]
        bad = [
            (pb.UpsertRequest(collection="items", points=[pb.Point(id="x", vector=[1, 2])]),
             stub.Upsert, grpc.StatusCode.INVALID_ARGUMENT, "points[0].vector: has 2 values"),
            (pb.UpsertRequest(collection="items", points=[
                pb.Point(id="x", vector=[1, 2, 3], payload={"colour": val("red")})]),
             stub.Upsert, grpc.StatusCode.INVALID_ARGUMENT, "points[0].payload.colour"),
            (pb.UpsertRequest(collection="items", points=[
                pb.Point(id="x", vector=[1, 2, 3], payload={"price": val("cheap")})]),
             stub.Upsert, grpc.StatusCode.INVALID_ARGUMENT, "points[0].payload.price"),
            (pb.SearchRequest(collection="items", vector=[1, 2, 3], k=5000),
             stub.Search, grpc.StatusCode.INVALID_ARGUMENT, "k: an integer from 1 to 1000"),
            (pb.SearchRequest(collection="items", vector=[1, 2, 3], min_score=0.5),
             stub.Search, grpc.StatusCode.INVALID_ARGUMENT, "give max_distance"),
            (pb.SearchRequest(collection="items", vector=[1, 2, 3], filter=[
                pb.Condition(field="category", op=pb.Condition.LT, value=val("m"))]),
             stub.Search, grpc.StatusCode.INVALID_ARGUMENT, "ranges apply to number fields"),
            (pb.SearchRequest(collection="nope", vector=[1, 2, 3]),
             stub.Search, grpc.StatusCode.NOT_FOUND, "collection nope does not exist"),
        ]
        for req, call, code, words in bad:
            with pytest.raises(grpc.RpcError) as e:
                call(req, timeout=10)
            assert e.value.code() == code and words in e.value.details(), e.value.details()
    assert count(srv) == 19


def test_a_second_server_on_the_same_redis_follows_the_writes(start_server, empty_repo,
                                                              redis_server):
    flags = ("--memory", "--redis", redis_server.addr)
    a = start_server(empty_repo, *flags)
    b = start_server(empty_repo, *flags)
    spec = {"name": "shared", "dimension": 2, "metric": "l2", "shards": 2}
    assert a.post("/v2/memory/collections", json=spec).status_code == 200
    pts = [{"id": f"s{i}", "vector": [float(i), 0.0]} for i in range(50)]
    assert a.post("/v2/memory/collections/shared/upsert", json={"points": pts}).status_code == 200
    # b takes up the collection a created (every 2 s) and its points.
    wait_for(lambda: b.get("/v2/memory/collections/shared").status_code == 200 and
             count(b, "shared") == 50, 15, "b to take up the collection")
    assert "collection shared created elsewhere" in b.log_text()
    assert a.post("/v2/memory/collections/shared/upsert",
                  json={"points": [{"id": "new", "vector": [100.0, 0.0]}]}).status_code == 200
    assert a.post("/v2/memory/collections/shared/delete", json={"ids": ["s49"]}).status_code == 200
    nearest = lambda srv: search(srv, {"vector": [99.0, 0.0], "k": 2}, "shared").json()  # noqa
    got = wait_for(lambda: [h["id"] for h in nearest(b)["results"]] == ["new", "s48"] and
                   nearest(b), 10, "b to apply a's writes")
    assert got["results"][0]["score"] == pytest.approx(1.0)
    assert count(b, "shared") == 50
    assert requests.delete(a.url + "/v2/memory/collections/shared", timeout=10).status_code == 200
    wait_for(lambda: b.get("/v2/memory/collections/shared").status_code == 404, 15,
             "b to forget the dropped collection")
