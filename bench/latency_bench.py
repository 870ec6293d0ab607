#!/usr/bin/python3
"""Latency at low load and throughput at high load (issue 18), in one run on one machine.

Part "floor" (goals 1 and 4), on mlp_small at concurrency 1:
  - the loopback floor: nginx (Debian's nginx-light) answering a fixed body of the same size as
    dais's answer, to wrk's same POST;
  - the forward pass in process (bench/model_ceiling, batch 1);
  - dais serve over HTTP JSON, HTTP binary (wrk) and gRPC (dais perf -i grpc);
  - dais's own cost = dais p50 - nginx p50 - forward p50; p99 against nginx's p99, quiet and with
    a CPU-bound neighbour (a Python busy loop on the same cores);
  - context switches of the server per request (/proc/<pid>/task/*/status), each of these for
    the inline path and for the queued one (a copy with inline_execution_max_microseconds 0),
    and the inline path on a second server started with --io-busy-poll-microseconds N
    (--busy-poll-us, default 200; 0 leaves it out).
Part "batching" (goals 2 and 3), on mlp_heavy over HTTP JSON at concurrency 1, 16 and 64: Triton's
batcher with max_queue_delay 0, 500, 2000 and 5000 us against the adaptive policy (latency target
10 ms), all five served by one dais serve as copies of the model, side by side, and nginx
answering a fixed body of the answer's size (the loopback floor); "of ceiling" is req/s over the
in-process best batched rows/s; server CPU per request from /proc; each cell is the median of
interleaved rounds.

Part "null" (not run by default): at concurrency 1, the adaptive copy, the delay-0 copy, an
identical twin of it and a copy with inline execution off, request by request on one connection
in a shuffled cycle (paired); the twin's difference from delay 0 is the noise floor for the
adaptive copy's, the queued copy's is what inline execution saves. Runs --seconds x --rounds
seconds.

usage: bench/latency_bench.py [--seconds 5] [--rounds 3] [--parts floor,batching,null] [--twin]
                              [--busy-poll-us 200]
                              [--build build/release]
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (cpu_seconds, example_repository, mlp_layers,  # noqa: E402
                      nginx_conf, repo_with_queue_delay, request_bodies, run_wrk)
from cluster_bench import ROOT, free_port, wait_for  # noqa: E402
from tls_bench import Procs, log  # noqa: E402

NGINX_HTTP = """  server {{
    listen 127.0.0.1:{port};
    default_type application/json;
    location = /json {{ return 200 "{json}"; }}
    location = /binary {{ return 200 "{binary}"; }}
  }}"""

DELAYS = [0, 500, 2000, 5000]
ADAPTIVE = "adaptive"
LATENCY_TARGET_US = 10000
QUEUED_PARAMETER = ('parameters { key: "inline_execution_max_microseconds" value: '
                    '{ string_value: "0" } }\n')


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read() or b"null")


def post(url, body, header_len):
    headers = {"Content-Type": "application/json"}
    if header_len:
        headers = {"Content-Type": "application/octet-stream",
                   "Inference-Header-Content-Length": str(header_len)}
    req = urllib.request.Request(url, data=body, headers=headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read()


def context_switches(pid):
    """Voluntary + involuntary context switches of every thread of `pid`."""
    n = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            text = Path(status).read_text()
        except OSError:
            continue
        n += sum(int(v) for v in re.findall(r"ctxt_switches:\s+(\d+)", text))
    return n


def ceiling(build, model_dir, batches):
    out = subprocess.run([str(build / "bench/model_ceiling"), str(model_dir), "3",
                          *[str(b) for b in batches]], capture_output=True, text=True,
                         check=True).stdout
    return {r["batch"]: r for r in map(json.loads, out.splitlines())}


def serve(procs, build, repo, name, extra=()):
    http, grpc = free_port(), free_port()
    p = procs.start([build / "src/cmd/dais", "serve", "--model-repository", repo, "--http-port",
                     http, "--grpc-port", grpc, "--metrics-port", 0, *extra], name)
    wait_for(lambda: subprocess.run(["curl", "-sf", f"http://127.0.0.1:{http}/v2/health/ready"],
                                    capture_output=True).returncode == 0, 120, name)
    return http, grpc, p.pid


class Neighbour:
    """A CPU-bound process on the same cores while the block runs (None: no neighbour)."""

    def __init__(self, on):
        self.on, self.p = on, None

    def __enter__(self):
        if self.on:
            self.p = subprocess.Popen(["/usr/bin/python3", "-c", "while True: pass"])
        return self

    def __exit__(self, *exc):
        if self.p:
            self.p.kill()
            self.p.wait()


def perf_grpc(build, port, model, seconds):
    """dais perf -i grpc at concurrency 1: rps, p50_us, p99_us, errors."""
    cmd = [build / "src/cmd/dais", "perf", "-m", model, "-i", "grpc", "-u", f"localhost:{port}",
           "--concurrency-range", 1, "--measurement-interval-ms", int(seconds * 1000),
           "--max-trials", 3, "--no-progress"]
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                         check=True).stdout
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("1 "))
    rps = float(row[1])
    return {"rps": rps, "p50_us": float(row[3]), "p99_us": float(row[6]),
            "errors": int(row[7])}


def floor_repo(tmp):
    """mlp_small without a batching delay, twice: as is, and with inline execution off (every
    request queued for the instance thread, as before issue 18)."""
    repo = Path(repo_with_queue_delay(example_repository(ROOT), ["mlp_small"], 0,
                                      str(tmp / "floor-repo-")))
    shutil.copytree(repo / "mlp_small", repo / "mlp_small_queued", symlinks=True)
    cfg = repo / "mlp_small_queued" / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace('name: "mlp_small"', 'name: "mlp_small_queued"') +
                   QUEUED_PARAMETER)
    return repo


def measure(pid, answered, run):
    """run() with the server's context switches and CPU time per request it answered
    (`answered()`: the model's success count, so a client's warm-up requests count too)."""
    c0, s0, n0 = context_switches(pid), cpu_seconds(pid), answered()
    r = run()
    c1, s1, n1 = context_switches(pid), cpu_seconds(pid), answered()
    n = max(n1 - n0, 1)
    r.update(cs=(c1 - c0) / n, cpu_us=(s1 - s0) / n * 1e6)
    return r


def floor_part(args, build, procs, tmp):
    repo = floor_repo(tmp)
    forward = ceiling(build, repo / "mlp_small", [1])[1]["p50_us"]
    log(f"forward pass mlp_small batch 1: p50 {forward} us")
    http, grpc, pid = serve(procs, build, repo, "dais-floor")
    base = f"http://127.0.0.1:{http}/v2/models"
    # The same repository on a second server whose I/O threads poll before they sleep.
    servers = [(http, grpc, pid, ("mlp_small", "mlp_small_queued"), "")]
    if args.busy_poll_us > 0:
        servers.append(serve(procs, build, repo, "dais-floor-busy-poll",
                             ["--io-busy-poll-microseconds", args.busy_poll_us]) +
                       (("mlp_small",), f", busy poll {args.busy_poll_us} us"))
    bodies = request_bodies(16)
    answers = {p: post(f"{base}/mlp_small/infer", b, h) for p, (b, h) in bodies.items()}
    nginx_port = free_port()
    # Same sizes as dais's answers (the content does not matter to the floor).
    (tmp / "nginx.conf").write_text(nginx_conf(tmp, NGINX_HTTP.format(
        port=nginx_port, json="x" * len(answers["json"]), binary="x" * len(answers["binary"]))))
    procs.start(["nginx", "-c", tmp / "nginx.conf", "-p", tmp], "nginx")
    wait_for(lambda: subprocess.run(["curl", "-sf", f"http://127.0.0.1:{nginx_port}/json"],
                                    capture_output=True).returncode == 0, 30, "nginx")
    rows = []
    for neighbour in (False, True):
        with Neighbour(neighbour):
            for proto, (body, hlen) in list(bodies.items()) + [("grpc", (None, 0))]:
                floor = "binary" if proto == "grpc" else proto
                ng = run_wrk(f"http://127.0.0.1:{nginx_port}/{floor}", *bodies[floor], 1,
                             args.seconds, tmp)
                for s_http, s_grpc, s_pid, models, label in servers:
                    s_base = f"http://127.0.0.1:{s_http}/v2/models"
                    for model in models:
                        def answered(model=model, s_base=s_base):
                            return get(f"{s_base}/{model}/stats")["model_stats"][0][
                                "inference_stats"]["success"]["count"]
                        if proto == "grpc":
                            d = measure(s_pid, answered,
                                        lambda: perf_grpc(build, s_grpc, model, args.seconds))
                        else:
                            url = f"{s_base}/{model}/infer"
                            run_wrk(url, body, hlen, 1, 1, tmp)  # warm-up
                            d = measure(s_pid, answered,
                                        lambda: run_wrk(url, body, hlen, 1, args.seconds, tmp))
                        path = "inline" if model == "mlp_small" else "queued"
                        rows.append(dict(proto="gRPC" if proto == "grpc" else f"HTTP {proto}",
                                         path=path + label, neighbour=neighbour, dais=d,
                                         nginx=ng))
                        log(json.dumps(rows[-1]))
    print(f"\nforward pass (bench/model_ceiling, mlp_small, batch 1): p50 {forward:.1f} us\n")
    print("| protocol | dais path | neighbour | nginx p50 | dais p50 | dais own cost (p50 - nginx "
          "- forward) | nginx p99 | dais p99 | p99 dais / nginx | server context switches / req "
          "| server CPU / req | dais req/s | errors |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        d, ng = r["dais"], r["nginx"]
        own = d["p50_us"] - ng["p50_us"] - forward
        print(f"| {r['proto']} | {r['path']} | {'busy loop' if r['neighbour'] else 'quiet'} | "
              f"{ng['p50_us']:.0f} us | {d['p50_us']:.0f} us | {own:.0f} us | "
              f"{ng['p99_us']:.0f} us | {d['p99_us']:.0f} us | {d['p99_us'] / ng['p99_us']:.2f} | "
              f"{d['cs']:.1f} | {d['cpu_us']:.0f} us | {d['rps']:.0f} | {d['errors']} |")
    print("\ninline: the request runs on the I/O thread that read it (an idle instance, nothing "
          "queued); queued: the same model with inline_execution_max_microseconds 0 (instance "
          "thread, then the answer handed back to an I/O thread: the path before issue 18); "
          "busy poll: a second server whose I/O threads poll their sockets that long after each "
          "request before they sleep (--io-busy-poll-microseconds). gRPC "
          "rows: dais perf -i grpc against nginx's HTTP binary floor (nginx has no fixed-answer "
          "gRPC).")


def round_order(items, round_no):
    """The order of one interleaved round: each round starts one further along, and odd rounds run
    backwards, so that no item always follows the same one (at concurrency 1 the one after delay
    5000 would always start on an idle machine)."""
    order = items[round_no % len(items):] + items[:round_no % len(items)]
    return order[::-1] if round_no % 2 else order


def batching_repo(tmp, folder="batching", twin=False):
    """mlp_heavy under five batching configurations, as five models of one repository (and, with
    `twin`, a second delay-0 copy: how far two identical copies differ)."""
    src = example_repository(ROOT) / "mlp_heavy"
    repo = tmp / folder
    config = (src / "config.pbtxt").read_text()
    names = []
    for policy in DELAYS + [ADAPTIVE]:
        name = f"mlp_heavy_{policy}" if policy == ADAPTIVE else f"mlp_heavy_d{policy}"
        (repo / name / "1").mkdir(parents=True)
        os.symlink(src / "1" / "model.pt", repo / name / "1" / "model.pt")
        text = config.replace('name: "mlp_heavy"', f'name: "{name}"')
        delay = 0 if policy == ADAPTIVE else policy
        text = re.sub(r"max_queue_delay_microseconds:\s*\d+",
                      f"max_queue_delay_microseconds: {delay}", text)
        if policy == ADAPTIVE:
            text += ('parameters { key: "batching_policy" value: { string_value: "adaptive" } }\n'
                     'parameters { key: "latency_target_microseconds" value: { string_value: '
                     f'"{LATENCY_TARGET_US}" }} }}\n')
        (repo / name / "config.pbtxt").write_text(text)
        names.append(name)
    if twin:
        copy = "mlp_heavy_d0_twin"
        shutil.copytree(repo / "mlp_heavy_d0", repo / copy, symlinks=True)
        cfg = repo / copy / "config.pbtxt"
        cfg.write_text(cfg.read_text().replace('name: "mlp_heavy_d0"', f'name: "{copy}"'))
        names.insert(len(DELAYS), copy)  # the adaptive copy stays last
    return repo, names


def dispatch_reasons(metrics_text, model):
    out = {}
    for m in re.finditer(r'^dais_batch_dispatches_total\{([^}]*)\} ([\d.e+]+)$', metrics_text,
                         re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("model") == model and float(m.group(2)) > 0:
            out[labels["reason"]] = float(m.group(2))
    return out


def batching_part(args, build, procs, tmp):
    repo, names = batching_repo(tmp, twin=args.twin)
    ceil = ceiling(build, example_repository(ROOT) / "mlp_heavy", [1, 8, 32, 64])
    best = max(ceil.values(), key=lambda r: r["rows_per_s"])
    log(f"mlp_heavy ceiling: batch 1 p50 {ceil[1]['p50_us']} us; best batch {best['batch']}: "
        f"{best['rows_per_s']:.0f} rows/s")
    http, _, pid = serve(procs, build, repo, "dais-batching")
    base = f"http://127.0.0.1:{http}"
    body, hlen = request_bodies(256)["json"]
    # The loopback floor for throughput: nginx answering a fixed body of dais's answer's size.
    answer = post(f"{base}/v2/models/{names[0]}/infer", body, hlen)
    nginx_port = free_port()
    (tmp / "nginx-batching.conf").write_text(nginx_conf(tmp, NGINX_HTTP.format(
        port=nginx_port, json="x" * len(answer), binary="x")))
    procs.start(["nginx", "-c", tmp / "nginx-batching.conf", "-p", tmp], "nginx-batching")
    wait_for(lambda: subprocess.run(["curl", "-sf", f"http://127.0.0.1:{nginx_port}/json"],
                                    capture_output=True).returncode == 0, 30, "nginx")
    runs = {}
    # Rounds interleave the five configurations, so that a slow patch of the shared machine does
    # not land on one of them only (in round_order); each cell is the median round (by req/s).
    for conc in [int(c) for c in args.concurrency.split(",")]:
        for round_no in range(args.rounds):
            r = run_wrk(f"http://127.0.0.1:{nginx_port}/json", body, hlen, conc, args.seconds,
                        tmp)
            runs.setdefault(("nginx", conc), []).append(r)
            log(f"nginx c={conc}: {json.dumps(r)}")
            for name in round_order(names, round_no):
                url = f"{base}/v2/models/{name}/infer"
                run_wrk(url, body, hlen, conc, 1, tmp)  # warm-up (and the adaptive one's learning)
                s0 = get(f"{base}/v2/models/{name}/stats")["model_stats"][0]
                m0 = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
                cpu0 = cpu_seconds(pid)
                r = run_wrk(url, body, hlen, conc, args.seconds, tmp)
                r["cpu_us"] = (cpu_seconds(pid) - cpu0) / max(r["requests"], 1) * 1e6
                s1 = get(f"{base}/v2/models/{name}/stats")["model_stats"][0]
                m1 = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
                n = s1["inference_count"] - s0["inference_count"]
                ex = s1["execution_count"] - s0["execution_count"]
                r0, r1 = dispatch_reasons(m0, name), dispatch_reasons(m1, name)
                r["avg_batch"] = n / max(ex, 1)
                r["reasons"] = {k: v - r0.get(k, 0) for k, v in r1.items() if v - r0.get(k, 0) > 0}
                runs.setdefault((name, conc), []).append(r)
                log(f"{name} c={conc}: {json.dumps(r)}")
    results = {k: sorted(v, key=lambda r: r["rps"])[len(v) // 2] for k, v in runs.items()}
    layers = mlp_layers(example_repository(ROOT) / "mlp_heavy/1/model.pt")
    print(f"\nmlp_heavy ({layers}) in process (bench/model_ceiling): batch 1 p50 "
          f"{ceil[1]['p50_us']:.1f} us, "
          f"{ceil[1]['rows_per_s']:.0f} rows/s; best batch {best['batch']}: "
          f"{best['rows_per_s']:.0f} rows/s (the ceiling below)\n")
    print(f"HTTP JSON, wrk, one row per request; adaptive: latency target {LATENCY_TARGET_US} us; "
          f"median of {args.rounds} interleaved rounds of {args.seconds} s\n")
    print("| conc | nginx fixed answer | " +
          " | ".join(n.replace("mlp_heavy_", "") for n in names) + " |")
    print("|---:|---:|" + "---:|" * len(names))
    for conc in [int(c) for c in args.concurrency.split(",")]:
        ng = results[("nginx", conc)]
        cells = [f"{ng['rps']:.0f} req/s, p50 {ng['p50_us']:.0f} / p99 {ng['p99_us']:.0f} us"]
        for name in names:
            r = results[(name, conc)]
            cells.append(f"{r['rps']:.0f} req/s, p50 {r['p50_us']:.0f} / p99 {r['p99_us']:.0f} us, "
                         f"batch {r['avg_batch']:.1f}, server CPU {r['cpu_us']:.0f} us/req, "
                         f"{r['rps'] / ng['rps']:.2f} of nginx, {r['rps'] / best['rows_per_s']:.3f} "
                         f"of ceiling" + (f", {r['errors']} errors" if r["errors"] else ""))
        print(f"| {conc} | " + " | ".join(cells) + " |")
    print("\nadaptive against the best fixed delay (req/s, median rounds):")
    for conc in [int(c) for c in args.concurrency.split(",")]:
        fixed = max((results[(n, conc)]["rps"], n) for n in names[:-1])
        print(f"- c={conc}: {results[(names[-1], conc)]['rps'] / fixed[0]:.2f} of "
              f"{fixed[1].replace('mlp_heavy_', '')}")
    # Paired within each round (the copies of one round ran minutes apart at most, so a slow
    # patch of the host moves both sides of a ratio): the median of adaptive / fixed per round.
    print("\nadaptive / fixed delay within each round (median, then every round):")
    for conc in [int(c) for c in args.concurrency.split(",")]:
        adaptive = [r["rps"] for r in runs[(names[-1], conc)]]
        cells = []
        for n in names[:-1]:
            ratios = [a / r["rps"] for a, r in zip(adaptive, runs[(n, conc)])]
            cells.append(f"{n.replace('mlp_heavy_', '')} {statistics.median(ratios):.3f} "
                         f"({', '.join(f'{x:.2f}' for x in ratios)})")
        print(f"- c={conc}: " + "; ".join(cells))
    print("\nadaptive dispatch reasons (batches during the measurement):")
    for conc in [int(c) for c in args.concurrency.split(",")]:
        print(f"- c={conc}: {results[(names[-1], conc)]['reasons']}")


def paired_latencies(port, models, body, seconds):
    """One keep-alive connection at concurrency 1 cycling through `models` in a shuffled order per
    cycle; returns one {model: latency_us} per cycle, in order. Every model sees the same host at
    the same moments, so drift between rounds cancels."""
    reqs = {m: (f"POST /v2/models/{m}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            + body for m in models}
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rng = random.Random(18)
    cycles = []
    clock = time.perf_counter_ns
    end = clock() + int(seconds * 1e9)
    buf = b""
    try:
        while clock() < end:
            order = list(models)
            rng.shuffle(order)
            cycle = {}
            for m in order:
                t0 = clock()
                sock.sendall(reqs[m])
                while b"\r\n\r\n" not in buf:
                    buf += sock.recv(65536)
                head, _, buf = buf.partition(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"{m}: {head[:80]!r}")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
                while len(buf) < length:
                    buf += sock.recv(65536)
                buf = buf[length:]
                cycle[m] = (clock() - t0) / 1000.0
            cycles.append(cycle)
    finally:
        sock.close()
    return cycles


def null_part(args, build, procs, tmp):
    """Concurrency 1: the adaptive copy of mlp_heavy, the delay-0 copy, an identical twin of the
    delay-0 copy and a copy that never runs inline (the queued path), measured request by request
    in a shuffled cycle on one connection (paired: each cycle's requests meet the same host). The
    twin's difference from delay 0 is the noise floor against which the adaptive copy's is read
    (goal 2 asks for 5 us); the queued copy's is what inline execution saves."""
    repo, _ = batching_repo(tmp, "null", twin=True)
    copy = "mlp_heavy_d0_queued"
    shutil.copytree(repo / "mlp_heavy_d0", repo / copy, symlinks=True)
    cfg = repo / copy / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace('name: "mlp_heavy_d0"', f'name: "{copy}"') +
                   QUEUED_PARAMETER)
    http, _, _ = serve(procs, build, repo, "dais-null")
    body, _ = request_bodies(256)["json"]
    models = ["mlp_heavy_d0", "mlp_heavy_d0_twin", "mlp_heavy_adaptive", "mlp_heavy_d0_queued"]
    paired_latencies(http, models, body, 1)  # warm-up
    cycles = paired_latencies(http, models, body, args.seconds * args.rounds)
    n = len(cycles)
    print(f"\nmlp_heavy ({mlp_layers(repo / 'mlp_heavy_d0/1/model.pt')}) at "
          f"concurrency 1, HTTP JSON, one connection cycling through the copies in a "
          f"shuffled order ({n} cycles in {args.seconds * args.rounds} s; a Python client, so "
          f"the absolute figures include its own cost, the same for each copy):\n")
    print("| copy | p50 | p99 | median paired difference from delay 0 | the same in each tenth "
          "of the run |")
    print("|---|---:|---:|---:|---|")
    for m in models:
        lat = sorted(c[m] for c in cycles)
        row = f"| {m} | {lat[n // 2]:.1f} us | {lat[int(n * 0.99)]:.1f} us |"
        if m == models[0]:
            print(row + " | |")
            continue
        diffs = [c[m] - c[models[0]] for c in cycles]
        tenths = [statistics.median(diffs[i * n // 10:(i + 1) * n // 10]) for i in range(10)]
        print(f"{row} {statistics.median(diffs):+.1f} us | "
              f"{', '.join(f'{d:+.1f}' for d in tenths)} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build/release"))
    ap.add_argument("--parts", default="floor,batching")
    ap.add_argument("--concurrency", default="1,16,64", help="batching part")
    ap.add_argument("--rounds", type=int, default=3, help="batching part: interleaved rounds")
    ap.add_argument("--busy-poll-us", type=int, default=200,
                    help="floor part: also measure a second dais serve started with "
                         "--io-busy-poll-microseconds N (0: not)")
    ap.add_argument("--twin", action="store_true",
                    help="batching part: add a second, identical delay-0 copy (the noise between "
                         "identical copies; it counts among the fixed delays)")
    args = ap.parse_args()
    build = Path(args.build)
    tmp = Path(tempfile.mkdtemp(prefix="dais-latency-bench-"))
    procs = Procs(tmp)
    print(f"# {os.cpu_count()} cores; {args.seconds} s per case; clients on the same machine")
    try:
        if "floor" in args.parts:
            floor_part(args, build, procs, tmp)
        procs.stop()
        procs = Procs(tmp)
        if "batching" in args.parts:
            batching_part(args, build, procs, tmp)
        procs.stop()
        procs = Procs(tmp)
        if "null" in args.parts:
            null_part(args, build, procs, tmp)
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
