"""What both Python baselines share: read one TorchScript model of a Triton-style repository and
describe it in KServe v2 terms (metadata and a minimal configuration).

The config.pbtxt reading is deliberately small (regular expressions over the fields the
generated models use: name, platform, max_batch_size, input/output name, data_type, dims), as a
team serving its own models would write it; it is not a protobuf text-format parser.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import torch

# Triton's config data types -> KServe v2 datatype names and torch dtypes (the ones these
# baselines accept; the generated MLPs are FP32 in and out).
DATATYPES = {
    "TYPE_FP32": ("FP32", torch.float32),
    "TYPE_FP64": ("FP64", torch.float64),
    "TYPE_INT32": ("INT32", torch.int32),
    "TYPE_INT64": ("INT64", torch.int64),
}


@dataclass
class TensorSpec:
    name: str
    datatype: str  # "FP32"
    config_type: str  # "TYPE_FP32"
    dims: list[int]  # without the batch dimension

    @property
    def torch_dtype(self) -> torch.dtype:
        return DATATYPES[self.config_type][1]


@dataclass
class ServedModel:
    name: str
    version: str
    platform: str
    max_batch_size: int
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    module: torch.jit.ScriptModule = field(repr=False)

    def metadata(self) -> dict:
        """GET /v2/models/{m}: KServe v2 model metadata (batch dimension as -1)."""
        lead = [-1] if self.max_batch_size > 0 else []
        return {
            "name": self.name,
            "versions": [self.version],
            "platform": self.platform,
            "inputs": [{"name": t.name, "datatype": t.datatype, "shape": lead + t.dims}
                       for t in self.inputs],
            "outputs": [{"name": t.name, "datatype": t.datatype, "shape": lead + t.dims}
                        for t in self.outputs],
        }

    def config(self) -> dict:
        """GET /v2/models/{m}/config: the fields a client needs (Triton's JSON names)."""
        return {
            "name": self.name,
            "platform": self.platform,
            "max_batch_size": self.max_batch_size,
            "input": [{"name": t.name, "data_type": t.config_type, "dims": t.dims}
                      for t in self.inputs],
            "output": [{"name": t.name, "data_type": t.config_type, "dims": t.dims}
                       for t in self.outputs],
        }


def _tensors(text: str, section: str) -> list[TensorSpec]:
    m = re.search(rf"^\s*{section}\s*\[(.*?)^\s*\]", text, re.S | re.M)
    if not m:
        return []
    specs = []
    for block in re.findall(r"\{(.*?)\}", m.group(1), re.S):
        name = re.search(r'name:\s*"([^"]+)"', block).group(1)
        config_type = re.search(r"data_type:\s*(\w+)", block).group(1)
        dims = [int(d) for d in re.search(r"dims:\s*\[([^\]]*)\]", block).group(1).split(",")]
        if config_type not in DATATYPES:
            raise ValueError(f"{name}: data type {config_type} is not supported here")
        specs.append(TensorSpec(name, DATATYPES[config_type][0], config_type, dims))
    return specs


def load_model(repository: str, name: str) -> ServedModel:
    """Loads the highest numeric version of `name` (its model.pt) in eval mode."""
    model_dir = os.path.join(repository, name)
    with open(os.path.join(model_dir, "config.pbtxt")) as f:
        text = f.read()
    versions = sorted(int(v) for v in os.listdir(model_dir)
                      if v.isdigit() and os.path.isdir(os.path.join(model_dir, v)))
    if not versions:
        raise FileNotFoundError(f"{model_dir}: no numeric version directory")
    version = str(versions[-1])
    module = torch.jit.load(os.path.join(model_dir, version, "model.pt"), map_location="cpu")
    module.eval()
    platform = re.search(r'platform:\s*"([^"]+)"', text)
    max_batch = re.search(r"max_batch_size:\s*(\d+)", text)
    return ServedModel(
        name=name,
        version=version,
        platform=platform.group(1) if platform else "pytorch_libtorch",
        max_batch_size=int(max_batch.group(1)) if max_batch else 0,
        inputs=_tensors(text, "input"),
        outputs=_tensors(text, "output"),
        module=module,
    )
