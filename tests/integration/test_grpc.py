"""The KServe v2 gRPC frontend (package inference, service GRPCInferenceService, plus
grpc.health.v1.Health): every method, streaming, deadlines, cancellation, malformed requests.

Stubs are generated at test time from proto/*.proto (grpc_client.generate_stubs). The whole module
is skipped while the server logs `grpc=0` (gRPC frontend not built).
"""

from __future__ import annotations

import os

import queue
import re
import shutil
import signal
import time

import grpc
import numpy as np
import pytest

import grpc_client
from grpc_client import GrpcClient, decode_outputs

TOL = dict(rtol=1e-5, atol=1e-5)
SC = grpc.StatusCode
MODELS = ("mlp_small", "mlp_heavy", "xgb_binary", "xgb_multiclass")

# mlp_heavy made slow: a lone request waits up to SLOW_DELAY_S in the batcher for a batch of 32.
SLOW_DELAY_S = 0.4
SLOW_BATCHING = f"""dynamic_batching {{
  preferred_batch_size: [ 32 ]
  max_queue_delay_microseconds: {int(SLOW_DELAY_S * 1e6)}
}}"""


def rows(n, d, seed):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


# --------------------------------------------------------------------------------------------
# Fixtures.


@pytest.fixture(scope="session")
def stubs(tmp_path_factory):
    return grpc_client.generate_stubs(tmp_path_factory.mktemp("grpc_stubs"))


def require_grpc(srv):
    """Skips on a build without gRPC; fails instead when DAIS_REQUIRE_GRPC is set (the test
    command sets it, so CI never skips these silently)."""
    if not srv.grpc_port:
        if os.environ.get("DAIS_REQUIRE_GRPC", "0") != "0":
            pytest.fail("the server logged grpc=0: the gRPC frontend was not built")
        pytest.skip("gRPC frontend not built")


@pytest.fixture(scope="module")
def g(server, stubs):
    """A client of the shared server; skips the test when the server has no gRPC port."""
    require_grpc(server)
    client = GrpcClient(stubs, server.grpc_port)
    yield client
    client.close()


def make_slow_repo(model_repo, dst):
    """A copy of the repository whose mlp_heavy holds a lone request for SLOW_DELAY_S."""
    repo = dst / "repo"
    shutil.copytree(model_repo, repo)
    cfg_path = repo / "mlp_heavy" / "config.pbtxt"
    cfg, n = re.subn(r"dynamic_batching \{.*?\n\}", SLOW_BATCHING, cfg_path.read_text(),
                     flags=re.S)
    assert n == 1, cfg
    cfg_path.write_text(cfg)
    return repo


@pytest.fixture(scope="session")
def slow_repo(model_repo, tmp_path_factory):
    return make_slow_repo(model_repo, tmp_path_factory.mktemp("grpc_slow"))


@pytest.fixture
def slow(g, slow_repo, stubs, start_server):
    """(server, client, repo): a private server (a crash stays within one test) on
    make_slow_repo's repository."""
    srv = start_server(slow_repo)
    require_grpc(srv)
    client = GrpcClient(stubs, srv.grpc_port)
    yield srv, client, slow_repo
    client.close()


# Regression tests for two races fixed in kserve_grpc.cc: InferReactor::Complete touched the
# reactor after Finish (use after free on expired/cancelled unary calls), and StreamReactor
# counted a request only after starting the next read (a half-close could finish the stream
# early). The tests marked below hammer exactly those paths.


def expect_error(fn, codes, words=(), what=""):
    """Calls fn(); asserts it raises a grpc.RpcError with a code in `codes` and a non-empty
    message containing one of `words` (case-insensitive). Returns the error."""
    if isinstance(codes, SC):
        codes = (codes,)
    try:
        res = fn()
    except grpc.RpcError as e:
        code, details = e.code(), e.details() or ""
        assert code in codes, f"{what}: status {code} ({details!r}), expected one of {codes}"
        assert details.strip(), f"{what}: {code} with an empty message"
        if words:
            assert any(w.lower() in details.lower() for w in words), \
                f"{what}: message {details!r} mentions none of {list(words)}"
        return e
    raise AssertionError(f"{what}: expected {codes}, the call succeeded: {res!r}"[:2000])


def heavy_stats(c):
    r = c.stub.ModelStatistics(c.pb.ModelStatisticsRequest(name="mlp_heavy"), timeout=10)
    assert len(r.model_stats) == 1, r
    return r.model_stats[0].inference_stats


def assert_still_serving(client, model_repo, refs):
    x = rows(2, 16, 99)
    out = decode_outputs(client.infer("mlp_small", {"INPUT__0": x}))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x), **TOL)


# --------------------------------------------------------------------------------------------
# Stub generation (needs no server).


