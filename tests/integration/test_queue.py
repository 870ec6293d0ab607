"""Queue policy: a full queue rejects with 503 (never 500), and request timeouts."""

import json
import re

import numpy as np
import pytest

QUEUE_BATCHING = """dynamic_batching {
  max_queue_delay_microseconds: 100000
  default_queue_policy {
    max_queue_size: 2
  }
}"""


@pytest.fixture
def queue_server(start_server, repo_copy):
    cfg_path = repo_copy / "mlp_heavy" / "config.pbtxt"
    cfg, n = re.subn(r"dynamic_batching \{.*?\n\}", QUEUE_BATCHING, cfg_path.read_text(),
                     flags=re.S)
    assert n == 1, cfg
    cfg_path.write_text(cfg)
    return start_server(repo_copy)


def test_queue_full_rejects_with_503(queue_server, repo_copy, refs, kv):
    srv = queue_server
    n = 32
    x = np.random.default_rng(51).normal(size=(n, 256)).astype(np.float32)
    bodies = [json.dumps(kv.infer_body({"INPUT__0": x[i:i + 1]})).encode() for i in range(n)]
    results = kv.concurrent_posts(srv.http_port, "/v2/models/mlp_heavy/infer", bodies)

    expected = refs.mlp(repo_copy, "mlp_heavy", x)
    ok, rejected = 0, 0
    for i, res in enumerate(results):
        assert not isinstance(res, BaseException), f"request {i}: {res!r}"
        status, raw = res
        if status == 200:
            ok += 1
            out = json.loads(raw)["outputs"][0]
            np.testing.assert_allclose(np.asarray(out["data"], np.float32), expected[i],
                                       rtol=1e-4, atol=1e-5)
        else:
            assert status == 503, f"request {i}: {status} {raw[:300]!r}"
            err = json.loads(raw)["error"]
            assert "queue" in err.lower(), err
            rejected += 1
    print(f"{ok} served, {rejected} rejected")
    assert rejected > 0, "32 concurrent requests against max_queue_size 2: none was rejected"
    assert ok > 0
    # The server keeps serving.
    kv.json_outputs(srv.infer("mlp_heavy", {"INPUT__0": x[:1]}))


def test_request_timeout(queue_server, kv):
    """A 1 us timeout on a model that holds requests up to 100 ms for batching expires."""
    srv = queue_server
    x = np.random.default_rng(52).normal(size=(1, 256)).astype(np.float32)
    r = srv.infer("mlp_heavy", {"INPUT__0": x}, parameters={"timeout": 1})
    assert r.status_code != 200, "a request with a 1 us timeout was served after a 100 ms wait"
    assert r.status_code in (504, 408, 429, 503), f"{r.status_code} {r.text[:300]}"
    err = kv.error_text(r).lower()
    assert "timeout" in err or "deadline" in err or "timed out" in err, err
    # A generous timeout (10 s) is served.
    kv.json_outputs(srv.infer("mlp_heavy", {"INPUT__0": x}, parameters={"timeout": 10_000_000}))
    # The expired request counts as a failure, not a success.
    s = srv.stats("mlp_heavy")["inference_stats"]
    assert s["success"]["count"] == 1, s
