#!/usr/bin/python3
"""dais serve benchmark: the in-process ceiling vs dais serve over HTTP JSON and binary.

In one run, on the generated models mlp_small and mlp_heavy:
  (a) the model's own forward in process (bench/model_ceiling, same backend code) at batch 1, 32;
  (b) dais serve over HTTP JSON and (c) over HTTP binary, batch-1 requests from wrk at
      concurrency 1 and 64.
Prints a markdown table: throughput, p50/p99, ratio to the ceiling, average executed batch,
server-side overhead (server time per request minus model compute per request, from the
statistics endpoint) and requests per server CPU-second (from /proc).

usage: bench/serve_bench.py [--seconds 10] [--build build/release]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read() or b"null")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(ROOT, "build/release"))
    ap.add_argument("--models", default="mlp_small,mlp_heavy")
    ap.add_argument("--queue-delay-us", type=int, default=None,
                    help="serve a copy of the example repository whose models use this "
                         "max_queue_delay_microseconds (default: the examples' own)")
    ap.add_argument("--concurrency", default="1,16,64")
    args = ap.parse_args()
    repo = os.path.join(ROOT, "examples/model_repository")
    if not os.path.exists(os.path.join(repo, "mlp_heavy/1/model.pt")):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts/gen_models.py"), repo],
                       check=True)
    if args.queue_delay_us is not None:
        repo = benchlib.repo_with_queue_delay(repo, os.listdir(repo), args.queue_delay_us,
                                              "dais-bench-repo-")
        print(f"# serving a copy with max_queue_delay_microseconds: {args.queue_delay_us}")
    models = args.models.split(",")
    widths = {"mlp_small": 16, "mlp_heavy": 256}

    print(f"# machine: {os.cpu_count()} cores; {args.seconds}s per case; wrk on the same machine",
          flush=True)
    ceiling = {}
    for m in models:
        out = subprocess.run([os.path.join(args.build, "bench/model_ceiling"),
                              os.path.join(repo, m), "3", "1", "32"],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            r = json.loads(line)
            ceiling[(m, r["batch"])] = r
            print(f"ceiling {m} batch {r['batch']}: p50 {r['p50_us']} us, "
                  f"{r['rows_per_s']:.0f} rows/s", flush=True)

    log = tempfile.NamedTemporaryFile(prefix="dais-bench-", suffix=".log", delete=False)
    server = subprocess.Popen([os.path.join(args.build, "src/cmd/dais"), "serve",
                               "--model-repository", repo, "--http-port", "0"],
                              stderr=log, stdout=subprocess.DEVNULL)
    port = None
    for _ in range(600):
        with open(log.name) as f:
            m = re.search(r"ports: http=(\d+)", f.read())
        if m:
            port = int(m.group(1))
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1)
                break
            except Exception:
                pass
        time.sleep(0.1)
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for m in models:
                for proto, (body, hlen) in benchlib.request_bodies(widths[m]).items():
                    for conc in [int(c) for c in args.concurrency.split(",")]:
                        url = f"{base}/v2/models/{m}/infer"
                        benchlib.run_wrk(url, body, hlen, conc, 1, tmp)  # warm-up
                        s0 = get(f"{base}/v2/models/{m}/stats")["model_stats"][0]
                        c0 = benchlib.cpu_seconds(server.pid)
                        r = benchlib.run_wrk(url, body, hlen, conc, args.seconds, tmp)
                        c1 = benchlib.cpu_seconds(server.pid)
                        s1 = get(f"{base}/v2/models/{m}/stats")["model_stats"][0]
                        n = s1["inference_stats"]["success"]["count"] - \
                            s0["inference_stats"]["success"]["count"]
                        ex = s1["execution_count"] - s0["execution_count"]
                        d = lambda k: (s1["inference_stats"][k]["ns"] -
                                       s0["inference_stats"][k]["ns"])
                        server_us = d("success") / max(n, 1) / 1e3
                        compute_us = (d("compute_infer")) / max(n, 1) / 1e3
                        ref = ceiling[(m, 1)] if conc == 1 else ceiling[(m, 32)]
                        r.update(model=m, proto=proto, conc=conc,
                                 avg_batch=n / max(ex, 1),
                                 server_us=server_us, compute_us=compute_us,
                                 overhead_us=server_us - compute_us,
                                 ratio=r["rps"] / ref["rows_per_s"],
                                 rps_per_core=n / max(c1 - c0, 1e-9),
                                 ceiling_p50_us=ref["p50_us"])
                        rows.append(r)
                        print(json.dumps(r), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)

    print()
    print("| model | protocol | conc | req/s | p50 | p99 | vs ceiling | avg batch | "
          "server time/req | compute/req | server overhead/req | req per server CPU-s | errors |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | HTTP {r['proto']} | {r['conc']} | {r['rps']:.0f} | "
              f"{r['p50_us']:.0f} us | {r['p99_us']:.0f} us | {r['ratio']:.2f} | "
              f"{r['avg_batch']:.1f} | {r['server_us']:.0f} us | {r['compute_us']:.0f} us | "
              f"{r['overhead_us']:.0f} us | {r['rps_per_core']:.0f} | {r['errors']} |")
    print()
    print("ceiling = the backend's in-process forward (bench/model_ceiling): batch 1 for "
          "concurrency 1, batch 32 rows/s for concurrency 16 and 64.")


if __name__ == "__main__":
    sys.exit(main())
