#!/usr/bin/python3
"""How late a route change takes effect on a gateway after N earlier route writes (issue 32: the
gateway parsed every route again on every etcd event, so N writes cost O(N^2): a change took
effect 150.8 s late after 3,000 writes). A real etcd and one `dais gateway` on loopback.

For each N in --counts: N routes are written one put at a time (N etcd events) through etcd's
JSON gateway, then one more route; the time from that write until the gateway routes the new
alias (503 "no READY instance" instead of 404 "no route") is the propagation time, printed with
the gateway's CPU seconds spent over the N writes and its ratio to the N=0 run.

usage: bench/gateway_config_bench.py [--counts 0,1000,3000] [--build build/release]
"""
import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def b64(s):
    return base64.b64encode(s.encode()).decode()


def put(etcd_http, key, value):
    req = urllib.request.Request(f"{etcd_http}/v3/kv/put", method="POST", data=json.dumps(
        {"key": b64(key), "value": b64(value)}).encode())
    urllib.request.urlopen(req, timeout=10).read()


def status_of(url):
    req = urllib.request.Request(url, method="POST", data=b'{"inputs": []}',
                                 headers={"Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(req, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def route(name):
    return json.dumps({"kind": "route", "name": name, "model": name,
                       "versions": [{"version": 1, "weight": 100}]})


def run(dais, counts):
    tmp = Path(tempfile.mkdtemp(prefix="dais-gwcfg-"))
    client, peer = free_port(), free_port()
    etcd = subprocess.Popen(
        ["etcd", "--data-dir", str(tmp / "etcd"), "--listen-client-urls",
         f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
         f"http://127.0.0.1:{peer}", "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    etcd_http = f"http://127.0.0.1:{client}"
    gw = None
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{etcd_http}/health", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        log = open(tmp / "gateway.log", "wb")
        gw = subprocess.Popen([dais, "gateway", "--etcd", f"127.0.0.1:{client}", "--http-port",
                               "0", "--grpc-port", "0"], stdout=log, stderr=subprocess.STDOUT)
        port = None
        while port is None:
            text = (tmp / "gateway.log").read_text(errors="replace")
            if "ports: http=" in text:
                port = int(text.split("ports: http=")[1].split()[0])
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/v2/models"
        rows, written = [], 0
        for n in counts:
            cpu0 = cpu_seconds(gw.pid)
            t0 = time.monotonic()
            while written < n:
                put(etcd_http, f"/dais/routes/r{written}", route(f"r{written}"))
                written += 1
            writes_s = time.monotonic() - t0
            cpu = cpu_seconds(gw.pid) - cpu0
            probe = f"probe{n}"
            t1 = time.monotonic()
            put(etcd_http, f"/dais/routes/{probe}", route(probe))
            while status_of(f"{url}/{probe}/infer") == 404:
                if time.monotonic() - t1 > 600:
                    raise RuntimeError("the probe route never took effect")
                time.sleep(0.002)
            rows.append((n, written, (time.monotonic() - t1) * 1000, writes_s, cpu))
        base = rows[0][2]
        print(f"{'routes before':>13} {'propagation ms':>15} {'vs first':>9} "
              f"{'write time s':>13} {'gateway CPU s':>14}")
        for n, total, ms, writes_s, cpu in rows:
            print(f"{total:>13} {ms:>15.1f} {ms / base:>9.2f} {writes_s:>13.1f} {cpu:>14.2f}")
    finally:
        if gw:
            gw.terminate()
            gw.wait(10)
        etcd.terminate()
        etcd.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--counts", default="0,1000,3000")
    ap.add_argument("--build", default=str(ROOT / "build" / "release"))
    a = ap.parse_args()
    counts = sorted({int(c) for c in a.counts.split(",")})
    run(str(Path(a.build) / "src" / "cmd" / "dais"), counts)


if __name__ == "__main__":
    main()
