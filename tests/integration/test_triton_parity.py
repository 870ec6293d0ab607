"""Issue 13: what a Triton user brings along works on dais: raw binary requests, compressed HTTP
bodies both ways, Triton's flag names and limits, restricted API groups over HTTP and gRPC, the
status codes clients act on, and the JSON depth limit. Requests are built the way tritonclient
builds them (gzip.compress / zlib.compress bodies with Content-Encoding, Accept-Encoding for
answers, Inference-Header-Content-Length: 0 for raw bodies)."""

from __future__ import annotations

import gzip
import http.client
import json
import re
import socket
import subprocess
import zlib
from pathlib import Path

import grpc
import numpy as np
import pytest

from grpc_client import GrpcClient, generate_stubs

TOL = dict(rtol=1e-5, atol=1e-5)
RAW = {"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"}


def identity_config(name, inputs, max_batch_size=0):
    """config.pbtxt of an identity model; inputs: [(name, TYPE_x, dims)] (outputs mirror them)."""
    def tensors(prefix):
        return ", ".join(f'{{ name: "{prefix}{i}" data_type: {t} dims: {list(d)} }}'
                         for i, (_, t, d) in enumerate(inputs))
    return (f'name: "{name}"\nbackend: "identity"\nmax_batch_size: {max_batch_size}\n'
            f'input [ {tensors("INPUT")} ]\noutput [ {tensors("OUTPUT")} ]\n')


@pytest.fixture(scope="module")
def parity_repo(model_repo, tmp_path_factory):
    """The generated models plus identity models shaped for the raw binary rules."""
    import shutil
    repo = tmp_path_factory.mktemp("parity_repo")
    shutil.copytree(model_repo / "mlp_small", repo / "mlp_small")
    models = {
        "id_batch": ([("x", "TYPE_INT32", [2])], 8),
        "id_var": ([("x", "TYPE_FP32", [-1])], 0),
        "id_var2": ([("x", "TYPE_FP32", [-1, -1])], 0),
        "id_two": ([("x", "TYPE_INT32", [2]), ("y", "TYPE_INT32", [2])], 0),
        "id_bytes": ([("x", "TYPE_STRING", [1])], 0),
        "id_bytes_big": ([("x", "TYPE_STRING", [3])], 0),
        "id_bytes_var": ([("x", "TYPE_STRING", [-1])], 0),
        "id_bytes_batch": ([("x", "TYPE_STRING", [1])], 4),
    }
    for name, (inputs, mbs) in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(identity_config(name, inputs, mbs))
    return repo


@pytest.fixture(scope="module")
def psrv(parity_repo, start_module_server):
    return start_module_server(parity_repo, "--http-max-input-size", str(1 << 20))