def test_stub_generation(stubs):
    svc = stubs.pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    methods = {m.name for m in svc.methods}
    for m in ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
              "ModelInfer", "ModelStreamInfer", "ModelConfig", "ModelStatistics",
              "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload"):
        assert m in methods, m
    assert stubs.pb.DESCRIPTOR.package == "inference"
    assert stubs.health_pb.DESCRIPTOR.services_by_name["Health"].full_name == \
        "grpc.health.v1.Health"


# --------------------------------------------------------------------------------------------
# Health, metadata, configuration, repository, statistics.


def test_server_live_ready(g):
    assert g.stub.ServerLive(g.pb.ServerLiveRequest(), timeout=10).live is True
    assert g.stub.ServerReady(g.pb.ServerReadyRequest(), timeout=10).ready is True


def test_health_check(g, stubs):
    hp = stubs.health_pb
    r = g.health.Check(hp.HealthCheckRequest(service=""), timeout=10)
    assert r.status == hp.HealthCheckResponse.SERVING, r


def test_health_check_unknown_service(g, stubs):
    """grpc.health.v1: an unknown service is NOT_FOUND (or reported SERVICE_UNKNOWN)."""
    hp = stubs.health_pb
    try:
        r = g.health.Check(hp.HealthCheckRequest(service="no.such.Service"), timeout=10)
    except grpc.RpcError as e:
        assert e.code() == SC.NOT_FOUND, (e.code(), e.details())
    else:
        assert r.status == hp.HealthCheckResponse.SERVICE_UNKNOWN, r


@pytest.mark.parametrize("model", MODELS)
def test_model_ready(g, model):
    assert g.stub.ModelReady(g.pb.ModelReadyRequest(name=model), timeout=10).ready is True
    r = g.stub.ModelReady(g.pb.ModelReadyRequest(name=model, version="1"), timeout=10)
    assert r.ready is True


@pytest.mark.parametrize("name,version", [("no_such_model", ""), ("mlp_small", "9")])
def test_model_ready_unknown(g, name, version):
    try:
        r = g.stub.ModelReady(g.pb.ModelReadyRequest(name=name, version=version), timeout=10)
    except grpc.RpcError as e:
        assert e.code() in (SC.NOT_FOUND, SC.INVALID_ARGUMENT), (e.code(), e.details())
    else:
        assert r.ready is False, f"{name} v{version!r} reported ready"


def test_server_metadata(g):
    r = g.stub.ServerMetadata(g.pb.ServerMetadataRequest(), timeout=10)
    assert r.name == "dais", r
    assert r.version, r
    for e in ("model_repository", "statistics", "model_configuration"):
        assert e in r.extensions, f"extension {e!r} missing from {list(r.extensions)}"


@pytest.mark.parametrize("model,platform,inp,in_dims,out,out_dims", [
    ("mlp_small", "pytorch_libtorch", "INPUT__0", [16], "OUTPUT__0", [4]),
    ("mlp_heavy", "pytorch_libtorch", "INPUT__0", [256], "OUTPUT__0", [10]),
    ("xgb_binary", None, "input__0", [8], "output__0", [2]),
])
@pytest.mark.parametrize("version", ["", "1"])
def test_model_metadata(g, model, platform, inp, in_dims, out, out_dims, version):
    r = g.stub.ModelMetadata(g.pb.ModelMetadataRequest(name=model, version=version), timeout=10)
    assert r.name == model, r
    assert list(r.versions) == ["1"], r
    if platform:
        assert r.platform == platform, r
    assert [(t.name, t.datatype, list(t.shape)) for t in r.inputs] == \
        [(inp, "FP32", [-1] + in_dims)], r
    assert [(t.name, t.datatype, list(t.shape)) for t in r.outputs] == \
        [(out, "FP32", [-1] + out_dims)], r


def test_model_metadata_unknown(g):
    expect_error(lambda: g.stub.ModelMetadata(g.pb.ModelMetadataRequest(name="no_such_model"),
                                              timeout=10),
                 (SC.NOT_FOUND, SC.INVALID_ARGUMENT), ["no_such_model"], "metadata")
    expect_error(lambda: g.stub.ModelMetadata(
        g.pb.ModelMetadataRequest(name="mlp_small", version="9"), timeout=10),
        (SC.NOT_FOUND, SC.INVALID_ARGUMENT), ["9", "version"], "metadata v9")


def test_model_config(g, stubs):
    cp = stubs.config_pb
    c = g.stub.ModelConfig(g.pb.ModelConfigRequest(name="mlp_small"), timeout=10).config
    assert c.name == "mlp_small", c
    assert c.max_batch_size == 64, c
    assert c.platform == "pytorch_libtorch" or c.backend == "pytorch", c
    assert [(i.name, i.data_type, list(i.dims)) for i in c.input] == \
        [("INPUT__0", cp.DataType.Value("TYPE_FP32"), [16])], c
    assert [(o.name, o.data_type, list(o.dims)) for o in c.output] == \
        [("OUTPUT__0", cp.DataType.Value("TYPE_FP32"), [4])], c
    assert c.HasField("dynamic_batching"), c
    # The auto-completed model has a configuration too.
    c = g.stub.ModelConfig(g.pb.ModelConfigRequest(name="xgb_multiclass", version="1"),
                           timeout=10).config
    assert c.name == "xgb_multiclass" and c.max_batch_size > 0, c
    assert len(c.input) == 1 and list(c.input[0].dims) == [6], c
    assert len(c.output) == 1, c


