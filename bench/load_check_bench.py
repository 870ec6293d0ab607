#!/usr/bin/env python3
"""What the load check process costs (issue 11): the time of an explicit load through the
repository API, per example model, with --model-load-isolation none (the reference: the load in
the server alone) and process (a fork of the check zygote loads and warms the version up first),
and the time of `dais check-model` run as a process of its own (what a check would cost without
the zygote).

  /usr/bin/python3 bench/load_check_bench.py [--dais build/release/src/cmd/dais] [--rounds 5]

Needs the example repository (scripts/gen_examples.sh). Prints a table of medians.
"""
import argparse
import json
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("mlp_small", "mlp_heavy", "xgb_binary", "xgb_multiclass")


def start(dais, repo, log, isolation):
    p = subprocess.Popen([dais, "serve", "--model-repository", repo, "--http-port", "0",
                          "--grpc-port", "0", "--model-control-mode", "explicit",
                          "--model-load-isolation", isolation], stdout=log,
                         stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in Path(log.name).read_text(errors="replace").splitlines():
            if "ports: http=" in line:
                return p, int(line.split("http=")[1].split()[0])
        time.sleep(0.05)
    p.kill()
    raise SystemExit("dais serve did not start")


def post(port, path):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=b"", method="POST")
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        r.read()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dais", default=str(ROOT / "build/release/src/cmd/dais"))
    ap.add_argument("--repo", default=str(ROOT / "examples/model_repository"))
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    times = {m: {} for m in MODELS}
    with tempfile.TemporaryDirectory() as tmp:
        for isolation in ("none", "process"):
            log = open(f"{tmp}/{isolation}.log", "wb")
            p, port = start(a.dais, a.repo, log, isolation)
            try:
                for m in MODELS:
                    post(port, f"/v2/repository/models/{m}/load")  # first: zygote start, caches
                    post(port, f"/v2/repository/models/{m}/unload")
                    runs = []
                    for _ in range(a.rounds):
                        runs.append(post(port, f"/v2/repository/models/{m}/load"))
                        post(port, f"/v2/repository/models/{m}/unload")
                    times[m][isolation] = statistics.median(runs)
            finally:
                p.terminate()
                p.wait(30)
    for m in MODELS:
        runs = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            subprocess.run([a.dais, "check-model", "--model-dir", f"{a.repo}/{m}",
                            "--model-version", "1"], capture_output=True, check=True)
            runs.append(time.perf_counter() - t0)
        times[m]["own"] = statistics.median(runs)
    print(f"{'model':<16}{'load, none (ref)':>18}{'load, process':>16}{'ratio':>8}"
          f"{'check-model alone':>20}")
    for m in MODELS:
        t = times[m]
        print(f"{m:<16}{t['none'] * 1e3:>15.1f} ms{t['process'] * 1e3:>13.1f} ms"
              f"{t['process'] / t['none']:>8.2f}{t['own'] * 1e3:>17.1f} ms")
    print(json.dumps({"rounds": a.rounds}))


if __name__ == "__main__":
    main()
