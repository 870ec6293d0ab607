#!/usr/bin/python3
"""Gateway overhead (issue 15): one `dais node` serving mlp_small, and in front of it, in the
same run, `dais gateway` (a route with one version), nginx (Debian's nginx-light, proxy_pass
with an upstream keep-alive pool, 2 workers) and h2o (Debian's h2o 2.2, proxy.reverse.url, 2
threads; left out when not installed). wrk posts a batch-1 KServe v2 JSON request:

The node's mlp_small runs with max_queue_delay_microseconds 0 (a copy of the example).

  - concurrency 1: p50 / p99 direct, through nginx, through the gateway; added p50 of each
    proxy over the direct path. Goal: the gateway adds no more p50 than nginx.
  - concurrency 64: requests/s through each; goal: gateway / nginx >= 1.0.
  - rollback propagation: a second node serves mlp_small v2 and a second gateway runs; the route
    is put at v2 100 %, then back at v1 100 % with one etcd write; the time from that write until
    both gateways answer from v1 (polled with requests), p50 / p99 / max over --rollbacks runs.
    Goal: p99 <= 1 s.
  - canary accuracy: the route at 90 / 10 with a sticky header; the canary's share of 10,000
    requests without the header (goal: 10 % ± 2 %), and 500 sticky users x 4 requests
    alternating between the two gateways: how many changed version (goal: none).

  - with --jwt: the same c=1 / c=64 cells through gateways that verify a bearer token (one
    JWKS with an RS256, an ES256 and an HS256 key; tenant "bench"): each algorithm with the cache
    of verified tokens (the client reuses its token, as clients do), and RS256 / ES256 with
    --jwt-cache-size 0 (a signature check per request). Goal (issue 37): cached JWT adds at most
    1.1x nginx's p50 and keeps 0.95x its requests/s.

  - with --grpc: KServe v2 gRPC ModelInfer with `dais perf` (one connection per in-flight call)
    straight to the node and through the gateway, c=1 p50 and c=64 calls/s. Goal (issue 37):
    the gateway adds at most 60 µs at the p50 and keeps 0.7x the direct calls/s.

usage: bench/gateway_bench.py [--seconds 10] [--repeat 3] [--build build/release] [--jwt]
                              [--grpc]
"""
import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (cpu_ticks, example_repository, get_ok, nginx_conf,  # noqa: E402
                      repo_with_queue_delay, request_bodies, run_wrk, steal_percent)
from cluster_bench import ROOT, free_port, wait_for  # noqa: E402

NGINX_HTTP = """  upstream node {{ server 127.0.0.1:{node_port}; keepalive 128; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://node;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}"""


# h2o (Debian's h2o 2.2) as the second reference: a reverse proxy with its default upstream
# keep-alive, 2 threads like nginx's 2 workers. Runs as root only when told (`user: root`).
H2O_CONF = """listen:
  host: 127.0.0.1
  port: {port}
num-threads: 2
user: root
error-log: {tmp}/h2o-error.log
hosts:
  default:
    paths:
      "/":
        proxy.reverse.url: http://127.0.0.1:{node_port}/
"""


def log_port(path, pattern="ports: http="):
    def find():
        text = Path(path).read_text(errors="replace")
        i = text.find(pattern)
        return int(text[i + len(pattern):].split()[0]) if i >= 0 else None
    return wait_for(find, 60, f"a port in {path}")


def route_json(version):
    return json.dumps({"kind": "route", "name": "ranker", "model": "mlp_small",
                       "versions": [{"version": version, "weight": 100}], "stable": version})


def answered_version(port, user=None):
    headers = {"Content-Type": "application/json"}
    if user is not None:
        headers["x-user"] = user
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/ranker/infer",
                                 data=request_bodies(16)["json"][0], headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.headers.get("x-dais-version")
    except OSError:  # 503 while v2 is not READY yet
        return None


def rollback_propagation(dais, etcd, repo, tmp, start, gw_port, runs):
    """Two gateways, v1 on n1 and v2 on n2: time from the rollback's etcd write until both
    gateways answer from v1."""
    env = {"ETCDCTL_API": "3"}
    start([dais, "node", "--model-repository", str(repo), "--http-port", "0", "--grpc-port", "0",
           "--etcd", etcd, "--node-id", "n2"], "node2.log")
    subprocess.run(["etcdctl", "--endpoints", etcd, "put", "/dais/assignments/n2/mlp_small",
                    json.dumps({"deployment": "d2", "model": "mlp_small", "version": 2})],
                   check=True, capture_output=True, env=env)
    start([dais, "gateway", "--etcd", etcd, "--http-port", "0", "--grpc-port", "-1", "--id", "g2"],
          "gateway2.log")
    ports = [gw_port, log_port(tmp / "gateway2.log")]
    times = []
    for _ in range(runs):
        subprocess.run(["etcdctl", "--endpoints", etcd, "put", "/dais/routes/ranker",
                        route_json(2)], check=True, capture_output=True, env=env)
        wait_for(lambda: all(answered_version(p) == "2" for p in ports), 60, "both gateways on v2")
        subprocess.run(["etcdctl", "--endpoints", etcd, "put", "/dais/routes/ranker",
                        route_json(1)], check=True, capture_output=True, env=env)
        # The write is done when etcdctl returns; from then on, poll until no gateway says v2.
        t_write = time.monotonic()
        pending = set(ports)
        while pending:
            pending = {p for p in pending if answered_version(p) != "1"}
        times.append(time.monotonic() - t_write)
    times.sort()
    print_rollbacks(times, runs)
    return ports


