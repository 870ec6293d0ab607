#!/usr/bin/python3
"""What TLS costs dais, measured in one run on this machine (issue 17):

  HTTP JSON   wrk POSTing batch-1 requests to mlp_small (max_queue_delay 0) at concurrency 1 and
              64 with keep-alive: a plain-text `dais serve` against one with --http-use-ssl.
  gRPC        `dais perf -i grpc` (its own HTTP/2 connection, one per in-flight request) at
              concurrency 1 and 64: plain against --grpc-use-ssl.
  handshakes  new TLS connections per second (`openssl s_time -new`, TLS 1.3, one client
              process) against dais's HTTPS port and against nginx (Debian's nginx-light)
              listening with TLS and the same certificate.
  Redis       batched feature lookups (bench/feature_store_bench, phase tput: 100 entities per
              lookup, 8 threads, L1 off) against redis-server on a plain port and on a TLS port
              (tls-port, same data).

Everything (servers, clients) shares the machine's cores; the ratios are what matter.
usage: bench/tls_bench.py [--seconds 5] [--build build/release]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (cpu_seconds, example_repository, nginx_conf,  # noqa: E402
                      repo_with_queue_delay, request_bodies, run_wrk)
from cluster_bench import ROOT, free_port, wait_for  # noqa: E402
from feature_bench import SPEC  # noqa: E402 (the user_profile group; inputs unused here)

NGINX_HTTP = """  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {certs}/server.crt;
    ssl_certificate_key {certs}/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    location / {{ return 200 "ok"; }}
  }}"""



def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Procs:
    def __init__(self, tmp):
        self.tmp, self.procs = tmp, []

    def start(self, cmd, name):
        p = subprocess.Popen([str(c) for c in cmd], stdout=open(self.tmp / f"{name}.log", "wb"),
                             stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def serve(procs, build, repo, certs, tls, name):
    """A dais serve; returns (http_port, grpc_port)."""
    http, grpc, metrics = free_port(), free_port(), free_port()
    cmd = [build / "src/cmd/dais", "serve", "--model-repository", repo, "--http-port", http,
           "--grpc-port", grpc, "--metrics-port", metrics]
    if tls:
        for p in ("http", "grpc"):
            cmd += [f"--{p}-use-ssl", "true", f"--{p}-server-cert", certs / "server.crt",
                    f"--{p}-server-key", certs / "server.key"]
    p = procs.start(cmd, name)
    scheme = "https" if tls else "http"
    wait_for(lambda: subprocess.run(["curl", "-sfk", f"{scheme}://127.0.0.1:{http}/v2/health/ready"],
                                    capture_output=True).returncode == 0, 60, name)
    return http, grpc, p.pid


def served(http_port, tls):
    """Requests mlp_small has answered (its statistics)."""
    out = subprocess.run(["curl", "-sfk", f"{'https' if tls else 'http'}://127.0.0.1:{http_port}"
                          "/v2/models/mlp_small/stats"], capture_output=True, check=True).stdout
    return json.loads(out)["model_stats"][0]["inference_stats"]["success"]["count"]


def perf_grpc(build, port, conc, seconds, certs=None):
    cmd = [build / "src/cmd/dais", "perf", "-m", "mlp_small", "-i", "grpc",
           "-u", f"localhost:{port}", "--concurrency-range", conc,
           "--measurement-interval-ms", int(seconds * 1000), "--max-trials", 3, "--no-progress"]
    if certs:
        cmd += ["--ssl-grpc-use-ssl", "--ssl-grpc-root-certifications-file", certs / "ca.crt"]
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                         check=True).stdout
    row = next(line.split() for line in out.splitlines()
               if line.strip().startswith(f"{conc} "))
    return {"rps": float(row[1]), "p50_us": float(row[3]), "p99_us": float(row[6]),
            "errors": int(row[7])}


def s_time(port, seconds):
    """New TLS connections per second (wall clock) made by one `openssl s_time -new` client:
    a full handshake each, no resumption (its own "real seconds" are whole seconds)."""
    t0 = time.monotonic()
    out = subprocess.run(["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new",
                          "-time", str(int(seconds))], capture_output=True, text=True).stdout
    wall = time.monotonic() - t0
    m = re.search(r"(\d+) connections in [\d.]+s;", out)
    if not m:
        raise RuntimeError(f"s_time: {out[-500:]}")
    return int(m.group(1)) / wall


def start_redis(procs, tmp, certs, tls, name):
    port = free_port()
    d = tmp / name
    d.mkdir()
    cmd = ["redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--dir", d]
    cli = ["redis-cli", "-p", port]
    if tls:
        cmd[2] = 0
        cmd += ["--tls-port", port, "--tls-cert-file", certs / "server.crt", "--tls-key-file",
                certs / "server.key", "--tls-ca-cert-file", certs / "ca.crt",
                "--tls-auth-clients", "no"]
        cli += ["--tls", "--cacert", certs / "ca.crt"]
    p = procs.start(cmd, name)
    wait_for(lambda: subprocess.run([str(c) for c in cli + ["PING"]], capture_output=True,
                                    text=True).stdout.strip() == "PONG", 30, name)
    return p, port


def redis_tput(build, port, pid, spec, certs, seconds, entities):
    base = [build / "bench/feature_store_bench", "--redis",
            f"{'rediss://' if certs else ''}127.0.0.1:{port}", "--spec", spec,
            "--entities", entities, "--redis-pid", pid]
    if certs:
        base += ["--redis-tls-ca", certs / "ca.crt"]
    run = lambda *extra: json.loads(subprocess.run(  # noqa: E731
        [str(c) for c in base + list(extra)], capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1])
    run("--phase", "load", "--batch", 1000)
    return run("--phase", "tput", "--threads", 8, "--rows", 100, "--seconds", seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--build", default=str(Path(ROOT) / "build/release"))
    ap.add_argument("--entities", type=int, default=20000)
    args = ap.parse_args()
    build = Path(args.build)
    tmp = Path(tempfile.mkdtemp(prefix="dais-tls-bench-"))
    certs = tmp / "certs"
    subprocess.run([Path(ROOT) / "scripts/make_certs.sh", certs], check=True,
                   capture_output=True)
    repo = repo_with_queue_delay(str(example_repository(ROOT)), ["mlp_small"], 0,
                                 "dais-tls-bench-repo-")
    procs = Procs(tmp)
    rows, res = [], {}
    try:
        plain_http, plain_grpc, plain_pid = serve(procs, build, repo, certs, False,
                                                  "serve-plain")
        tls_http, tls_grpc, tls_pid = serve(procs, build, repo, certs, True, "serve-tls")
        body = request_bodies(16)["json"][0]
        for conc in (1, 64):
            for tls, port, pid in ((False, plain_http, plain_pid), (True, tls_http, tls_pid)):
                url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/v2/models/mlp_small/infer"
                run_wrk(url, body, 0, conc, 1, str(tmp))  # warm-up
                c0 = cpu_seconds(pid)
                r = run_wrk(url, body, 0, conc, int(args.seconds), str(tmp))
                r["server_cpu_us"] = (cpu_seconds(pid) - c0) / max(r["requests"], 1) * 1e6
                res[("http", conc, tls)] = r
                log(f"http c={conc} tls={tls}: {json.dumps(r)}")
            for tls, port, pid, http in ((False, plain_grpc, plain_pid, plain_http),
                                         (True, tls_grpc, tls_pid, tls_http)):
                # dais perf's warm-up and trials all load the server: CPU per request over the
                # whole run, requests counted by the model's statistics.
                n0, c0 = served(http, tls), cpu_seconds(pid)
                r = perf_grpc(build, port, conc, args.seconds, certs if tls else None)
                r["server_cpu_us"] = (cpu_seconds(pid) - c0) / max(served(http, tls) - n0, 1) * 1e6
                res[("grpc", conc, tls)] = r
                log(f"grpc c={conc} tls={tls}: {json.dumps(r)}")
        for proto in ("http", "grpc"):
            for conc in (1, 64):
                p, t = res[(proto, conc, False)], res[(proto, conc, True)]
                rows.append((proto, conc, p, t))

        nginx_port = free_port()
        (tmp / "nginx.conf").write_text(
            nginx_conf(tmp, NGINX_HTTP.format(port=nginx_port, certs=certs)))
        procs.start(["nginx", "-c", tmp / "nginx.conf", "-p", tmp], "nginx")
        wait_for(lambda: subprocess.run(["curl", "-sfk", f"https://127.0.0.1:{nginx_port}/"],
                                        capture_output=True).returncode == 0, 30, "nginx")
        hs = {"dais": s_time(tls_http, args.seconds), "nginx": s_time(nginx_port, args.seconds)}
        log(f"handshakes/s: {hs}")

        spec = tmp / "features.yaml"
        spec.write_text(SPEC)
        rp, rport = start_redis(procs, tmp, certs, False, "redis-plain")
        rt, rtport = start_redis(procs, tmp, certs, True, "redis-tls")
        redis = {"plain": redis_tput(build, rport, rp.pid, spec, None, args.seconds,
                                     args.entities),
                 "tls": redis_tput(build, rtport, rt.pid, spec, certs, args.seconds,
                                   args.entities)}
        log(f"redis: {json.dumps(redis)}")
    finally:
        procs.stop()

    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
          f"{args.seconds:g} s per case, TLS 1.3 (OpenSSL's default suite), EC P-256 certificate")
    print()
    print("| protocol | conc | plain req/s | plain p50 | TLS req/s | TLS p50 | TLS / plain | "
          "server CPU/req plain | TLS | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cpu = lambda r: f"{r['server_cpu_us']:.1f} us" if r.get("server_cpu_us") else "-"  # noqa
    for proto, conc, p, t in rows:
        print(f"| {'HTTP JSON' if proto == 'http' else 'gRPC'} | {conc} | {p['rps']:.0f} | "
              f"{p['p50_us']:.0f} us | {t['rps']:.0f} | {t['p50_us']:.0f} us | "
              f"{t['rps'] / p['rps']:.2f} | {cpu(p)} | {cpu(t)} | "
              f"{p['errors'] + t['errors']} |")
    print()
    print("| new TLS connections/s (openssl s_time -new, 1 client) | dais HTTPS | nginx | "
          "dais / nginx |")
    print("|---|---:|---:|---:|")
    print(f"| same certificate, TLS 1.3 | {hs['dais']:.0f} | {hs['nginx']:.0f} | "
          f"{hs['dais'] / hs['nginx']:.2f} |")
    print()
    key = "records_per_s" if "records_per_s" in redis["plain"] else next(
        k for k in redis["plain"] if "per_s" in k)
    print("| batched feature lookups (100 entities, 8 threads, L1 off) | plain Redis | "
          "Redis over TLS | TLS / plain |")
    print("|---|---:|---:|---:|")
    print(f"| {key} | {redis['plain'][key]:.0f} | {redis['tls'][key]:.0f} | "
          f"{redis['tls'][key] / redis['plain'][key]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