def raw_request(port, method, path, body=b"", headers=None):
    """(status, headers with lower-case names, body bytes) over http.client: nothing added or
    decoded behind the test's back (requests would send and undo Accept-Encoding itself)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def binary_outputs(headers, body):
    """{name: (datatype, shape, bytes)} of a binary-extension answer."""
    hlen = int(headers["inference-header-content-length"])
    header = json.loads(body[:hlen])
    out, off = {}, hlen
    for o in header["outputs"]:
        n = o["parameters"]["binary_data_size"]
        out[o["name"]] = (o["datatype"], o["shape"], body[off:off + n])
        off += n
    assert off == len(body), f"{len(body) - off} bytes after the outputs"
    return out


# ------------------------------------------------------------------------------------------
# Raw binary requests (Inference-Header-Content-Length: 0)


def test_raw_binary_batching_identity_is_a_batch_of_one(psrv):
    x = np.array([7, -3], dtype="<i4")
    st, h, body = raw_request(psrv.http_port, "POST", "/v2/models/id_batch/infer", x.tobytes(), RAW)
    assert st == 200, body[:300]
    assert h["content-type"] == "application/octet-stream"
    (dt, shape, data), = binary_outputs(h, body).values()
    assert (dt, shape) == ("INT32", [1, 2])
    assert np.array_equal(np.frombuffer(data, "<i4"), x)


def test_raw_binary_torchscript_matches_the_model(psrv, parity_repo, refs):
    x = np.random.default_rng(5).normal(size=(1, 16)).astype("<f4")
    st, h, body = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer", x.tobytes(), RAW)
    assert st == 200, body[:300]
    (dt, shape, data), = binary_outputs(h, body).values()
    assert (dt, shape) == ("FP32", [1, 4])
    np.testing.assert_allclose(np.frombuffer(data, "<f4").reshape(1, 4),
                               refs.mlp(parity_repo, "mlp_small", x), **TOL)
    st, _, body = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer", x.tobytes()[:-1],
                              RAW)
    assert st == 400 and b"takes 64 bytes, the body has 63" in body, body


def test_raw_binary_deduces_the_one_variable_dimension(psrv, kv):
    x = np.arange(5, dtype="<f4")
    st, h, body = raw_request(psrv.http_port, "POST", "/v2/models/id_var/infer", x.tobytes(), RAW)
    assert st == 200, body[:300]
    (dt, shape, data), = binary_outputs(h, body).values()
    assert (dt, shape) == ("FP32", [5]) and np.array_equal(np.frombuffer(data, "<f4"), x)
    st, _, body = raw_request(psrv.http_port, "POST", "/v2/models/id_var/infer", b"1234567", RAW)
    assert st == 400 and b"not a whole number of 4-byte rows" in body, body


@pytest.mark.parametrize("model,why", [
    ("id_var2", "more than one variable dimension"),
    ("id_two", "needs a model with one input; 'id_two' has 2"),
    ("id_bytes_big", "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"),
    # Issue 31: [-1] was accepted; Triton refuses it with these words.
    ("id_bytes_var", "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"),
])
def test_raw_binary_refused_when_it_cannot_be_deduced(psrv, model, why):
    st, _, body = raw_request(psrv.http_port, "POST", f"/v2/models/{model}/infer", b"\0" * 24, RAW)
    assert st == 400, body
    assert why in json.loads(body)["error"], body


@pytest.mark.parametrize("model,shape", [("id_bytes", [1]), ("id_bytes_batch", [1, 1])])
def test_raw_binary_bytes_input_is_one_element(psrv, model, shape):
    st, h, body = raw_request(psrv.http_port, "POST", f"/v2/models/{model}/infer", b"hello, dais",
                              RAW)
    assert st == 200, body[:300]
    (dt, got_shape, data), = binary_outputs(h, body).values()
    assert (dt, got_shape) == ("BYTES", shape)
    assert data == len(b"hello, dais").to_bytes(4, "little") + b"hello, dais"


def test_raw_binary_unknown_model_is_404(psrv):
    st, _, body = raw_request(psrv.http_port, "POST", "/v2/models/nope/infer", b"1234", RAW)
    assert st == 404, body


# ------------------------------------------------------------------------------------------
# Compressed bodies (tritonclient's request_ / response_compression_algorithm)

COMPRESS = {"gzip": gzip.compress, "deflate": zlib.compress}
DECOMPRESS = {"gzip": gzip.decompress, "deflate": zlib.decompress}


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_compressed_json_request_and_answer(psrv, parity_repo, refs, kv, coding):
    x = np.random.default_rng(9).normal(size=(64, 16)).astype(np.float32)
    body = json.dumps(kv.infer_body({"INPUT__0": x})).encode()
    st, h, out = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer",
                             COMPRESS[coding](body),
                             {"Content-Encoding": coding, "Content-Type": "application/json",
                              "Accept-Encoding": coding})
    assert st == 200, out[:300]
    assert h.get("content-encoding") == coding, h
    assert "accept-encoding" in h.get("vary", "").lower(), h
    answer = json.loads(DECOMPRESS[coding](out))
    got = np.asarray(answer["outputs"][0]["data"], dtype=np.float32).reshape(64, 4)
    np.testing.assert_allclose(got, refs.mlp(parity_repo, "mlp_small", x), **TOL)


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_compressed_binary_request_and_answer(psrv, parity_repo, refs, kv, coding):
    x = np.random.default_rng(10).normal(size=(60, 16)).astype(np.float32)
    body, headers = kv.binary_request(
        {"INPUT__0": x}, outputs=[{"name": "OUTPUT__0", "parameters": {"binary_data": True}}])
    st, h, out = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer",
                             COMPRESS[coding](body),
                             {**headers, "Content-Encoding": coding, "Accept-Encoding": coding})
    assert st == 200, out[:300]
    assert h.get("content-encoding") == coding
    plain = DECOMPRESS[coding](out)
    # Inference-Header-Content-Length counts the uncompressed JSON header, as Triton's.
    (dt, shape, data), = binary_outputs(h, plain).values()
    assert (dt, shape) == ("FP32", [60, 4])
    np.testing.assert_allclose(np.frombuffer(data, "<f4").reshape(60, 4),
                               refs.mlp(parity_repo, "mlp_small", x), **TOL)


def test_small_answers_and_unasked_answers_are_not_compressed(psrv, kv):
    st, h, out = raw_request(psrv.http_port, "GET", "/v2/health/live", headers={
        "Accept-Encoding": "gzip"})
    assert st == 200 and "content-encoding" not in h
    body = json.dumps(kv.infer_body({"INPUT__0": np.zeros((64, 16), np.float32)})).encode()
    st, h, out = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer", body,
                             {"Content-Type": "application/json"})
    assert st == 200 and "content-encoding" not in h and json.loads(out)["outputs"]
    st, h, out = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer", body,
                             {"Accept-Encoding": "gzip;q=0, deflate;q=0"})
    assert st == 200 and "content-encoding" not in h


def test_compressed_body_limit_applies_to_the_decompressed_size(psrv, kv):
    # 8 MiB of JSON whitespace compresses to ~8 KiB; the limit is 1 MiB (decompressed).
    bomb = gzip.compress(b"{" + b" " * (8 << 20) + b"}", 9)
    assert len(bomb) < 64 << 10
    st, _, out = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer", bomb,
                             {"Content-Encoding": "gzip"})
    assert st == 413, out
    assert "decompresses to more than the limit of 1048576 bytes" in json.loads(out)["error"]
    assert psrv.get("/v2/health/live").status_code == 200


@pytest.mark.parametrize("body,coding,status,why", [
    (b"definitely not gzip", "gzip", 400, "malformed gzip body"),
    (gzip.compress(b'{"inputs": []}')[:-6], "gzip", 400, "truncated"),
    (b"{}", "br", 415, "Content-Encoding 'br' is not supported"),
])
def test_bad_compressed_bodies_are_named(psrv, body, coding, status, why):
    st, h, out = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer", body,
                             {"Content-Encoding": coding})
    assert st == status, out
    assert why in json.loads(out)["error"], out
    if status == 415:
        assert h.get("accept-encoding") == "gzip, deflate"


def test_compressed_repository_request(psrv):
    st, _, out = raw_request(psrv.http_port, "POST", "/v2/repository/index",
                             gzip.compress(b'{"ready": true}'), {"Content-Encoding": "gzip"})
    assert st == 200, out
    assert {m["name"] for m in json.loads(out)} >= {"mlp_small", "id_batch"}


# ------------------------------------------------------------------------------------------
# Flags and limits


def test_max_input_size_alias_sets_the_limit(psrv):
    st, _, out = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer",
                             b"[" + b" " * (2 << 20) + b"]")
    assert st == 413 and b"limit of 1048576 bytes" in out, out


@pytest.mark.parametrize("flag,value", [
    ("--http-max-input-size", "0"),
    ("--http-max-input-size", "-5"),
    ("--http-max-input-size", "99999999999999"),
    ("--http-max-body-bytes", "0"),
    ("--http-max-body-chunks", "0"),
    ("--http-max-json-depth", "0"),
    ("--http-restricted-api", "model-repository"),
    ("--http-restricted-api", "admin:k=v"),
    ("--grpc-restricted-protocol", "health:k"),
])
def test_bad_limits_are_refused_at_start(dais_bin, parity_repo, flag, value):
    r = subprocess.run([str(dais_bin), "serve", "--model-repository", str(parity_repo),
                        "--http-port", "0", "--grpc-port", "0", flag, value],
                       capture_output=True, text=True, timeout=60)
    text = r.stdout + r.stderr
    assert r.returncode != 0, text
    # (--http-max-body-bytes is the same option: its errors name it by Triton's name.)
    assert flag.replace("--http-max-body-bytes", "--http-max-input-size") in text, text


def test_a_group_in_two_flags_is_refused(dais_bin, parity_repo):
    r = subprocess.run([str(dais_bin), "serve", "--model-repository", str(parity_repo),
                        "--http-port", "0", "--grpc-port", "0",
                        "--http-restricted-api", "health:a=1",
                        "--http-restricted-api", "metadata,health:b=2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "API 'health' is already in another group" in r.stdout + r.stderr


def chunked_post(port, path, pieces):
    """POSTs `pieces` as one chunk each (Transfer-Encoding: chunked); returns (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                "Content-Type: application/json\r\n\r\n").encode()
        wire = head + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        try:
            s.sendall(wire)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered early: the answer is still there to read
        resp = http.client.HTTPResponse(s)
        resp.begin()
        return resp.status, resp.read()


