#!/usr/bin/python3
"""Where a loaded dais serve spends its CPU: wrk posts the mlp_heavy JSON row (as latency_bench's
batching part does, same five batching copies) at one concurrency, and this prints the rate, the
server's CPU time and context switches per request, the batcher's dispatch reasons and, with
--perf, `perf record -g` of the server during the run summarised by library and by symbol.

usage: bench/server_profile.py [--model mlp_heavy_d0] [--concurrency 64] [--seconds 8] [--perf]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency_bench as lb  # noqa: E402
from benchlib import cpu_seconds, request_bodies, run_wrk  # noqa: E402
from tls_bench import Procs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp_heavy_d0",
                    help="mlp_heavy_d0, _d500, _d2000, _d5000 or mlp_heavy_adaptive")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--perf", action="store_true", help="perf record -g the server meanwhile")
    ap.add_argument("--build", default=os.path.join(lb.ROOT, "build/release"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dais-profile-"))
    procs = Procs(tmp)
    try:
        repo, _ = lb.batching_repo(tmp)
        http, _, pid = lb.serve(procs, Path(args.build), repo, "dais-profile")
        url = f"http://127.0.0.1:{http}/v2/models/{args.model}/infer"
        body, hlen = request_bodies(256)["json"]
        run_wrk(url, body, hlen, args.concurrency, 2, tmp)  # warm-up
        data = tmp / "perf.data"
        perf = None
        if args.perf:
            perf = subprocess.Popen(["perf", "record", "-F", "2000", "-g", "-p", str(pid), "-o",
                                     str(data), "--", "sleep", str(max(1, args.seconds - 2))],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c0, cs0 = cpu_seconds(pid), lb.context_switches(pid)
        r = run_wrk(url, body, hlen, args.concurrency, args.seconds, tmp)
        c1, cs1 = cpu_seconds(pid), lb.context_switches(pid)
        n = max(r["requests"], 1)
        print(f"{args.model} c={args.concurrency}: {r['rps']:.0f} req/s, p50 {r['p50_us']:.0f} / "
              f"p99 {r['p99_us']:.0f} us; server CPU {(c1 - c0) / n * 1e6:.1f} us/req "
              f"({(c1 - c0) / args.seconds:.2f} cores), {(cs1 - cs0) / n:.2f} context "
              f"switches/req")
        print("  dispatch reasons since the server started (warm-ups included):")
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10).read()
        for line in metrics.decode().splitlines():
            if (line.startswith("dais_batch_dispatches_total") and f'"{args.model}"' in line
                    and not line.endswith(" 0")):
                print(" ", line)
        if perf:
            perf.wait()
            for sort in ("dso", "dso,sym"):
                out = subprocess.run(["perf", "report", "-i", str(data), "--no-children",
                                      "--sort", sort, "-g", "none"], capture_output=True,
                                     text=True).stdout
                rows = [x[:150] for x in out.splitlines() if "%" in x and not x.startswith("#")]
                print(f"\nperf, by {sort}:\n" + "\n".join(rows[:25]))
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
