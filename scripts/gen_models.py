#!/usr/bin/python3
"""Generate a small, seeded Triton-style model repository for dais's tests and examples.

usage: gen_models.py [--heavy-width N] OUT_DIR

Run it with Debian's /usr/bin/python3 (python3-torch, python3-xgboost, python3-numpy).
Everything is seeded: the same width gives byte-identical weights. Nothing here is committed;
the integration tests call this script into a temporary directory and compute their reference
outputs at test time by loading the very same files (torch.jit.load / xgboost.Booster).

Layout written to OUT_DIR:

  mlp_small/config.pbtxt, mlp_small/1/model.pt
      TorchScript MLP 16 -> 32 -> 4 (FP32), platform pytorch_libtorch, max_batch_size 64,
      INPUT__0 [16] -> OUTPUT__0 [4], dynamic batching (max_queue_delay 2000 us), 1 CPU instance.

  mlp_heavy/config.pbtxt, mlp_heavy/1/model.pt
      TorchScript MLP 256 -> W -> W -> 10 where W is chosen here so that one forward pass of a
      batch of 32 takes about 1 ms on one CPU core (torch.set_num_threads(1)); max_batch_size 64,
      preferred_batch_size [32], max_queue_delay 5000 us, 1 instance. Override W with
      --heavy-width (the measured width depends on the machine; the weights for a given W do not).

  xgb_binary/config.pbtxt, xgb_binary/1/xgboost.json
      XGBoost binary:logistic, 8 features, 20 trees of depth 4, laid out as Triton's FIL backend
      expects (backend "fil", model_type xgboost_json, output_class true, predict_proba true):
      input__0 [8] FP32 -> output__0 [2] FP32 = [1 - p, p]; max_batch_size 256, dynamic batching.

  xgb_multiclass/1/xgboost.json        (NO config.pbtxt: dais auto-completes it from the model)
      XGBoost multi:softprob, 3 classes, 6 features, 10 rounds (30 trees) of depth 4.
      What dais is expected to infer (the lead engineer owns the exact auto-complete): backend
      "fil", one input "input__0" TYPE_FP32 dims [6] (the model's num_feature), one output
      "output__0" TYPE_FP32 dims [3] (num_class probabilities, softmax, rows sum to 1), some
      max_batch_size > 0. The tests only require: the model loads, /config has one input with
      dims [6] and one output, and inference returns 3 probabilities per row that sum to 1 and
      match xgboost's Booster.predict.

The builder functions (build_mlp, save_torchscript, ...) are importable: the poll-mode test uses
them to write new versions of a model while the server runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import xgboost as xgb

SMALL_SEED = 1
HEAVY_SEED = 2
XGB_BINARY_SEED = 3
XGB_MULTI_SEED = 4

HEAVY_TARGET_S = 1e-3
HEAVY_WIDTHS = (64, 96, 128, 160, 192, 224, 256, 320, 384, 512, 640, 768, 1024, 1280, 1536, 2048)


class MLP(torch.nn.Module):
    """Linear layers with ReLU between them (none after the last)."""

    def __init__(self, sizes: list[int]):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            [torch.nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < n - 1:
                x = torch.relu(x)
        return x


def build_mlp(sizes: list[int], seed: int) -> torch.jit.ScriptModule:
    """A seeded TorchScript MLP in eval mode."""
    torch.manual_seed(seed)
    module = MLP(list(sizes)).eval()
    with torch.no_grad():
        return torch.jit.script(module)


def save_torchscript(module: torch.jit.ScriptModule, path: Path) -> None:
    """Saves atomically (temp file + rename), so a polling server never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    torch.jit.save(module, str(tmp))
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def mlp_config(name: str, in_dim: int, out_dim: int, dynamic_batching: str) -> str:
    return f"""name: "{name}"
platform: "pytorch_libtorch"
max_batch_size: 64
input [
  {{
    name: "INPUT__0"
    data_type: TYPE_FP32
    dims: [ {in_dim} ]
  }}
]
output [
  {{
    name: "OUTPUT__0"
    data_type: TYPE_FP32
    dims: [ {out_dim} ]
  }}
]
dynamic_batching {{
{dynamic_batching}
}}
instance_group [
  {{
    count: 1
    kind: KIND_CPU
  }}
]
"""


SMALL_SIZES = [16, 32, 4]


def heavy_sizes(width: int) -> list[int]:
    return [256, width, width, 10]


def time_forward(module: torch.jit.ScriptModule, in_dim: int, batch: int = 32,
                 reps: int = 30) -> float:
    """Best-of-`reps` seconds for one forward pass on one thread (the minimum resists noise from
    other processes on a busy machine)."""
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x = torch.randn(batch, in_dim, generator=torch.Generator().manual_seed(0))
        best = float("inf")
        with torch.no_grad():
            for _ in range(5):
                module(x)
            for _ in range(reps):
                t0 = time.perf_counter()
                module(x)
                best = min(best, time.perf_counter() - t0)
        return best
    finally:
        torch.set_num_threads(prev)


