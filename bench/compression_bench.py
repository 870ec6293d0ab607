#!/usr/bin/python3
"""Request compression benchmark (issue 13): a 1 MiB FP32 input sent as a raw binary request
(Inference-Header-Content-Length: 0) plain and with Content-Encoding gzip, as tritonclient's
request_compression_algorithm sends it, at concurrency 16.

The model (generated here with python3-torch) sums its 262,144-value input, so the answer is a
few bytes and the difference between the runs is the cost of the compressed body. Two inputs:
"image-like" (uint8 pixels / 255: compresses ~3-4x, what images and quantised features look like)
and "random normal" (barely compresses: the worst case, all cost and no saving). For each: wrk
throughput and latency, dais's CPU per request (from /proc), and the decompression cost per MiB
derived from it, next to the reference measured in this run: Python's zlib.decompress of the
same body (the same zlib, no server around it).

usage: bench/compression_bench.py [--seconds 8] [--build build/release]
"""
import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
N = 262_144  # FP32 values: 1 MiB


def write_model(repo: Path):
    import torch

    class Sum(torch.nn.Module):
        def forward(self, x):
            return x.sum(dim=0, keepdim=True)

    d = repo / "sum1m"
    (d / "1").mkdir(parents=True)
    torch.jit.save(torch.jit.script(Sum()), str(d / "1" / "model.pt"))
    (d / "config.pbtxt").write_text(
        'name: "sum1m"\nplatform: "pytorch_libtorch"\nmax_batch_size: 0\n'
        f'input [ {{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ {N} ] }} ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        "instance_group [ { count: 2 kind: KIND_CPU } ]\n")


def start(dais, repo, log):
    p = subprocess.Popen([dais, "serve", "--model-repository", str(repo), "--http-port", "0",
                          "--metrics-port", "0", "--grpc-port", "0"],
                         stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = Path(log.name).read_text(errors="replace")
        if "dais serve ready" in text:
            for line in text.splitlines():
                if "ports: http=" in line:
                    ports = dict(kv.split("=") for kv in line.split("ports: ")[1].split())
                    return p, int(ports["http"])
        time.sleep(0.05)
    p.kill()
    raise SystemExit("dais serve did not start:\n" + Path(log.name).read_text())


def decompress_ms_per_mib(packed: bytes, plain_len: int) -> float:
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        zlib.decompress(packed, 15 + 16)
        reps += 1
    return (time.perf_counter() - t0) / reps * 1e3 / (plain_len / (1 << 20))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    args = ap.parse_args()
    dais = os.path.join(args.build, "src/cmd/dais")
    rng = np.random.default_rng(13)
    inputs = {
        "image-like": (rng.integers(0, 256, N) / 255.0).astype("<f4").tobytes(),
        "random normal": rng.normal(size=N).astype("<f4").tobytes(),
    }
    tmp = Path(tempfile.mkdtemp(prefix="dais-compression-bench-"))
    write_model(tmp / "repo")
    with open(tmp / "dais.log", "w") as log:
        proc, port = start(dais, tmp / "repo", log)
    url = f"http://127.0.0.1:{port}/v2/models/sum1m/infer"
    rows = []
    try:
        for kind, plain in inputs.items():
            packed = gzip.compress(plain, 6)  # tritonclient: gzip.compress, default level
            ref_ms = decompress_ms_per_mib(packed, len(plain))
            base = None
            for coding, body in (("none", plain), ("gzip", packed)):
                extra = 'wrk.headers["Inference-Header-Content-Length"] = "0"\n'
                if coding == "gzip":
                    extra += 'wrk.headers["Content-Encoding"] = "gzip"\n'
                benchlib.run_wrk(url, body, 0, args.concurrency, 1, str(tmp),
                                 lua_extra=extra)  # warm-up
                cpu0 = benchlib.cpu_seconds(proc.pid)
                t0 = time.monotonic()
                r = benchlib.run_wrk(url, body, 0, args.concurrency, args.seconds, str(tmp),
                                     lua_extra=extra)
                elapsed = time.monotonic() - t0
                cpu_us = (benchlib.cpu_seconds(proc.pid) - cpu0) / (r["rps"] * elapsed) * 1e6
                if r["errors"]:
                    raise SystemExit(f"{kind} {coding}: {r['errors']} errors")
                row = dict(kind=kind, coding=coding, wire=len(body), cpu_us=cpu_us, ref=ref_ms,
                           **r)
                if base is None:
                    base = row
                row["ratio"] = r["rps"] / base["rps"]
                row["extra_ms_per_mib"] = (cpu_us - base["cpu_us"]) / 1e3
                rows.append(row)
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"\n1 MiB FP32 raw binary request, wrk -c {args.concurrency}, {args.seconds} s each, "
          f"{os.cpu_count()} cores\n")
    print("| input | Content-Encoding | bytes sent | req/s | vs plain | p50 ms | p99 ms "
          "| dais CPU µs/req | extra CPU ms per MiB | zlib.decompress ms per MiB (reference) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        extra = "" if r["coding"] == "none" else f"{r['extra_ms_per_mib']:.2f}"
        ref = "" if r["coding"] == "none" else f"{r['ref']:.2f}"
        print(f"| {r['kind']} | {r['coding']} | {r['wire']:,} | {r['rps']:.0f} | "
              f"{r['ratio']:.2f} | {r['p50_us'] / 1e3:.2f} | {r['p99_us'] / 1e3:.2f} | "
              f"{r['cpu_us']:.0f} | {extra} | {ref} |")


if __name__ == "__main__":
    main()