def canary_accuracy(etcd, ports, requests=10000, users=500, per_user=4):
    """A 10 % canary: the share of `requests` (no sticky header) answered by it, and `users`
    sticky users sending `per_user` requests each, alternating between the gateways: how many
    ever changed version."""
    env = {"ETCDCTL_API": "3"}
    subprocess.run(["etcdctl", "--endpoints", etcd, "put", "/dais/routes/ranker", json.dumps({
        "kind": "route", "name": "ranker", "model": "mlp_small", "stable": 1,
        "sticky_header": "x-user",
        "versions": [{"version": 1, "weight": 90}, {"version": 2, "weight": 10}]})],
        check=True, capture_output=True, env=env)
    wait_for(lambda: all(answered_version(p, "probe-user-0") is not None for p in ports), 30,
             "the canary route")
    wait_for(lambda: any(answered_version(ports[0]) == "2" for _ in range(200)), 30,
             "the canary answering")
    canary = sum(answered_version(ports[i % 2]) == "2" for i in range(requests))
    changed, on_canary = 0, 0
    for u in range(users):
        seen = {answered_version(ports[i % 2], f"user-{u}") for i in range(per_user)}
        changed += len(seen) > 1
        on_canary += seen == {"2"}
    print(f"\ncanary accuracy: {canary / requests:.2%} of {requests:,} requests on a 10 % canary "
          f"(goal ±2 %: {'met' if abs(canary / requests - 0.10) <= 0.02 else 'NOT met'}); "
          f"{users} sticky users x {per_user} requests over two gateways: {changed} changed "
          f"version, {on_canary / users:.1%} on the canary")


def print_rollbacks(times, runs):
    p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
    print(f"\nrollback propagation (etcd write -> both gateways on v1), {runs} runs: "
          f"p50 {times[len(times) // 2] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max "
          f"{times[-1] * 1000:.1f} ms; goal p99 ≤ 1 s: {'met' if p99 <= 1.0 else 'NOT met'}")


def jwt_material(tmp):
    """A JWKS file with an RS256, an ES256 and an HS256 key, and a token (tenant "bench", valid
    for an hour) signed by each: (path, {alg: token})."""
    import base64
    import os

    import jwt  # Debian python3-jwt (with python3-cryptography)
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    secret = os.urandom(32)
    keys = []
    for kid, alg, public in (("rs", "RS256", jwt.algorithms.RSAAlgorithm.to_jwk(
            rsa_key.public_key())), ("es", "ES256", jwt.algorithms.ECAlgorithm.to_jwk(
            ec_key.public_key()))):
        keys.append({**json.loads(public), "kid": kid, "alg": alg, "use": "sig"})
    keys.append({"kty": "oct", "kid": "hs", "alg": "HS256",
                 "k": base64.urlsafe_b64encode(secret).rstrip(b"=").decode()})
    path = tmp / "jwks.json"
    path.write_text(json.dumps({"keys": keys}))
    claims = {"tenant": "bench", "sub": "bench-client", "exp": int(time.time()) + 3600}
    tokens = {alg: jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})
              for kid, alg, key in (("rs", "RS256", rsa_key), ("es", "ES256", ec_key),
                                    ("hs", "HS256", secret))}
    return path, tokens


def cpu_seconds(pids):
    """User + system CPU seconds used so far by these processes (all their threads), and by
    their child processes' (nginx's workers) through /proc."""
    total = 0.0
    for pid in process_tree(pids):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass  # gone, or not readable: counts nothing
    return total


def median_of(values):
    """The median of the values that are numbers (NaN: not measured in that run), or NaN."""
    known = [v for v in values if not math.isnan(v)]
    return statistics.median(known) if known else float("nan")


def metric_value(url, series):
    """The value of `series` (a metric name with its labels, as exposed) in the /metrics of the
    dais process serving `url`, or None (nginx; a series not exposed)."""
    try:
        text = urllib.request.urlopen(url.split("/v2/")[0] + "/metrics", timeout=10).read()
    except OSError:
        return None
    for line in text.decode().splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def heap_allocations(url):
    """dais_process_heap_allocations_total of the dais process serving `url`, or None (nginx; a
    build without jemalloc)."""
    return metric_value(url, "dais_process_heap_allocations_total")


