"""Backend variants beyond the generated repository: TorchScript models bound by forward()'s
argument names, tuple outputs, max_batch_size 0, INT64 tensors; XGBoost saved as UBJSON and as the
legacy binary format, FIL's output_class / predict_proba / threshold, a regressor; two instances
of one model; model_warmup; and configs that must not load (feature count mismatch, a warm-up
sample naming no input, sequence_batching).

Every model is built here, seeded, into one temporary repository that one server serves for the
whole module (--strict-readiness false, since some models are meant to fail). Expected outputs
come from the very files the server loads (torch.jit.load / xgboost.Booster)."""

import json
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest
import torch

TOL = dict(rtol=1e-5, atol=1e-5)

READY_MODELS = ("torch_named", "torch_tuple", "torch_nobatch", "torch_int64", "xgb_ubj",
                "xgb_legacy", "xgb_class", "xgb_class_t09", "xgb_reg", "mlp_inst2", "warm_ok")
BAD_MODELS = ("xgb_badfeat", "warm_bad", "seq_batch")
ALL_MODELS = READY_MODELS + BAD_MODELS
XGB_FEATURES = 8


# --------------------------------------------------------------------------------------------
# Model builders (TorchScript modules are defined at module level so torch.jit.script can read
# their source; no `from __future__ import annotations` here, for TorchScript's sake).


class NamedArgs(torch.nn.Module):
    """forward(features, scale): not symmetric, so binding the inputs by position instead of by
    name gives different numbers (both bindings broadcast, so a wrong one would not error)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4))

    def forward(self, features: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return features * self.w - 2.0 * scale


class TwoOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 3)
        self.b = torch.nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.a(x), torch.tanh(self.b(x))


class NoBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


class IntOps(torch.nn.Module):
    """INT64 in, INT64 (arithmetic) and FP32 (embedding lookup) out."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 3)

    def forward(self, ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return ids * 3 - 1, self.emb(torch.remainder(ids, 10))


def scripted(cls, seed: int) -> torch.jit.ScriptModule:
    torch.manual_seed(seed)
    return torch.jit.script(cls().eval())


def io_block(kind: str, specs) -> str:
    """`input [ ... ]` / `output [ ... ]` from (name, TYPE_X, dims) tuples."""
    items = ",\n".join(
        f'  {{ name: "{n}" data_type: {t} dims: [ {", ".join(map(str, d))} ] }}'
        for n, t, d in specs)
    return f"{kind} [\n{items}\n]\n"


def torch_config(name, max_batch, inputs, outputs, extra="") -> str:
    return (f'name: "{name}"\nplatform: "pytorch_libtorch"\nmax_batch_size: {max_batch}\n'
            + io_block("input", inputs) + io_block("output", outputs) + extra)


def fil_config(name, n_features, out_width, params: dict, extra="") -> str:
    ps = ",\n".join(f'  {{ key: "{k}" value: {{ string_value: "{v}" }} }}'
                    for k, v in params.items())
    return (f'name: "{name}"\nbackend: "fil"\nmax_batch_size: 64\n'
            + io_block("input", [("input__0", "TYPE_FP32", [n_features])])
            + io_block("output", [("output__0", "TYPE_FP32", [out_width])])
            + f"parameters [\n{ps}\n]\n" + extra)


def train_xgb(seed: int, objective: str, rounds: int = 15):
    import xgboost as xgb
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1500, XGB_FEATURES)).astype(np.float32)
    w = rng.normal(size=XGB_FEATURES)
    score = x @ w + 0.5 * rng.normal(size=x.shape[0])
    y = (score > 0).astype(np.float32) if objective.startswith("binary:") else score
    params = {"objective": objective, "max_depth": 3, "eta": 0.3, "seed": seed, "nthread": 1,
              "tree_method": "exact"}
    return xgb.train(params, xgb.DMatrix(x, label=y), num_boost_round=rounds)


MLP_IO = dict(inputs=[("INPUT__0", "TYPE_FP32", [16])], outputs=[("OUTPUT__0", "TYPE_FP32", [4])])

WARMUP_OK = """model_warmup [
  {
    name: "random_sample"
    batch_size: 4
    inputs { key: "INPUT__0" value { data_type: TYPE_FP32 dims: [ 16 ] random_data: true } }
  },
  {
    name: "zero_sample"
    batch_size: 1
    count: 2
    inputs { key: "INPUT__0" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } }
  }
]
"""

