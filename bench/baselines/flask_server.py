#!/usr/bin/python3
"""Baseline: the monolith the design notes start from, Flask + PyTorch in a single process.

Serves TorchScript models of a Triton-style repository over the same minimal KServe v2 JSON
protocol as fastapi_server.py (health, metadata, config, infer; JSON only, no binary tensor
extension), so the same load generator drives it.

Set-up: one process, Flask's built-in server with its default of one thread per connection
(`app.run(threaded=True)`), the model loaded once in eval mode and run under
torch.inference_mode(); torch.set_num_threads(1) (request threads, not intra-op threads, are the
parallelism, and they share the GIL); the per-request access log is off (dais does not log every
request either). No gunicorn, no workers: that is the point of this baseline.

usage: flask_server.py --model-repository DIR --model NAME [--model NAME2]
                       [--host 127.0.0.1] [--port 8000]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import torch
from flask import Flask, jsonify, request

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from model_repo import load_model  # noqa: E402

app = Flask(__name__)
models = {}


def error(status: int, message: str):
    return jsonify({"error": message}), status


@app.get("/v2/health/live")
def live():
    return "", 200


@app.get("/v2/health/ready")
def ready():
    return "", 200 if models else 503


@app.get("/v2/models/<model_name>")
def model_metadata(model_name):
    model = models.get(model_name)
    if model is None:
        return error(404, f"unknown model '{model_name}'")
    return jsonify(model.metadata())


@app.get("/v2/models/<model_name>/ready")
def model_ready(model_name):
    return "", 200 if model_name in models else 404


@app.get("/v2/models/<model_name>/config")
def model_config(model_name):
    model = models.get(model_name)
    if model is None:
        return error(404, f"unknown model '{model_name}'")
    return jsonify(model.config())


@app.post("/v2/models/<model_name>/infer")
def infer(model_name):
    model = models.get(model_name)
    if model is None:
        return error(404, f"unknown model '{model_name}'")
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), list):
        return error(400, "the body must be a JSON object with an 'inputs' list")
    by_name = {i.get("name"): i for i in body["inputs"] if isinstance(i, dict)}
    args = []
    for spec in model.inputs:
        inp = by_name.get(spec.name)
        if inp is None:
            return error(400, f"missing input '{spec.name}'")
        if inp.get("datatype") != spec.datatype:
            return error(400, f"input '{spec.name}': datatype {inp.get('datatype')}, "
                              f"expected {spec.datatype}")
        try:
            args.append(torch.tensor(inp["data"], dtype=spec.torch_dtype).reshape(inp["shape"]))
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            return error(400, f"input '{spec.name}': {e}")
    with torch.inference_mode():
        result = model.module(*args)
    results = [result] if isinstance(result, torch.Tensor) else list(result)
    return jsonify({
        "model_name": model.name,
        "model_version": model.version,
        "id": body.get("id"),
        "outputs": [{"name": spec.name, "datatype": spec.datatype, "shape": list(t.shape),
                     "data": t.reshape(-1).tolist()}
                    for spec, t in zip(model.outputs, results)],
    })


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-repository", required=True)
    ap.add_argument("--model", action="append", required=True,
                    help="model to serve (repeatable)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name in args.model:
        models[name] = load_model(args.model_repository, name)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no per-request access log
    app.run(host=args.host, port=args.port, threaded=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
