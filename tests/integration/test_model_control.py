"""--model-control-mode explicit: load and unload through the repository API, --load-model, and
memory across load/unload cycles."""

import numpy as np
import pytest

MODELS = ("mlp_small", "mlp_heavy", "xgb_binary", "xgb_multiclass")


def x_small(seed=61):
    return np.random.default_rng(seed).normal(size=(2, 16)).astype(np.float32)


def assert_not_served(srv, kv, model, x):
    assert srv.get(f"/v2/models/{model}/ready").status_code != 200
    r = srv.infer(model, {"INPUT__0": x})
    assert r.status_code in (400, 404, 503), f"{model}: {r.status_code} {r.text[:300]}"
    kv.error_text(r)


def test_explicit_load_unload(start_server, model_repo, refs, kv):
    srv = start_server(model_repo, "--model-control-mode", "explicit", wait_ready=False)
    idx = srv.index()
    names = {e["name"] for e in idx}
    assert set(MODELS) <= names, f"the index lists every model of the repository: {idx}"
    assert not [e for e in idx if e.get("state") == "READY"], f"nothing is loaded yet: {idx}"
    assert srv.index(ready=True) == []
    x = x_small()
    assert_not_served(srv, kv, "mlp_small", x)

    r = srv.post("/v2/repository/models/mlp_small/load")
    assert r.status_code == 200, r.text
    assert srv.model_ready("mlp_small"), "load returned 200 but the model is not ready"
    out = kv.json_outputs(srv.infer("mlp_small", {"INPUT__0": x}))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x),
                               rtol=1e-5, atol=1e-5)
    e = srv.index_entry("mlp_small")
    assert e["state"] == "READY" and str(e.get("version")) == "1", e
    assert not srv.model_ready("mlp_heavy")
    assert srv.get("/v2/health/ready").status_code == 200

    # Loading a loaded model again is fine.
    r = srv.post("/v2/repository/models/mlp_small/load")
    assert r.status_code == 200, r.text
    kv.json_outputs(srv.infer("mlp_small", {"INPUT__0": x}))

    r = srv.post("/v2/repository/models/mlp_small/unload")
    assert r.status_code == 200, r.text
    srv.wait_until(lambda: not srv.model_ready("mlp_small"), 10, "mlp_small to unload")
    assert_not_served(srv, kv, "mlp_small", x)
    e = srv.index_entry("mlp_small")
    assert e is not None and e.get("state") != "READY", e

    # Load again after unload.
    r = srv.post("/v2/repository/models/mlp_small/load")
    assert r.status_code == 200, r.text
    kv.json_outputs(srv.infer("mlp_small", {"INPUT__0": x}))


def test_explicit_load_errors(start_server, model_repo, kv):
    srv = start_server(model_repo, "--model-control-mode", "explicit", wait_ready=False)
    r = srv.post("/v2/repository/models/no_such_model/load")
    assert r.status_code in (400, 404), f"{r.status_code} {r.text}"
    assert "no_such_model" in kv.error_text(r)
    r = srv.post("/v2/repository/models/no_such_model/unload")
    assert r.status_code in (200, 400, 404), f"{r.status_code} {r.text}"
    assert srv.get("/v2/health/live").status_code == 200


def test_load_model_flag(start_server, model_repo, kv):
    srv = start_server(model_repo, "--model-control-mode", "explicit",
                       "--load-model", "mlp_small", wait_ready=False)
    srv.wait_until(lambda: srv.model_ready("mlp_small"), 30, "mlp_small ready")
    ready = {e["name"] for e in srv.index() if e.get("state") == "READY"}
    assert ready == {"mlp_small"}, ready
    for m in ("mlp_heavy", "xgb_binary", "xgb_multiclass"):
        assert not srv.model_ready(m), m
    kv.json_outputs(srv.infer("mlp_small", {"INPUT__0": x_small()}))
    assert srv.get("/v2/health/ready").status_code == 200


@pytest.mark.slow
def test_memory_across_load_unload_cycles(start_server, model_repo, kv):
    srv = start_server(model_repo, "--model-control-mode", "explicit", wait_ready=False)
    x = np.random.default_rng(62).normal(size=(4, 256)).astype(np.float32)
    cycles = 50
    rss = {}
    for c in range(1, cycles + 1):
        r = srv.post("/v2/repository/models/mlp_heavy/load")
        assert r.status_code == 200, f"cycle {c}: load {r.status_code} {r.text}"
        for _ in range(5):
            kv.json_outputs(srv.infer("mlp_heavy", {"INPUT__0": x}))
        r = srv.post("/v2/repository/models/mlp_heavy/unload")
        assert r.status_code == 200, f"cycle {c}: unload {r.status_code} {r.text}"
        srv.wait_until(lambda: not srv.model_ready("mlp_heavy"), 10,
                       f"mlp_heavy to unload (cycle {c})", interval=0.02)
        if c in (1, 10, 25, cycles):
            rss[c] = srv.rss_kib()
    print("VmRSS (KiB) after cycle: " + ", ".join(f"{c}: {v}" for c, v in rss.items()))
    print(f"first {rss[1]} KiB, final {rss[cycles]} KiB, ratio {rss[cycles] / rss[1]:.3f}")
    assert rss[cycles] <= 1.10 * rss[1], rss
