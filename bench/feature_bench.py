#!/usr/bin/python3
"""Feature store benchmark: dais's FeatureStore over Redis against redis-benchmark, in one run.

Starts its own redis-server on a free loopback port (--save '' --appendonly no), loads
--entities user_profile records (age FP32 + clicks FP32[15] = 64 bytes, the spec below) with
bench/feature_store_bench (PushSync in batches of 1000), then measures:
  references  redis-benchmark: GET and HMGET of one real record, 1 client (round trip) and
              50 clients x pipeline 16 (the server's batched rate); and pipelined HMGET over
              --entities random keys of the same shape (fields, value sizes, TTL) that
              redis-benchmark writes itself: the access pattern of the dais lookups below (one
              hot key stays in the CPU caches, random keys do not: Redis itself is 2-3x slower
              on them, in dictFind and the expires lookup);
  in process  bench/feature_store_bench: 1 entity per lookup from Redis (L1 off, l1_ttl 0),
              100 entities per lookup, batched throughput with several threads (records/s, the
              ratio to pipelined HMGET), and L1 hits (plus the raw L1Cache::Get);
  HTTP        dais serve --redis on a copy of mlp_small with a features.yaml: plain inference
              (INPUT__0 sent) against feature-enriched inference (USER_ID sent, INPUT__0 filled
              from the store), wrk at concurrency 1 and 16, with L1 on (default TTL, 1000 hot
              ids) and off (--feature-l1-ttl-ms 0, random ids over all entities).
Prints a markdown table; --json-out writes every measurement.

usage: bench/feature_bench.py [--quick] [--json-out FILE] [--build build/release]
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SPEC = """\
domain: bench
entities:
  - {name: user_id, key_type: int64}
feature_groups:
  - name: user_profile
    entity: user_id
    version: 1
    max_age: 1d
    ttl: 7d
    features:
      - {name: age, dtype: FP32, shape: [], default: 0}
      - {name: clicks, dtype: FP32, shape: [15], default: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}
inputs:
  - {name: INPUT__0, features: [user_profile:age, user_profile:clicks]}
entity_input: USER_ID
"""
# online_tier.cc RecordKey: "dais:<domain>:{<entity>=<id>}:<group>:v<version>"
KEY1 = "dais:bench:{user_id=1}:user_profile:v1"
# The random-key reference's keys: redis-benchmark replaces __rand_int__ with a random 12-digit
# number below -r; same length class as the dais keys.
REF_KEY = "dais:ref:{user_id=__rand_int__}:user_profile:v1"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def machine_busy_s():
    """Busy CPU seconds of the whole machine (all cores) since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:8]]
    return (sum(v) - v[3] - v[4]) / benchlib.CLK_TCK


