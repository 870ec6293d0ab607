#!/usr/bin/python3
"""dais vs the alternatives, in one run, on the same generated TorchScript models.

For mlp_small and mlp_heavy (scripts/gen_models.py):
  1. the in-process LibTorch ceiling: bench/model_ceiling at batch 1, 8, 32, 64 (the same
     backend code dais serves with; "best batch" = the highest rows/s);
  2. dais serve over HTTP binary, gRPC and HTTP JSON;
  3. a FastAPI + uvicorn + PyTorch server (bench/baselines/fastapi_server.py, one uvicorn worker
     per core, JSON);
  4. the Flask + PyTorch monolith (bench/baselines/flask_server.py, one process, JSON);
all driven by the same load generator, `dais perf` (batch-1 requests, closed loop) at
concurrency 1, 16 and 64. For each case: throughput, p50, p99, errors, the ratio to the ceiling
(the batch-1 ceiling at concurrency 1, the best-batch ceiling otherwise), the server's CPU use
(utime + stime from /proc of the server process, or of the baseline's whole process tree,
before and after the case) and requests per server CPU-second. Then a markdown table and the
issue's goals, each met or not met with the numbers.

dais serves a copy of the example repository whose models use max_queue_delay_microseconds
--queue-delay-us (default 0: dispatch at once, batches form from what queued while the instance
was busy), as bench/serve_bench.py's table A. The baselines do not batch across requests.

Everything runs on this machine: the load generator shares the cores with the server. The CPU
the load generator took ("client cores") and the rest of the machine's busy CPU ("other cores",
other people's jobs: a case with more than 0.25 is flagged) are reported next to each case.

Load generators: dais perf by default. If dais perf is missing (after --wait-for-perf seconds),
wrk drives the HTTP cases and gRPC is skipped; if dais perf cannot talk to a baseline, wrk
drives that baseline and dais's HTTP cases are measured with wrk as well, so that the goals
compare like with like. A server that dies during a case is reported as such and restarted.
Every server is stopped at the end, also on errors and on SIGTERM / Ctrl-C.

Default settings take about 6 minutes on 2 cores; --quick (0.7 s windows) about 2.

usage: bench/compare_bench.py [--quick] [--build build/release] [--queue-delay-us 0]
                              [--measurement-interval-ms 3000] [--max-trials 3]
                              [--load-generator auto|perf|wrk] [--wait-for-perf SECONDS]
                              [--json-out FILE] [--report FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
CLK_TCK = os.sysconf("SC_CLK_TCK")
WIDTHS = {"mlp_small": 16, "mlp_heavy": 256}  # input widths, for the wrk fallback's bodies

# (server, protocol) pairs measured, in table order.
CASES = [("dais", "http-binary"), ("dais", "grpc"), ("dais", "grpc-shared"),
         ("dais", "http-json"), ("fastapi", "http-json"), ("flask", "http-json")]
# Servers in the order they are measured: the baselines first, so that when dais perf cannot
# drive them (and wrk has to) the dais HTTP cases are measured with wrk as well.
RUN_ORDER = ["fastapi", "flask", "dais"]
LABEL = {"dais": "dais", "fastapi": "FastAPI+uvicorn", "flask": "Flask"}
PROTO_LABEL = {"http-binary": "HTTP binary", "grpc": "gRPC", "http-json": "HTTP JSON",
               "grpc-shared": "gRPC, 1 connection"}
# grpc-shared: `dais perf --grpc-connections 1`, every in-flight call an HTTP/2 stream on one
# connection (one load thread), as a gRPC client does on one channel (tritonclient's
# InferenceServerClient holds one); "grpc" has one connection and load thread per in-flight
# call, like the HTTP cases.


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes and CPU accounting

def process_tree(root: int) -> list[int]:
    """root and all its live descendants (from /proc/*/stat's ppid)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy (user, nice, system, irq, softirq, steal), /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / CLK_TCK


def tree_cpu_seconds(root: int) -> float:
    return sum(benchlib.cpu_seconds(p) for p in process_tree(root))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except Exception:
        return False


class Server:
    """A server process started in its own session, so that it and its children can be stopped
    together."""

    def __init__(self, name: str, argv: list[str], log_path: str):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.http_port = self.grpc_port = None

    def log_text(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n"
                                   f"{self.log_text()[-3000:]}")
            if self.http_port is None and self.name == "dais":
                m = re.search(r"ports: http=(\d+) metrics=(\d+) grpc=(\d+)", self.log_text())
                if m:
                    self.http_port, self.grpc_port = int(m.group(1)), int(m.group(3))
            if self.http_port and http_ok(f"http://127.0.0.1:{self.http_port}/v2/health/ready"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready after {timeout_s} s:\n"
                           f"{self.log_text()[-3000:]}")

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        try:  # whatever is left of the session (e.g. uvicorn workers)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        self.log.close()


# ---------------------------------------------------------------- load generators

def perf_binary(build: str) -> str:
    return os.path.join(build, "src/cmd/dais")


def perf_available(build: str) -> bool:
    try:
        r = subprocess.run([perf_binary(build), "perf", "--help"], capture_output=True,
                           text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and "concurrency" in r.stdout


def _find(obj, keys):
    """The first value under any of `keys` in a nested JSON object (depth-first)."""
    if isinstance(obj, dict):
        for k in keys:
            if k in obj and not isinstance(obj[k], (dict, list)):
                return obj[k]
        for v in obj.values():
            r = _find(v, keys)
            if r is not None:
                return r
    elif isinstance(obj, list):
        for v in obj:
            r = _find(v, keys)
            if r is not None:
                return r
    return None


def parse_perf_json(path: str) -> dict:
    """dais perf --json FILE, one concurrency level: throughput, p50/p99 (us), errors."""
    with open(path) as f:
        doc = json.load(f)
    levels = doc.get("results") if isinstance(doc, dict) else doc
    level = levels[-1] if isinstance(levels, list) and levels else doc
    rps = _find(level, ["throughput_infer_per_sec", "throughput", "infer_per_sec"])
    p50 = _find(level, ["p50_us"])
    p99 = _find(level, ["p99_us"])
    errors = _find(level, ["errors", "error_count", "failed"])
    stable = _find(level, ["stable"])
    avg_batch = _find(level, ["avg_batch"])  # from the server's statistics (dais only)
    return {"rps": float(rps), "p50_us": float(p50), "p99_us": float(p99),
            "errors": int(errors or 0), "stable": stable,
            "avg_batch": float(avg_batch) if avg_batch else None}


def run_perf(args, model: str, host_port: str, protocol: str, conc: int, tmp: str) -> dict:
    out = os.path.join(tmp, f"perf-{model}-{protocol}-{conc}.json")
    argv = [perf_binary(args.build), "perf", "-m", model, "-u", host_port,
            "-i", "grpc" if protocol.startswith("grpc") else "http",
            "--concurrency-range", str(conc),
            "--measurement-interval-ms", str(args.measurement_interval_ms),
            "--max-trials", str(args.max_trials),
            "--warmup-secs", str(args.warmup_secs),
            "--json", out, "--no-progress"]
    if protocol == "http-binary":
        argv.append("--http-binary")
    if protocol == "grpc-shared":
        argv += ["--grpc-connections", "1"]
    for attempt in range(12):
        try:
            r = subprocess.run(argv, capture_output=True, text=True,
                               timeout=60 + args.max_trials * args.measurement_interval_ms / 1e3 * 3)
            break
        except OSError as e:  # the binary is being rebuilt (EACCES / ETXTBSY): wait for it
            if attempt == 11:
                raise
            log(f"  {argv[0]}: {e}; retrying in 5 s")
            time.sleep(5)
    if not os.path.exists(out):
        raise RuntimeError(f"dais perf failed (rc {r.returncode}): {' '.join(argv)}\n"
                           f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    res = parse_perf_json(out)
    res["perf_rc"] = r.returncode
    return res


def perf_can_drive(args, model: str, host_port: str, tmp: str) -> tuple[bool, str]:
    """A short dais perf run (no warm-up, one 200 ms window): whether it can talk to a server."""
    out = os.path.join(tmp, "probe.json")
    r = subprocess.run([perf_binary(args.build), "perf", "-m", model, "-u", host_port,
                        "--concurrency-range", "1", "--measurement-interval-ms", "200",
                        "--max-trials", "1", "--warmup-secs", "0", "--json", out,
                        "--no-progress"], capture_output=True, text=True, timeout=60)
    if os.path.exists(out):
        os.remove(out)
        return True, ""
    return False, (r.stdout + r.stderr).strip().splitlines()[-1] if (r.stdout + r.stderr) else \
        f"rc {r.returncode}"


def run_wrk(args, model: str, host_port: str, protocol: str, conc: int, tmp: str) -> dict:
    """Fallback for the HTTP cases when dais perf is not there (wrk cannot speak gRPC)."""
    body, hlen = benchlib.request_bodies(WIDTHS[model])[protocol.removeprefix("http-")]
    url = f"http://{host_port}/v2/models/{model}/infer"
    seconds = max(1, round(args.max_trials * args.measurement_interval_ms / 1e3))
    benchlib.run_wrk(url, body, hlen, conc, max(1, round(args.warmup_secs)), tmp)  # warm-up
    r = benchlib.run_wrk(url, body, hlen, conc, seconds, tmp)
    r["stable"] = None
    return r


# ---------------------------------------------------------------- the run

def prepare_repository(args) -> tuple[str, str | None]:
    """(repository dais serves, temporary copy to delete or None); the baselines read the same
    model files (the copy only changes max_queue_delay_microseconds)."""
    repo = os.path.join(ROOT, "examples/model_repository")
    if not all(os.path.exists(os.path.join(repo, m, "1/model.pt")) for m in args.models):
        subprocess.run([PYTHON, os.path.join(ROOT, "scripts/gen_models.py"), repo], check=True)
    if args.queue_delay_us is None:
        return repo, None
    copy = benchlib.repo_with_queue_delay(repo, args.models, args.queue_delay_us,
                                          "dais-compare-repo-")  # only the measured models
    return copy, copy


def measure_ceilings(args, repo: str) -> dict:
    ceiling = {}
    for m in args.models:
        out = subprocess.run([os.path.join(args.build, "bench/model_ceiling"),
                              os.path.join(repo, m), str(args.ceiling_seconds), "1", "8", "32",
                              "64"], capture_output=True, text=True, check=True).stdout
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        best = max(rows, key=lambda r: r["rows_per_s"])
        ceiling[m] = {"rows": rows, "batch1": next(r for r in rows if r["batch"] == 1),
                      "best": best}
        for r in rows:
            log(f"ceiling {m} batch {r['batch']}: p50 {r['p50_us']} us, p99 {r['p99_us']} us, "
                f"{r['rows_per_s']:.0f} rows/s")
    return ceiling


def start_server(args, name: str, repo: str, tmp: str) -> Server:
    n = 1
    while os.path.exists(os.path.join(tmp, f"{name}-{n}.log")):
        n += 1
    logp = os.path.join(tmp, f"{name}-{n}.log")
    if name == "dais":
        s = Server(name, [os.path.join(args.build, "src/cmd/dais"), "serve",
                          "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                          "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1"], logp)
    else:
        port = free_port()
        argv = [PYTHON, os.path.join(ROOT, f"bench/baselines/{name}_server.py"),
                "--model-repository", repo, "--port", str(port)]
        for m in args.models:
            argv += ["--model", m]
        if name == "fastapi":
            argv += ["--workers", str(args.fastapi_workers)]
        s = Server(name, argv, logp)
        s.http_port = port
    s.wait_ready()
    return s


def run_case(args, server: Server, model: str, protocol: str, conc: int, client: str,
             ceiling: dict, tmp: str) -> dict:
    if protocol.startswith("grpc"):
        host_port = f"127.0.0.1:{server.grpc_port}"
    else:
        host_port = f"127.0.0.1:{server.http_port}"
    row = {"model": model, "server": server.name, "protocol": protocol, "conc": conc,
           "client": client}
    if client == "wrk" and protocol.startswith("grpc"):
        row.update(skipped="wrk cannot drive gRPC")
        return row
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    c0, t0, b0 = server.cpu_seconds(), time.monotonic(), machine_busy_seconds()
    try:
        if client == "perf":
            r = run_perf(args, model, host_port, protocol, conc, tmp)
        else:
            r = run_wrk(args, model, host_port, protocol, conc, tmp)
    except Exception as e:  # one failed case does not lose the others
        row.update(failed=str(e)[-500:])
        log(f"  FAILED {server.name} {protocol} {model} c{conc} ({client}): {e}")
        if server.proc.poll() is not None:
            row.update(server_exit=server.proc.returncode)
        return row
    if server.proc.poll() is not None:  # not a measurement: keep the numbers aside
        row.update(server_exit=server.proc.returncode,
                   partial={k: r[k] for k in ("rps", "errors") if k in r})
        return row
    c1, t1, b1 = server.cpu_seconds(), time.monotonic(), machine_busy_seconds()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = t1 - t0
    server_cores = (c1 - c0) / wall
    client_cores = ((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)) / wall
    # Everything else the machine ran meanwhile (other users' jobs): a busy neighbour takes
    # cores from the server and the client, so the case is not comparable with the others.
    other_cores = max(0.0, (b1 - b0) / wall - server_cores - client_cores)
    ref = ceiling[model]["batch1"] if conc == 1 else ceiling[model]["best"]
    row.update(r)
    row.update(server_cores=server_cores, client_cores=client_cores, other_cores=other_cores,
               req_per_cpu_s=r["rps"] / server_cores if server_cores > 0 else None,
               vs_ceiling=r["rps"] / ref["rows_per_s"], ceiling_batch=ref["batch"])
    return row


def fmt_us(us: float) -> str:
    return f"{us:.0f} us" if us < 10000 else f"{us / 1e3:.1f} ms"


CLIENT_LABEL = {"perf": "dais perf", "wrk": "wrk"}


def exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"server crashed ({signal.Signals(-code).name})"
        except ValueError:
            return f"server killed by signal {-code}"
    return f"server exited ({code})"


def table(rows: list[dict]) -> str:
    lines = ["| model | server | protocol | client | conc | req/s | p50 | p99 | vs ceiling | "
             "avg batch | server cores | req per server CPU-s | client cores | other cores | "
             "errors |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        head = (f"| {r['model']} | {LABEL[r['server']]} | {PROTO_LABEL[r['protocol']]} | "
                f"{CLIENT_LABEL[r['client']]} | {r['conc']} |")
        if "rps" not in r:
            why = r.get("skipped") or "failed"
            if "server_exit" in r:
                why = exit_text(r["server_exit"])
                if r.get("partial", {}).get("errors"):
                    why += f"; {r['partial']['errors']} failed requests"
            lines.append(head + f" {why} | | | | | | | | | |")
            continue
        rpc = f"{r['req_per_cpu_s']:.0f}" if r["req_per_cpu_s"] else "-"
        lines.append(head + f" {r['rps']:.0f} | {fmt_us(r['p50_us'])} | {fmt_us(r['p99_us'])} | "
                     f"{r['vs_ceiling']:.3f} | "
                     f"{'%.1f' % r['avg_batch'] if r.get('avg_batch') else '-'} | "
                     f"{r['server_cores']:.2f} | {rpc} | "
                     f"{r['client_cores']:.2f} | {r['other_cores']:.2f} | {r['errors']} |")
    return "\n".join(lines)


def goals(rows: list[dict], models: list[str], ceiling: dict) -> str:
    by = {(r["model"], r["server"], r["protocol"], r["client"], r["conc"]): r
          for r in rows if "rps" in r}
    died = {(r["model"], r["server"], r["protocol"], r["client"], r["conc"]): r
            for r in rows if "server_exit" in r}
    concs = sorted({r["conc"] for r in rows})
    out = []

    # 1. >= 10x the FastAPI baseline's throughput at concurrency 64, with a lower p99; dais and
    #    FastAPI measured by the same client.
    out.append("**Goal 1: at concurrency 64, ≥ 10× the FastAPI baseline's throughput with a "
               "lower p99** (same load generator on both sides).")
    for m in models:
        for client in ("perf", "wrk"):
            fa = by.get((m, "fastapi", "http-json", client, 64))
            if not fa:
                continue
            for proto in ("http-binary", "grpc", "grpc-shared", "http-json"):
                d = by.get((m, "dais", proto, client, 64))
                if not d:
                    x = died.get((m, "dais", proto, client, 64))
                    if x:
                        out.append(f"- {m}, dais {PROTO_LABEL[proto]} vs FastAPI JSON "
                                   f"({CLIENT_LABEL[client]}): NOT met: dais "
                                   f"{exit_text(x['server_exit'])} during the case")
                    continue
                ratio = d["rps"] / fa["rps"]
                met = ratio >= 10 and d["p99_us"] < fa["p99_us"]
                per_cpu = (f"; per server CPU-second {d['req_per_cpu_s'] / fa['req_per_cpu_s']:.1f}×"
                           if d.get("req_per_cpu_s") and fa.get("req_per_cpu_s") else "")
                out.append(f"- {m}, dais {PROTO_LABEL[proto]} vs FastAPI JSON "
                           f"({CLIENT_LABEL[client]}): {'met' if met else 'NOT met'}: "
                           f"{ratio:.1f}× the throughput ({d['rps']:.0f} vs {fa['rps']:.0f} "
                           f"req/s), p99 {fmt_us(d['p99_us'])} vs {fmt_us(fa['p99_us'])}{per_cpu}")
            best = ceiling[m]["best"]
            if 10 * fa["rps"] > best["rows_per_s"]:
                out.append(f"  - 10× FastAPI is {10 * fa['rps']:.0f} req/s, above what one "
                           f"instance of {m} can compute at all (in-process ceiling "
                           f"{best['rows_per_s']:.0f} rows/s at batch {best['batch']})")

    # 2. gRPC within 10 % of HTTP binary or better (both through dais perf).
    out.append("")
    out.append("**Goal 2: gRPC throughput within 10 % of HTTP binary, or better** (both driven "
               "by dais perf).")
    for m in models:
        for c in concs:
            g = by.get((m, "dais", "grpc", "perf", c))
            b = by.get((m, "dais", "http-binary", "perf", c))
            x = died.get((m, "dais", "grpc", "perf", c))
            if x and b:
                out.append(f"- {m}, concurrency {c}: NOT met: dais "
                           f"{exit_text(x['server_exit'])} under gRPC load "
                           f"(HTTP binary: {b['rps']:.0f} req/s)")
            if not g or not b:
                continue
            ratio = g["rps"] / b["rps"]
            out.append(f"- {m}, concurrency {c}: {'met' if ratio >= 0.9 else 'NOT met'}: "
                       f"gRPC/HTTP binary = {ratio:.2f} ({g['rps']:.0f} vs {b['rps']:.0f} req/s; "
                       f"p99 {fmt_us(g['p99_us'])} vs {fmt_us(b['p99_us'])})")

    # 3. Small-model requests per second per core, next to Triton's published range.
    out.append("")
    out.append("**Goal 3: small-model requests per second per core, next to Triton's "
               "published ~2.5–3k per core (trivial model, gRPC).**")
    for client in ("perf", "wrk"):
        for proto in ("grpc", "grpc-shared", "http-binary", "http-json"):
            vals = [(c, by[("mlp_small", "dais", proto, client, c)]) for c in concs
                    if ("mlp_small", "dais", proto, client, c) in by]
            vals = [(c, r) for c, r in vals if r["req_per_cpu_s"]]
            if vals:
                out.append(f"- dais {PROTO_LABEL[proto]} ({CLIENT_LABEL[client]}): " + ", ".join(
                    f"concurrency {c}: {r['req_per_cpu_s']:.0f} req per server CPU-s "
                    f"({r['rps']:.0f} req/s on {r['server_cores']:.2f} server cores)"
                    for c, r in vals))
    for name in ("fastapi", "flask"):
        for client in ("perf", "wrk"):
            vals = [(c, by[("mlp_small", name, "http-json", client, c)]) for c in concs
                    if ("mlp_small", name, "http-json", client, c) in by]
            vals = [(c, r) for c, r in vals if r["req_per_cpu_s"]]
            if vals:
                out.append(f"- {LABEL[name]} JSON ({CLIENT_LABEL[client]}): " + ", ".join(
                    f"concurrency {c}: {r['req_per_cpu_s']:.0f}" for c, r in vals) +
                    " req per server CPU-s")
    return "\n".join(out)


def report(result: dict) -> str:
    """The markdown report of a run (also from a saved --json-out file, with --report)."""
    rows, ceiling, models = result["rows"], result["ceiling"], result["models"]
    out = list(result["header"]) + [""]
    out += [f"# note: {note}" for note in result["notes"]]
    for m in models:
        b1, best = ceiling[m]["batch1"], ceiling[m]["best"]
        out.append(f"- ceiling {m}: batch 1 p50 {b1['p50_us']} us, {b1['rows_per_s']:.0f} rows/s; "
                   f"best batch {best['batch']}: p50 {best['p50_us']} us, "
                   f"{best['rows_per_s']:.0f} rows/s")
    out += ["", table(rows), ""]
    out.append("vs ceiling = req/s divided by the in-process ceiling's rows/s: batch 1 at "
               "concurrency 1, the best batch otherwise. avg batch = executed batch size (dais "
               "statistics). server cores = server CPU seconds (process tree, utime+stime) per "
               "wall second of the case; req per server CPU-s = req/s / server cores; client "
               "cores = the same for the load generator; other cores = the rest of the "
               "machine's busy CPU during the case (other processes: should be near 0).")
    busy = [r for r in rows if r.get("other_cores", 0) > 0.25]
    if busy:
        out.append("")
        out.append(f"# WARNING: {len(busy)} case(s) ran while other processes used more than "
                   f"0.25 cores (up to {max(r['other_cores'] for r in busy):.2f}): their numbers "
                   f"are lower than this machine gives when quiet; rerun when it is idle.")
    out += ["", goals(rows, models, ceiling), "", f"# total {result['total_s']} s"]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build/release"))
    ap.add_argument("--models", default="mlp_small,mlp_heavy")
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--servers", default="dais,fastapi,flask")
    ap.add_argument("--queue-delay-us", type=int, default=0,
                    help="dais serves a copy of the repository with this "
                         "max_queue_delay_microseconds (default 0; -1: the examples' own)")
    ap.add_argument("--measurement-interval-ms", type=int, default=3000)
    ap.add_argument("--max-trials", type=int, default=3)
    ap.add_argument("--warmup-secs", type=float, default=1.0)
    ap.add_argument("--ceiling-seconds", type=float, default=3.0)
    ap.add_argument("--fastapi-workers", type=int, default=os.cpu_count())
    ap.add_argument("--load-generator", choices=["auto", "perf", "wrk"], default="auto",
                    help="auto (default): dais perf for every case; if it cannot drive a "
                         "baseline, wrk for that baseline and, for a like-for-like comparison, "
                         "for dais's HTTP cases too. perf: dais perf only. wrk: wrk only "
                         "(no gRPC)")
    ap.add_argument("--wait-for-perf", type=float, default=0,
                    help="seconds to wait for `dais perf` to appear (else: wrk only)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run (~2 minutes): 0.7 s windows, 1 s ceilings")
    ap.add_argument("--json-out", help="also write the results as JSON to this file")
    ap.add_argument("--report", metavar="FILE",
                    help="print the report of a saved --json-out file and exit (runs nothing)")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            print(report(json.load(f)))
        return 0
    args.models = args.models.split(",")
    concs = [int(c) for c in args.concurrency.split(",")]
    servers = [s for s in RUN_ORDER if s in args.servers.split(",")]
    if args.queue_delay_us is not None and args.queue_delay_us < 0:
        args.queue_delay_us = None
    if args.quick:
        args.measurement_interval_ms, args.max_trials = 700, 3
        args.warmup_secs, args.ceiling_seconds = 0.5, 1.0

    if args.load_generator != "wrk":
        deadline = time.time() + args.wait_for_perf
        while not perf_available(args.build) and time.time() < deadline:
            time.sleep(15)
        if not perf_available(args.build):
            if args.load_generator == "perf":
                sys.exit("dais perf is not available (build/release/src/cmd/dais perf --help)")
            log("dais perf is not available: wrk for every HTTP case, no gRPC")
            args.load_generator = "wrk"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks

    started = time.monotonic()
    repo, tmp_repo = prepare_repository(args)
    header = [f"# {os.cpu_count()} cores, shared by the servers and the load generator; "
              f"batch-1 requests; windows of {args.measurement_interval_ms} ms, at most "
              f"{args.max_trials} per case, {args.warmup_secs} s warm-up",
              f"# dais serves the models with max_queue_delay_microseconds: "
              f"{'the examples own' if args.queue_delay_us is None else args.queue_delay_us}; "
              f"FastAPI: {args.fastapi_workers} uvicorn workers; Flask: 1 process, threaded"]
    log("\n".join(header))
    rows: list[dict] = []
    notes: list[str] = []
    dais_wrk_too = False  # a baseline needed wrk: measure dais's HTTP cases with wrk as well
    server = None
    tmp = None
    try:
        ceiling = measure_ceilings(args, repo)
        tmp = tempfile.mkdtemp(prefix="dais-compare-")
        for name in servers:
            log(f"starting {name}")
            server = start_server(args, name, repo, tmp)
            try:
                clients = ["wrk"] if args.load_generator == "wrk" else ["perf"]
                if name != "dais" and args.load_generator == "auto":
                    ok, why = perf_can_drive(args, args.models[0],
                                             f"127.0.0.1:{server.http_port}", tmp)
                    if not ok:
                        clients = ["wrk"]
                        dais_wrk_too = True
                        notes.append(f"dais perf cannot drive {LABEL[name]} ({why}): wrk "
                                     f"drives it, and dais's HTTP cases are also measured "
                                     f"with wrk")
                        log(notes[-1])
                if name == "dais" and dais_wrk_too:
                    clients = ["perf", "wrk"]
                for m in args.models:
                    for s_name, proto in CASES:
                        if s_name != name:
                            continue
                        for client in clients:
                            if client == "wrk" and proto.startswith("grpc") and "perf" in clients:
                                continue
                            for c in concs:
                                if server.proc.poll() is not None:  # it died: start anew
                                    notes.append(f"{name} {exit_text(server.proc.returncode)}"
                                                 f"; restarted before {m} "
                                                 f"{PROTO_LABEL[proto]} concurrency {c}")
                                    log(notes[-1])
                                    server.stop()
                                    server = start_server(args, name, repo, tmp)
                                r = run_case(args, server, m, proto, c, client, ceiling, tmp)
                                rows.append(r)
                                log(json.dumps(r))
            finally:
                server.stop()
                server = None
    finally:
        if server is not None:
            server.stop()
        if tmp_repo:
            shutil.rmtree(tmp_repo, ignore_errors=True)
        if tmp and any("server_exit" in r or "failed" in r for r in rows):
            log(f"server logs kept in {tmp}")
        elif tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    order = {(s, p): i for i, (s, p) in enumerate(CASES)}
    rows.sort(key=lambda r: (args.models.index(r["model"]), order[(r["server"], r["protocol"])],
                             r["client"] != "perf", r["conc"]))
    result = {"header": header, "ceiling": ceiling, "rows": rows, "notes": notes,
              "models": args.models, "queue_delay_us": args.queue_delay_us,
              "total_s": round(time.monotonic() - started)}
    print()
    print(report(result))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if all(("rps" in r and "server_exit" not in r) or "skipped" in r
                    for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