def test_chunk_count_is_capped(start_server, parity_repo):
    srv = start_server(parity_repo, "--http-max-body-chunks", "100")
    body = b'{"inputs": []}'
    st, out = chunked_post(srv.http_port, "/v2/repository/index", [body[i:i + 1]
                                                              for i in range(len(body))])
    assert st == 200, out  # 14 chunks
    st, out = chunked_post(srv.http_port, "/v2/repository/index", [b" "] * 500 + [b"{}"])
    assert st == 413 and b"more than 100 chunks" in out, out
    assert srv.get("/v2/health/live").status_code == 200


# ------------------------------------------------------------------------------------------
# Restricted APIs: every group behind its own header, over HTTP and gRPC

# group -> (method, path, body, status when allowed)
HTTP_GROUPS = {
    "health": ("GET", "/v2/health/live", None, 200),
    "metadata": ("GET", "/v2/models/mlp_small", None, 200),
    "inference": ("POST", "/v2/models/id_batch/infer", "identity", 200),
    "shared-memory": ("GET", "/v2/systemsharedmemory/status", None, 501),
    "model-config": ("GET", "/v2/models/mlp_small/config", None, 200),
    "model-repository": ("POST", "/v2/repository/index", b"{}", 200),
    "statistics": ("GET", "/v2/models/stats", None, 200),
    "trace": ("GET", "/v2/trace/setting", None, 501),
    "logging": ("GET", "/v2/logging", None, 501),
    "features": ("POST", "/get-online-features", b"{}", 400),  # names no feature
}


