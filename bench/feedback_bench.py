#!/usr/bin/python3
"""Feedback stream overhead (issue 16): `dais serve` on mlp_small (queue delay 0), wrk posting a
batch-1 KServe v2 JSON request at concurrency 64, without and with `--feedback-stream` to a
real redis-server on loopback, alternating, --repeat times each; the medians side by side, and
the records the stream took, dropped or failed. Goal: at most 3 % throughput lost.

usage: bench/feedback_bench.py [--seconds 8] [--repeat 3] [--build build/release]
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (cpu_seconds, example_repository, get_ok,  # noqa: E402
                      repo_with_queue_delay, request_bodies, run_wrk)
from cluster_bench import ROOT, free_port, wait_for  # noqa: E402


def feedback_counts(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("dais_feedback_records_total{"):
            outcome = line.split('outcome="')[1].split('"')[0]
            out[outcome] = float(line.split()[-1])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    args = ap.parse_args()
    dais = str(Path(args.build) / "src/cmd/dais")
    repo = example_repository(ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="dais-feedback-bench-"))
    repo = Path(repo_with_queue_delay(str(repo), ["mlp_small"], 0, str(tmp / "repo-")))
    redis_port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "",
                              "--appendonly", "no", "--dir", str(tmp)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    body, header_len = request_bodies(16)["json"]
    rps = {"without": [], "with": []}
    cpu_us = {"without": [], "with": []}  # dais's CPU time per request
    redis_us = []  # redis-server's CPU time per request (with the stream)
    counts = {}
    try:
        for _ in range(args.repeat):
            for mode in ("without", "with"):
                port = free_port()
                extra = ([] if mode == "without" else
                         ["--feedback-stream", f"redis://127.0.0.1:{redis_port}/dais:bench"])
                srv = subprocess.Popen(
                    [dais, "serve", "--model-repository", str(repo), "--http-port", str(port),
                     "--grpc-port", "0", "--metrics-port", "0", *extra],
                    stdout=open(tmp / f"serve-{mode}.log", "ab"), stderr=subprocess.STDOUT)
                try:
                    url = f"http://127.0.0.1:{port}"
                    wait_for(lambda: get_ok(url + "/v2/models/mlp_small/ready"), 60, "serve")
                    target = url + "/v2/models/mlp_small/infer"
                    run_wrk(target, body, header_len, 64, 2, str(tmp))  # warm-up
                    cpu0, rcpu0 = cpu_seconds(srv.pid), cpu_seconds(redis.pid)
                    r = run_wrk(target, body, header_len, 64, args.seconds, str(tmp))
                    n = max(r["requests"], 1)
                    rps[mode].append(r["rps"])
                    cpu_us[mode].append((cpu_seconds(srv.pid) - cpu0) / n * 1e6)
                    if mode == "with":
                        redis_us.append((cpu_seconds(redis.pid) - rcpu0) / n * 1e6)
                    if mode == "with":
                        time.sleep(0.5)  # the writer's last batch; counted either way below
                        for k, v in feedback_counts(port).items():
                            counts[k] = counts.get(k, 0) + v
                finally:
                    srv.terminate()
                    srv.wait(30)
        without, with_ = statistics.median(rps["without"]), statistics.median(rps["with"])
        loss = 1 - with_ / without
        print(f"\nmlp_small, KServe v2 JSON batch 1, wrk c=64, {args.seconds} s per run, median of "
              f"{args.repeat}; {time.strftime('%Y-%m-%d')}\n")
        print("| dais serve | req/s (median) | runs | dais CPU µs / request | redis-server CPU "
              "µs / request |")
        print("|---|---:|---|---:|---:|")
        print(f"| without feedback stream | {without:,.0f} | "
              f"{', '.join(f'{r:,.0f}' for r in rps['without'])} | "
              f"{statistics.median(cpu_us['without']):.1f} | |")
        print(f"| with --feedback-stream (sample 1) | {with_:,.0f} | "
              f"{', '.join(f'{r:,.0f}' for r in rps['with'])} | "
              f"{statistics.median(cpu_us['with']):.1f} | {statistics.median(redis_us):.1f} |")
        total = sum(counts.values()) or 1
        print(f"\nthroughput lost: {loss:.1%} (goal ≤ 3 %: {'met' if loss <= 0.03 else 'NOT met'}); "
              f"records: {counts.get('sent', 0):,.0f} sent, {counts.get('dropped', 0):,.0f} "
              f"dropped ({counts.get('dropped', 0) / total:.1%}), {counts.get('failed', 0):,.0f} "
              "failed")
    finally:
        redis.terminate()
        redis.wait(10)
        subprocess.run(["rm", "-rf", str(tmp), str(repo)])


if __name__ == "__main__":
    main()
