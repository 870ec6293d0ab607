"""Metadata, health, configuration, statistics and metrics endpoints (shared server)."""

import numpy as np
import pytest

# name -> (platform or None to skip, input name, input dims, output name, output dims)
EXPECTED = {
    "mlp_small": ("pytorch_libtorch", "INPUT__0", [16], "OUTPUT__0", [4]),
    "mlp_heavy": ("pytorch_libtorch", "INPUT__0", [256], "OUTPUT__0", [10]),
    "xgb_binary": (None, "input__0", [8], "output__0", [2]),
}


def test_server_metadata(server):
    r = server.get("/v2")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == "dais"
    assert isinstance(body["version"], str) and body["version"]
    ext = body["extensions"]
    assert isinstance(ext, list) and all(isinstance(e, str) for e in ext)
    for e in ("binary_tensor_data", "statistics", "model_repository", "model_configuration"):
        assert e in ext, f"extension {e!r} missing from {ext}"


def test_health(server):
    assert server.get("/v2/health/live").status_code == 200
    assert server.get("/v2/health/ready").status_code == 200


def test_healthz_ok(server):
    r = server.get("/healthz")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ok", body
    assert isinstance(body["checks"], dict), body


@pytest.mark.parametrize("model", sorted(EXPECTED))
@pytest.mark.parametrize("versioned", [False, True], ids=["latest", "v1"])
def test_model_metadata(server, model, versioned):
    platform, in_name, in_dims, out_name, out_dims = EXPECTED[model]
    r = server.get(f"/v2/models/{model}" + ("/versions/1" if versioned else ""))
    assert r.status_code == 200, r.text
    md = r.json()
    assert md["name"] == model
    assert md["versions"] == ["1"], md
    if platform:
        assert md["platform"] == platform, md
    else:
        assert isinstance(md.get("platform"), str), md
    assert md["inputs"] == [{"name": in_name, "datatype": "FP32", "shape": [-1] + in_dims}], md
    assert md["outputs"] == [{"name": out_name, "datatype": "FP32", "shape": [-1] + out_dims}], md


def test_autocompleted_model_metadata(server):
    r = server.get("/v2/models/xgb_multiclass")
    assert r.status_code == 200, r.text
    md = r.json()
    assert md["name"] == "xgb_multiclass" and md["versions"] == ["1"], md
    assert len(md["inputs"]) == 1 and len(md["outputs"]) == 1, md
    assert md["inputs"][0]["datatype"] == "FP32" and md["inputs"][0]["shape"][-1] == 6, md
    assert md["outputs"][0]["datatype"] == "FP32", md


@pytest.mark.parametrize("model", ["mlp_small", "mlp_heavy", "xgb_binary", "xgb_multiclass"])
def test_model_ready(server, model):
    assert server.get(f"/v2/models/{model}/ready").status_code == 200
    assert server.get(f"/v2/models/{model}/versions/1/ready").status_code == 200


def test_unknown_model_metadata_and_ready(server, kv):
    r = server.get("/v2/models/no_such_model")
    assert r.status_code in (400, 404), r.status_code
    assert "no_such_model" in kv.error_text(r)
    assert server.get("/v2/models/no_such_model/ready").status_code != 200
    assert server.get("/v2/models/mlp_small/versions/9/ready").status_code != 200
    r = server.get("/v2/models/mlp_small/versions/9")
    assert r.status_code in (400, 404), r.status_code
    kv.error_text(r)


def test_unknown_route_is_404(server):
    assert server.get("/v2/no/such/route").status_code == 404


def _dims(d):
    return [int(x) for x in d]


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_model_config(server, model):
    _, in_name, in_dims, out_name, out_dims = EXPECTED[model]
    r = server.get(f"/v2/models/{model}/config")
    assert r.status_code == 200, r.text
    cfg = r.json()
    assert cfg["name"] == model
    mbs = cfg["max_batch_size"]
    assert isinstance(mbs, int) and not isinstance(mbs, bool), f"max_batch_size {mbs!r}"
    assert mbs == (256 if model == "xgb_binary" else 64)
    assert len(cfg["input"]) == 1 and len(cfg["output"]) == 1, cfg
    assert cfg["input"][0]["name"] == in_name
    assert cfg["input"][0]["data_type"] == "TYPE_FP32"
    assert _dims(cfg["input"][0]["dims"]) == in_dims
    assert cfg["output"][0]["name"] == out_name
    assert cfg["output"][0]["data_type"] == "TYPE_FP32"
    assert _dims(cfg["output"][0]["dims"]) == out_dims
    if model == "xgb_binary":
        assert cfg.get("backend") == "fil", cfg
    else:
        assert cfg.get("platform") == "pytorch_libtorch", cfg


def test_autocompleted_config(server):
    r = server.get("/v2/models/xgb_multiclass/config")
    assert r.status_code == 200, r.text
    cfg = r.json()
    assert cfg["name"] == "xgb_multiclass"
    assert len(cfg["input"]) == 1, cfg
    assert _dims(cfg["input"][0]["dims"]) == [6], cfg
    assert cfg["input"][0]["data_type"] == "TYPE_FP32", cfg
    assert len(cfg["output"]) == 1, cfg
    assert isinstance(cfg["max_batch_size"], int), cfg


def _duration(stat, key):
    d = stat[key]
    assert isinstance(d["count"], int) and isinstance(d["ns"], int), (key, d)
    return d


