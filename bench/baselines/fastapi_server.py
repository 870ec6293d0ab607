#!/usr/bin/python3
"""Baseline: the PyTorch model server a team writes by itself with FastAPI + uvicorn.

Serves TorchScript models of a Triton-style repository over a minimal KServe v2 JSON protocol,
enough for the same load generator (`dais perf -i http`) to drive it as it drives dais:

  GET  /v2/health/live, /v2/health/ready
  GET  /v2/models/{m}            metadata: name, versions, platform, inputs/outputs [-1, dims]
  GET  /v2/models/{m}/ready
  GET  /v2/models/{m}/config     {"max_batch_size": 64, "input": [...], "output": [...]}
  POST /v2/models/{m}/infer      JSON inputs ({"name", "shape", "datatype", "data": [flat]}),
                                 JSON outputs. No binary tensor extension: the baselines take
                                 and return JSON only.

How it is set up, and why (it is meant to be an honest baseline, neither slowed down nor tuned
beyond what the FastAPI documentation suggests):
  * uvicorn with --workers N processes (default: os.cpu_count()), each loading its own copy of
    the model in eval mode and running it under torch.inference_mode() (no autograd);
  * torch.set_num_threads(1) in every worker: the parallelism is the worker processes, one per
    core, and intra-op threads would only oversubscribe the cores;
  * the request body is validated by pydantic models (FastAPI's idiom);
  * the endpoint is `async def` and calls the model inline: the forward passes here take tens of
    microseconds to about a millisecond, less than a hop to the thread pool that a plain `def`
    endpoint would take, and one worker per core is what gives parallelism;
  * access logging is off (dais does not log every request either);
  * uvicorn runs with whatever event loop and HTTP parser are installed: with Debian's packages
    that is asyncio and h11 (uvloop and httptools are not packaged alongside);
  * with --workers > 1 the listening socket is bound here with proto=IPPROTO_TCP (see
    run_workers): uvicorn's own binding (uvicorn issue #3149) leaves TCP_NODELAY off on the
    accepted connections, which costs ~40 ms per keep-alive request (measured here: 23 req/s
    at concurrency 1). --stock-uvicorn-socket keeps uvicorn's binding to show it.

uvicorn's multi-worker mode needs the app as an import string ("fastapi_server:app"), so the
configuration travels to the workers in environment variables:
  DAIS_BASELINE_MODEL_REPOSITORY, DAIS_BASELINE_MODELS (comma-separated).

usage: fastapi_server.py --model-repository DIR --model NAME [--model NAME2]
                         [--host 127.0.0.1] [--port 8000] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional

import torch
from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from model_repo import ServedModel, load_model  # noqa: E402

ENV_REPOSITORY = "DAIS_BASELINE_MODEL_REPOSITORY"
ENV_MODELS = "DAIS_BASELINE_MODELS"


class InferInput(BaseModel):
    name: str
    shape: List[int]
    datatype: str
    data: List[float]
    parameters: Optional[Dict[str, Any]] = None


class RequestedOutput(BaseModel):
    name: str
    parameters: Optional[Dict[str, Any]] = None


class InferRequest(BaseModel):
    id: Optional[str] = None
    inputs: List[InferInput]
    outputs: Optional[List[RequestedOutput]] = None
    parameters: Optional[Dict[str, Any]] = None


app = FastAPI(title="PyTorch model server (FastAPI baseline)")
models: Dict[str, ServedModel] = {}


@app.on_event("startup")
def load_models() -> None:
    torch.set_num_threads(1)
    repository = os.environ[ENV_REPOSITORY]
    for name in os.environ[ENV_MODELS].split(","):
        models[name] = load_model(repository, name)


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


@app.get("/v2/health/live")
def live() -> Response:
    return Response(status_code=200)


@app.get("/v2/health/ready")
def ready() -> Response:
    return Response(status_code=200 if models else 503)


@app.get("/v2/models/{model_name}")
def model_metadata(model_name: str):
    model = models.get(model_name)
    if model is None:
        return error(404, f"unknown model '{model_name}'")
    return model.metadata()


@app.get("/v2/models/{model_name}/ready")
def model_ready(model_name: str) -> Response:
    return Response(status_code=200 if model_name in models else 404)


@app.get("/v2/models/{model_name}/config")
def model_config(model_name: str):
    model = models.get(model_name)
    if model is None:
        return error(404, f"unknown model '{model_name}'")
    return model.config()


@app.post("/v2/models/{model_name}/infer")
async def infer(model_name: str, request: InferRequest):
    model = models.get(model_name)
    if model is None:
        return error(404, f"unknown model '{model_name}'")
    by_name = {i.name: i for i in request.inputs}
    args = []
    for spec in model.inputs:
        inp = by_name.get(spec.name)
        if inp is None:
            return error(400, f"missing input '{spec.name}'")
        if inp.datatype != spec.datatype:
            return error(400, f"input '{spec.name}': datatype {inp.datatype}, "
                              f"expected {spec.datatype}")
        try:
            args.append(torch.tensor(inp.data, dtype=spec.torch_dtype).reshape(inp.shape))
        except RuntimeError as e:
            return error(400, f"input '{spec.name}': {e}")
    with torch.inference_mode():
        result = model.module(*args)
    results = [result] if isinstance(result, torch.Tensor) else list(result)
    return {
        "model_name": model.name,
        "model_version": model.version,
        "id": request.id,
        "outputs": [{"name": spec.name, "datatype": spec.datatype, "shape": list(t.shape),
                     "data": t.reshape(-1).tolist()}
                    for spec, t in zip(model.outputs, results)],
    }


def run_workers(args) -> None:
    """uvicorn.run(..., workers=N) with one change: the listening socket is created with
    proto=IPPROTO_TCP. uvicorn (0.17 here, still open upstream as Kludex/uvicorn#3149) binds it
    with proto 0 when it forks workers; asyncio then does not set TCP_NODELAY on the accepted
    connections, and since uvicorn writes the response head and body separately, every
    keep-alive response waits ~40 ms for the client's delayed ACK. A team would hit that at
    once and work around it; the rest is what uvicorn.run does for workers > 1."""
    import socket

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config("fastapi_server:app", host=args.host, port=args.port,
                            workers=args.workers, access_log=False, log_level="warning")
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.set_inheritable(True)
    Multiprocess(config, target=uvicorn.Server(config=config).run, sockets=[sock]).run()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-repository", required=True)
    ap.add_argument("--model", action="append", required=True,
                    help="model to serve (repeatable)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--workers", type=int, default=os.cpu_count(),
                    help="uvicorn worker processes (default: os.cpu_count())")
    ap.add_argument("--stock-uvicorn-socket", action="store_true",
                    help="bind with uvicorn.run's own socket (keeps the ~40 ms Nagle delay of "
                         "uvicorn issue #3149 with --workers > 1)")
    args = ap.parse_args()
    os.environ[ENV_REPOSITORY] = os.path.abspath(args.model_repository)
    os.environ[ENV_MODELS] = ",".join(args.model)

    import uvicorn

    # An import string, not the object: uvicorn's worker processes import the app themselves.
    if args.workers <= 1 or args.stock_uvicorn_socket:
        uvicorn.run("fastapi_server:app", host=args.host, port=args.port, workers=args.workers,
                    access_log=False, log_level="warning")
    else:
        run_workers(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
