#!/usr/bin/python3
"""Item embeddings from the example model, for the vector memory benchmark (bench/memory_bench
--data; docs/benchmarks.md, "Vector memory").

No example model has trained item embeddings, so this uses the closest thing the examples have:
the hidden layer of `mlp_small` (16 -> 32 -> 4, TorchScript, scripts/gen_models.py) as an
encoder. Items are --n rows of 16 features drawn around --clusters seeded category centres
(items of a category look alike), and an item's embedding is the model's 32 hidden activations
(ReLU(W1 x + b1)) for its row: non-negative, anisotropic, many zeros, unlike the Gaussian data of
the synthetic run. The file holds --n + --queries rows of float32 (little-endian, 32 per row):
the items, then the query rows (other items of the same categories, not in the data).

usage: gen_item_embeddings.py MODEL_PT OUT [--n 1000000] [--queries 1000] [--clusters 1000]
Run it with Debian's /usr/bin/python3 (python3-torch, python3-numpy).
"""
from __future__ import annotations

import argparse

import numpy as np
import torch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    model = torch.jit.load(args.model)
    first = getattr(model.layers, "0")  # the hidden layer: Linear(16, 32)
    rng = np.random.default_rng(args.seed)
    centres = rng.normal(size=(args.clusters, 16)).astype(np.float32)
    rows = args.n + args.queries
    with open(args.out, "wb") as out, torch.no_grad():
        for start in range(0, rows, 100_000):
            m = min(100_000, rows - start)
            x = centres[rng.integers(0, args.clusters, m)] + 0.5 * rng.normal(
                size=(m, 16)).astype(np.float32)
            h = torch.relu(first(torch.from_numpy(x))).numpy().astype("<f4")
            # An all-zero row has no direction (cosine): nudge it.
            h[np.all(h == 0, axis=1), 0] = 1e-3
            out.write(h.tobytes())
    print(f"{rows} x 32 embeddings ({args.n} items + {args.queries} queries) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
