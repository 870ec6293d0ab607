"""JSON inference against references computed in Python from the same model files."""

import numpy as np
import pytest

TOL = dict(rtol=1e-5, atol=1e-5)


def rows(n, d, seed):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


def test_mlp_small(server, model_repo, refs, kv):
    x = rows(3, 16, 1)
    r = server.infer("mlp_small", {"INPUT__0": x})
    out = kv.json_outputs(r)
    body = r.json()
    assert body["model_name"] == "mlp_small"
    assert body.get("model_version", "1") == "1"
    assert [o["name"] for o in body["outputs"]] == ["OUTPUT__0"]
    o = body["outputs"][0]
    assert o["datatype"] == "FP32" and o["shape"] == [3, 4], o
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x), **TOL)


def test_mlp_small_versioned_url(server, model_repo, refs, kv):
    x = rows(2, 16, 2)
    out = kv.json_outputs(server.infer("mlp_small", {"INPUT__0": x}, version=1))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x), **TOL)


def test_nested_data(server, model_repo, refs, kv):
    x = rows(3, 16, 3)
    r = server.infer("mlp_small", [kv.tensor_json("INPUT__0", x, nested=True)])
    out = kv.json_outputs(r)
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x), **TOL)


@pytest.mark.parametrize("n", [1, 8, 64])
def test_mlp_heavy(server, model_repo, refs, kv, n):
    x = rows(n, 256, 4)
    out = kv.json_outputs(server.infer("mlp_heavy", {"INPUT__0": x}))
    assert out["OUTPUT__0"].shape == (n, 10)
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_heavy", x),
                               rtol=1e-4, atol=1e-5)


def test_xgb_binary(server, model_repo, refs, kv):
    x = rows(5, 8, 5)
    r = server.infer("xgb_binary", {"input__0": x})
    out = kv.json_outputs(r)["output__0"]
    assert out.shape == (5, 2)
    p = refs.xgb(model_repo, "xgb_binary", x)
    np.testing.assert_allclose(out, np.stack([1 - p, p], axis=1), **TOL)


def test_xgb_multiclass(server, model_repo, refs, kv):
    md = server.get("/v2/models/xgb_multiclass").json()
    in_name, out_name = md["inputs"][0]["name"], md["outputs"][0]["name"]
    x = rows(4, 6, 6)
    out = kv.json_outputs(server.infer("xgb_multiclass", {in_name: x}))
    assert list(out) == [out_name]
    prob = out[out_name]
    assert prob.shape == (4, 3), prob.shape
    np.testing.assert_allclose(prob.sum(axis=1), np.ones(4), atol=1e-5)
    np.testing.assert_allclose(prob, refs.xgb(model_repo, "xgb_multiclass", x), **TOL)


def test_request_id_echoed(server, kv):
    x = rows(1, 16, 7)
    r = server.infer("mlp_small", {"INPUT__0": x}, id="req-42/é")
    kv.json_outputs(r)
    assert r.json()["id"] == "req-42/é"
    r = server.infer("mlp_small", {"INPUT__0": x})
    kv.json_outputs(r)
    assert r.json().get("id", "") == ""


def test_requested_output_subset(server, model_repo, refs, kv):
    x = rows(2, 16, 8)
    r = server.infer("mlp_small", {"INPUT__0": x}, outputs=[{"name": "OUTPUT__0"}])
    out = kv.json_outputs(r)
    assert list(out) == ["OUTPUT__0"]
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x), **TOL)


def test_unknown_output_name(server, kv):
    x = rows(1, 16, 9)
    r = server.infer("mlp_small", {"INPUT__0": x}, outputs=[{"name": "NO_SUCH_OUTPUT"}])
    assert r.status_code == 400, r.text
    assert "NO_SUCH_OUTPUT" in kv.error_text(r)
    kv.json_outputs(server.infer("mlp_small", {"INPUT__0": x}))
