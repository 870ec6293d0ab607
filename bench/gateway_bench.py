#!/usr/bin/python3
"""Gateway overhead (issue 15): one `dais node` serving mlp_small, and in front of it, in the
same run, `dais gateway` (a route with one version) and nginx (Debian's nginx-light, proxy_pass
with an upstream keep-alive pool, 2 workers). wrk posts a batch-1 KServe v2 JSON request:

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

usage: bench/gateway_bench.py [--seconds 10] [--repeat 3] [--build build/release]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (example_repository, get_ok, nginx_conf,  # noqa: E402
                      repo_with_queue_delay, request_bodies, run_wrk)
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


def measure_cell(args, tmp, gateway, name, url, body, header_len, conc, profile, trace):
    """One wrk cell (after a 2 s warm-up); optionally perf-records or straces the gateway."""
    run_wrk(url, body, header_len, conc, 2, str(tmp))  # warm-up
    profiler = tracer = None
    if profile:
        profiler = subprocess.Popen(
            ["perf", "record", "-g", "-p", str(gateway.pid), "-o", args.profile, "--",
             "sleep", str(args.seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if trace:
        tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(gateway.pid),
                                   "-o", str(tmp / "strace.txt")], stderr=subprocess.DEVNULL)
        time.sleep(1)  # strace attaches asynchronously; nothing to poll for
    result = run_wrk(url, body, header_len, conc, args.seconds, str(tmp))
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    ap.add_argument("--gateway-args", default="", help="extra `dais gateway` flags")
    ap.add_argument("--rollbacks", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of every cell; the table shows the medians")
    ap.add_argument("--profile", help="perf record the gateway during its c=64 cell into this "
                    "file (then: perf report -i FILE)")
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
        start([dais, "node", "--model-repository", str(repo), "--http-port", "0", "--grpc-port",
               "0", "--etcd", etcd, "--node-id", "n1"], "node.log")
        node_port = log_port(tmp / "node.log")
        subprocess.run([dais, "ctl", "--etcd", etcd, "apply", "-f", "/dev/stdin"], check=True,
                       capture_output=True, input=route_json(1).encode())
        subprocess.run(["etcdctl", "--endpoints", etcd, "put", "/dais/assignments/n1/mlp_small",
                        json.dumps({"deployment": "d", "model": "mlp_small", "version": 1})],
                       check=True, capture_output=True, env={"ETCDCTL_API": "3"})
        wait_for(lambda: get_ok(f"http://127.0.0.1:{node_port}/v2/models/mlp_small/ready"), 60,
                 "mlp_small READY on the node")
        gateway = start([dais, "gateway", "--etcd", etcd, "--http-port", "0", "--grpc-port", "-1",
                         *args.gateway_args.split()], "gateway.log")
        gw_port = log_port(tmp / "gateway.log")
        wait_for(lambda: get_ok(f"http://127.0.0.1:{gw_port}/v2/models/ranker/ready"), 30,
                 "the gateway routing")
        nginx_port = free_port()
        (tmp / "nginx.conf").write_text(nginx_conf(
            tmp, NGINX_HTTP.format(node_port=node_port, port=nginx_port), workers=2))
        start(["nginx", "-c", str(tmp / "nginx.conf"), "-p", str(tmp)], "nginx.log")
        wait_for(lambda: get_ok(f"http://127.0.0.1:{nginx_port}/v2/models/mlp_small/ready"), 30,
                 "nginx")
        body, header_len = request_bodies(16)["json"]
        targets = {
            "direct": f"http://127.0.0.1:{node_port}/v2/models/mlp_small/infer",
            "nginx": f"http://127.0.0.1:{nginx_port}/v2/models/mlp_small/infer",
            "gateway": f"http://127.0.0.1:{gw_port}/v2/models/ranker/infer",
        }
        runs = {}
        for rep in range(args.repeat):
            for conc in (1, 64):
                for name, url in targets.items():
                    first = rep == 0
                    runs.setdefault((name, conc), []).append(measure_cell(
                        args, tmp, gateway, name, url, body, header_len, conc,
                        profile=first and args.profile and name == "gateway" and conc == 64,
                        trace=first and args.strace and name == "gateway" and conc == 1))
        # Each figure: the median over the repeats (runs on this shared machine vary by ±20 %).
        results = {key: {f: statistics.median(r[f] for r in rs) for f in rs[0]}
                   for key, rs in runs.items()}
        print(f"\nmlp_small, KServe v2 JSON batch 1, wrk {args.seconds} s per cell, median of "
              f"{args.repeat} run(s), one node on loopback; {time.strftime('%Y-%m-%d')}\n")
        print("| path | c=1 p50 µs | c=1 p99 µs | added p50 µs | c=64 req/s | c=64 p99 µs | "
              "errors |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        base = results[("direct", 1)]["p50_us"]
        for name in targets:
            r1, r64 = results[(name, 1)], results[(name, 64)]
            added = "" if name == "direct" else f"{r1['p50_us'] - base:+.0f}"
            print(f"| {name} | {r1['p50_us']:.0f} | {r1['p99_us']:.0f} | {added} | "
                  f"{r64['rps']:,.0f} | {r64['p99_us']:.0f} | {r1['errors'] + r64['errors']} |")
        g, n = results[("gateway", 1)]["p50_us"] - base, results[("nginx", 1)]["p50_us"] - base
        ratio = results[("gateway", 64)]["rps"] / results[("nginx", 64)]["rps"]
        print(f"\ngateway added p50 {g:.0f} µs vs nginx {n:.0f} µs: goal (≤ nginx) "
              f"{'met' if g <= n else 'NOT met'}; c=64 throughput gateway / nginx = {ratio:.2f} "
              f"(goal ≥ 1.0: {'met' if ratio >= 1.0 else 'NOT met'})")
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