def test_model_config_unknown(g):
    expect_error(lambda: g.stub.ModelConfig(g.pb.ModelConfigRequest(name="no_such_model"),
                                            timeout=10),
                 (SC.NOT_FOUND, SC.INVALID_ARGUMENT), ["no_such_model"], "config")


def test_repository_index(g):
    for ready in (False, True):
        r = g.stub.RepositoryIndex(g.pb.RepositoryIndexRequest(ready=ready), timeout=10)
        by_name = {}
        for m in r.models:
            by_name.setdefault(m.name, []).append(m)
        for model in MODELS:
            assert model in by_name, f"{model} missing from the index (ready={ready}): {r}"
            e = by_name[model]
            assert any(m.state == "READY" and m.version == "1" for m in e), e


def test_model_statistics(g, model_repo, refs):
    def stats():
        r = g.stub.ModelStatistics(g.pb.ModelStatisticsRequest(name="mlp_small"), timeout=10)
        s = [m for m in r.model_stats if m.name == "mlp_small"]
        assert len(s) == 1, r
        return s[0]

    before = stats()
    x = rows(3, 16, 11)
    for _ in range(2):
        decode_outputs(g.infer("mlp_small", {"INPUT__0": x}))
    s = stats()
    assert s.version == "1", s
    assert s.last_inference > 1_600_000_000_000, "last_inference is ms since the epoch"
    assert s.inference_count - before.inference_count == 6, (before, s)
    assert 1 <= s.execution_count - before.execution_count <= 2, (before, s)
    a, b = s.inference_stats, before.inference_stats
    assert a.success.count - b.success.count == 2, (b, a)
    assert a.success.ns > b.success.ns, (b, a)
    assert a.queue.count - b.queue.count == 2, (b, a)
    assert a.compute_infer.count > b.compute_infer.count, (b, a)
    assert a.fail.count == b.fail.count, (b, a)
    assert len(s.batch_stats) >= 1, s
    sizes = {bs.batch_size for bs in s.batch_stats}
    assert all(bs.batch_size >= 1 and bs.compute_infer.count >= 1 for bs in s.batch_stats), s
    assert sizes & {3, 6}, f"a batch of 3 (or 2x3) rows should appear in batch_stats: {sizes}"


def test_model_statistics_all_and_versioned(g):
    r = g.stub.ModelStatistics(g.pb.ModelStatisticsRequest(), timeout=10)
    names = {m.name for m in r.model_stats}
    assert set(MODELS) <= names, names
    r = g.stub.ModelStatistics(g.pb.ModelStatisticsRequest(name="xgb_binary", version="1"),
                               timeout=10)
    assert [(m.name, m.version) for m in r.model_stats] == [("xgb_binary", "1")], r
    expect_error(lambda: g.stub.ModelStatistics(
        g.pb.ModelStatisticsRequest(name="no_such_model"), timeout=10),
        (SC.NOT_FOUND, SC.INVALID_ARGUMENT), ["no_such_model"], "stats")


# --------------------------------------------------------------------------------------------
# Repository control.


@pytest.mark.parametrize("method", ["RepositoryModelLoad", "RepositoryModelUnload"])
def test_load_unload_refused_without_explicit_mode(g, method, model_repo, refs):
    req_type = getattr(g.pb, method + "Request")
    expect_error(lambda: getattr(g.stub, method)(req_type(model_name="mlp_small"), timeout=10),
                 (SC.FAILED_PRECONDITION, SC.INVALID_ARGUMENT, SC.UNAVAILABLE),
                 ["explicit"], method)
    assert g.stub.ModelReady(g.pb.ModelReadyRequest(name="mlp_small"), timeout=10).ready
    assert_still_serving(g, model_repo, refs)