JWT_MISSES = 'dais_gateway_jwt_cache_lookups_total{result="miss"}'


JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
# The entry points counted: operator new (operator new[] calls it: not counted twice), malloc,
# calloc, realloc.
ALLOC_ENTRY_POINTS = ("_Znwm", "malloc", "calloc", "realloc")


def alloc_probes():
    """perf uprobe events on jemalloc's allocation entry points, placed afresh (as root) at the
    addresses of the library installed now, or [] where perf cannot place them. Removed again by
    remove_alloc_probes()."""
    try:
        symbols = subprocess.run(["nm", "-D", "--defined-only", JEMALLOC], capture_output=True,
                                 text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    remove_alloc_probes()  # never a probe left at another version's address
    events = []
    for line in symbols.splitlines():
        f = line.split()
        if len(f) == 3 and f[2] in ALLOC_ENTRY_POINTS:
            name = "dais_alloc_" + f[2].lstrip("_")
            # By address: perf finds C++ names without debug information this way.
            added = subprocess.run(["perf", "probe", "-q", "-x", JEMALLOC, "-a",
                                    f"{name}=0x{f[0]}"], capture_output=True, timeout=60)
            if added.returncode == 0:
                events.append(f"probe_libjemalloc:{name}")
    return events


def remove_alloc_probes():
    subprocess.run(["perf", "probe", "-q", "-d", "probe_libjemalloc:dais_alloc_*"],
                   capture_output=True, timeout=60)


def perf_stat_cell(args, tmp, pids, events, url, body, header_len, token=None):
    """One wrk cell at c=64 (after a 2 s warm-up) while perf stat counts `events` in the
    processes `pids`: ({event: count}, the cell's result), the counts empty where perf wrote
    none. Events perf reports "<not counted>" are left out."""
    lua = f'wrk.headers["Authorization"] = "Bearer {token}"\n' if token else ""
    run_wrk(url, body, header_len, 64, 2, str(tmp), lua)  # connections opened, caches warm
    out = tmp / "perf-stat.csv"
    out.unlink(missing_ok=True)
    counter = subprocess.Popen(["perf", "stat", "-x", ",", "-o", str(out), "-p",
                                ",".join(str(p) for p in pids), "-e", ",".join(events)],
                               stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # perf attaches asynchronously; it counts before wrk's first request
        result = run_wrk(url, body, header_len, 64, args.seconds, str(tmp), lua)
    finally:
        counter.send_signal(signal.SIGINT)
        try:
            counter.wait(30)
        except subprocess.TimeoutExpired:
            counter.kill()
            counter.wait(10)
    counts = {}
    try:
        for line in out.read_text().splitlines():
            f = line.split(",")
            if len(f) > 2 and f[0].isdigit():
                counts[f[2]] = int(f[0])
    except OSError:
        pass
    return counts, result


def count_allocations(args, tmp, pid, url, body, header_len, token=None):
    """Heap allocations per request of the dais process `pid` serving `url` at c=64, counted
    exactly by perf uprobes on jemalloc's entry points during a cell of its own, after a warm-up
    (the probes slow the process: this cell's throughput is not reported). NaN where perf cannot
    probe or count."""
    events = alloc_probes()
    try:
        if len(events) != len(ALLOC_ENTRY_POINTS):
            return float("nan")
        counts, result = perf_stat_cell(args, tmp, [pid], events, url, body, header_len, token)
    finally:
        remove_alloc_probes()
    if set(counts) != set(events):  # an event "<not counted>": no exact figure
        return float("nan")
    return sum(counts.values()) / max(result["requests"], 1)


# The system calls counted per request with --syscalls (perf's syscall tracepoints; the rest
# are summed under "other").
SYSCALLS = ("epoll_wait", "recvfrom", "recvmsg", "read", "readv", "sendto", "sendmsg", "write",
            "writev", "epoll_ctl", "timerfd_settime", "futex")


def process_tree(pids):
    """These processes and their descendants (nginx's and h2o's workers)."""
    seen, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        try:
            todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except (OSError, ValueError):
            pass
    return seen


def count_syscalls(args, tmp, pids, url, body, header_len, token=None):
    """System calls per request of the processes serving `url` (all threads, their workers) at
    c=64, by type, counted by perf stat on the syscall tracepoints in a cell of its own after a
    warm-up. {} where perf cannot count."""
    events = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{n}" for n in SYSCALLS]
    counts, result = perf_stat_cell(args, tmp, process_tree(pids), events, url, body, header_len,
                                    token)
    if "raw_syscalls:sys_enter" not in counts:
        return {}
    n = max(result["requests"], 1)
    per = {("total" if k.startswith("raw_") else k.rsplit("sys_enter_", 1)[-1]): v / n
           for k, v in counts.items()}
    per["other"] = per["total"] - sum(v for k, v in per.items() if k != "total")
    return per


def syscall_table(args, tmp, targets, tokens, body, header_len, pids):
    """--syscalls: one counted c=64 cell per target, the table of calls per request by type."""
    rows = {name: count_syscalls(args, tmp, pids[name], url, body, header_len, tokens.get(name))
            for name, url in targets.items() if pids.get(name)}
    rows = {k: v for k, v in rows.items() if v}
    if not rows:
        print("\n(--syscalls: perf could not count the syscall tracepoints here)")
        return
    names = [n for n in SYSCALLS + ("other",) if any(r.get(n, 0) >= 0.005 for r in rows.values())]
    print("\nSystem calls per request at c=64 (perf stat on the syscall tracepoints, all the "
          "serving processes' threads, a cell of its own; nginx, h2o: their workers; direct: "
          "the node):\n")
    print("| path | all | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for name, r in rows.items():
        print(f"| {name} | {r['total']:.2f} | " +
              " | ".join(f"{r.get(n, 0):.2f}" for n in names) + " |")


def measure_cell(args, tmp, gateway, name, url, body, header_len, conc, profile, trace,
                 token=None, cpu_pids=()):
    """One wrk cell (after a 2 s warm-up); optionally perf-records or straces the gateway.
    `token`: sent as the bearer token of every request. `cpu_pids`: the processes serving `url`
    (the proxy, or the node for "direct"): their CPU per request goes into result["cpu_us"]."""
    lua = f'wrk.headers["Authorization"] = "Bearer {token}"\n' if token else ""
    run_wrk(url, body, header_len, conc, 2, str(tmp), lua)  # warm-up
    profiler = tracer = None
    if profile:
        profiler = subprocess.Popen(
            ["perf", "record", *os.environ.get("DAIS_PERF_ARGS", "-g").split(), "-p", str(gateway.pid), "-o", args.profile, "--",
             "sleep", str(args.seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if trace:
        tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(gateway.pid),
                                   "-o", str(tmp / "strace.txt")], stderr=subprocess.DEVNULL)
        time.sleep(1)  # strace attaches asynchronously; nothing to poll for
    cpu_before = cpu_seconds(cpu_pids)
    # Only a dais process's own /metrics (h2o and nginx would pass the path on to the node).
    dais_served = (name == "direct" or name.startswith("gateway")) and url.startswith("http:")
    allocs_before = heap_allocations(url) if dais_served else None
    misses_before = metric_value(url, JWT_MISSES) if token else None
    ticks_before = cpu_ticks()
    result = run_wrk(url, body, header_len, conc, args.seconds, str(tmp), lua)
    result["steal_pct"] = steal_percent(ticks_before, cpu_ticks())
    result["cpu_us"] = ((cpu_seconds(cpu_pids) - cpu_before) * 1e6 / max(result["requests"], 1)
                        if cpu_pids else float("nan"))
    allocs_after = heap_allocations(url) if allocs_before is not None else None
    # Tokens verified (not answered from the cache) per request: 0 once the cache holds it.
    misses_after = metric_value(url, JWT_MISSES) if token else None
    result["jwt_misses"] = ((misses_after - misses_before) / max(result["requests"], 1)
                            if None not in (misses_before, misses_after) else float("nan"))
    result["allocs"] = ((allocs_after - allocs_before) / max(result["requests"], 1)
                        if allocs_after is not None else float("nan"))
    if profiler:
        profiler.wait()
    if tracer:
        tracer.terminate()
        tracer.wait(10)
        n = result["requests"]
        print(f"gateway system calls per request at c=1 ({n} requests, traced; this cell's "
              "latency is the tracer's, not the gateway's):")
        for line in (tmp / "strace.txt").read_text().splitlines()[2:]:
            f = line.split()
            if len(f) >= 5 and f[3].isdigit() and f[-1] != "total":
                print(f"  {f[-1]:<16} {int(f[3]) / max(n, 1):6.2f}")
    return result


def gateway_requests(gw_http):
    """The gateway's count of requests it answered (dais_gateway_requests_total, all labels)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{gw_http}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("dais_gateway_requests_total{"))


def trace_grpc(perf_args, gateway, gw_http, gw_grpc, tmp):
    """With --strace: the gateway's system calls per gRPC call at c=1 (one traced perf run)."""
    from compare_bench import run_perf
    tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(gateway.pid),
                               "-o", str(tmp / "strace-grpc.txt")], stderr=subprocess.DEVNULL)
    time.sleep(1)  # strace attaches asynchronously; nothing to poll for
    before = gateway_requests(gw_http)
    run_perf(perf_args, "ranker", f"127.0.0.1:{gw_grpc}", "grpc", 1, str(tmp))
    n = gateway_requests(gw_http) - before
    tracer.terminate()
    tracer.wait(10)
    print(f"gateway system calls per gRPC call at c=1 ({n:.0f} calls, traced):")
    for line in (tmp / "strace-grpc.txt").read_text().splitlines()[2:]:
        f = line.split()
        if len(f) >= 5 and f[3].isdigit() and f[-1] != "total":
            print(f"  {f[-1]:<16} {int(f[3]) / max(n, 1):6.2f}")


def grpc_cells(args, node_grpc, gw_grpc, tmp, gateway=None, gw_http=None):
    """ModelInfer with `dais perf` at c=1 and c=64, direct and through the gateway (medians of
    --repeat); prints the table. With --strace, then one traced c=1 run of the gateway."""
    import types

    from compare_bench import run_perf
    perf_args = types.SimpleNamespace(build=args.build, measurement_interval_ms=args.seconds * 500,
                                      max_trials=4, warmup_secs=2)
    runs = {}
    for _ in range(args.repeat):
        for name, model, port in (("direct", "mlp_small", node_grpc),
                                  ("gateway", "ranker", gw_grpc)):
            for conc in (1, 64):
                r = run_perf(perf_args, model, f"127.0.0.1:{port}", "grpc", conc, str(tmp))
                runs.setdefault((name, conc), []).append(r)
    med = {key: {f: statistics.median(r[f] for r in rs) for f in ("rps", "p50_us", "p99_us",
                                                                   "errors")}
           for key, rs in runs.items()}
    print("\n| gRPC ModelInfer (dais perf) | c=1 p50 µs | added p50 µs | c=64 calls/s | "
          "vs direct | errors |")
    print("|---|---:|---:|---:|---:|---:|")
    base, direct_rps = med[("direct", 1)]["p50_us"], med[("direct", 64)]["rps"]
    for name in ("direct", "gateway"):
        r1, r64 = med[(name, 1)], med[(name, 64)]
        added = "" if name == "direct" else f"{r1['p50_us'] - base:+.0f}"
        print(f"| {name} | {r1['p50_us']:.0f} | {added} | {r64['rps']:,.0f} | "
              f"{r64['rps'] / direct_rps:.2f}x | {r1['errors'] + r64['errors']:.0f} |")
    if args.strace and gateway is not None:
        trace_grpc(perf_args, gateway, gw_http, gw_grpc, tmp)


def jwt_gateways(dais, etcd, tmp, start, args, tokens, pids):
    """Two more gateways verifying bearer tokens (the cache on, and off) for the tenant "bench";
    fills tokens {target name: token} and pids {target name: [gateway pid]}; returns {target
    name: url}."""
    jwks, by_alg = jwt_material(tmp)
    subprocess.run([dais, "ctl", "--etcd", etcd, "apply", "-f", "/dev/stdin"], check=True,
                   capture_output=True, input=b"kind: tenant\nname: bench\n")
    urls = {}
    for label, extra in (("cached", []), ("uncached", ["--jwt-cache-size", "0"])):
        log = f"gateway-jwt-{label}.log"
        proc = start([dais, "gateway", "--etcd", etcd, "--http-port", "0", "--grpc-port", "-1",
                      "--jwks", str(jwks), *extra, *args.gateway_args.split()], log)
        port = log_port(tmp / log)
        url = f"http://127.0.0.1:{port}/v2/models/ranker/infer"
        wait_for(lambda: get_ok(f"http://127.0.0.1:{port}/v2/health/ready"), 30,
                 f"the {label} JWT gateway")
        for alg, token in by_alg.items():
            if label == "uncached" and alg == "HS256":
                continue  # an HMAC costs ~1 µs: nothing to cache
            name = f"gateway {alg} {label}"
            urls[name], tokens[name], pids[name] = url, token, [proc.pid]
    return urls


def tls_targets(dais, etcd, tmp, start, args, node_port, pids):
    """HTTPS in front of the same node (the node plain): a gateway with --http-use-ssl, nginx
    (listen ssl) and h2o (when installed), one self-signed P-256 certificate. Returns {target
    name: url}; fills pids."""
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out",
                    str(cert)], check=True, capture_output=True)
    urls = {}
    nginx_port = free_port()
    (tmp / "nginx-tls.conf").write_text(nginx_conf(tmp, NGINX_HTTP.format(
        node_port=node_port, port=f"{nginx_port} ssl").replace(
        "location /", f"ssl_certificate {cert};\n    ssl_certificate_key {key};\n    location /"),
        workers=2).replace(f"pid {tmp}/nginx.pid", f"pid {tmp}/nginx-tls.pid"))
    nginx = start(["nginx", "-c", str(tmp / "nginx-tls.conf"), "-p", str(tmp)], "nginx-tls.log")
    urls["nginx TLS"], pids["nginx TLS"] = f"https://127.0.0.1:{nginx_port}", [nginx.pid]
    if shutil.which("h2o"):
        h2o_port = free_port()
        (tmp / "h2o-tls.conf").write_text(H2O_CONF.format(
            port=h2o_port, node_port=node_port, tmp=tmp).replace(
            f"  port: {h2o_port}\n",
            f"  port: {h2o_port}\n  ssl:\n    certificate-file: {cert}\n    key-file: {key}\n"))
        h2o = start(["h2o", "-c", str(tmp / "h2o-tls.conf")], "h2o-tls.log")
        urls["h2o TLS"], pids["h2o TLS"] = f"https://127.0.0.1:{h2o_port}", [h2o.pid]
    gw = start([dais, "gateway", "--etcd", etcd, "--http-port", "0", "--grpc-port", "-1",
                "--id", "gtls", "--http-use-ssl", "1", "--http-server-cert", str(cert),
                "--http-server-key", str(key), *args.gateway_args.split()], "gateway-tls.log")
    gw_port = log_port(tmp / "gateway-tls.log")
    urls["gateway TLS"], pids["gateway TLS"] = f"https://127.0.0.1:{gw_port}", [gw.pid]
    paths = {"nginx TLS": "/v2/models/mlp_small", "h2o TLS": "/v2/models/mlp_small",
             "gateway TLS": "/v2/models/ranker"}
    for name in urls:
        url = urls[name] + paths[name]
        wait_for(lambda: subprocess.run(["curl", "-sfk", url + "/ready"],
                                        capture_output=True).returncode == 0, 30, name)
        urls[name] = url + "/infer"
    return urls