WARMUP_BAD = """model_warmup [
  {
    name: "misnamed_sample"
    batch_size: 1
    inputs { key: "NOT_AN_INPUT" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } }
  }
]
"""


def build_repo(root: Path, gen) -> Path:
    def model(name, files: dict, config: str):
        d = root / name
        (d / "1").mkdir(parents=True)
        for fname, obj in files.items():
            if isinstance(obj, torch.jit.ScriptModule):
                gen.save_torchscript(obj, d / "1" / fname)
            else:
                obj.save_model(str(d / "1" / fname))
        (d / "config.pbtxt").write_text(config)

    # 1. Inputs bound by forward()'s argument names, declared in the opposite order.
    model("torch_named", {"model.pt": scripted(NamedArgs, 11)}, torch_config(
        "torch_named", 8, [("scale", "TYPE_FP32", [1]), ("features", "TYPE_FP32", [4])],
        [("OUTPUT__0", "TYPE_FP32", [4])]))
    # 2. A tuple of two tensors.
    model("torch_tuple", {"model.pt": scripted(TwoOutputs, 12)}, torch_config(
        "torch_tuple", 8, [("INPUT__0", "TYPE_FP32", [6])],
        [("OUTPUT__0", "TYPE_FP32", [3]), ("OUTPUT__1", "TYPE_FP32", [2])]))
    # 3. No batching: dims are the full shape.
    model("torch_nobatch", {"model.pt": scripted(NoBatch, 13)}, torch_config(
        "torch_nobatch", 0, [("INPUT__0", "TYPE_FP32", [2, 3])],
        [("OUTPUT__0", "TYPE_FP32", [2, 5])]))
    # 4. INT64 end to end.
    model("torch_int64", {"model.pt": scripted(IntOps, 14)}, torch_config(
        "torch_int64", 8, [("INPUT__0", "TYPE_INT64", [5])],
        [("OUTPUT__0", "TYPE_INT64", [5]), ("OUTPUT__1", "TYPE_FP32", [5, 3])]))

    # 5. XGBoost / FIL variants: one binary classifier in two file formats and three configs.
    clf = train_xgb(15, "binary:logistic")
    model("xgb_ubj", {"xgboost.ubj": clf}, fil_config(
        "xgb_ubj", XGB_FEATURES, 2,
        {"model_type": "xgboost_ubj", "output_class": "true", "predict_proba": "true"}))
    model("xgb_legacy", {"xgboost.model": clf}, fil_config(
        "xgb_legacy", XGB_FEATURES, 1, {"model_type": "xgboost", "output_class": "false"}))
    model("xgb_class", {"xgboost.json": clf}, fil_config(
        "xgb_class", XGB_FEATURES, 1,
        {"model_type": "xgboost_json", "output_class": "true", "predict_proba": "false"}))
    model("xgb_class_t09", {"xgboost.json": clf}, fil_config(
        "xgb_class_t09", XGB_FEATURES, 1,
        {"model_type": "xgboost_json", "output_class": "true", "predict_proba": "false",
         "threshold": "0.9"}))
    model("xgb_reg", {"xgboost.json": train_xgb(16, "reg:squarederror")}, fil_config(
        "xgb_reg", XGB_FEATURES, 1, {"model_type": "xgboost_json", "output_class": "false"}))
    model("xgb_badfeat", {"xgboost.json": clf}, fil_config(
        "xgb_badfeat", XGB_FEATURES - 1, 2,
        {"model_type": "xgboost_json", "output_class": "true", "predict_proba": "true"}))

    # 6. Two CPU instances.
    mlp = gen.build_mlp(gen.SMALL_SIZES, 17)
    model("mlp_inst2", {"model.pt": mlp}, torch_config(
        "mlp_inst2", 8, **MLP_IO, extra="instance_group [ { count: 2 kind: KIND_CPU } ]\n"))
    # 7. Warm-up samples, good and misnamed.
    model("warm_ok", {"model.pt": mlp}, torch_config("warm_ok", 8, **MLP_IO, extra=WARMUP_OK))
    model("warm_bad", {"model.pt": mlp}, torch_config("warm_bad", 8, **MLP_IO, extra=WARMUP_BAD))
    # 8. Rejected scheduling.
    model("seq_batch", {"model.pt": mlp}, torch_config(
        "seq_batch", 8, **MLP_IO,
        extra="sequence_batching { max_sequence_idle_microseconds: 5000000 }\n"))
    return root


@pytest.fixture(scope="module")
def variants_repo(tmp_path_factory, gen_models) -> Path:
    return build_repo(tmp_path_factory.mktemp("variants") / "repo", gen_models)