def test_explicit_load_unload(g, stubs, start_server, model_repo, refs):
    srv = start_server(model_repo, "--model-control-mode", "explicit", wait_ready=False)
    require_grpc(srv)
    c = GrpcClient(stubs, srv.grpc_port)
    pb = c.pb
    try:
        def ready(name="mlp_small"):
            try:
                return c.stub.ModelReady(pb.ModelReadyRequest(name=name), timeout=10).ready
            except grpc.RpcError as e:
                assert e.code() in (SC.NOT_FOUND, SC.UNAVAILABLE, SC.INVALID_ARGUMENT), e
                return False

        idx = c.stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=10)
        assert set(MODELS) <= {m.name for m in idx.models}, idx
        assert not [m for m in idx.models if m.state == "READY"], idx
        assert not ready()
        x = rows(2, 16, 12)
        expect_error(lambda: c.infer("mlp_small", {"INPUT__0": x}),
                     (SC.NOT_FOUND, SC.UNAVAILABLE, SC.FAILED_PRECONDITION,
                      SC.INVALID_ARGUMENT), ["mlp_small"], "infer before load")

        c.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="mlp_small"),
                                   timeout=60)
        assert ready(), "load returned OK but the model is not ready"
        out = decode_outputs(c.infer("mlp_small", {"INPUT__0": x}))
        np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x),
                                   **TOL)
        idx = c.stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True), timeout=10)
        assert [(m.name, m.version, m.state) for m in idx.models] == \
            [("mlp_small", "1", "READY")], idx
        assert not ready("mlp_heavy")

        c.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp_small"),
                                     timeout=60)
        srv.wait_until(lambda: not ready(), 10, "mlp_small to unload")
        expect_error(lambda: c.infer("mlp_small", {"INPUT__0": x}),
                     (SC.NOT_FOUND, SC.UNAVAILABLE, SC.FAILED_PRECONDITION,
                      SC.INVALID_ARGUMENT), ["mlp_small"], "infer after unload")

        expect_error(lambda: c.stub.RepositoryModelLoad(
            pb.RepositoryModelLoadRequest(model_name="no_such_model"), timeout=60),
            (SC.NOT_FOUND, SC.INVALID_ARGUMENT), ["no_such_model"], "load unknown")

        # Load again after unload.
        c.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="mlp_small"),
                                   timeout=60)
        out = decode_outputs(c.infer("mlp_small", {"INPUT__0": x}))
        np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x),
                                   **TOL)
        assert c.stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live
    finally:
        c.close()


# --------------------------------------------------------------------------------------------
# ModelInfer.


def test_infer_mlp_small_raw(g, model_repo, refs):
    x = rows(3, 16, 1)
    r = g.infer("mlp_small", {"INPUT__0": x})
    assert r.model_name == "mlp_small", r
    assert r.model_version in ("", "1"), r
    assert [(o.name, o.datatype, list(o.shape)) for o in r.outputs] == \
        [("OUTPUT__0", "FP32", [3, 4])], r
    assert len(r.raw_output_contents) == 1, "outputs come back in raw_output_contents"
    assert len(r.raw_output_contents[0]) == 3 * 4 * 4
    out = decode_outputs(r)
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x), **TOL)


def test_infer_xgb_binary_raw(g, model_repo, refs):
    x = rows(5, 8, 5)
    r = g.infer("xgb_binary", {"input__0": x}, version="1")
    assert [(o.name, o.datatype, list(o.shape)) for o in r.outputs] == \
        [("output__0", "FP32", [5, 2])], r
    assert len(r.raw_output_contents) == 1
    p = refs.xgb(model_repo, "xgb_binary", x)
    np.testing.assert_allclose(decode_outputs(r)["output__0"], np.stack([1 - p, p], axis=1),
                               **TOL)


def test_infer_mlp_heavy_batch(g, model_repo, refs):
    x = rows(8, 256, 4)
    out = decode_outputs(g.infer("mlp_heavy", {"INPUT__0": x}))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_heavy", x),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model,inp,out,dim", [("mlp_small", "INPUT__0", "OUTPUT__0", 16),
                                               ("xgb_binary", "input__0", "output__0", 8)])
def test_infer_typed_contents(g, model_repo, refs, model, inp, out, dim):
    x = rows(4, dim, 2)
    req = g.request(model, {inp: x}, typed=True)
    assert len(req.raw_input_contents) == 0
    assert len(req.inputs[0].contents.fp32_contents) == 4 * dim
    r = g.stub.ModelInfer(req, timeout=30)
    got = decode_outputs(r)[out]
    if model == "mlp_small":
        want = refs.mlp(model_repo, model, x)
    else:
        p = refs.xgb(model_repo, model, x)
        want = np.stack([1 - p, p], axis=1)
    np.testing.assert_allclose(got, want, **TOL)


def test_infer_requested_output_and_id(g, model_repo, refs):
    x = rows(2, 16, 8)
    r = g.infer("mlp_small", {"INPUT__0": x}, outputs=["OUTPUT__0"], id="req-42/é")
    assert r.id == "req-42/é", r.id
    assert [o.name for o in r.outputs] == ["OUTPUT__0"], r
    np.testing.assert_allclose(decode_outputs(r)["OUTPUT__0"],
                               refs.mlp(model_repo, "mlp_small", x), **TOL)
    r = g.infer("mlp_small", {"INPUT__0": x})
    assert r.id == "", r.id


