"""Malformed and invalid requests: each gets 400 (404 for an unknown model or version, 413 for an
oversized body) with {"error": "..."} naming the problem, and the server keeps serving."""

import json

import numpy as np
import pytest

X = np.random.default_rng(21).normal(size=(3, 16)).astype(np.float32)
SMALL = "/v2/models/mlp_small/infer"


def body_of(inputs, **extra):
    return json.dumps({"inputs": inputs, **extra}).encode()


def good_input(shape=(3, 16), name="INPUT__0", datatype="FP32", data=None):
    n = int(np.prod(shape))
    if data is None:
        data = np.resize(X.reshape(-1), n).tolist()
    return {"name": name, "shape": list(shape), "datatype": datatype, "data": data}


def binary_body(declared_size, sent_bytes, header_len_delta=0):
    hdr = json.dumps({"inputs": [{"name": "INPUT__0", "shape": [3, 16], "datatype": "FP32",
                                  "parameters": {"binary_data_size": declared_size}}]}).encode()
    payload = X.astype("<f4").tobytes()[:sent_bytes]
    return hdr + payload, {"Inference-Header-Content-Length": str(len(hdr) + header_len_delta)}


# (id, path, body, headers, expected status, words of which the error must contain one)
CASES = [
    ("malformed_json", SMALL, b'{"inputs": [{"name": "INPUT__0", "shape": [3', {}, 400,
     ["json", "parse"]),
    ("not_an_object", SMALL, b'[1, 2, 3]', {}, 400, ["object", "inputs", "json"]),
    ("empty_body", SMALL, b"", {}, 400, ["json", "empty", "body", "parse"]),
    ("no_inputs_field", SMALL, b'{"id": "x"}', {}, 400, ["inputs"]),
    ("wrong_datatype", SMALL,
     body_of([good_input(datatype="INT32", data=[1] * 48)]), {}, 400,
     ["datatype", "int32", "fp32", "type"]),
    ("unknown_datatype", SMALL, body_of([good_input(datatype="FP99")]), {}, 400,
     ["fp99", "datatype"]),
    ("wrong_shape", SMALL, body_of([good_input(shape=(3, 15))]), {}, 400,
     ["shape", "[3,15]", "dims", "15"]),
    ("rank_too_low", SMALL, body_of([good_input(shape=(48,))]), {}, 400,
     ["shape", "[48]", "dims", "rank"]),
    ("data_length_mismatch", SMALL,
     body_of([good_input(data=X.reshape(-1)[:47].tolist())]), {}, 400,
     ["element", "size", "length", "count", "data", "47", "48"]),
    ("data_not_numbers", SMALL, body_of([good_input(data=["a"] * 48)]), {}, 400,
     ["data", "number", "type", "fp32"]),
    ("missing_input", SMALL, body_of([]), {}, 400, ["input__0", "missing", "expect"]),
    ("unknown_input_name", SMALL,
     body_of([good_input(name="INPUT__0"), good_input(name="BOGUS_IN")]), {}, 400,
     ["bogus_in"]),
    ("wrong_input_name_only", SMALL, body_of([good_input(name="BOGUS_IN")]), {}, 400,
     ["bogus_in", "input__0"]),
    ("batch_too_large", SMALL, body_of([good_input(shape=(65, 16))]), {}, 400,
     ["batch", "64", "65"]),
    ("unknown_output", SMALL, body_of([good_input()], outputs=[{"name": "NOPE_OUT"}]), {}, 400,
     ["nope_out"]),
    ("unknown_model", "/v2/models/no_such_model/infer", body_of([good_input()]), {}, 404,
     ["no_such_model"]),
    ("unknown_version", "/v2/models/mlp_small/versions/7/infer", body_of([good_input()]), {},
     404, ["version", "7"]),
    ("bad_version_string", "/v2/models/mlp_small/versions/abc/infer", body_of([good_input()]),
     {}, (400, 404), ["version", "abc"]),
    ("truncated_binary_payload", SMALL, *binary_body(3 * 16 * 4, 100), 400,
     ["binary", "size", "data", "byte"]),
    ("binary_sizes_short_of_body", SMALL, *binary_body(100, 3 * 16 * 4), 400,
     ["binary", "size", "byte", "element", "data"]),
    ("header_length_beyond_body", SMALL, *binary_body(3 * 16 * 4, 3 * 16 * 4, 10_000), 400,
     ["inference-header-content-length", "header", "length"]),
    ("header_length_not_a_number", SMALL, binary_body(3 * 16 * 4, 3 * 16 * 4)[0],
     {"Inference-Header-Content-Length": "12abc"}, 400,
     ["inference-header-content-length", "header", "length"]),
]


def assert_still_serving(server, kv):
    kv.json_outputs(server.infer("mlp_small", {"INPUT__0": X}))


@pytest.mark.parametrize("path,body,headers,status,words",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_request(server, kv, path, body, headers, status, words):
    hdrs = {"Content-Type": "application/json", **headers}
    st, _, raw = kv.raw_post(server.http_port, path, body, hdrs)
    allowed = status if isinstance(status, tuple) else (status,)
    assert st in allowed, f"status {st}, want {status}: {raw[:300]!r}"
    try:
        err = json.loads(raw)["error"]
    except (ValueError, KeyError, TypeError):
        raise AssertionError(f"error body is not {{\"error\": ...}}: {raw[:300]!r}")
    assert isinstance(err, str) and err
    assert any(w.lower() in err.lower() for w in words), \
        f"error {err!r} names none of {words}"
    assert_still_serving(server, kv)


def test_rejected_request_is_not_a_success(server, kv):
    """A request rejected for its shape never counts as a success in /stats."""
    before = server.stats("mlp_small")["inference_stats"]["success"]["count"]
    st, _, _ = kv.raw_post(server.http_port, SMALL, body_of([good_input(shape=(3, 15))]),
                           {"Content-Type": "application/json"})
    assert st == 400
    after = server.stats("mlp_small")["inference_stats"]["success"]["count"]
    assert after == before


def test_get_on_infer_is_rejected(server):
    r = server.get("/v2/models/mlp_small/infer")
    assert r.status_code in (404, 405), r.status_code


def test_body_over_limit(start_server, model_repo, kv):
    srv = start_server(model_repo, "--http-max-body-bytes", "1024")
    x = np.random.default_rng(22).normal(size=(8, 16)).astype(np.float32)
    body = json.dumps(kv.infer_body({"INPUT__0": x})).encode()
    assert len(body) > 1024
    st, _, raw = kv.raw_post(srv.http_port, SMALL, body, {"Content-Type": "application/json"})
    assert st == 413, f"status {st}: {raw[:300]!r}"
    if raw:
        try:
            err = json.loads(raw)["error"]
        except (ValueError, KeyError, TypeError):
            raise AssertionError(f"413 body is not {{\"error\": ...}}: {raw[:300]!r}")
        assert any(w in err.lower() for w in ("body", "large", "limit", "size", "1024")), err
    # A binary body over the limit too.
    big, headers = kv.binary_request({"INPUT__0": np.zeros((32, 16), np.float32)})
    assert len(big) > 1024
    st, _, raw = kv.raw_post(srv.http_port, SMALL, big, headers)
    assert st == 413, f"status {st}: {raw[:300]!r}"
    # Under the limit still works.
    small = np.zeros((1, 16), np.float32)
    small_body = json.dumps(kv.infer_body({"INPUT__0": small})).encode()
    assert len(small_body) < 1024
    st, _, raw = kv.raw_post(srv.http_port, SMALL, small_body, {"Content-Type": "application/json"})
    assert st == 200, raw[:300]