@pytest.fixture(scope="module")
def vsrv(variants_repo, tmp_path_factory, kv):
    """One server on the variants repository; some of its models are meant to fail."""
    kv.dais_binary()
    try:
        srv = kv.DaisServer(variants_repo, ("--strict-readiness", "false"),
                            log_dir=tmp_path_factory.mktemp("variants-logs"), wait_ready=False)
    except kv.ServerStartError as e:
        pytest.fail(str(e), pytrace=False)
    srv.index_by_name = srv.wait_models_settled(ALL_MODELS)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def load_ts(variants_repo):
    cache = {}

    def load(name: str) -> torch.jit.ScriptModule:
        if name not in cache:
            cache[name] = torch.jit.load(str(variants_repo / name / "1" / "model.pt")).eval()
        return cache[name]
    return load


def booster(repo: Path, name: str, fname: str):
    import xgboost as xgb
    return xgb.Booster(model_file=str(repo / name / "1" / fname))


def xgb_predict(repo, name, fname, x):
    import xgboost as xgb
    return booster(repo, name, fname).predict(xgb.DMatrix(np.asarray(x, np.float32)))


def rows(n, d, seed):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


def infer_path(model):
    return f"/v2/models/{model}/infer"


# --------------------------------------------------------------------------------------------
# Loading.


def test_ready_models_load(vsrv):
    for m in READY_MODELS:
        e = vsrv.index_by_name[m]
        assert e["state"] == "READY", f"{m}: {e}"
        assert vsrv.model_ready(m), m


# --------------------------------------------------------------------------------------------
# 1. Inputs bound by name.


def test_torch_inputs_bound_by_argument_name(vsrv, load_ts, kv):
    feats = rows(3, 4, 101)
    scale = np.array([[0.5], [-1.25], [3.0]], np.float32)
    mod = load_ts("torch_named")
    with torch.no_grad():
        want = mod(torch.from_numpy(feats), torch.from_numpy(scale)).numpy()
        # What binding by the config's order would compute (scale as forward's first argument):
        swapped = mod(torch.from_numpy(scale), torch.from_numpy(feats)).numpy()
    assert not np.allclose(want, swapped), "test model cannot tell the two bindings apart"

    md = vsrv.get("/v2/models/torch_named").json()
    assert [i["name"] for i in md["inputs"]] == ["scale", "features"], md

    # Request inputs in forward()'s order and in the config's order: same answer.
    for order in (("features", "scale"), ("scale", "features")):
        arrays = {"features": feats, "scale": scale}
        r = vsrv.infer("torch_named", [kv.tensor_json(n, arrays[n]) for n in order])
        out = kv.json_outputs(r)["OUTPUT__0"]
        assert out.shape == (3, 4), out.shape
        np.testing.assert_allclose(out, want, **TOL, err_msg=f"request order {order}")


# --------------------------------------------------------------------------------------------
# 2. Tuple outputs.


def test_torch_tuple_outputs(vsrv, load_ts, kv):
    x = rows(4, 6, 102)
    with torch.no_grad():
        want0, want1 = (t.numpy() for t in load_ts("torch_tuple")(torch.from_numpy(x)))

    r = vsrv.infer("torch_tuple", {"INPUT__0": x}, outputs=[{"name": "OUTPUT__1"}])
    out = kv.json_outputs(r)
    assert list(out) == ["OUTPUT__1"], r.json()["outputs"]
    assert out["OUTPUT__1"].shape == (4, 2)
    np.testing.assert_allclose(out["OUTPUT__1"], want1, **TOL)

    out = kv.json_outputs(vsrv.infer("torch_tuple", {"INPUT__0": x}))
    assert sorted(out) == ["OUTPUT__0", "OUTPUT__1"], list(out)
    np.testing.assert_allclose(out["OUTPUT__0"], want0, **TOL)
    np.testing.assert_allclose(out["OUTPUT__1"], want1, **TOL)


# --------------------------------------------------------------------------------------------
# 3. max_batch_size 0.


