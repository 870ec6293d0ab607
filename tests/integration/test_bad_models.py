"""A repository with a broken model: an invalid config.pbtxt and a corrupt model file. The broken
models are UNAVAILABLE with a reason; the others serve."""

import shutil

import numpy as np
import pytest

GOOD = ("mlp_small", "mlp_heavy", "xgb_binary", "xgb_multiclass")
BAD = ("bad_config", "bad_model")
ALL = GOOD + BAD


@pytest.fixture
def broken_repo(repo_copy):
    src = repo_copy / "mlp_small"
    cfg = (src / "config.pbtxt").read_text()

    d = repo_copy / "bad_config"
    shutil.copytree(src, d)
    (d / "config.pbtxt").write_text(
        cfg.replace('name: "mlp_small"', 'name: "bad_config"') + "\nbogus_field_xyz: 3\n")

    d = repo_copy / "bad_model"
    shutil.copytree(src, d)
    (d / "config.pbtxt").write_text(cfg.replace('name: "mlp_small"', 'name: "bad_model"'))
    (d / "1" / "model.pt").write_bytes(np.random.default_rng(41).bytes(4096))
    return repo_copy


def check_broken(srv, kv, model_repo, refs):
    idx = srv.wait_models_settled(ALL)
    for m in GOOD:
        assert idx[m]["state"] == "READY", idx[m]
    for m in BAD:
        e = idx[m]
        assert e["state"] == "UNAVAILABLE", e
        assert isinstance(e.get("reason"), str) and e["reason"], f"no reason for {m}: {e}"
    assert "bogus_field_xyz" in idx["bad_config"]["reason"], idx["bad_config"]
    print(f"reasons: {idx['bad_config']['reason']!r} / {idx['bad_model']['reason']!r}")

    for m in BAD:
        assert srv.get(f"/v2/models/{m}/ready").status_code != 200
        r = srv.infer(m, {"INPUT__0": np.zeros((1, 16), np.float32)})
        assert r.status_code in (400, 404, 503), f"{m}: {r.status_code} {r.text[:300]}"
        kv.error_text(r)

    x = np.random.default_rng(42).normal(size=(2, 16)).astype(np.float32)
    out = kv.json_outputs(srv.infer("mlp_small", {"INPUT__0": x}))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x),
                               rtol=1e-5, atol=1e-5)
    xb = np.random.default_rng(43).normal(size=(2, 8)).astype(np.float32)
    kv.json_outputs(srv.infer("xgb_binary", {"input__0": xb}))

    # The readiness gauge the DaisModelNotReady alert reads: 1 for a served version, 0 for one
    # whose load failed.
    metrics = srv.get("/metrics").text
    assert 'dais_model_ready{model="mlp_small",version="1"} 1' in metrics
    assert 'dais_model_ready{model="bad_model",version="1"} 0' in metrics

    r = srv.get("/healthz")
    assert r.status_code == 503, f"/healthz {r.status_code}: {r.text[:300]}"
    body = r.json()
    assert body.get("status") != "ok", body
    text = r.text
    for m in BAD:
        assert m in text, f"/healthz does not name {m}: {text}"
    return idx


def test_broken_models_non_strict(start_server, broken_repo, model_repo, refs, kv):
    srv = start_server(broken_repo, "--strict-readiness", "false", wait_ready=False)
    check_broken(srv, kv, model_repo, refs)
    assert srv.get("/v2/health/live").status_code == 200
    assert srv.get("/v2/health/ready").status_code == 200, \
        "with --strict-readiness false the server is ready although some models are not"


def test_broken_models_strict(start_server, broken_repo, model_repo, refs, kv):
    srv = start_server(broken_repo, wait_ready=False)
    check_broken(srv, kv, model_repo, refs)
    assert srv.get("/v2/health/live").status_code == 200
    assert srv.get("/v2/health/ready").status_code != 200, \
        "strict readiness (the default): not ready while a model failed to load"


def test_index_ready_filter(start_server, broken_repo, kv):
    srv = start_server(broken_repo, "--strict-readiness", "false", wait_ready=False)
    srv.wait_models_settled(ALL)
    ready = {e["name"] for e in srv.index(ready=True)}
    assert set(GOOD) <= ready and not (set(BAD) & ready), ready