def test_infer_concurrent(g, model_repo, refs):
    """16 concurrent calls on one channel all get their own answers."""
    xs = [rows(1 + i % 3, 16, 100 + i) for i in range(16)]
    futs = [g.stub.ModelInfer.future(g.request("mlp_small", {"INPUT__0": x}, id=f"c{i}"),
                                     timeout=30) for i, x in enumerate(xs)]
    for i, (f, x) in enumerate(zip(futs, xs)):
        r = f.result()
        assert r.id == f"c{i}", r.id
        np.testing.assert_allclose(decode_outputs(r)["OUTPUT__0"],
                                   refs.mlp(model_repo, "mlp_small", x), **TOL)


# --------------------------------------------------------------------------------------------
# Malformed requests: INVALID_ARGUMENT (NOT_FOUND for an unknown model) naming the problem.


X3 = rows(3, 16, 21)
RAW3 = X3.astype("<f4").tobytes()


def bad_request(pb, case):
    T = pb.ModelInferRequest.InferInputTensor

    def req(inputs, raw=(), model="mlp_small", version="", outputs=()):
        r = pb.ModelInferRequest(model_name=model, model_version=version)
        r.inputs.extend(inputs)
        r.raw_input_contents.extend(raw)
        for o in outputs:
            r.outputs.add(name=o)
        return r

    def good(name="INPUT__0", shape=(3, 16), datatype="FP32"):
        return T(name=name, shape=list(shape), datatype=datatype)

    def typed(n, name="INPUT__0", shape=(3, 16)):
        t = good(name=name, shape=shape)
        t.contents.fp32_contents.extend(np.resize(X3.reshape(-1), n).tolist())
        return t

    def int_typed():
        t = good()
        t.contents.int_contents.extend([1] * 48)  # an FP32 input's data in the INT32 field
        return t

    return {
        "raw_count_more_than_inputs": req([good()], [RAW3, RAW3]),
        "raw_size_mismatch": req([good()], [RAW3[:100]]),
        "raw_and_typed_mixed": req([typed(48)], [RAW3]),
        "no_data": req([good()]),
        "wrong_datatype": req([good(datatype="INT32")], [RAW3]),
        "unknown_datatype": req([good(datatype="FP99")], [RAW3]),
        "wrong_shape": req([good(shape=(3, 15))], [RAW3[:3 * 15 * 4]]),
        "rank_too_low": req([good(shape=(48,))], [RAW3]),
        "batch_too_large": req([good(shape=(65, 16))], [np.zeros((65, 16), "<f4").tobytes()]),
        "unknown_input_name": req([good(), good(name="BOGUS_IN")], [RAW3, RAW3]),
        "wrong_input_name_only": req([good(name="BOGUS_IN")], [RAW3]),
        "missing_input": req([]),
        "typed_wrong_count": req([typed(47)]),
        "typed_wrong_field": req([int_typed()]),
        "duplicate_input": req([good(), good()], [RAW3, RAW3]),
        "duplicate_output": req([good()], [RAW3], outputs=["OUTPUT__0", "OUTPUT__0"]),
        "unknown_output": req([good()], [RAW3], outputs=["NOPE_OUT"]),
        "unknown_model": req([good()], [RAW3], model="no_such_model"),
        "unknown_version": req([good()], [RAW3], version="7"),
    }[case]