def test_no_batching_model(vsrv, load_ts, kv):
    md = vsrv.get("/v2/models/torch_nobatch").json()
    assert md["inputs"][0]["shape"] == [2, 3], md
    assert md["outputs"][0]["shape"] == [2, 5], md
    for t in md["inputs"] + md["outputs"]:
        assert -1 not in t["shape"], md
    cfg = vsrv.get("/v2/models/torch_nobatch/config").json()
    assert cfg.get("max_batch_size", 0) == 0, cfg

    x = rows(2, 3, 103)
    with torch.no_grad():
        want = load_ts("torch_nobatch")(torch.from_numpy(x)).numpy()
    r = vsrv.infer("torch_nobatch", {"INPUT__0": x})
    out = kv.json_outputs(r)["OUTPUT__0"]
    assert r.json()["outputs"][0]["shape"] == [2, 5]
    np.testing.assert_allclose(out, want, **TOL)

    r = vsrv.infer("torch_nobatch", {"INPUT__0": x[None]})  # [1, 2, 3]: no batch dimension
    assert r.status_code == 400, f"{r.status_code} {r.text[:300]}"
    kv.error_text(r)


# --------------------------------------------------------------------------------------------
# 4. INT64.


INT_IDS = np.array([[0, 1, 2, 3, 4],
                    [-7, 123456789, 2 ** 40 + 3, -(2 ** 40) - 5, 9],
                    [2 ** 31, -(2 ** 31) - 1, 10, 11, 99]], np.int64)


def int_refs(load_ts):
    with torch.no_grad():
        a, b = load_ts("torch_int64")(torch.from_numpy(INT_IDS))
    return a.numpy(), b.numpy()


def test_int64_json(vsrv, load_ts, kv):
    want0, want1 = int_refs(load_ts)
    assert want0.dtype == np.int64
    r = vsrv.infer("torch_int64", [kv.tensor_json("INPUT__0", INT_IDS, "INT64")])
    out = kv.json_outputs(r)
    by_name = {o["name"]: o for o in r.json()["outputs"]}
    assert by_name["OUTPUT__0"]["datatype"] == "INT64", by_name
    assert by_name["OUTPUT__1"]["datatype"] == "FP32", by_name
    np.testing.assert_array_equal(out["OUTPUT__0"], want0)
    assert out["OUTPUT__1"].shape == (3, 5, 3)
    np.testing.assert_allclose(out["OUTPUT__1"], want1, **TOL)


def test_int64_binary(vsrv, load_ts, kv):
    want0, want1 = int_refs(load_ts)
    body, headers = kv.binary_request(
        {"INPUT__0": INT_IDS}, datatype="INT64",
        outputs=[{"name": n, "parameters": {"binary_data": True}}
                 for n in ("OUTPUT__0", "OUTPUT__1")])
    r = vsrv.post(infer_path("torch_int64"), data=body, headers=headers)
    header, out = kv.decode_response(r)
    sizes = {o["name"]: o["parameters"]["binary_data_size"] for o in header["outputs"]}
    assert sizes == {"OUTPUT__0": 3 * 5 * 8, "OUTPUT__1": 3 * 5 * 3 * 4}, header
    assert out["OUTPUT__0"].dtype == np.dtype("<i8")
    np.testing.assert_array_equal(out["OUTPUT__0"], want0)
    np.testing.assert_allclose(out["OUTPUT__1"], want1, **TOL)


# --------------------------------------------------------------------------------------------
# 5. XGBoost / FIL.


def fil_out(vsrv, kv, model, x):
    out = kv.json_outputs(vsrv.infer(model, {"input__0": x}))
    assert list(out) == ["output__0"], list(out)
    return out["output__0"]


def test_xgb_ubj(vsrv, variants_repo, kv):
    x = rows(9, XGB_FEATURES, 104)
    p = xgb_predict(variants_repo, "xgb_ubj", "xgboost.ubj", x)
    got = fil_out(vsrv, kv, "xgb_ubj", x)
    assert got.shape == (9, 2)
    np.testing.assert_allclose(got, np.stack([1 - p, p], axis=1), **TOL)


def test_xgb_legacy_binary(vsrv, variants_repo, kv):
    x = rows(9, XGB_FEATURES, 105)
    p = xgb_predict(variants_repo, "xgb_legacy", "xgboost.model", x)
    got = fil_out(vsrv, kv, "xgb_legacy", x)
    assert got.shape == (9, 1)
    np.testing.assert_allclose(got[:, 0], p, **TOL)
    # The same trees as the UBJSON copy.
    np.testing.assert_allclose(p, xgb_predict(variants_repo, "xgb_ubj", "xgboost.ubj", x), **TOL)


