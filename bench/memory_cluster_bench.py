#!/usr/bin/python3
"""Vector memory in a cluster (issue 34): what the gateway's fan-out and merge cost against
searching the node directly, in the same run, and what a SIGKILL of a replica's node costs the
searches.

Processes: etcd, redis-server, `dais scheduler`, two `dais node --memory` (n1, n2) and `dais
gateway`, all on this machine. A collection of --n seeded clustered vectors (dimension --dim,
cosine, --shards shards, 2 replicas: each node holds every shard) is loaded through the
gateway. Then wrk POSTs one search body (k 10) at --concurrency connections for --seconds to
  direct   n1's /v2/memory/collections/bench/search (it holds every shard: one local fan-out)
  gateway  the gateway's, which sends one request per node with ?shards= and merges
and prints queries/s, p50 and p99 with the gateway / direct ratios. Last, --kill: four client
threads search through the gateway while n2 is killed with SIGKILL; it prints the searches
made, those that failed, and the time until every shard is READY again (on n1 only: no third
node), with the gateway's replica retries.

usage: bench/memory_cluster_bench.py [--n 100000] [--dim 128] [--shards 2] [--concurrency 16]
                                     [--seconds 10] [--build build/release]
"""
import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import get_ok, run_wrk  # noqa: E402
from cluster_bench import ROOT, free_port, wait_for  # noqa: E402


def post(url, body, timeout=30):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {}
    except OSError:
        return 0, {}


def log_port(path, pattern):
    import re
    found = wait_for(lambda: path.exists() and re.search(pattern + r"(\d+)", path.read_text()),
                     30, f"a port in {path}")
    return int(found.group(1))


def ready_replicas(etcd):
    out = subprocess.run(["etcdctl", "--endpoints", etcd, "get", "--prefix", "/dais/instances/",
                          "--print-value-only"], capture_output=True, text=True,
                         env={"ETCDCTL_API": "3"}).stdout
    ready = {}
    for line in out.splitlines():
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if v.get("model", "").startswith("memory:bench:") and v.get("state") == "READY":
            ready.setdefault(v["model"], set()).add(v["node"])
    return ready


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    args = ap.parse_args()
    dais = str(Path(args.build) / "src/cmd/dais")
    tmp = Path(tempfile.mkdtemp(prefix="dais-memory-cluster-bench-"))
    (tmp / "repo").mkdir()
    procs = {}

    def start(name, cmd):
        procs[name] = subprocess.Popen(cmd, stdout=open(tmp / f"{name}.log", "wb"),
                                       stderr=subprocess.STDOUT)

    try:
        etcd_port, peer, redis_port = free_port(), free_port(), free_port()
        etcd = f"127.0.0.1:{etcd_port}"
        start("etcd", ["etcd", "--name", "m", "--data-dir", str(tmp / "etcd"),
                       "--listen-client-urls", f"http://{etcd}", "--advertise-client-urls",
                       f"http://{etcd}", "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                       "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                       "--initial-cluster", f"m=http://127.0.0.1:{peer}"])
        start("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                        "--save", "", "--appendonly", "no", "--dir", str(tmp)])
        wait_for(lambda: get_ok(f"http://{etcd}/health"), 30, "etcd")
        start("scheduler", [dais, "scheduler", "--etcd", etcd, "--id", "s1",
                            "--lease-ttl-secs", "2"])
        for n in ("n1", "n2"):
            start(n, [dais, "node", "--model-repository", str(tmp / "repo"), "--http-port", "0",
                      "--grpc-port", "0", "--etcd", etcd, "--node-id", n, "--lease-ttl-secs",
                      "2", "--memory", "--redis", f"127.0.0.1:{redis_port}"])
        n1_port = log_port(tmp / "n1.log", "ports: http=")
        start("gateway", [dais, "gateway", "--etcd", etcd, "--http-port", "0", "--grpc-port",
                          "-1"])
        gw_port = log_port(tmp / "gateway.log", "ports: http=")
        spec = (f"kind: collection\nname: bench\ndimension: {args.dim}\nmetric: cosine\n"
                f"shards: {args.shards}\nreplicas: 2\nresources: {{cpu_milli: 100, "
                "memory_mib: 256}\n")
        subprocess.run([dais, "ctl", "--etcd", etcd, "apply", "-f", "-"], input=spec.encode(),
                       check=True, capture_output=True)
        wait_for(lambda: len(ready_replicas(etcd)) == args.shards and all(
            len(v) == 2 for v in ready_replicas(etcd).values()), 60, "every shard on both nodes")
        gw = f"http://127.0.0.1:{gw_port}/v2/memory/collections/bench"
        direct = f"http://127.0.0.1:{n1_port}/v2/memory/collections/bench"
        rng = np.random.default_rng(1)
        # Clustered like bench/memory_bench.cc's: 1,000 centres N(0,1), noise N(0,1).
        centres = rng.normal(size=(1000, args.dim)).astype(np.float32)
        vecs = centres[rng.integers(0, 1000, args.n)] + rng.normal(
            size=(args.n, args.dim)).astype(np.float32)
        t0 = time.monotonic()
        for i in range(0, args.n, 1000):
            pts = [{"id": f"v{j}", "vector": vecs[j].tolist()}
                   for j in range(i, min(i + 1000, args.n))]
            status, _ = post(gw + "/upsert", {"points": pts})
            assert status == 200, status
        load_s = time.monotonic() - t0

        def points(port):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/memory/collections/bench",
                                        timeout=10) as r:
                return json.loads(r.read())["points"]
        n2_port = log_port(tmp / "n2.log", "ports: http=")
        t1 = time.monotonic()
        wait_for(lambda: points(n1_port) == args.n and points(n2_port) == args.n, 600,
                 "both replicas holding every point")
        follow_s = time.monotonic() - t1
        q = centres[7] + rng.normal(size=args.dim).astype(np.float32)
        body = json.dumps({"vector": q.tolist(), "k": 10, "with_payload": False}).encode()
        _, a = post(direct + "/search", json.loads(body))
        _, b = post(gw + "/search", json.loads(body))
        assert [h["id"] for h in a["results"]] == [h["id"] for h in b["results"]]
        rows = {}
        for name, url in (("direct", direct), ("gateway", gw)):
            rows[name] = run_wrk(url + "/search", body, 0, args.concurrency, args.seconds,
                                 str(tmp))
        print(f"\n{args.n} vectors of {args.dim}, {args.shards} shards x 2 replicas; loaded "
              f"through the gateway in {load_s:.1f} s ({args.n / load_s:,.0f} points/s), the "
              f"second replica caught up {follow_s:.1f} s after the last write was answered\n")
        print("| search, c=%d | queries/s | p50 us | p99 us | errors |" % args.concurrency)
        print("|---|---:|---:|---:|---:|")
        for name, r in rows.items():
            print(f"| {name} | {r['rps']:,.0f} | {r['p50_us']:,.0f} | {r['p99_us']:,.0f} | "
                  f"{r['errors']} |")
        d, g = rows["direct"], rows["gateway"]
        print(f"\ngateway / direct: queries/s {g['rps'] / d['rps']:.2f}x, p50 "
              f"{g['p50_us'] / d['p50_us']:.2f}x, p99 {g['p99_us'] / d['p99_us']:.2f}x")
        v = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        exact = {f"v{i}" for i in np.argsort(-(v @ (q / np.linalg.norm(q))))[:10]}
        kill_under_load(procs, gw, body, etcd, exact)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)
        subprocess.run(["rm", "-rf", str(tmp)])