# case -> (status codes, words of which the message must contain one)
BAD_CASES = {
    "raw_count_more_than_inputs": (SC.INVALID_ARGUMENT, ["raw_input_contents", "raw", "count"]),
    "raw_size_mismatch": (SC.INVALID_ARGUMENT, ["size", "byte", "100", "192"]),
    "raw_and_typed_mixed": (SC.INVALID_ARGUMENT, ["raw_input_contents", "contents"]),
    "no_data": (SC.INVALID_ARGUMENT, ["data", "contents", "raw"]),
    "wrong_datatype": (SC.INVALID_ARGUMENT, ["datatype", "int32", "fp32", "type"]),
    "unknown_datatype": (SC.INVALID_ARGUMENT, ["fp99", "datatype"]),
    "wrong_shape": (SC.INVALID_ARGUMENT, ["shape", "[3,15]", "dims", "15"]),
    "rank_too_low": (SC.INVALID_ARGUMENT, ["shape", "[48]", "dims", "rank"]),
    "batch_too_large": (SC.INVALID_ARGUMENT, ["batch", "64", "65"]),
    "unknown_input_name": (SC.INVALID_ARGUMENT, ["bogus_in"]),
    "wrong_input_name_only": (SC.INVALID_ARGUMENT, ["bogus_in", "input__0"]),
    "missing_input": (SC.INVALID_ARGUMENT, ["input__0", "missing", "expect"]),
    "typed_wrong_count": (SC.INVALID_ARGUMENT, ["element", "count", "47", "48", "size"]),
    "typed_wrong_field": (SC.INVALID_ARGUMENT, ["fp32_contents", "contents", "48"]),
    "duplicate_input": (SC.INVALID_ARGUMENT, ["duplicate", "more than once", "input__0"]),
    "duplicate_output": (SC.INVALID_ARGUMENT, ["duplicate", "more than once", "output__0"]),
    "unknown_output": (SC.INVALID_ARGUMENT, ["nope_out"]),
    "unknown_model": (SC.NOT_FOUND, ["no_such_model"]),
    "unknown_version": ((SC.NOT_FOUND, SC.INVALID_ARGUMENT), ["version", "7"]),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_malformed_infer(g, model_repo, refs, case):
    codes, words = BAD_CASES[case]
    req = bad_request(g.pb, case)
    expect_error(lambda: g.stub.ModelInfer(req, timeout=30), codes, words, case)
    assert_still_serving(g, model_repo, refs)


# --------------------------------------------------------------------------------------------
# ModelStreamInfer.


class Stream:
    """A bidirectional ModelStreamInfer call driven one request at a time."""

    _END = object()

    def __init__(self, stub, timeout=60):
        self._q = queue.Queue()
        self.call = stub.ModelStreamInfer(self._requests(), timeout=timeout)

    def _requests(self):
        while True:
            item = self._q.get()
            if item is self._END:
                return
            yield item

    def send(self, req):
        self._q.put(req)

    def recv(self):
        try:
            return next(self.call)
        except StopIteration:
            raise AssertionError(f"the server ended the stream ({self.call.code()}, "
                                 f"{self.call.details()!r}) instead of answering") from None

    def close(self):
        self._q.put(self._END)


def test_stream_infer(g, model_repo, refs):
    xs = {"s0": ("mlp_small", "INPUT__0", rows(3, 16, 31)),
          "s1": ("xgb_binary", "input__0", rows(2, 8, 32)),
          "s2": ("mlp_small", "BOGUS_IN", rows(1, 16, 33)),  # unknown input name
          "s3": ("mlp_small", "INPUT__0", rows(1, 16, 34)),
          "s4": ("xgb_binary", "input__0", rows(4, 8, 35))}
    st = Stream(g.stub)
    try:
        got = {}
        # Lockstep: the requests after the bad one prove the stream continues.
        for rid, (model, inp, x) in xs.items():
            st.send(g.request(model, {inp: x}, id=rid))
            got[rid] = st.recv()
        st.close()
        rest = list(st.call)
        assert rest == [], f"unexpected extra responses: {rest}"
        assert st.call.code() == SC.OK, (st.call.code(), st.call.details())
    finally:
        st.close()
    for rid, (model, inp, x) in xs.items():
        resp = got[rid]
        if rid == "s2":
            assert resp.error_message, f"bad request got no error: {resp}"
            assert "bogus_in" in resp.error_message.lower(), resp.error_message
            assert not resp.infer_response.outputs, resp
            continue
        assert resp.error_message == "", f"{rid}: {resp.error_message}"
        r = resp.infer_response
        assert r.id == rid and r.model_name == model, r
        out = decode_outputs(r)
        if model == "mlp_small":
            np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, model, x), **TOL)
        else:
            p = refs.xgb(model_repo, model, x)
            np.testing.assert_allclose(out["output__0"], np.stack([1 - p, p], axis=1), **TOL)


def test_stream_infer_pipelined(g, model_repo, refs):
    """Five requests sent at once, one of them bad: five responses, matched by id."""
    reqs, xs = [], {}
    for i in range(5):
        rid = f"p{i}"
        x = rows(1 + i, 16, 40 + i)
        xs[rid] = x
        reqs.append(g.request("mlp_small", {"BOGUS_IN" if i == 1 else "INPUT__0": x}, id=rid))
    resps = list(g.stub.ModelStreamInfer(iter(reqs), timeout=60))
    assert len(resps) == 5, resps
    errors = [r for r in resps if r.error_message]
    assert len(errors) == 1 and "bogus_in" in errors[0].error_message.lower(), errors
    ok = {r.infer_response.id: r.infer_response for r in resps if not r.error_message}
    assert set(ok) == {"p0", "p2", "p3", "p4"}, ok.keys()
    for rid, r in ok.items():
        np.testing.assert_allclose(decode_outputs(r)["OUTPUT__0"],
                                   refs.mlp(model_repo, "mlp_small", xs[rid]), **TOL)


# --------------------------------------------------------------------------------------------
# Deadlines and cancellation (mlp_heavy holding requests for SLOW_DELAY_S).


