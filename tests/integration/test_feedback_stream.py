"""Issue 16, the inference feedback stream: `dais serve --feedback-stream redis://HOST:PORT/STREAM`
appends every answered inference (HTTP and gRPC alike) to a capped Redis stream, off the request
path; `dais stream tail` prints it. Real redis-server, real `dais serve`."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np

from conftest import metric_value, parse_prometheus, wait_for

X = np.arange(32, dtype=np.float32).reshape(2, 16) / 32


def tail(dais_bin, redis_port, stream, count, timeout=30):
    r = subprocess.run([str(dais_bin), "stream", "tail", stream, "--redis",
                        f"127.0.0.1:{redis_port}", "--from", "0", "--count", str(count),
                        "--timeout-secs", str(timeout)],
                       capture_output=True, text=True, timeout=timeout + 10)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    return [(line.split(" ", 1)[0], json.loads(line.split(" ", 1)[1])) for line in lines]


def counts(srv):
    samples = parse_prometheus(srv.metrics())
    return {o: metric_value(samples, "dais_feedback_records_total", outcome=o) or 0
            for o in ("sent", "dropped", "failed")}


def test_answered_inferences_reach_the_stream(start_server, repo_copy, redis_server, dais_bin):
    srv = start_server(repo_copy, "--feedback-stream",
                       f"redis://127.0.0.1:{redis_server.port}/dais:feedback")
    answers = {}
    for i in range(5):
        r = srv.infer("mlp_small", {"INPUT__0": X}, id=f"fb-{i}")
        assert r.status_code == 200, r.text
        answers[f"fb-{i}"] = r.json()["outputs"][0]
    r = srv.infer("nosuch", {"INPUT__0": X})
    assert r.status_code == 404  # a failed request is not fed back
    entries = tail(dais_bin, redis_server.port, "dais:feedback", 5)
    assert [rec["id"] for _, rec in entries] == [f"fb-{i}" for i in range(5)]
    for entry_id, rec in entries:
        assert rec["model"] == "mlp_small" and rec["version"] == "1", rec
        assert rec["latency_us"] > 0 and rec["time_ms"] > 0
        (inp,) = rec["inputs"]
        assert inp["name"] == "INPUT__0" and inp["datatype"] == "FP32" and inp["shape"] == [2, 16]
        np.testing.assert_allclose(inp["data"], X.reshape(-1), rtol=1e-6)
        out = rec["outputs"][0]
        want = answers[rec["id"]]
        assert out["name"] == want["name"] and out["shape"] == want["shape"]
        np.testing.assert_allclose(out["data"], want["data"], rtol=1e-5)
    wait_for(lambda: counts(srv)["sent"] >= 5, 10, "5 records counted as sent")
    assert counts(srv)["dropped"] == 0 and counts(srv)["failed"] == 0


def test_sampling_and_redis_away_never_hold_requests(start_server, repo_copy, redis_server):
    none = start_server(repo_copy, "--feedback-stream",
                        f"redis://127.0.0.1:{redis_server.port}/dais:none",
                        "--feedback-sample", "0")
    for _ in range(20):
        assert none.infer("mlp_small", {"INPUT__0": X}).status_code == 200
    assert counts(none) == {"sent": 0, "dropped": 0, "failed": 0}
    assert redis_server.call("XLEN", "dais:none") == 0
    # Redis not there: every request is answered; the records are counted as not written.
    away = start_server(repo_copy, "--feedback-stream", "redis://127.0.0.1:1/dais:away",
                        "--feedback-buffer", "8")
    for _ in range(50):
        assert away.infer("mlp_small", {"INPUT__0": X}).status_code == 200
    wait_for(lambda: counts(away)["failed"] + counts(away)["dropped"] >= 50, 20,
             "the 50 records counted as failed or dropped")


def test_an_enriched_request_records_the_features_it_used(start_server, model_repo, tmp_path,
                                                          redis_server, dais_bin, kv):
    repo = tmp_path / "repo"
    repo.mkdir()
    kv.add_feature_model(model_repo, repo, "shop_mlp", kv.shop_spec(model=True))
    srv = start_server(repo, "--feedback-stream",
                       f"redis://127.0.0.1:{redis_server.port}/dais:enriched")
    kv.push(srv, "user_profile", {"user_id": [1001], "event_timestamp": [int(time.time()) - 5],
                                  "age": [31.5], "clicks": [[0.25] * 15]})
    r = srv.infer("shop_mlp", [], parameters={"entity_ids": [1001]}, id="enriched-1")
    assert r.status_code == 200, r.text
    ((_, rec),) = tail(dais_bin, redis_server.port, "dais:enriched", 1)
    assert rec["id"] == "enriched-1" and rec["model"] == "shop_mlp"
    assert rec["entity_ids"] == ["1001"], rec["entity_ids"]
    values = [v for t in rec["inputs"] for v in t.get("data", [])]
    assert 31.5 in values, rec["inputs"]  # the pushed feature the model ran on