def kill_under_load(procs, gw, body, etcd, exact):
    """Searches through the gateway from 4 threads while n2 is killed: the failed ones (not 200),
    and the mean recall@10 against the exact top 10 before and after the kill (each replica's
    graph is approximate in its own way, so answers may differ between replicas)."""
    stop, killed = threading.Event(), threading.Event()
    made, failed, recall = [0], [], {False: [], True: []}
    query = json.loads(body)

    def load():
        while not stop.is_set():
            after = killed.is_set()
            status, got = post(gw + "/search", query, timeout=10)
            made[0] += 1
            if status != 200:
                failed.append((status, str(got)[:120]))
            else:
                recall[after].append(len({h["id"] for h in got["results"]} & exact) / 10)
    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(2)
    before = made[0]
    t0 = time.monotonic()
    procs["n2"].send_signal(signal.SIGKILL)
    killed.set()
    # n2's replicas have nowhere else to go (two nodes, one replica each per node): the
    # collection runs on n1's replicas; the view drops n2 when its lease ends.
    wait_for(lambda: all(v == {"n1"} for v in ready_replicas(etcd).values()), 60,
             "n2's replicas gone from the view")
    gone_s = time.monotonic() - t0
    time.sleep(3)
    stop.set()
    for t in threads:
        t.join(15)
    retries = 0
    with urllib.request.urlopen(gw.split("/v2/")[0] + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("dais_gateway_memory_replica_retries_total"):
                retries += float(line.split()[-1])
    mean = {k: sum(v) / max(1, len(v)) for k, v in recall.items()}
    print(f"\nSIGKILL of n2 under 4 search clients through the gateway: {made[0]} searches "
          f"({made[0] - before} after the kill), {len(failed)} failed, n2 out of the view after "
          f"{gone_s:.1f} s, {retries:.0f} parts retried on another replica; recall@10 "
          f"{mean[False]:.3f} before the kill, {mean[True]:.3f} after")
    if failed:
        print("first failures:", failed[:3])


if __name__ == "__main__":
    main()