def test_deadline_exceeded(slow, refs):
    srv, c, repo = slow
    x = rows(1, 256, 51)
    before = heavy_stats(c)
    for timeout in (0.001, 0.05):
        t0 = time.monotonic()
        expect_error(lambda: c.infer("mlp_heavy", {"INPUT__0": x}, timeout=timeout),
                     SC.DEADLINE_EXCEEDED, what=f"deadline {timeout}")
        assert time.monotonic() - t0 < SLOW_DELAY_S, "the deadline was not enforced"
    # A generous deadline succeeds.
    out = decode_outputs(c.infer("mlp_heavy", {"INPUT__0": x}, timeout=20))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(repo, "mlp_heavy", x),
                               rtol=1e-4, atol=1e-5)
    assert srv.running()
    # The deadline travels to the server: the expired requests were not run successfully.
    after = heavy_stats(c)
    assert after.success.count - before.success.count == 1, (before, after)


def test_many_deadlines_then_serving(slow, refs):
    srv, c, repo = slow
    x = rows(1, 256, 52)
    futs = [c.stub.ModelInfer.future(c.request("mlp_heavy", {"INPUT__0": x}), timeout=0.05)
            for _ in range(16)]
    for f in futs:
        assert f.exception(timeout=10) is not None
        assert f.code() == SC.DEADLINE_EXCEEDED, (f.code(), f.details())
    time.sleep(SLOW_DELAY_S + 0.2)  # the server finishes (or drops) the expired requests
    out = decode_outputs(c.infer("mlp_heavy", {"INPUT__0": x}, timeout=20))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(repo, "mlp_heavy", x),
                               rtol=1e-4, atol=1e-5)
    assert srv.running()


def test_cancel_unary(slow, refs):
    srv, c, repo = slow
    x = rows(1, 256, 53)
    before = heavy_stats(c)
    futs = [c.stub.ModelInfer.future(c.request("mlp_heavy", {"INPUT__0": x}), timeout=20)
            for _ in range(4)]
    time.sleep(0.1)
    for f in futs:
        assert f.cancel(), "the call finished before it could be cancelled"
        assert f.cancelled()
        with pytest.raises(grpc.FutureCancelledError):
            f.result(timeout=5)
        assert f.code() == SC.CANCELLED, f.code()
    # The server keeps serving, the cancelled requests' model too.
    out = decode_outputs(c.infer("mlp_heavy", {"INPUT__0": x}, timeout=20))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(repo, "mlp_heavy", x),
                               rtol=1e-4, atol=1e-5)
    assert c.stub.ServerLive(c.pb.ServerLiveRequest(), timeout=10).live
    assert srv.running()
    # The cancelled requests were dropped from the queue, not run.
    after = heavy_stats(c)
    assert after.success.count - before.success.count == 1, (before, after)


def test_expired_and_cancelled_storm(slow, refs):
    """Ten rounds of 16 unary calls that expire in the queue (30 ms deadline) plus 8 cancelled
    ones (24 in all: below the preferred batch of 32, so they wait out the 400 ms queue delay):
    the server survives and serves."""
    srv, c, repo = slow
    x = rows(1, 256, 56)
    for rnd in range(10):
        futs = [c.stub.ModelInfer.future(c.request("mlp_heavy", {"INPUT__0": x}), timeout=0.03)
                for _ in range(16)]
        cancels = [c.stub.ModelInfer.future(c.request("mlp_heavy", {"INPUT__0": x}),
                                            timeout=20) for _ in range(8)]
        time.sleep(0.01)
        for f in cancels:
            f.cancel()
        for f in futs:
            assert f.exception(timeout=10) is not None
            assert f.code() == SC.DEADLINE_EXCEEDED, (f.code(), f.details())
        time.sleep(0.05)
        assert srv.running(), f"dais died in round {rnd} (exit status {srv.proc.returncode})"
    out = decode_outputs(c.infer("mlp_heavy", {"INPUT__0": x}, timeout=20))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(repo, "mlp_heavy", x),
                               rtol=1e-4, atol=1e-5)
    assert srv.running()


def test_cancel_stream(slow, refs):
    srv, c, repo = slow
    x = rows(1, 256, 54)
    st = Stream(c.stub)
    try:
        st.send(c.request("mlp_heavy", {"INPUT__0": x}, id="will-cancel"))
        time.sleep(0.1)
        assert st.call.cancel()
        with pytest.raises(grpc.RpcError) as ei:
            st.recv()
        assert ei.value.code() == SC.CANCELLED, ei.value
    finally:
        st.close()
    time.sleep(SLOW_DELAY_S + 0.2)
    out = decode_outputs(c.infer("mlp_heavy", {"INPUT__0": x}, timeout=20))
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(repo, "mlp_heavy", x),
                               rtol=1e-4, atol=1e-5)
    assert srv.running()