def tls_cells(args, tmp, gateway, targets, body, header_len, pids):
    """c=1 and c=64 over HTTPS (wrk keeps its connections: handshakes amortised), medians of
    --repeat; ratios against nginx over TLS."""
    runs = {}
    for _ in range(args.repeat):
        for conc in (1, 64):
            for name, url in targets.items():
                runs.setdefault((name, conc), []).append(measure_cell(
                    args, tmp, gateway, name, url, body, header_len, conc, profile=False,
                    trace=False, cpu_pids=pids.get(name, ())))
    res = {key: {f: median_of(r[f] for r in rs) for f in rs[0]}
           for key, rs in runs.items()}
    print("\nOver TLS (client to proxy HTTPS, TLS 1.3, P-256 certificate; proxy to node plain):\n")
    print("| path | c=1 p50 µs | p50 / nginx TLS | c=64 req/s | req/s / nginx TLS | "
          "c=64 CPU µs per request | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ref1, ref64 = res[("nginx TLS", 1)]["p50_us"], res[("nginx TLS", 64)]["rps"]
    for name in targets:
        r1, r64 = res[(name, 1)], res[(name, 64)]
        print(f"| {name} | {r1['p50_us']:.0f} | {r1['p50_us'] / ref1:.2f}x | {r64['rps']:,.0f} | "
              f"{r64['rps'] / ref64:.2f}x | {r64['cpu_us']:.1f} | "
              f"{r1['errors'] + r64['errors']} |")


def http_cells(args, tmp, gateway, targets, tokens, body, header_len, pids):
    """The wrk cells (c=1 and c=64 through every target, medians of --repeat) and their tables.
    `pids`: {target name: the processes serving it}, for CPU per request."""
    runs = {}
    for rep in range(args.repeat):
        # Every other repeat runs the cells in the reverse order, so that no target always runs
        # right after the same one (a cell can inherit the machine's state from the one before).
        order = list(targets.items())[::-1 if rep % 2 else 1]
        for conc in (1, 64):
            for name, url in order:
                first = rep == 0
                runs.setdefault((name, conc), []).append(measure_cell(
                    args, tmp, gateway, name, url, body, header_len, conc,
                    profile=first and args.profile and name == "gateway" and conc == 64,
                    trace=first and args.strace and name == "gateway" and conc == 1,
                    token=tokens.get(name), cpu_pids=pids.get(name, ())))
    # Each figure: the median over the repeats (runs on this shared machine vary by ±20 %).
    results = {key: {f: median_of(r[f] for r in rs) for f in rs[0]}
               for key, rs in runs.items()}
    # Allocations counted exactly where perf can (jemalloc's own count lags: a thread's cache
    # merges its counts into the arena's only when it flushes: 4 % to 44 % low in our runs).
    exact = False
    for name in targets:
        dais_served = name == "direct" or name.startswith("gateway")
        if dais_served and pids.get(name) and os.geteuid() == 0 and shutil.which("perf"):
            per_request = count_allocations(args, tmp, pids[name][0], targets[name], body,
                                            header_len, tokens.get(name))
            if not math.isnan(per_request):
                results[(name, 64)]["allocs"], exact = per_request, True
    print(f"\nmlp_small, KServe v2 JSON batch 1, wrk {args.seconds} s per cell, median of "
          f"{args.repeat} run(s), one node on loopback; {time.strftime('%Y-%m-%d')}\n")
    print("| path | c=1 p50 µs | c=1 p99 µs | added p50 µs | c=64 req/s | c=64 p99 µs | "
          "c=64 CPU µs per request | c=64 allocations per request | c=64 host steal % | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = results[("direct", 1)]["p50_us"]
    for name in targets:
        r1, r64 = results[(name, 1)], results[(name, 64)]
        added = "" if name == "direct" else f"{r1['p50_us'] - base:+.0f}"
        print(f"| {name} | {r1['p50_us']:.0f} | {r1['p99_us']:.0f} | {added} | "
              f"{r64['rps']:,.0f} | {r64['p99_us']:.0f} | {r64['cpu_us']:.1f} | "
              f"{'' if math.isnan(r64['allocs']) else format(r64['allocs'], '.1f')} | "
              f"{r64['steal_pct']:.1f} | {r1['errors'] + r64['errors']} |")
    print("\n(CPU per request: the serving process's own user + system time, all its threads "
          "(nginx: its workers; direct: the node), over the requests of the c=64 cell. "
          + ("Allocations per request: calls of jemalloc's operator new, malloc, calloc and "
             "realloc in the dais process, counted by perf uprobes in a c=64 cell of their own.)"
             if exact else
             "Allocations per request: the dais process's heap allocations "
             "(dais_process_heap_allocations_total, jemalloc's count, which lags by its "
             "threads' caches: a lower bound) over the same cell; as root with perf they are "
             "counted exactly.)")
          + " Host steal: the share of the machine's CPU time the hypervisor gave to other "
          "guests during the c=64 cell (/proc/stat); a cell with more steal is slower for a "
          "reason outside the path measured.")
    if args.syscalls and os.geteuid() == 0 and shutil.which("perf"):
        syscall_table(args, tmp, targets, tokens, body, header_len, pids)
    g, n = results[("gateway", 1)]["p50_us"] - base, results[("nginx", 1)]["p50_us"] - base
    ratio = results[("gateway", 64)]["rps"] / results[("nginx", 64)]["rps"]
    if args.jwt:
        print("\n| with a bearer token | added p50 / nginx's | c=64 req/s / nginx's | "
              "c=64 tokens verified per request (cache misses) |")
        print("|---|---:|---:|---:|")
        for name in tokens:
            added = results[(name, 1)]["p50_us"] - base
            print(f"| {name} | {added / n:.2f}x | "
                  f"{results[(name, 64)]['rps'] / results[('nginx', 64)]['rps']:.2f}x | "
                  f"{results[(name, 64)]['jwt_misses']:.4f} |")
    if ("h2o", 1) in results:
        h = results[("h2o", 1)]["p50_us"] - base
        print(f"\nh2o added p50 {h:.0f} µs, c=64 throughput h2o / nginx = "
              f"{results[('h2o', 64)]['rps'] / results[('nginx', 64)]['rps']:.2f}; gateway / h2o "
              f"= {results[('gateway', 64)]['rps'] / results[('h2o', 64)]['rps']:.2f}")
    print(f"\ngateway added p50 {g:.0f} µs vs nginx {n:.0f} µs: goal (≤ nginx) "
          f"{'met' if g <= n else 'NOT met'}; c=64 throughput gateway / nginx = {ratio:.2f} "
          f"(goal ≥ 1.0: {'met' if ratio >= 1.0 else 'NOT met'})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    ap.add_argument("--gateway-args", default="", help="extra `dais gateway` flags")
    ap.add_argument("--rollbacks", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of every cell; the table shows the medians")
    ap.add_argument("--profile", help="perf record the gateway during its c=64 cell into this "
                    "file (then: perf report -i FILE); perf's options from DAIS_PERF_ARGS (default -g), "
                    "e.g. '--call-graph dwarf,8192' or '-e probe_libjemalloc:opnew' after "
                    "perf probe, to find allocation sites")
    ap.add_argument("--no-http", action="store_true", help="skip the HTTP cells (with --grpc: "
                    "only the gRPC ones)")
    ap.add_argument("--grpc", action="store_true", help="also measure gRPC ModelInfer direct "
                    "and through the gateway (dais perf)")
    ap.add_argument("--tls", action="store_true", help="also measure nginx, h2o and the gateway "
                    "over HTTPS (the node behind them plain)")
    ap.add_argument("--jwt", action="store_true", help="also measure gateways that verify "
                    "bearer tokens (RS256, ES256, HS256; cached and not)")
    ap.add_argument("--syscalls", action="store_true", help="count the system calls per request "
                    "at c=64 of every HTTP path's serving processes, by type (perf stat, root)")
    ap.add_argument("--strace", action="store_true", help="count the gateway's system calls "
                    "per request in its c=1 cell (strace -c; slows that cell)")
    args = ap.parse_args()
    dais = str(Path(args.build) / "src/cmd/dais")
    repo = example_repository(ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="dais-gateway-bench-"))
    # No batching delay: the proxies' own cost shows instead of the model's queue wait.
    repo = Path(repo_with_queue_delay(str(repo), ["mlp_small"], 0, str(tmp / "repo-")))
    subprocess.run(["cp", "-r", str(repo / "mlp_small/1"), str(repo / "mlp_small/2")], check=True)
    procs = []

    def start(cmd, log):
        procs.append(subprocess.Popen(cmd, stdout=open(tmp / log, "wb"), stderr=subprocess.STDOUT))
        return procs[-1]

    try:
        etcd_port, peer = free_port(), free_port()
        etcd = f"127.0.0.1:{etcd_port}"
        start(["etcd", "--name", "m", "--data-dir", str(tmp / "etcd"),
               "--listen-client-urls", f"http://{etcd}", "--advertise-client-urls", f"http://{etcd}",
               "--listen-peer-urls", f"http://127.0.0.1:{peer}",
               "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
               "--initial-cluster", f"m=http://127.0.0.1:{peer}"], "etcd.log")
        wait_for(lambda: get_ok(f"http://{etcd}/health"), 30, "etcd")
        node = start([dais, "node", "--model-repository", str(repo), "--http-port", "0",
                      "--grpc-port", "0", "--etcd", etcd, "--node-id", "n1"], "node.log")
        node_port = log_port(tmp / "node.log")
        subprocess.run([dais, "ctl", "--etcd", etcd, "apply", "-f", "/dev/stdin"], check=True,
                       capture_output=True, input=route_json(1).encode())
        subprocess.run(["etcdctl", "--endpoints", etcd, "put", "/dais/assignments/n1/mlp_small",
                        json.dumps({"deployment": "d", "model": "mlp_small", "version": 1})],
                       check=True, capture_output=True, env={"ETCDCTL_API": "3"})
        wait_for(lambda: get_ok(f"http://127.0.0.1:{node_port}/v2/models/mlp_small/ready"), 60,
                 "mlp_small READY on the node")
        gateway = start([dais, "gateway", "--etcd", etcd, "--http-port", "0", "--grpc-port", "0",
                         *args.gateway_args.split()], "gateway.log")
        gw_port = log_port(tmp / "gateway.log")
        gw_grpc, node_grpc = log_port(tmp / "gateway.log", "grpc="), log_port(tmp / "node.log",
                                                                             "grpc=")
        wait_for(lambda: get_ok(f"http://127.0.0.1:{gw_port}/v2/models/ranker/ready"), 30,
                 "the gateway routing")
        nginx_port = free_port()
        (tmp / "nginx.conf").write_text(nginx_conf(
            tmp, NGINX_HTTP.format(node_port=node_port, port=nginx_port), workers=2))
        nginx = start(["nginx", "-c", str(tmp / "nginx.conf"), "-p", str(tmp)], "nginx.log")
        wait_for(lambda: get_ok(f"http://127.0.0.1:{nginx_port}/v2/models/mlp_small/ready"), 30,
                 "nginx")
        body, header_len = request_bodies(16)["json"]
        targets = {
            "direct": f"http://127.0.0.1:{node_port}/v2/models/mlp_small/infer",
            "nginx": f"http://127.0.0.1:{nginx_port}/v2/models/mlp_small/infer",
        }
        pids = {"direct": [node.pid], "nginx": [nginx.pid], "gateway": [gateway.pid]}
        if shutil.which("h2o"):
            h2o_port = free_port()
            (tmp / "h2o.conf").write_text(H2O_CONF.format(port=h2o_port, node_port=node_port,
                                                          tmp=tmp))
            h2o = start(["h2o", "-c", str(tmp / "h2o.conf")], "h2o.log")
            targets["h2o"] = f"http://127.0.0.1:{h2o_port}/v2/models/mlp_small/infer"
            pids["h2o"] = [h2o.pid]
            wait_for(lambda: get_ok(f"http://127.0.0.1:{h2o_port}/v2/models/mlp_small/ready"), 30,
                     "h2o")
        else:
            print("h2o is not installed (apt-get install h2o): its row is left out")
        targets["gateway"] = f"http://127.0.0.1:{gw_port}/v2/models/ranker/infer"
        tokens = {}
        if args.jwt:
            targets.update(jwt_gateways(dais, etcd, tmp, start, args, tokens, pids))
        if not args.no_http:
            http_cells(args, tmp, gateway, targets, tokens, body, header_len, pids)
        if args.tls:
            tls = tls_targets(dais, etcd, tmp, start, args, node_port, pids)
            tls_cells(args, tmp, gateway, tls, body, header_len, pids)
        if args.grpc:
            grpc_cells(args, node_grpc, gw_grpc, tmp, gateway, gw_port)
        if args.rollbacks > 0:
            ports = rollback_propagation(dais, etcd, repo, tmp, start, gw_port, args.rollbacks)
            canary_accuracy(etcd, ports)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        subprocess.run(["rm", "-rf", str(tmp), str(repo)])


if __name__ == "__main__":
    main()
