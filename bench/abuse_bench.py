#!/usr/bin/env python3
"""Abuse benchmark (issue 11): what a hostile client costs `dais serve`.

  /usr/bin/python3 bench/abuse_bench.py [--dais build/release/src/cmd/dais] [--limit 1000]
                                         [--over 1000] [--probes 200]

Three measurements, each against a reference taken in the same run on the same server:
 1. Liveness while idle connections are held: `--limit` (--http-max-connections) plus `--over`
    idle TCP connections are opened and held; /v2/health/live is then probed `--probes` times,
    each on a new connection (as a kubelet does). Reference: the same probes with nothing held.
 2. Server CPU while at the limit and idle (goal: no spinning, < 5 % of a core), in two cases:
    connections over --http-max-connections, and connections over the process's open-file limit
    (the server started with RLIMIT_NOFILE 1024 and a limit above it: accept fails with EMFILE).
 3. Refusing a 40 MB body of nested brackets: time from the first byte sent to the 400, and the
    growth of the server's peak RSS (VmHWM) (goals: < 50 ms, < 10 MB). Reference: 40 MB of
    '0' (nothing nested) sent to an endpoint that reads it whole and answers 405
    (POST /v2/health/live).
Prints a table; record it in docs/benchmarks.md with the command line.
"""
import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import cpu_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def start(dais, repo, log, *args, nofile=None):
    def limit():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    p = subprocess.Popen([dais, "serve", "--model-repository", repo, "--http-port", "0",
                          "--metrics-port", "0", "--grpc-port", "0", "--model-control-mode",
                          "explicit", *args], stdout=log, stderr=subprocess.STDOUT,
                         preexec_fn=limit)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = Path(log.name).read_text(errors="replace")
        for line in text.splitlines():
            if "ports: http=" in line:
                ports = dict(kv.split("=") for kv in line.split("ports: ")[1].split())
                return p, int(ports["http"]), int(ports["metrics"])
        time.sleep(0.05)
    p.kill()
    raise SystemExit("dais serve did not start:\n" + Path(log.name).read_text())


def http(port, request: bytes, timeout=10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
            if b"\r\n\r\n" in data:
                head, _, body = data.partition(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                if len(body) >= n:
                    return data


def probe_latencies(port, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        reply = http(port, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        out.append((time.perf_counter() - t0) * 1e6)
        if not reply.startswith(b"HTTP/1.1 200"):
            raise SystemExit(f"liveness failed: {reply[:100]!r}")
    out.sort()
    return out[len(out) // 2], out[int(len(out) * 0.99) - 1]


def hold(port, n):
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            break
    return socks


def cpu_share(pid, seconds=5.0):
    c0 = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / seconds


def vm_hwm_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def post(port, path, body_file):
    """curl POSTs the file: total ms and the status code. curl stops sending when a final answer
    comes before the body is sent, so a server that refuses early is seen refusing early."""
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-H", "Expect:", "-H",
                          "Content-Type: application/json", "-w",
                          "%{http_code} %{time_total}", "--data-binary", f"@{body_file}",
                          f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True)
    code, secs = out.stdout.split()
    return float(secs) * 1e3, code


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dais", default=str(ROOT / "build/release/src/cmd/dais"))
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--over", type=int, default=1000)
    ap.add_argument("--probes", type=int, default=200)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = a.limit + a.over + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, need), hard))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        os.makedirs(repo)
        log = open(os.path.join(tmp, "dais.log"), "wb")
        p, port, _ = start(a.dais, repo, log, "--http-max-connections", str(a.limit))
        try:
            ref50, ref99 = probe_latencies(port, a.probes)
            idle_cpu = cpu_share(p.pid, 3.0)
            held = hold(port, a.limit + a.over)
            time.sleep(0.5)
            p50, p99 = probe_latencies(port, a.probes)
            at_limit_cpu = cpu_share(p.pid)
            for s in held:
                s.close()
            rows.append(("liveness p50, nothing held (reference)", f"{ref50:.0f} us", "1.00"))
            rows.append((f"liveness p50, {len(held)} idle held (limit {a.limit})",
                         f"{p50:.0f} us", f"{p50 / ref50:.2f}"))
            rows.append(("liveness p99, nothing held (reference)", f"{ref99:.0f} us", "1.00"))
            rows.append((f"liveness p99, {len(held)} idle held", f"{p99:.0f} us",
                         f"{p99 / ref99:.2f}"))
            rows.append(("server CPU, idle, nothing held", f"{idle_cpu * 100:.1f} % of a core",
                         ""))
            rows.append((f"server CPU, idle, {len(held)} held over the limit",
                         f"{at_limit_cpu * 100:.1f} % of a core", ""))
            time.sleep(0.5)
            # 3. the nested body, against the same bytes read and discarded.
            big, flat = os.path.join(tmp, "nested.json"), os.path.join(tmp, "flat.json")
            with open(big, "wb") as f:
                f.write(b"[" * (40 << 20))
            with open(flat, "wb") as f:  # the same size, nothing nested: read whole, then 405
                f.write(b"0" * (40 << 20))
            hwm0 = vm_hwm_kib(p.pid)
            ms, status = post(port, "/v2/repository/index", big)
            ms2, _ = post(port, "/v2/repository/index", big)
            hwm1 = vm_hwm_kib(p.pid)
            ref_ms, ref_status = post(port, "/v2/health/live", flat)
            hwm2 = vm_hwm_kib(p.pid)
            rows.append((f"40 MB flat body read whole (reference, {ref_status})",
                         f"{ref_ms:.1f} ms", "1.00"))
            rows.append((f"40 MB nested body refused ({status})",
                         f"{ms:.1f} ms / {ms2:.1f} ms", f"{ms / ref_ms:.2f}"))
            rows.append(("peak RSS growth refusing it twice (VmHWM)",
                         f"{(hwm1 - hwm0) / 1024:.1f} MiB", ""))
            rows.append(("peak RSS growth reading the flat body (reference)",
                         f"{(hwm2 - hwm1) / 1024:.1f} MiB", ""))
        finally:
            p.terminate()
            p.wait(30)
        # 2b. over the open-file limit.
        log2 = open(os.path.join(tmp, "dais2.log"), "wb")
        p, port, _ = start(a.dais, repo, log2, "--http-max-connections", "100000",
                           "--allow-grpc", "false", nofile=1024)
        try:
            held = hold(port, 1500)
            time.sleep(1.0)
            emfile_cpu = cpu_share(p.pid)
            t0 = time.perf_counter()
            http(port, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            live_ms = (time.perf_counter() - t0) * 1e3
            for s in held:
                s.close()
            rows.append((f"server CPU, {len(held)} held over RLIMIT_NOFILE 1024 (EMFILE)",
                         f"{emfile_cpu * 100:.1f} % of a core", ""))
            rows.append(("liveness at the descriptor limit (one probe)", f"{live_ms:.0f} ms", ""))
        finally:
            p.terminate()
            p.wait(30)
    w = max(len(r[0]) for r in rows)
    print(f"{'measurement':<{w}}  {'value':>24}  ratio to reference")
    for name, value, ratio in rows:
        print(f"{name:<{w}}  {value:>24}  {ratio}")


if __name__ == "__main__":
    main()