def choose_heavy_width() -> tuple[int, float]:
    """The width from HEAVY_WIDTHS whose batch-32 forward is nearest 1 ms (in log scale)."""
    best_w, best_t, best_err = None, None, float("inf")
    for w in HEAVY_WIDTHS:
        t = time_forward(build_mlp(heavy_sizes(w), HEAVY_SEED), 256)
        err = abs(np.log(t / HEAVY_TARGET_S))
        if err < best_err:
            best_w, best_t, best_err = w, t, err
        if t > HEAVY_TARGET_S:  # widths only get slower from here
            break
    return best_w, best_t


def write_mlp_small(out: Path) -> dict:
    d = out / "mlp_small"
    save_torchscript(build_mlp(SMALL_SIZES, SMALL_SEED), d / "1" / "model.pt")
    write_text(d / "config.pbtxt",
               mlp_config("mlp_small", 16, 4, "  max_queue_delay_microseconds: 2000"))
    return {"model": "mlp_small", "files": ["config.pbtxt", "1/model.pt"],
            "params": sum(a * b + b for a, b in zip(SMALL_SIZES[:-1], SMALL_SIZES[1:])),
            "note": "16->32->4"}


def write_mlp_heavy(out: Path, width: int | None) -> dict:
    d = out / "mlp_heavy"
    if width is None:
        width, _ = choose_heavy_width()
    module = build_mlp(heavy_sizes(width), HEAVY_SEED)
    t = time_forward(module, 256)
    save_torchscript(module, d / "1" / "model.pt")
    write_text(d / "config.pbtxt", mlp_config(
        "mlp_heavy", 256, 10,
        "  preferred_batch_size: [ 32 ]\n  max_queue_delay_microseconds: 5000"))
    sizes = heavy_sizes(width)
    return {"model": "mlp_heavy", "files": ["config.pbtxt", "1/model.pt"],
            "params": sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:])),
            "note": f"{'->'.join(map(str, sizes))}, batch-32 forward {t * 1e3:.3f} ms "
                    f"on 1 thread (target {HEAVY_TARGET_S * 1e3:.1f} ms)"}


def train_xgb(seed: int, n_features: int, n_classes: int, rounds: int) -> xgb.Booster:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2000, n_features)).astype(np.float32)
    w = rng.normal(size=(n_features, n_classes if n_classes > 2 else 1))
    logits = x @ w + 0.3 * rng.normal(size=(x.shape[0], w.shape[1]))
    if n_classes > 2:
        y = logits.argmax(axis=1)
        params = {"objective": "multi:softprob", "num_class": n_classes}
    else:
        y = (logits[:, 0] > 0).astype(np.int32)
        params = {"objective": "binary:logistic"}
    params.update({"max_depth": 4, "eta": 0.3, "seed": seed, "nthread": 1,
                   "tree_method": "exact"})
    return xgb.train(params, xgb.DMatrix(x, label=y), num_boost_round=rounds)


XGB_BINARY_CONFIG = """name: "xgb_binary"
backend: "fil"
max_batch_size: 256
input [
  {
    name: "input__0"
    data_type: TYPE_FP32
    dims: [ 8 ]
  }
]
output [
  {
    name: "output__0"
    data_type: TYPE_FP32
    dims: [ 2 ]
  }
]
instance_group [
  {
    count: 1
    kind: KIND_CPU
  }
]
parameters [
  {
    key: "model_type"
    value: { string_value: "xgboost_json" }
  },
  {
    key: "output_class"
    value: { string_value: "true" }
  },
  {
    key: "predict_proba"
    value: { string_value: "true" }
  }
]
dynamic_batching { }
"""


def write_xgb_binary(out: Path) -> dict:
    d = out / "xgb_binary"
    booster = train_xgb(XGB_BINARY_SEED, 8, 2, 20)
    (d / "1").mkdir(parents=True, exist_ok=True)
    booster.save_model(str(d / "1" / "xgboost.json"))
    write_text(d / "config.pbtxt", XGB_BINARY_CONFIG)
    return {"model": "xgb_binary", "files": ["config.pbtxt", "1/xgboost.json"],
            "params": f"{len(booster.get_dump())} trees",
            "note": "binary:logistic, 8 features, depth 4, outputs [1-p, p]"}


def write_xgb_multiclass(out: Path) -> dict:
    d = out / "xgb_multiclass"
    booster = train_xgb(XGB_MULTI_SEED, 6, 3, 10)
    (d / "1").mkdir(parents=True, exist_ok=True)
    booster.save_model(str(d / "1" / "xgboost.json"))
    return {"model": "xgb_multiclass", "files": ["1/xgboost.json (no config.pbtxt)"],
            "params": f"{len(booster.get_dump())} trees",
            "note": "multi:softprob, 3 classes, 6 features, depth 4"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", metavar="OUT_DIR", help="model repository to write")
    ap.add_argument("--heavy-width", type=int, default=None,
                    help="hidden width of mlp_heavy (default: measured for ~1 ms per batch of 32)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = [write_mlp_small(out), write_mlp_heavy(out, args.heavy_width),
            write_xgb_binary(out), write_xgb_multiclass(out)]
    print(f"model repository: {out.resolve()}")
    for r in rows:
        print(f"  {r['model']:<15} {', '.join(r['files']):<40} params={r['params']}  {r['note']}")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