def own_cpu_s():
    """CPU seconds of this script and every child it waited for (redis-server, dais serve,
    feature_store_bench, redis-benchmark, wrk)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def busy_builds():
    r = subprocess.run(["pgrep", "-f", "ninja|cc1plus"], capture_output=True, text=True)
    return [p for p in r.stdout.split() if p and int(p) != os.getpid()]


def start_redis(tmp):
    port = free_port()
    logf = open(os.path.join(tmp, "redis.log"), "w")
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--daemonize", "no",
                          "--dir", tmp], stdout=logf, stderr=subprocess.STDOUT)
    for _ in range(100):
        r = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True,
                           text=True)
        if r.stdout.strip() == "PONG":
            return p, port
        time.sleep(0.05)
    p.kill()
    raise RuntimeError("redis-server did not start")


def redis_benchmark(port, redis_pid, n, clients, pipeline, command, keyspace=0):
    """One redis-benchmark run (--csv); rps, p50/p99 in µs, and redis-server's cores.
    keyspace > 0: -r keyspace (random keys, REF_KEY)."""
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(n),
           "-c", str(clients), "-P", str(pipeline), "--csv"]
    if keyspace:
        cmd += ["-r", str(keyspace)]
    cmd += ["-t", "get"] if command == ["GET"] else command
    c0, t0, k0 = benchlib.cpu_seconds(redis_pid), time.monotonic(), os.times()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    c1, t1, k1 = benchlib.cpu_seconds(redis_pid), time.monotonic(), os.times()
    client = (k1.children_user + k1.children_system) - (k0.children_user + k0.children_system)
    row = [line for line in out.splitlines() if line and not line.startswith('"test"')][-1]
    f = [x.strip('"') for x in row.split('","')]
    # test, rps, avg, min, p50, p95, p99, max (ms)
    return {"name": command[0], "clients": clients, "pipeline": pipeline, "n": n,
            "keyspace": keyspace,
            "rps": float(f[1]), "p50_us": float(f[4]) * 1e3, "p99_us": float(f[6]) * 1e3,
            "redis_cores": (c1 - c0) / (t1 - t0), "client_cores": client / (t1 - t0)}


def load_random_reference(port, entities):
    """Hashes like the dais records (same field names and value sizes, 7-day TTL) under
    REF_KEY's __rand_int__ pattern, for the random-key HMGET reference. redis-benchmark -r picks
    keys at random: 5 x entities writes leave < 1 % of the key space unwritten."""
    base = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-r", str(entities),
            "-n", str(5 * entities), "-c", "50", "-P", "16", "-q"]
    ts, age, clicks = "t" * 8, "a" * 4, "c" * 60
    subprocess.run(base + ["HSET", REF_KEY, "_ts", ts, "age", age, "clicks", clicks],
                   capture_output=True, check=True)
    subprocess.run(base + ["PEXPIRE", REF_KEY, str(7 * 86400 * 1000)], capture_output=True,
                   check=True)


def fsb(args, port, spec, redis_pid, phase, *extra):
    cmd = [os.path.join(args.build, "bench/feature_store_bench"), "--redis", f"127.0.0.1:{port}",
           "--spec", spec, "--phase", phase, "--entities", str(args.entities),
           "--redis-pid", str(redis_pid)] + [str(x) for x in extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    log(json.dumps(r))
    return r


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def post(url, body):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def l1_counts(base):
    text = get(f"{base}/metrics").decode()
    out = {}
    for res in ("hit", "miss"):
        m = re.search(r'^dais_feature_l1_requests_total\{result="%s"\}\s+([\d.e+]+)' % res,
                      text, re.M)
        out[res] = float(m.group(1)) if m else 0.0
    return out


class Serve:
    def __init__(self, args, repo, port, l1_ttl_ms, tmp):
        self.log = os.path.join(tmp, f"dais-{l1_ttl_ms}.log")
        cmd = [os.path.join(args.build, "src/cmd/dais"), "serve", "--model-repository", repo,
               "--http-port", "0", "--grpc-port", "0", "--http-address", "127.0.0.1",
               "--grpc-address", "127.0.0.1", "--redis", f"127.0.0.1:{port}"]
        if l1_ttl_ms is not None:
            cmd += ["--feature-l1-ttl-ms", str(l1_ttl_ms)]
        self.proc = subprocess.Popen(cmd, stderr=open(self.log, "w"), stdout=subprocess.DEVNULL)
        self.base = None
        for _ in range(600):
            with open(self.log) as f:
                m = re.search(r"ports: http=(\d+)", f.read())
            if m:
                try:
                    get(f"http://127.0.0.1:{m.group(1)}/v2/models/mlp_small/ready")
                    self.base = f"http://127.0.0.1:{m.group(1)}"
                    return
                except Exception:
                    pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        with open(self.log) as f:
            tail = f.read()[-2000:]
        self.stop()
        raise RuntimeError("dais serve did not become ready:\n" + tail)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def enriched_body(uid):
    return json.dumps({"inputs": [{"name": "USER_ID", "shape": [1], "datatype": "INT64",
                                   "data": [uid]}]}).encode()


def random_id_lua(lo, hi):
    """wrk: a fresh random USER_ID per request, a different random sequence per wrk thread."""
    return ("local counter = 0\n"
            "function setup(thread) counter = counter + 1; thread:set('tid', counter) end\n"
            "function init(args) math.randomseed(os.time() * 1000 + (tid or 0) * 7919) end\n"
            "function request()\n"
            f"  local id = math.random({lo}, {hi})\n"
            "  return wrk.format(nil, nil, nil, '{\"inputs\":[{\"name\":\"USER_ID\",\"shape\":[1],"
            "\"datatype\":\"INT64\",\"data\":[' .. id .. ']}]}')\n"
            "end\n")


def http_case(srv, label, body, lua, conc, seconds, tmp):
    url = f"{srv.base}/v2/models/mlp_small/infer"
    benchlib.run_wrk(url, body, 0, conc, 1, tmp, lua)  # warm-up (fills L1 for the hot set)
    h0, c0 = l1_counts(srv.base), benchlib.cpu_seconds(srv.proc.pid)
    r = benchlib.run_wrk(url, body, 0, conc, seconds, tmp, lua)
    h1, c1 = l1_counts(srv.base), benchlib.cpu_seconds(srv.proc.pid)
    hits, misses = h1["hit"] - h0["hit"], h1["miss"] - h0["miss"]
    r.update(case=label, conc=conc, server_cores=(c1 - c0) / seconds,
             l1_hit=(hits / (hits + misses)) if hits + misses else None)
    log(json.dumps(r))
    return r


def fmt_us(us):
    return f"{us / 1e3:.2f} ms" if us >= 10000 else f"{us:.0f} us"


def report(res):
    refs = {(r["name"], r["clients"], r.get("keyspace", 0)): r for r in res["refs"]}
    ph = res["phases"]
    hm1, hmP = refs[("HMGET", 1, 0)], refs[("HMGET", 50, 0)]
    hmR = refs.get(("HMGET", 50, res["meta"]["entities"]))
    get1, getP = refs[("GET", 1, 0)], refs[("GET", 50, 0)]
    print(f"# {res['meta']['date']}, {res['meta']['cores']} cores, load average at start "
          f"{res['meta']['loadavg_start']}, at end {res['meta']['loadavg_end']}, other processes "
          f"{res['meta'].get('other_cores', '?')} cores on average; "
          f"{res['meta']['entities']} entities of {ph['load']['record_bytes']} bytes, "
          f"loaded at {ph['load']['rows_per_s']:.0f} records/s (PushSync, batches of 1000)")
    print()
    print("**References (redis-benchmark, same redis-server)**")
    print()
    print("| command | clients x pipeline | ops/s | p50 | p99 | redis-server cores | "
          "redis-benchmark cores |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in res["refs"]:
        name = "GET" if r["name"] == "GET" else \
            f"HMGET _ts age clicks ({r['keyspace']} random records)" if r.get("keyspace") else \
            "HMGET _ts age clicks (one record)"
        print(f"| {name} | {r['clients']} x {r['pipeline']} | {r['rps']:.0f} | "
              f"{fmt_us(r['p50_us'])} | {fmt_us(r['p99_us'])} | {r['redis_cores']:.2f} | "
              f"{r.get('client_cores', 0):.2f} |")
    print()
    print("**dais FeatureStore in process (bench/feature_store_bench, RedisTier, 2 pooled "
          "connections)**")
    print()
    print("| case | p50 | p99 | p99.9 | throughput | vs reference | redis-server cores | "
          "bench cores | non-PRESENT |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    r1 = ph["redis1"]
    print(f"| 1 entity from Redis (L1 off), sequential | {r1['p50_us']:.0f} us | "
          f"{r1['p99_us']:.0f} us | {r1['p999_us']:.0f} us | {r1['lookups_per_s']:.0f} lookups/s | "
          f"p50 {r1['p50_us'] / hm1['p50_us']:.2f}x redis-benchmark HMGET -c 1 "
          f"({fmt_us(hm1['p50_us'])}) | {r1['redis_cores']:.2f} | {r1['bench_cores']:.2f} | "
          f"{r1['bad']} |")
    r100 = ph["redis100"]
    print(f"| 100 entities from Redis (L1 off), sequential | {r100['p50_us']:.0f} us | "
          f"{r100['p99_us']:.0f} us | {r100['p999_us']:.0f} us | "
          f"{r100['records_per_s']:.0f} records/s | {r100['records_per_s'] / hmP['rps']:.2f} of "
          f"pipelined HMGET | {r100['redis_cores']:.2f} | {r100['bench_cores']:.2f} | "
          f"{r100['bad']} |")
    for t in ph["tput"]:
        vs = f"**{t['records_per_s'] / hmP['rps']:.2f}** of pipelined HMGET, one key " \
             f"({hmP['rps']:.0f}/s)"
        if hmR:
            vs += f"; **{t['records_per_s'] / hmR['rps']:.2f}** of it on random keys " \
                  f"({hmR['rps']:.0f}/s)"
        print(f"| batched, {t['threads']} threads x 100 entities (L1 off) | {t['p50_us']:.0f} us | "
              f"{t['p99_us']:.0f} us | - | {t['records_per_s']:.0f} records/s | {vs} | "
              f"{t['redis_cores']:.2f} | {t['bench_cores']:.2f} | {t['bad']} |")
    l1 = ph["l1"]
    print(f"| L1 hit, 1 entity (LookupSync) | {l1['p50_ns']} ns | {l1['p99_ns']} ns | "
          f"{l1['p999_ns']} ns | {l1['lookups_per_s']:.0f} lookups/s | tier reads "
          f"{l1['tier_reads']} | - | - | {l1['bad']} |")
    print(f"| raw L1Cache::Get (same keys) | {l1['raw_get_p50_ns']} ns | {l1['raw_get_p99_ns']} ns | "
          f"{l1['raw_get_p999_ns']} ns | - | misses {l1['raw_get_misses']} | - | - | - |")
    print()
    print(f"Round trip from redis-benchmark -c 1: GET {1e6 / get1['rps']:.0f} us "
          f"({get1['rps']:.0f}/s), HMGET {1e6 / hm1['rps']:.0f} us. Pipelined GET "
          f"{getP['rps']:.0f}/s, pipelined HMGET {hmP['rps']:.0f}/s. Timer cost ~"
          f"{l1['clock_p50_ns']} ns per sample (included).")
    if res.get("http"):
        print()
        print("**HTTP: plain vs feature-enriched inference (dais serve --redis, mlp_small, "
              "queue delay 0, JSON, wrk)**")
        print()
        print("| case | L1 | conc | req/s | p50 | p99 | added p50 vs plain | L1 hit rate | "
              "server cores | errors |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        plain = {r["conc"]: r for r in res["http"] if r["case"] == "plain"}
        for r in res["http"]:
            l1txt = {"plain": "-", "enriched_l1": "on (2 s TTL), 1000 hot ids",
                     "enriched_nol1": "off (TTL 0), random ids"}[r["case"]]
            name = {"plain": "plain (INPUT__0 sent)",
                    "enriched_l1": "enriched (USER_ID sent)",
                    "enriched_nol1": "enriched (USER_ID sent)"}[r["case"]]
            added = "-" if r["case"] == "plain" else \
                f"{r['p50_us'] - plain[r['conc']]['p50_us']:+.0f} us"
            hit = "-" if r["l1_hit"] is None else f"{100 * r['l1_hit']:.1f} %"
            print(f"| {name} | {l1txt} | {r['conc']} | {r['rps']:.0f} | {fmt_us(r['p50_us'])} | "
                  f"{fmt_us(r['p99_us'])} | {added} | {hit} | {r['server_cores']:.2f} | "
                  f"{r['errors']} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build/release"))
    ap.add_argument("--quick", action="store_true", help="smaller samples, 2 s HTTP cases")
    ap.add_argument("--entities", type=int, default=100000)
    ap.add_argument("--threads", default="4,8,16", help="thread counts of the batched case")
    ap.add_argument("--seconds", type=int, default=None, help="seconds per HTTP case")
    ap.add_argument("--no-http", action="store_true", help="skip the dais serve part")
    ap.add_argument("--json-out")
    ap.add_argument("--report", help="print the table of an earlier --json-out; run nothing")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            report(json.load(f))
        return 0
    q = args.quick
    seconds = args.seconds or (2 if q else 5)
    if busy_builds():
        log("# warning: a build (ninja/cc1plus) is running; numbers will be low")
    res = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M"), "cores": os.cpu_count(),
                    "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                    "entities": args.entities, "quick": q}, "refs": [], "phases": {},
           "http": []}
    t_start, busy0, own0 = time.monotonic(), machine_busy_s(), own_cpu_s()
    tmp = tempfile.mkdtemp(prefix="dais-feature-bench-")
    redis, port = start_redis(tmp)
    servers = []
    try:
        spec = os.path.join(tmp, "features.yaml")
        with open(spec, "w") as f:
            f.write(SPEC)
        log(f"# redis-server on 127.0.0.1:{port} (pid {redis.pid}); loading "
            f"{args.entities} entities")
        ph = res["phases"]
        ph["load"] = fsb(args, port, spec, redis.pid, "load", "--batch", 1000)

        n1, nP = (50000, 500000) if q else (200000, 2000000)
        for cmd in (["GET"], ["HMGET", KEY1, "_ts", "age", "clicks"]):
            for clients, pipe, n in ((1, 1, n1), (50, 16, nP)):
                r = redis_benchmark(port, redis.pid, n, clients, pipe, cmd)
                log(json.dumps(r))
                res["refs"].append(r)
        log(f"# writing {args.entities} random reference records")
        load_random_reference(port, args.entities)
        r = redis_benchmark(port, redis.pid, nP, 50, 16,
                            ["HMGET", REF_KEY, "_ts", "age", "clicks"], args.entities)
        log(json.dumps(r))
        res["refs"].append(r)

        ph["redis1"] = fsb(args, port, spec, redis.pid, "redis1", "--samples",
                           5000 if q else 20000)
        ph["redis100"] = fsb(args, port, spec, redis.pid, "redis100", "--rows", 100,
                             "--samples", 500 if q else 2000)
        ph["tput"] = [fsb(args, port, spec, redis.pid, "tput", "--threads", t, "--rows", 100,
                          "--seconds", 1 if q else 2)
                      for t in [int(x) for x in args.threads.split(",")]]
        ph["l1"] = fsb(args, port, spec, redis.pid, "l1", "--hot", 10000,
                       "--samples", 50000 if q else 200000)

        if not args.no_http:
            src = os.path.join(ROOT, "examples/model_repository")
            if not os.path.exists(os.path.join(src, "mlp_small/1/model.pt")):
                subprocess.run(["bash", os.path.join(ROOT, "scripts/gen_examples.sh")],
                               check=True)
            repo = benchlib.repo_with_queue_delay(src, ["mlp_small"], 0,
                                                  "dais-feature-bench-repo-")
            with open(os.path.join(repo, "mlp_small/features.yaml"), "w") as f:
                f.write(SPEC)
            plain_body = benchlib.request_bodies(16)["json"][0]
            try:
                for l1_ttl in (None, 0):
                    srv = Serve(args, repo, port, l1_ttl, tmp)
                    servers.append(srv)
                    # One checked request: the features were found.
                    out = post(f"{srv.base}/v2/models/mlp_small/infer", enriched_body(1))
                    status = out.get("parameters", {}).get("feature_status")
                    if status != "PRESENT":
                        raise RuntimeError(f"enriched request: feature_status {status!r}: {out}")
                    for conc in (1, 16):
                        if l1_ttl is None:
                            res["http"].append(http_case(srv, "plain", plain_body, "", conc,
                                                         seconds, tmp))
                            res["http"].append(http_case(srv, "enriched_l1", enriched_body(1),
                                                         random_id_lua(1, 1000), conc, seconds,
                                                         tmp))
                        else:
                            res["http"].append(http_case(
                                srv, "enriched_nol1", enriched_body(1),
                                random_id_lua(1, args.entities), conc, seconds, tmp))
                    srv.stop()
            finally:
                shutil.rmtree(repo, ignore_errors=True)
    finally:
        for s in servers:
            s.stop()
        redis.terminate()
        redis.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    res["meta"]["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    wall = time.monotonic() - t_start
    res["meta"]["wall_s"] = round(wall, 1)
    # CPU that other processes (other engineers' builds and tests) took during the run.
    res["meta"]["other_cores"] = round(max(0.0, (machine_busy_s() - busy0) -
                                           (own_cpu_s() - own0)) / wall, 2)
    if res["meta"]["other_cores"] > 0.25:
        log(f"# warning: other processes used {res['meta']['other_cores']} cores on average")
    log(f"# done in {res['meta']['wall_s']} s")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(res, f, indent=1)
    report(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
