"""Triton's binary tensor data extension: raw little-endian bytes after a JSON header whose length
is in Inference-Header-Content-Length, both ways."""

import json

import numpy as np

TOL = dict(rtol=1e-5, atol=1e-5)


def rows(n, d, seed):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


def post(server, model, body, headers):
    return server.post(f"/v2/models/{model}/infer", data=body, headers=headers)


def test_binary_in_binary_out(server, model_repo, refs, kv):
    x = rows(3, 16, 11)
    body, headers = kv.binary_request(
        {"INPUT__0": x}, outputs=[{"name": "OUTPUT__0", "parameters": {"binary_data": True}}])
    # The header is JSON only up to Inference-Header-Content-Length; the rest is 3*16*4 bytes.
    assert len(body) == int(headers["Inference-Header-Content-Length"]) + 3 * 16 * 4
    r = post(server, "mlp_small", body, headers)
    assert r.status_code == 200, r.text[:500]
    hlen = int(r.headers["Inference-Header-Content-Length"])
    header = json.loads(r.content[:hlen])
    (o,) = header["outputs"]
    assert o["name"] == "OUTPUT__0" and o["datatype"] == "FP32" and o["shape"] == [3, 4], o
    assert o["parameters"]["binary_data_size"] == 3 * 4 * 4, o
    assert "data" not in o
    assert len(r.content) == hlen + 3 * 4 * 4
    got = np.frombuffer(r.content[hlen:], dtype="<f4").reshape(3, 4)
    np.testing.assert_allclose(got, refs.mlp(model_repo, "mlp_small", x), **TOL)


def test_binary_in_json_out(server, model_repo, refs, kv):
    x = rows(2, 16, 12)
    body, headers = kv.binary_request({"INPUT__0": x})
    r = post(server, "mlp_small", body, headers)
    header, out = kv.decode_response(r)
    assert "binary_data_size" not in (header["outputs"][0].get("parameters") or {})
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x), **TOL)


def test_json_in_binary_out_by_default(server, model_repo, refs, kv):
    """parameters.binary_data_output = true: every output comes back binary."""
    x = rows(4, 16, 13)
    r = server.infer("mlp_small", {"INPUT__0": x}, parameters={"binary_data_output": True})
    assert r.status_code == 200, r.text[:500]
    assert "Inference-Header-Content-Length" in r.headers
    header, out = kv.decode_response(r)
    assert header["outputs"][0]["parameters"]["binary_data_size"] == 4 * 4 * 4
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x), **TOL)


def test_binary_xgb(server, model_repo, refs, kv):
    x = rows(7, 8, 14)
    body, headers = kv.binary_request({"input__0": x}, parameters={"binary_data_output": True},
                                      json_extra={"id": "bin-1"})
    r = post(server, "xgb_binary", body, headers)
    header, out = kv.decode_response(r)
    assert header["id"] == "bin-1"
    assert header["outputs"][0]["parameters"]["binary_data_size"] == 7 * 2 * 4
    p = refs.xgb(model_repo, "xgb_binary", x)
    np.testing.assert_allclose(out["output__0"], np.stack([1 - p, p], axis=1), **TOL)


def test_binary_header_with_json_input(server, model_repo, refs, kv):
    """A binary request whose input carries JSON "data" instead (no binary_data_size) is valid:
    the binary section is then empty."""
    x = rows(1, 16, 15)
    header = {"inputs": [kv.tensor_json("INPUT__0", x)],
              "outputs": [{"name": "OUTPUT__0", "parameters": {"binary_data": True}}]}
    hdr = json.dumps(header).encode()
    r = post(server, "mlp_small", hdr, {"Inference-Header-Content-Length": str(len(hdr))})
    _, out = kv.decode_response(r)
    np.testing.assert_allclose(out["OUTPUT__0"], refs.mlp(model_repo, "mlp_small", x), **TOL)