def test_xgb_class_index_and_threshold(vsrv, variants_repo, kv):
    x = rows(60, XGB_FEATURES, 106)
    p = xgb_predict(variants_repo, "xgb_class", "xgboost.json", x)
    c05 = fil_out(vsrv, kv, "xgb_class", x)
    c09 = fil_out(vsrv, kv, "xgb_class_t09", x)
    assert c05.shape == c09.shape == (60, 1)
    for got, t in ((c05[:, 0], 0.5), (c09[:, 0], 0.9)):
        assert set(np.unique(got)) <= {0.0, 1.0}, np.unique(got)
        clear = np.abs(p - t) > 1e-6  # rows on the threshold itself are not checked
        np.testing.assert_array_equal(got[clear], (p[clear] > t).astype(np.float32),
                                      err_msg=f"threshold {t}")
    between = (p > 0.5 + 1e-6) & (p < 0.9 - 1e-6)
    assert between.sum() >= 3, f"test data has too few rows with 0.5 < p < 0.9: {between.sum()}"
    assert (c05[between, 0] == 1).all() and (c09[between, 0] == 0).all()
    assert (c05[:, 0] != c09[:, 0]).sum() >= 3


def test_xgb_regression_raw(vsrv, variants_repo, kv):
    x = rows(12, XGB_FEATURES, 107)
    pred = xgb_predict(variants_repo, "xgb_reg", "xgboost.json", x)
    assert pred.min() < 0 or pred.max() > 1, "regression test targets look like probabilities"
    got = fil_out(vsrv, kv, "xgb_reg", x)
    assert got.shape == (12, 1)
    np.testing.assert_allclose(got[:, 0], pred, **TOL)


def test_xgb_feature_mismatch_unavailable(vsrv):
    e = vsrv.index_by_name["xgb_badfeat"]
    assert e["state"] == "UNAVAILABLE", e
    reason = e.get("reason") or ""
    assert "feature" in reason.lower(), e
    assert "8" in reason, e
    assert not vsrv.model_ready("xgb_badfeat")


# --------------------------------------------------------------------------------------------
# 6. Two instances.


def test_two_instances_concurrent(vsrv, variants_repo, refs, kv):
    cfg = vsrv.get("/v2/models/mlp_inst2/config").json()
    groups = cfg["instance_group"]
    assert sum(g.get("count", 1) for g in groups) == 2, groups
    before = vsrv.stats("mlp_inst2")
    n = 32
    xs = [rows(1 + i % 3, 16, 200 + i) for i in range(n)]
    bodies = [json.dumps(kv.infer_body({"INPUT__0": x})).encode() for x in xs]
    results = kv.concurrent_posts(vsrv.http_port, infer_path("mlp_inst2"), bodies)
    for i, (res, x) in enumerate(zip(results, xs)):
        assert not isinstance(res, BaseException), f"request {i}: {res!r}"
        status, body = res
        assert status == 200, f"request {i}: {status} {body[:300]!r}"
        o = json.loads(body)["outputs"][0]
        got = np.asarray(o["data"], np.float32).reshape(o["shape"])
        np.testing.assert_allclose(got, refs.mlp(variants_repo, "mlp_inst2", x), **TOL,
                                   err_msg=f"request {i}")
    s = vsrv.stats("mlp_inst2")
    items = sum(x.shape[0] for x in xs)
    assert s["inference_stats"]["success"]["count"] - \
        before["inference_stats"]["success"]["count"] == n, s
    assert s["inference_count"] - before["inference_count"] == items, (before, s)
    assert s["execution_count"] - before["execution_count"] >= 1, (before, s)


# --------------------------------------------------------------------------------------------
# 7. Warm-up.


def test_warmup_ok(vsrv, variants_repo, refs, kv):
    assert vsrv.index_by_name["warm_ok"]["state"] == "READY"
    x = rows(2, 16, 108)
    out = kv.json_outputs(vsrv.infer("warm_ok", {"INPUT__0": x}))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(variants_repo, "warm_ok", x), **TOL)


def test_warmup_bad_input_name_unavailable(vsrv):
    e = vsrv.index_by_name["warm_bad"]
    assert e["state"] == "UNAVAILABLE", e
    reason = e.get("reason") or ""
    assert "misnamed_sample" in reason, e
    assert "warmup" in reason.lower().replace("-", "").replace("_", ""), e
    assert not vsrv.model_ready("warm_bad")


# --------------------------------------------------------------------------------------------
# 8. sequence_batching.


def test_sequence_batching_unavailable(vsrv):
    e = vsrv.index_by_name["seq_batch"]
    assert e["state"] == "UNAVAILABLE", e
    reason = e.get("reason") or ""
    assert "sequence_batching" in reason and "not supported" in reason, e
    assert not vsrv.model_ready("seq_batch")
