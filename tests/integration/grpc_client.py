"""A small KServe v2 gRPC client for the integration tests.

The Python stubs are generated at test time (see `generate_stubs`) from proto/model_config.proto,
proto/grpc_service.proto and proto/health.proto (grpc.health.v1) with Debian's protoc 3.21 and
grpc_python_plugin (matching python3-protobuf and python3-grpcio 1.51). Nothing generated is
committed.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = REPO_ROOT / "proto"
GRPC_PYTHON_PLUGIN = "/usr/bin/grpc_python_plugin"

# KServe datatype -> little-endian numpy dtype, and the InferTensorContents field for it.
NP_DTYPES = {"FP32": "<f4", "FP64": "<f8", "INT8": "<i1", "INT16": "<i2", "INT32": "<i4",
             "INT64": "<i8", "UINT8": "<u1", "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8",
             "BOOL": "?", "FP16": "<f2"}
CONTENTS_FIELD = {"FP32": "fp32_contents", "FP64": "fp64_contents", "INT8": "int_contents",
                  "INT16": "int_contents", "INT32": "int_contents", "INT64": "int64_contents",
                  "UINT8": "uint_contents", "UINT16": "uint_contents",
                  "UINT32": "uint_contents", "UINT64": "uint64_contents", "BOOL": "bool_contents"}


def generate_stubs(out_dir: Path) -> types.SimpleNamespace:
    """Runs protoc into out_dir, puts out_dir on sys.path and imports the generated modules.
    Returns a namespace with pb (grpc_service_pb2), pb_grpc, config_pb (model_config_pb2),
    health_pb, health_grpc, labels_pb, labels_grpc, memory_pb, memory_grpc, fed_pb and fed_grpc."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    protoc = shutil.which("protoc")
    if protoc is None:
        raise RuntimeError("protoc not found (apt-get install protobuf-compiler)")
    if not Path(GRPC_PYTHON_PLUGIN).exists():
        raise RuntimeError(f"{GRPC_PYTHON_PLUGIN} not found (apt-get install "
                           "protobuf-compiler-grpc)")
    common = [protoc, f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
              f"--plugin=protoc-gen-grpc_python={GRPC_PYTHON_PLUGIN}"]
    args = [f"-I{PROTO_DIR}"] + [str(PROTO_DIR / name) for name in
                                 ("model_config.proto", "grpc_service.proto", "health.proto",
                                  "labels.proto", "memory.proto", "fed.proto")]
    r = subprocess.run(common + args, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"protoc failed ({r.returncode}): {' '.join(common + args)}\n"
                           f"{r.stdout}\n{r.stderr}")
    if str(out_dir) not in sys.path:
        sys.path.insert(0, str(out_dir))
    importlib.invalidate_caches()
    ns = types.SimpleNamespace()
    ns.config_pb = importlib.import_module("model_config_pb2")
    ns.pb = importlib.import_module("grpc_service_pb2")
    ns.pb_grpc = importlib.import_module("grpc_service_pb2_grpc")
    ns.health_pb = importlib.import_module("health_pb2")
    ns.health_grpc = importlib.import_module("health_pb2_grpc")
    ns.labels_pb = importlib.import_module("labels_pb2")
    ns.labels_grpc = importlib.import_module("labels_pb2_grpc")
    ns.memory_pb = importlib.import_module("memory_pb2")
    ns.memory_grpc = importlib.import_module("memory_pb2_grpc")
    ns.fed_pb = importlib.import_module("fed_pb2")
    ns.fed_grpc = importlib.import_module("fed_pb2_grpc")
    return ns


class GrpcClient:
    """A channel to one dais gRPC port with the inference and health stubs."""

    def __init__(self, stubs: types.SimpleNamespace, port: int, connect_timeout: float = 15.0,
                 credentials=None, options=(), compression=None):
        """credentials: grpc.ssl_channel_credentials(...) for TLS (the target is then
        localhost, the name in the test certificates); compression: grpc.Compression.Gzip."""
        import grpc
        self.s = stubs
        self.pb = stubs.pb
        self.port = port
        if credentials is None:
            self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=list(options),
                                                 compression=compression)
        else:
            self.channel = grpc.secure_channel(f"localhost:{port}", credentials,
                                               options=list(options), compression=compression)
        grpc.channel_ready_future(self.channel).result(timeout=connect_timeout)
        self.stub = stubs.pb_grpc.GRPCInferenceServiceStub(self.channel)
        self.health = stubs.health_grpc.HealthStub(self.channel)

    def close(self):
        self.channel.close()

    # -- requests ------------------------------------------------------------------------------

    def tensor(self, name: str, arr, datatype: str = "FP32", shape=None, typed: bool = False):
        """(InferInputTensor, raw bytes or None). typed=True fills contents.<type>_contents."""
        arr = np.asarray(arr)
        t = self.pb.ModelInferRequest.InferInputTensor(
            name=name, datatype=datatype, shape=list(arr.shape if shape is None else shape))
        if typed:
            getattr(t.contents, CONTENTS_FIELD[datatype]).extend(arr.reshape(-1).tolist())
            return t, None
        raw = np.ascontiguousarray(arr).astype(NP_DTYPES[datatype]).tobytes()
        return t, raw

    def request(self, model: str, inputs: dict, version: str = "", id: str = "",
                outputs=None, typed: bool = False, datatype: str = "FP32"):
        """A ModelInferRequest; `inputs` is {name: ndarray}, sent as raw_input_contents unless
        typed=True."""
        req = self.pb.ModelInferRequest(model_name=model, model_version=version, id=id)
        for name, arr in inputs.items():
            t, raw = self.tensor(name, arr, datatype=datatype, typed=typed)
            req.inputs.append(t)
            if raw is not None:
                req.raw_input_contents.append(raw)
        for o in outputs or ():
            req.outputs.add(name=o)
        return req

    def infer(self, model: str, inputs: dict, timeout: float = 30.0, **kw):
        return self.stub.ModelInfer(self.request(model, inputs, **kw), timeout=timeout)


def decode_outputs(resp) -> dict[str, np.ndarray]:
    """{name: ndarray} from a ModelInferResponse (raw_output_contents, or typed contents when no
    raw contents are present)."""
    raw = list(resp.raw_output_contents)
    assert not raw or len(raw) == len(resp.outputs), \
        f"{len(raw)} raw_output_contents for {len(resp.outputs)} outputs"
    out = {}
    for i, o in enumerate(resp.outputs):
        shape = list(o.shape)
        if raw:
            arr = np.frombuffer(raw[i], dtype=NP_DTYPES[o.datatype])
        else:
            field = CONTENTS_FIELD[o.datatype]
            arr = np.asarray(getattr(o.contents, field), dtype=NP_DTYPES[o.datatype])
        assert arr.size == int(np.prod(shape)), \
            f"output {o.name}: {arr.size} elements for shape {shape}"
        out[o.name] = arr.reshape(shape)
    return out