def key_of(group):
    return f"{group.replace('-', '')}-key"


@pytest.fixture(scope="module")
def restricted(parity_repo, start_module_server):
    args = []
    for g in HTTP_GROUPS:
        args += ["--http-restricted-api", f"{g}:{key_of(g)}=open-{g}",
                 "--grpc-restricted-protocol", f"{g}:{key_of(g)}=open-{g}"]
    srv = start_module_server(parity_repo, *args, wait_ready=False)
    # Readiness is in the restricted health group too.
    srv.wait_until(lambda: srv.get("/v2/health/ready",
                                   headers={"health-key": "open-health"}).status_code == 200,
                   60, "ready (with the health key)")
    return srv


def test_http_restricted_groups(restricted, kv):
    for group, (method, path, body, allowed) in HTTP_GROUPS.items():
        if body == "identity":
            body = json.dumps(kv.IDENTITY_BODY).encode()
        right = {key_of(group): f"open-{group}"}
        st, _, out = raw_request(restricted.http_port, method, path, body)
        assert st == 403, (group, st, out)
        assert json.loads(out)["error"] == \
            f"This API is restricted, expecting header '{key_of(group)}'", out
        st, _, out = raw_request(restricted.http_port, method, path, body,
                                 {key_of(group): "wrong"})
        assert st == 403, (group, st, out)
        # Another group's key does not open this one.
        other = next(g for g in HTTP_GROUPS if g != group)
        st, _, out = raw_request(restricted.http_port, method, path, body,
                                 {key_of(other): f"open-{other}"})
        assert st == 403, (group, st, out)
        st, _, out = raw_request(restricted.http_port, method, path, body, right)
        assert st == allowed, (group, st, out)
    # /metrics is in no group.
    assert restricted.get("/metrics").status_code == 200


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    return generate_stubs(tmp_path_factory.mktemp("parity_stubs"))


