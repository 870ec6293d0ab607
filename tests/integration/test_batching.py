"""Dynamic batching: concurrent batch-1 requests are executed together."""

import json

import numpy as np


def test_concurrent_requests_are_batched(start_server, model_repo, refs, kv):
    srv = start_server(model_repo)
    n = 64
    x = np.random.default_rng(31).normal(size=(n, 256)).astype(np.float32)
    bodies = [json.dumps(kv.infer_body({"INPUT__0": x[i:i + 1]}, id=str(i))).encode()
              for i in range(n)]
    results = kv.concurrent_posts(srv.http_port, "/v2/models/mlp_heavy/infer", bodies)

    expected = refs.mlp(model_repo, "mlp_heavy", x)
    for i, res in enumerate(results):
        assert not isinstance(res, BaseException), f"request {i}: {res!r}"
        status, raw = res
        assert status == 200, f"request {i}: {status} {raw[:300]!r}"
        body = json.loads(raw)
        assert body["id"] == str(i)
        out = body["outputs"][0]
        assert out["shape"] == [1, 10], out
        # Each request gets its own row back, not a neighbour's.
        np.testing.assert_allclose(np.asarray(out["data"], np.float32), expected[i],
                                   rtol=1e-4, atol=1e-5, err_msg=f"request {i}")

    samples = kv.parse_prometheus(srv.metrics())
    bs_sum = kv.metric_value(samples, "dais_batch_size_sum", model="mlp_heavy")
    bs_count = kv.metric_value(samples, "dais_batch_size_count", model="mlp_heavy")
    assert bs_sum is not None and bs_count, "no dais_batch_size histogram for mlp_heavy"
    print(f"dais_batch_size: sum {bs_sum} count {bs_count} mean {bs_sum / bs_count:.2f}")
    assert bs_sum == n, f"the batch sizes add up to {bs_sum}, not {n} requests"
    assert bs_sum / bs_count > 1.5, f"mean batch size {bs_sum / bs_count:.2f}"

    s = srv.stats("mlp_heavy")
    print(f"stats: inference_count {s['inference_count']} execution_count "
          f"{s['execution_count']} batch_stats {s['batch_stats']}")
    assert s["inference_count"] == n
    assert s["execution_count"] < s["inference_count"]
    assert max(b["batch_size"] for b in s["batch_stats"]) > 1
    assert sum(b["batch_size"] * b["compute_infer"]["count"] for b in s["batch_stats"]) == n
    assert s["inference_stats"]["success"]["count"] == n