def test_model_stats(server, kv):
    before = server.stats("mlp_small")
    x = np.random.default_rng(7).normal(size=(3, 16)).astype(np.float32)
    for _ in range(2):
        kv.json_outputs(server.infer("mlp_small", {"INPUT__0": x}))
    r = server.get("/v2/models/mlp_small/stats")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"model_stats"}, body.keys()
    stats = [s for s in body["model_stats"] if s["name"] == "mlp_small"]
    assert len(stats) == 1, body
    s = stats[0]
    assert s["version"] == "1"
    for k in ("last_inference", "inference_count", "execution_count"):
        assert isinstance(s[k], int), (k, s[k])
    assert s["last_inference"] > 1_600_000_000_000, "last_inference is ms since the epoch"
    assert s["inference_count"] - before["inference_count"] == 6, (before, s)
    assert 1 <= s["execution_count"] - before["execution_count"] <= 2, (before, s)
    inf = s["inference_stats"]
    for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
        _duration(inf, key)
    b_inf = before["inference_stats"]
    assert inf["success"]["count"] - b_inf["success"]["count"] == 2
    assert inf["success"]["ns"] > b_inf["success"]["ns"]
    assert inf["queue"]["count"] - b_inf["queue"]["count"] == 2
    assert inf["compute_infer"]["count"] > b_inf["compute_infer"]["count"]
    assert inf["fail"]["count"] == b_inf["fail"]["count"]
    assert isinstance(s["batch_stats"], list) and s["batch_stats"], s
    sizes = set()
    for b in s["batch_stats"]:
        assert isinstance(b["batch_size"], int) and b["batch_size"] >= 1, b
        _duration(b, "compute_infer")
        sizes.add(b["batch_size"])
    assert sizes & {3, 6}, f"a batch of 3 (or 2x3) rows should appear in batch_stats: {sizes}"


def test_model_stats_urls(server):
    r = server.get("/v2/models/mlp_small/versions/1/stats")
    assert r.status_code == 200, r.text
    s = r.json()["model_stats"]
    assert len(s) == 1 and s[0]["name"] == "mlp_small" and s[0]["version"] == "1", s
    # Without a model name: every model (Triton's statistics extension).
    r = server.get("/v2/models/stats")
    assert r.status_code == 200, r.text
    names = {s["name"] for s in r.json()["model_stats"]}
    assert {"mlp_small", "mlp_heavy", "xgb_binary", "xgb_multiclass"} <= names, names


def test_model_stats_unknown_model(server, kv):
    r = server.get("/v2/models/no_such_model/stats")
    assert r.status_code in (400, 404), r.status_code
    kv.error_text(r)


def test_metrics(server, kv):
    x = np.zeros((1, 16), np.float32)
    kv.json_outputs(server.infer("mlp_small", {"INPUT__0": x}))
    text = server.metrics()
    assert 'dais_inference_request_success_total{model="mlp_small",version="1"}' in text, text
    assert "# TYPE dais_inference_request_success_total counter" in text
    before = kv.metric_value(kv.parse_prometheus(text), "dais_inference_request_success_total",
                             model="mlp_small", version="1")
    assert before >= 1
    for _ in range(3):
        kv.json_outputs(server.infer("mlp_small", {"INPUT__0": x}))
    after = kv.metric_value(kv.parse_prometheus(server.metrics()),
                            "dais_inference_request_success_total", model="mlp_small",
                            version="1")
    assert after - before == 3, (before, after)


def test_repository_index(server):
    idx = server.index()
    assert isinstance(idx, list), idx
    by_name = {e["name"]: e for e in idx}
    for m in ("mlp_small", "mlp_heavy", "xgb_binary", "xgb_multiclass"):
        assert by_name[m]["state"] == "READY", by_name.get(m)
        assert str(by_name[m]["version"]) == "1", by_name[m]
    ready = server.index(ready=True)
    assert {e["name"] for e in ready} >= {"mlp_small", "xgb_multiclass"}, ready


def test_head_answer_has_no_body_and_the_connection_goes_on(server):
    """A HEAD gets the head a GET would (its Content-Length too) and no body: bytes of a body
    would be read as the next answer on the same connection (RFC 9110 §9.3.2). Read from a raw
    socket: a client library may drop what its buffer read past a HEAD's head."""
    import re
    import socket
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as sock:
        received = b""

        def until(done):
            nonlocal received
            while not done(received):
                chunk = sock.recv(65536)
                assert chunk, f"connection closed after {received!r}"
                received += chunk

        for path in ("/v2", "/v2/models/mlp_small", "/no/such/path"):
            received = b""
            sock.sendall(f"HEAD {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            until(lambda b: b"\r\n\r\n" in b)
            head, rest = received.split(b"\r\n\r\n", 1)
            head_length = re.search(rb"(?i)content-length: *(\d+)", head)
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            received = rest
            until(lambda b: b"\r\n\r\n" in b)
            # What follows the HEAD's head is the GET's answer, not a body.
            assert received.startswith(b"HTTP/1.1 "), (path, received[:80])
            get_head, body = received.split(b"\r\n\r\n", 1)
            length = int(re.search(rb"(?i)content-length: *(\d+)", get_head).group(1))
            until(lambda b: len(b) >= len(get_head) + 4 + length)
            if head.split(b" ")[1] == get_head.split(b" ")[1]:
                assert head_length and int(head_length.group(1)) == length, (path, head)