def grpc_calls(stubs):
    """group -> [callable(stub, health_stub, metadata)] covering every method of the group."""
    pb = stubs.pb
    ident = pb.ModelInferRequest(model_name="id_batch")
    t = ident.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 2])
    t.contents.int_contents.extend([1, 2])

    def stream(s, h, md):
        return list(s.ModelStreamInfer(iter([ident]), metadata=md, timeout=30))

    return {
        "health": [lambda s, h, md: s.ServerLive(pb.ServerLiveRequest(), metadata=md),
                   lambda s, h, md: s.ServerReady(pb.ServerReadyRequest(), metadata=md),
                   lambda s, h, md: s.ModelReady(pb.ModelReadyRequest(name="mlp_small"),
                                                 metadata=md),
                   lambda s, h, md: h.Check(stubs.health_pb.HealthCheckRequest(), metadata=md)],
        "metadata": [lambda s, h, md: s.ServerMetadata(pb.ServerMetadataRequest(), metadata=md),
                     lambda s, h, md: s.ModelMetadata(pb.ModelMetadataRequest(name="mlp_small"),
                                                      metadata=md)],
        "inference": [lambda s, h, md: s.ModelInfer(ident, metadata=md), stream],
        "shared-memory": [lambda s, h, md: s.SystemSharedMemoryStatus(
            pb.SystemSharedMemoryStatusRequest(), metadata=md)],
        "model-config": [lambda s, h, md: s.ModelConfig(pb.ModelConfigRequest(name="mlp_small"),
                                                        metadata=md)],
        "model-repository": [lambda s, h, md: s.RepositoryIndex(pb.RepositoryIndexRequest(),
                                                                metadata=md)],
        "statistics": [lambda s, h, md: s.ModelStatistics(pb.ModelStatisticsRequest(),
                                                          metadata=md)],
        "trace": [lambda s, h, md: s.TraceSetting(pb.TraceSettingRequest(), metadata=md)],
        "logging": [lambda s, h, md: s.LogSettings(pb.LogSettingsRequest(), metadata=md)],
    }


def test_grpc_restricted_groups(restricted, stubs):
    client = GrpcClient(stubs, restricted.grpc_port)
    try:
        health = client.health
        for group, calls in grpc_calls(stubs).items():
            header = "triton-grpc-protocol-" + key_of(group)
            for call in calls:
                for md in [(), ((header, "wrong"),), ((key_of(group), f"open-{group}"),)]:
                    with pytest.raises(grpc.RpcError) as e:
                        call(client.stub, health, md)
                    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, (group, md, e.value)
                    assert e.value.details() == \
                        f"This protocol is restricted, expecting header '{header}'", e.value

                try:
                    call(client.stub, health, ((header, f"open-{group}"),))
                except grpc.RpcError as e:  # the extensions dais lacks
                    assert e.code() == grpc.StatusCode.UNIMPLEMENTED, (group, e)
                    assert group in ("shared-memory", "trace", "logging"), (group, e)
    finally:
        client.close()


# ------------------------------------------------------------------------------------------
# Status codes clients act on


def test_load_outside_explicit_mode_is_unavailable(psrv, stubs):
    for action in ("load", "unload"):
        r = psrv.post(f"/v2/repository/models/mlp_small/{action}")
        assert r.status_code == 503, r.text
        assert "--model-control-mode=explicit" in r.json()["error"]
    client = GrpcClient(stubs, psrv.grpc_port)
    try:
        with pytest.raises(grpc.RpcError) as e:
            client.stub.RepositoryModelLoad(stubs.pb.RepositoryModelLoadRequest(
                model_name="mlp_small"))
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        client.close()


@pytest.mark.parametrize("ready", ['"yes"', "1", "null", "[]"])
def test_repository_index_ready_must_be_a_boolean(psrv, ready):
    r = psrv.post("/v2/repository/index", data='{"ready": %s}' % ready)
    assert r.status_code == 400 and "expected a boolean" in r.json()["error"], r.text


# ------------------------------------------------------------------------------------------
# JSON depth


def nested(depth):
    return b'{"inputs": ' + b"[" * depth + b"]" * depth + b"}"


def test_json_depth_limit_default_100(psrv):
    # The object itself is level 1: 99 arrays inside it make 100 levels (accepted as JSON,
    # refused as an inference request); 100 arrays make 101.
    r = psrv.post("/v2/models/mlp_small/infer", data=nested(99))
    assert r.status_code == 400 and "deeper" not in r.json()["error"], r.text
    r = psrv.post("/v2/models/mlp_small/infer", data=nested(100))
    assert r.status_code == 400 and "JSON nested deeper than 100 levels" in r.json()["error"]
    for path in ("/v2/repository/index", "/v2/repository/models/mlp_small/load"):
        r = psrv.post(path, data=b'{"a": ' + b"[" * 200 + b"]" * 200 + b"}")
        assert r.status_code == 400 and "nested deeper than 100" in r.json()["error"], r.text


def test_json_depth_limit_is_configurable(start_server, parity_repo):
    srv = start_server(parity_repo, "--http-max-json-depth", "150")
    r = srv.post("/v2/models/mlp_small/infer", data=nested(120))
    assert r.status_code == 400 and "deeper" not in r.json()["error"], r.text
    r = srv.post("/v2/models/mlp_small/infer", data=nested(150))
    assert r.status_code == 400 and "nested deeper than 150 levels" in r.json()["error"], r.text


