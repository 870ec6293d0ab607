"""Dynamic batching: concurrent batch-1 requests are executed together."""

import json
import re
import shutil

import numpy as np


def post_rows_concurrently(srv, kv, model, x, expected):
    """Posts each row of `x` as its own request, all at once; each answer must be its own row."""
    bodies = [json.dumps(kv.infer_body({"INPUT__0": x[i:i + 1]}, id=str(i))).encode()
              for i in range(len(x))]
    results = kv.concurrent_posts(srv.http_port, f"/v2/models/{model}/infer", bodies)
    for i, res in enumerate(results):
        assert not isinstance(res, BaseException), f"request {i}: {res!r}"
        status, raw = res
        assert status == 200, f"request {i}: {status} {raw[:300]!r}"
        body = json.loads(raw)
        assert body["id"] == str(i)
        out = body["outputs"][0]
        assert out["shape"] == [1, expected.shape[1]], out
        # Each request gets its own row back, not a neighbour's.
        np.testing.assert_allclose(np.asarray(out["data"], np.float32), expected[i],
                                   rtol=1e-4, atol=1e-5, err_msg=f"request {i}")


def test_concurrent_requests_are_batched(start_server, model_repo, refs, kv):
    srv = start_server(model_repo)
    n = 64
    x = np.random.default_rng(31).normal(size=(n, 256)).astype(np.float32)
    post_rows_concurrently(srv, kv, "mlp_heavy", x, refs.mlp(model_repo, "mlp_heavy", x))

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


def adaptive_config(cfg, name, extra=""):
    # No max_queue_delay cap: every dispatch is the policy's own decision (with the examples'
    # 2 ms, a request that waited that long for a busy machine to wake the instance thread is
    # labelled max_queue_delay).
    cfg = re.sub(r"max_queue_delay_microseconds:\s*\d+", "max_queue_delay_microseconds: 0", cfg)
    return (cfg.replace('name: "mlp_small"', f'name: "{name}"') +
            'parameters { key: "batching_policy" value: { string_value: "adaptive" } }\n' + extra)


def test_adaptive_policy_serves_and_reports_its_decisions(start_server, repo_copy, model_repo,
                                                          refs, kv):
    """A model with batching_policy "adaptive" answers correctly; at one request at a time every
    batch leaves at once (reason adaptive_no_gain: waiting cannot pay), a burst of concurrent
    requests is answered row for row, and a bad policy is a load error that names it."""
    src = repo_copy / "mlp_small"
    cfg = (src / "config.pbtxt").read_text()
    shutil.copytree(src, repo_copy / "mlp_adaptive")
    (repo_copy / "mlp_adaptive" / "config.pbtxt").write_text(adaptive_config(
        cfg, "mlp_adaptive",
        'parameters { key: "latency_target_microseconds" value: { string_value: "20000" } }\n'))
    shutil.copytree(src, repo_copy / "mlp_bad_policy")
    (repo_copy / "mlp_bad_policy" / "config.pbtxt").write_text(
        adaptive_config(cfg, "mlp_bad_policy").replace('"adaptive"', '"aimd"'))
    srv = start_server(repo_copy, wait_ready=False)
    idx = srv.wait_models_settled(["mlp_small", "mlp_adaptive", "mlp_bad_policy"])
    assert idx["mlp_adaptive"]["state"] == "READY", idx["mlp_adaptive"]
    bad = idx["mlp_bad_policy"]
    assert bad["state"] == "UNAVAILABLE", bad
    assert "parameters batching_policy: 'aimd' is not a policy" in bad["reason"], bad

    rng = np.random.default_rng(7)
    n = 20
    for i in range(n):
        x = rng.normal(size=(1, 16)).astype(np.float32)
        out = kv.json_outputs(srv.infer("mlp_adaptive", {"INPUT__0": x}))
        np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x),
                                   rtol=1e-4, atol=1e-5)
    samples = kv.parse_prometheus(srv.metrics())

    def dispatched(reason):
        return kv.metric_value(samples, "dais_batch_dispatches_total", model="mlp_adaptive",
                               reason=reason) or 0

    # The warm-up is not a dispatch: every one of the n sequential requests left at once.
    assert dispatched("adaptive_no_gain") == n, [
        (s[1]["model"], s[1]["reason"], s[2]) for s in samples
        if s[0] == "dais_batch_dispatches_total" and s[2] > 0]
    assert kv.metric_value(samples, "dais_batch_wait_seconds_count", model="mlp_adaptive") == n

    burst = 64
    x = rng.normal(size=(burst, 16)).astype(np.float32)
    post_rows_concurrently(srv, kv, "mlp_adaptive", x, refs.mlp(model_repo, "mlp_small", x))
    s = srv.stats("mlp_adaptive")
    assert s["inference_count"] == n + burst, s
