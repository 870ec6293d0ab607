#!/usr/bin/python3
"""Lock service benchmark: acquire+release of a MODEL lock against one Redis, beside the raw
round-trip time, in one run.

Starts its own redis-server on a free loopback port (--save '' --appendonly no), then measures:
  reference  redis-benchmark -t ping -c 1 (PING_MBULK): one round trip, p50 / p99; and PING
             through dais's own redis::Client in lock_bench (its per-round-trip cost);
  lock_bench 1 thread, N threads on different models (independent locks), N threads on one
             model (contended: each grant waits for the previous release): acquire+release
             pairs/s, p50 / p99 per pair, and round trips per pair (EVALSHA/EVAL calls counted
             by the server, INFO commandstats).
Prints a markdown table; --json-out writes every measurement.

usage: bench/lock_bench.py [--seconds 3] [--threads 4] [--json-out FILE] [--build build/release]
"""
import argparse
import csv
import io
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(tmp):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


def redis_ping(port, n):
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "ping", "-c", "1", "-n",
                          str(n), "--csv"], capture_output=True, text=True, check=True).stdout
    rows = {r["test"]: r for r in csv.DictReader(io.StringIO(out))}
    row = rows.get("PING_MBULK") or next(iter(rows.values()))
    return {"rps": float(row["rps"]), "p50_us": float(row["p50_latency_ms"]) * 1000,
            "p99_us": float(row["p99_latency_ms"]) * 1000}


def lock_bench(binary, port, threads, seconds, same_model):
    cmd = [binary, "--redis", f"127.0.0.1:{port}", "--threads", str(threads),
           "--seconds", str(seconds)]
    if same_model:
        cmd.append("--same-model")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--json-out")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench", "lock_bench")
    tmp = tempfile.mkdtemp(prefix="lock_bench.")
    proc, port = start_redis(tmp)
    try:
        ping = redis_ping(port, 20000)
        runs = [("1 thread", lock_bench(binary, port, 1, args.seconds, False)),
                (f"{args.threads} threads, different models",
                 lock_bench(binary, port, args.threads, args.seconds, False)),
                (f"{args.threads} threads, one model (contended)",
                 lock_bench(binary, port, args.threads, args.seconds, True))]
        ping_after = redis_ping(port, 20000)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    rtt = (ping["p50_us"] + ping_after["p50_us"]) / 2
    print(f"redis-benchmark PING -c 1: p50 {ping['p50_us']:.0f} us / {ping_after['p50_us']:.0f} us"
          f" (before / after), p99 {ping['p99_us']:.0f} us, {ping['rps']:.0f} req/s\n")
    print("| run | acquire+release /s | p50 us | p99 us | p50 / redis-benchmark PING p50 | "
          "client PING p50 us | p50 / client PING p50 | round trips / pair |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in runs:
        cp = r["client_ping_p50_us"]
        print(f"| {name} | {r['ops_per_s']:.0f} | {r['p50_us']:.0f} | {r['p99_us']:.0f} | "
              f"{r['p50_us'] / rtt:.1f} | {cp:.0f} | {r['p50_us'] / cp:.1f} | "
              f"{r['round_trips_per_op']:.2f} |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"ping": ping, "ping_after": ping_after,
                       "runs": [dict(r, name=n) for n, r in runs]}, f, indent=2)


if __name__ == "__main__":
    main()