# ------------------------------------------------------------------------------------------
# The parity tables in docs/http-api.md and docs/grpc-api.md stay true

DOCS = Path(__file__).resolve().parents[2] / "docs"


def table_rows(doc, marker):
    """The body rows of the table between <!-- marker --> and <!-- /marker --> in docs/doc."""
    text = (DOCS / doc).read_text()
    body = text.split(f"<!-- {marker} -->")[1].split(f"<!-- /{marker} -->")[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in body.strip().splitlines()]
    return rows[2:]  # header and separator


def test_docs_endpoint_table(psrv):
    rows = table_rows("http-api.md", "endpoint-table")
    assert len(rows) >= 25
    for method, path, group, support in rows:
        path = path.strip("`").replace("{m}", "mlp_small")
        st, _, out = raw_request(psrv.http_port, method, path, b"" if method == "POST" else None)
        if support == "supported":
            assert st not in (404, 405, 501), (method, path, st, out[:200])
        else:
            assert support == "absent", support
            assert st == 501, (method, path, st, out[:200])


def test_docs_flag_table(dais_bin):
    r = subprocess.run([str(dais_bin), "serve", "--help"], capture_output=True, text=True,
                       timeout=30)
    # tritonserver's flags dais does not implement are accepted with a warning (issue 35),
    # listed in their own section of --help: "absent" is what is not implemented.
    implemented, _, accepted = r.stdout.partition("Accepted from tritonserver, not implemented")
    offered = set(re.findall(r"--[a-z0-9-]+", implemented))
    tolerated = set(re.findall(r"--[a-z0-9-]+", accepted))
    seen = set()
    for doc in ("http-api.md", "grpc-api.md"):
        for flag, support, _note in table_rows(doc, "flag-table"):
            flag = flag.strip("`")
            assert flag not in seen, f"{flag} listed twice"
            seen.add(flag)
            assert support in ("supported", "differs", "absent"), (flag, support)
            assert (flag in offered) == (support != "absent"), (doc, flag, support)
            # --model-store is tritonserver's other name for --model-repository: refused, not
            # ignored (a server without its repository is no server).
            if support == "absent" and flag != "--model-store":
                assert flag in tolerated, (doc, flag, "not accepted with a warning")
    assert len(seen) > 80


# What tritonclient.http.aio sends: aiohttp always adds "Accept-Encoding: gzip, deflate" and the
# client reads the body with auto_decompress=False, so a compressed metadata answer broke it
# (UnicodeDecodeError in get_model_config / get_inference_statistics). Issue 31.
AIOHTTP_HEADERS = {"Host": "127.0.0.1", "Accept": "*/*", "Accept-Encoding": "gzip, deflate",
                   "User-Agent": "Python/3.11 aiohttp/3.8.4"}


def test_only_inference_metrics_and_feast_answers_are_compressed(psrv, kv):
    """Triton compresses inference answers only; config, statistics, metadata and the repository
    index come back plain whatever the Accept-Encoding (and /metrics stays compressed)."""
    sizes = {}
    for method, path in [("GET", "/v2/models/mlp_small/config"), ("GET", "/v2/models/stats"),
                         ("GET", "/v2/models/mlp_small/stats"), ("GET", "/v2/models/mlp_small"),
                         ("GET", "/v2"), ("POST", "/v2/repository/index")]:
        st, h, out = raw_request(psrv.http_port, method, path, b"", AIOHTTP_HEADERS)
        assert st == 200, (path, out[:200])
        assert "content-encoding" not in h, (path, h)
        json.loads(out.decode("utf-8"))  # what the aio client does
        sizes[path] = len(out)
    # The case that broke: answers over the compression threshold (1 KiB).
    assert max(sizes.values()) >= 1024, sizes
    body = json.dumps(kv.infer_body({"INPUT__0": np.zeros((64, 16), np.float32)})).encode()
    st, h, out = raw_request(psrv.http_port, "POST", "/v2/models/mlp_small/infer", body,
                             {**AIOHTTP_HEADERS, "Content-Type": "application/json"})
    assert st == 200 and h.get("content-encoding") == "gzip", h
    assert json.loads(gzip.decompress(out))["outputs"]
    st, h, out = raw_request(psrv.http_port, "GET", "/metrics", b"", AIOHTTP_HEADERS)
    assert st == 200 and h.get("content-encoding") == "gzip", h
    assert b"dais_" in gzip.decompress(out)
