"""Issue 33, part 2: labels. `dais serve --label-stream redis://HOST:PORT/STREAM` takes
POST /labels (outcomes known after the prediction: by the request's id, or by entity ids and a
time) into a Redis stream, all of a request's labels or none, before answering; `dais archive`
archives that stream like the feedback stream. Real redis-server, real `dais serve`."""

from __future__ import annotations

import gzip
import json
import subprocess

import numpy as np

from conftest import metric_value, parse_prometheus

X = np.arange(16, dtype=np.float32).reshape(1, 16) / 16


def label_counts(srv):
    samples = parse_prometheus(srv.metrics())
    return {o: metric_value(samples, "dais_labels_total", outcome=o) or 0
            for o in ("stored", "failed")}


def stream_entries(redis_server, stream):
    out = []
    for entry_id, kv in redis_server.call("XRANGE", stream, "-", "+"):
        kv = [x.decode() for x in kv]
        out.append((entry_id.decode(), dict(zip(kv[0::2], kv[1::2]))))
    return out


def test_labels_reach_the_stream_and_the_archive(start_server, repo_copy, redis_server, dais_bin,
                                                 tmp_path):
    srv = start_server(repo_copy,
                       "--feedback-stream", f"redis://127.0.0.1:{redis_server.port}/fb",
                       "--label-stream", f"redis://127.0.0.1:{redis_server.port}/labels")
    assert srv.infer("mlp_small", {"INPUT__0": X}, id="req-1").status_code == 200
    r = srv.post("/labels", json={"labels": [
        {"request_id": "req-1", "label": True, "source": "chargebacks"},
        {"entity_ids": ["42"], "time_ms": 1764900000000,
         "labels": {"purchase": 1, "amount": 12.5}, "source": "orders"}]})
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 2}
    entries = stream_entries(redis_server, "labels")
    assert len(entries) == 2
    first, second = entries[0][1], entries[1][1]
    assert first["request_id"] == "req-1" and json.loads(first["labels"]) == {"label": 1}
    assert first["source"] == "chargebacks" and json.loads(first["entity_ids"]) == []
    assert int(first["time_ms"]) > 0 and int(first["received_ms"]) >= int(first["time_ms"]) - 1
    assert second["request_id"] == "" and json.loads(second["entity_ids"]) == ["42"]
    assert int(second["time_ms"]) == 1764900000000
    assert json.loads(second["labels"]) == {"purchase": 1, "amount": 12.5}
    assert label_counts(srv) == {"stored": 2, "failed": 0}

    # Bad labels: 400 naming the label and the field; nothing of the request is stored.
    for body, where in (
            ({"labels": [{"request_id": "a", "label": 1, "source": "s"},
                         {"request_id": "b", "label": "yes", "source": "s"}]},
             "labels[1].label"),
            ({"request_id": "a", "label": 1}, "label.source"),
            ({"label": 1, "source": "s"}, "request_id or entity_ids"),
            ({"request_id": "a", "label": 1, "source": "s", "when": 3}, "label.when")):
        r = srv.post("/labels", json=body)
        assert r.status_code == 400 and where in r.json()["error"], (body, r.text)
    r = srv.post("/labels", data=b'{"labels": [', headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "malformed JSON" in r.json()["error"]
    assert srv.get("/labels").status_code == 405
    assert len(stream_entries(redis_server, "labels")) == 2

    # Archived like feedback: the label values and entity ids are JSON in the lines.
    root = tmp_path / "offline"
    a = subprocess.run([str(dais_bin), "archive", "--redis", redis_server.addr, "--stream",
                        "labels", "--consumer", "a1", "--root", str(root), "--dataset", "labels",
                        "--drain"], capture_output=True, text=True, timeout=60)
    assert a.returncode == 0, a.stdout + a.stderr
    rows = []
    for part in sorted(root.glob("labels/dt=*/part-*.jsonl.gz")):
        with gzip.open(part, "rt") as f:
            rows += [json.loads(line) for line in f]
    assert sorted(r["entry_id"] for r in rows) == sorted(e for e, _ in entries)
    by_id = {r["request_id"]: r for r in rows}
    assert by_id["req-1"]["labels"] == {"label": 1} and by_id["req-1"]["source"] == "chargebacks"
    assert by_id[""]["entity_ids"] == ["42"] and by_id[""]["labels"]["amount"] == 12.5


def test_without_a_label_stream_or_with_redis_away(start_server, repo_copy):
    srv = start_server(repo_copy)
    r = srv.post("/labels", json={"request_id": "a", "label": 1, "source": "s"})
    assert r.status_code == 404 and "--label-stream" in r.json()["error"]
    away = start_server(repo_copy, "--label-stream", "redis://127.0.0.1:1/labels")
    r = away.post("/labels", json={"request_id": "a", "label": 1, "source": "s"})
    assert r.status_code == 503 and "label stream" in r.json()["error"], r.text
    assert label_counts(away) == {"stored": 0, "failed": 1}


def test_labels_over_grpc(start_server, repo_copy, redis_server, tmp_path):
    import grpc
    import grpc_client

    stubs = grpc_client.generate_stubs(tmp_path / "stubs")
    srv = start_server(repo_copy,
                       "--label-stream", f"redis://127.0.0.1:{redis_server.port}/glabels")
    assert srv.grpc_port, "the server logged grpc=0: the gRPC frontend was not built"
    pb = stubs.labels_pb
    with grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as ch:
        post = stubs.labels_grpc.LabelsStub(ch).Post
        resp = post(pb.PostLabelsRequest(labels=[
            pb.Label(request_id="g-1", labels={"fraud": 1.0, "amount": 3.5}, source="chargebacks"),
            pb.Label(entity_ids=["7"], time_ms=1764900000000, labels={"purchase": 1},
                     source="orders")]), timeout=10)
        assert resp.accepted == 2
        for bad, where in ((pb.Label(request_id="g-2", labels={"x": 1}), "labels[0].source"),
                           (pb.Label(labels={"x": 1}, source="s"), "request_id or entity_ids"),
                           (pb.Label(request_id="g-3", source="s"), "label or labels")):
            try:
                post(pb.PostLabelsRequest(labels=[bad]), timeout=10)
                raise AssertionError(f"accepted {bad}")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and where in e.details(), \
                    e.details()
    entries = stream_entries(redis_server, "glabels")
    assert len(entries) == 2
    first, second = entries[0][1], entries[1][1]
    assert first["request_id"] == "g-1"
    assert json.loads(first["labels"]) == {"amount": 3.5, "fraud": 1}  # by name: stable JSON
    assert json.loads(second["entity_ids"]) == ["7"] and second["time_ms"] == "1764900000000"


def test_labels_on_redis_cluster_are_one_script_on_the_key_owner(start_server, repo_copy,
                                                                 redis_cluster):
    """On Redis Cluster a request's labels are appended whole through a node that does not own
    the stream's slot (the client follows MOVED with the whole script)."""
    key = "labels-on-cluster"
    owner = redis_cluster.owner_of_key(key)
    other = next(n for n in redis_cluster.nodes if n.port != owner.port)
    srv = start_server(repo_copy, "--label-stream", f"redis://127.0.0.1:{other.port}/{key}")
    labels = [{"request_id": f"r{i}", "label": i % 2, "source": "test"} for i in range(50)]
    r = srv.post("/labels", json={"labels": labels})
    assert r.status_code == 200 and r.json() == {"accepted": 50}, r.text
    entries = redis_cluster.call_key(key, "XRANGE", key, "-", "+")
    assert [dict(zip(kv[::2], kv[1::2]))[b"request_id"] for _, kv in entries] == [
        f"r{i}".encode() for i in range(50)]