def test_client_half_closes_stream_with_request_in_flight(slow, refs):
    """The client ends its side while a slow request is queued: the response still arrives,
    then the stream ends OK."""
    srv, c, repo = slow
    x = rows(2, 256, 55)
    resps = list(c.stub.ModelStreamInfer(
        iter([c.request("mlp_heavy", {"INPUT__0": x}, id="h0")]), timeout=20))
    assert len(resps) == 1 and not resps[0].error_message, resps
    r = resps[0].infer_response
    assert r.id == "h0"
    np.testing.assert_allclose(decode_outputs(r)["OUTPUT__0"], refs.mlp(repo, "mlp_heavy", x),
                               rtol=1e-4, atol=1e-5)


def test_many_short_streams(g, stubs, start_server, model_repo, refs, kv):
    """Streams that send one request and half-close at once, 48 at a time, ten rounds, on a
    private server: every stream gets exactly its one answer and then ends OK (the end of the
    reads must not race with the submission of the last request)."""
    srv = start_server(model_repo)
    require_grpc(srv)
    c = GrpcClient(stubs, srv.grpc_port)
    x = rows(1, 16, 60)
    want = refs.mlp(model_repo, "mlp_small", x)

    def one(i, barrier):
        barrier.wait()
        call = c.stub.ModelStreamInfer(
            iter([c.request("mlp_small", {"INPUT__0": x}, id=f"m{i}")]), timeout=30)
        resps = list(call)
        return [(r.error_message, r.infer_response.id, decode_outputs(r.infer_response)
                 if not r.error_message else None) for r in resps], call.code()

    try:
        for rnd in range(10):
            results = kv.run_concurrently(one, 48, timeout=60.0)
            assert srv.running(), f"dais died in round {rnd} (exit status {srv.proc.returncode})"
            for i, res in enumerate(results):
                assert not isinstance(res, BaseException), f"round {rnd} stream {i}: {res!r}"
                resps, code = res
                assert code == SC.OK, f"round {rnd} stream {i}: {code}"
                assert len(resps) == 1, f"round {rnd} stream {i}: {len(resps)} responses"
                err, rid, out = resps[0]
                assert err == "" and rid == f"m{i}", (err, rid)
                np.testing.assert_allclose(out["OUTPUT__0"], want, **TOL)
    finally:
        c.close()




def test_sigterm_with_grpc_calls_open(g, stubs, start_server, model_repo, tmp_path, refs):
    """SIGTERM while a unary call is queued and an idle stream is open: the queued call is
    answered, readiness and health turn false, new calls are refused UNAVAILABLE, and the
    server exits 0 promptly despite the open stream."""
    repo = make_slow_repo(model_repo, tmp_path / "slowrepo")
    srv = start_server(repo, "--exit-timeout-secs", "10")
    require_grpc(srv)
    c = GrpcClient(stubs, srv.grpc_port)
    hp = stubs.health_pb
    try:
        st = Stream(c.stub, timeout=30)
        xs = rows(1, 16, 70)
        st.send(c.request("mlp_small", {"INPUT__0": xs}, id="idle"))
        assert st.recv().infer_response.id == "idle"
        x = rows(1, 256, 71)
        fut = c.stub.ModelInfer.future(c.request("mlp_heavy", {"INPUT__0": x}), timeout=20)
        time.sleep(0.1)
        t_term = time.monotonic()
        srv.signal(signal.SIGTERM)
        time.sleep(0.05)
        assert time.monotonic() - t_term < SLOW_DELAY_S - 0.1, "too slow to observe draining"
        assert c.stub.ServerReady(c.pb.ServerReadyRequest(), timeout=5).ready is False
        assert c.stub.ServerLive(c.pb.ServerLiveRequest(), timeout=5).live is True
        h = c.health.Check(hp.HealthCheckRequest(service=""), timeout=5)
        assert h.status == hp.HealthCheckResponse.NOT_SERVING, h
        expect_error(lambda: c.infer("mlp_small", {"INPUT__0": xs}, timeout=5),
                     SC.UNAVAILABLE, ["shutting down", "unavailable", "draining"],
                     "infer while draining")
        r = fut.result(timeout=20)
        np.testing.assert_allclose(decode_outputs(r)["OUTPUT__0"],
                                   refs.mlp(repo, "mlp_heavy", x), rtol=1e-4, atol=1e-5)
        rc = srv.wait(timeout=15)
        assert rc == 0, f"exit status {rc}"
        assert time.monotonic() - t_term < 10, "the open stream held up the exit"
        # The idle stream was ended by the server, not left hanging.
        with pytest.raises((grpc.RpcError, AssertionError)):
            st.recv()
        st.close()
    finally:
        c.close()


# --------------------------------------------------------------------------------------------
# Extensions dais does not implement.


@pytest.mark.parametrize("method", [
    "SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
    "CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister",
    "TraceSetting", "LogSettings"])
def test_unimplemented(g, method, model_repo, refs):
    req = getattr(g.pb, method + "Request")()
    expect_error(lambda: getattr(g.stub, method)(req, timeout=10), SC.UNIMPLEMENTED,
                 what=method)
    assert_still_serving(g, model_repo, refs)
