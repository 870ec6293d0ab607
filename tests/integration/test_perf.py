"""`dais perf` (perf_analyzer for KServe v2) against a real `dais serve`, and against a minimal
KServe v2 server without statistics. These check the shape of the results (levels, columns,
positive numbers, no errors), never the speed.
"""

from __future__ import annotations

import os

import csv
import json
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

CSV_HEADER = ("concurrency,rate,throughput_infer_per_sec,latency_avg_us,p50_us,p90_us,p95_us,"
              "p99_us,errors,server_queue_us,server_compute_input_us,server_compute_infer_us,"
              "server_compute_output_us,server_success_us,avg_batch,stable")
KEYS = CSV_HEADER.split(",")
SERVER_KEYS = [k for k in KEYS if k.startswith("server_")] + ["avg_batch"]
# The command of the brief: three levels, short windows.
LEVEL_ARGS = ["--concurrency-range", "1:4:x2", "--measurement-interval-ms", "500",
              "--max-trials", "4", "--no-progress"]
RUN_TIMEOUT_S = 120


def run_perf(dais_bin, *args, timeout=RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([str(dais_bin), "perf", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def explain(r: subprocess.CompletedProcess) -> str:
    return f"exit {r.returncode}\n--- stdout ---\n{r.stdout}\n--- stderr ---\n{r.stderr}"


def read_results(tmp_path):
    """(csv header line, csv rows as dicts, json rows)."""
    text = (tmp_path / "out.csv").read_text()
    header = text.splitlines()[0]
    rows = list(csv.DictReader(text.splitlines()))
    js = json.loads((tmp_path / "out.json").read_text())
    return header, rows, js


def check_level_rows(rows, js, key, levels, server_stats=True):
    assert [float(r[key]) for r in rows] == levels, rows
    assert isinstance(js, list) and len(js) == len(rows), js
    for r, j in zip(rows, js):
        assert list(j.keys()) == KEYS, j
        assert j[key] == pytest.approx(float(r[key]))
        assert j["errors"] == int(r["errors"]) == 0, r
        for k in ("throughput_infer_per_sec", "latency_avg_us", "p50_us", "p90_us", "p95_us",
                  "p99_us"):
            assert float(r[k]) > 0, (k, r)
            assert j[k] > 0, (k, j)
        assert float(r["p50_us"]) <= float(r["p90_us"]) <= float(r["p95_us"]) \
            <= float(r["p99_us"]), r
        assert r["stable"] in ("true", "false") and isinstance(j["stable"], bool), r
        if server_stats:
            # avg_batch = inference_count / execution_count deltas; the two counters are read
            # one after the other, so a snapshot taken between the server's two increments may
            # be off by one inference in thousands: allow 1%.
            assert float(r["avg_batch"]) >= 0.99, r
            assert float(r["server_compute_infer_us"]) > 0, r
            assert float(r["server_success_us"]) > 0, r
            assert j["server_compute_infer_us"] > 0, j
        else:
            assert all(r[k] == "" for k in SERVER_KEYS), r
            assert all(j[k] is None for k in SERVER_KEYS), j


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------------
# Concurrency mode over each protocol.


def require_grpc(srv):
    """As in test_grpc.py: skip without gRPC, fail when DAIS_REQUIRE_GRPC is set."""
    if not srv.grpc_port:
        if os.environ.get("DAIS_REQUIRE_GRPC", "0") != "0":
            pytest.fail("the server logged grpc=0: the gRPC frontend was not built")
        pytest.skip("gRPC frontend not built")


@pytest.mark.parametrize("variant",
                         ["http-json", "http-binary", "grpc", "grpc-stub", "grpc-1-connection"])
def test_concurrency_levels(server, dais_bin, tmp_path, variant):
    if variant.startswith("grpc"):
        require_grpc(server)
        extra = ["-i", "grpc", "-u", f"127.0.0.1:{server.grpc_port}"]
        if variant == "grpc-stub":
            extra.append("--grpc-stub")
        if variant == "grpc-1-connection":  # levels 2 and 4 as HTTP/2 streams on one connection
            extra += ["--grpc-connections", "1"]
    else:
        extra = ["-u", f"127.0.0.1:{server.http_port}"]
        if variant == "http-binary":
            extra.append("--http-binary")
    r = run_perf(dais_bin, "-m", "mlp_small", *extra, *LEVEL_ARGS,
                 "--csv", tmp_path / "out.csv", "--json", tmp_path / "out.json")
    assert r.returncode == 0, explain(r)
    header, rows, js = read_results(tmp_path)
    assert header == CSV_HEADER
    check_level_rows(rows, js, "concurrency", [1, 2, 4])
    assert all(float(row["rate"]) == 0 for row in rows)
    # The human table: a header naming the columns and one row per level.
    assert "concurrency" in r.stdout and "infer/s" in r.stdout and "p99" in r.stdout, r.stdout
    table_rows = [line.split() for line in r.stdout.splitlines()
                  if line.split() and line.split()[0] in ("1", "2", "4")]
    assert [t[0] for t in table_rows] == ["1", "2", "4"], r.stdout
    assert "server statistics unavailable" not in r.stderr


def test_request_rate_levels(server, dais_bin, tmp_path):
    r = run_perf(dais_bin, "-m", "mlp_small", "-u", f"127.0.0.1:{server.http_port}",
                 "--request-rate-range", "100:200:100", "--measurement-interval-ms", "500",
                 "--max-trials", "3", "--warmup-secs", "0.5", "--no-progress",
                 "--csv", tmp_path / "out.csv", "--json", tmp_path / "out.json")
    assert r.returncode == 0, explain(r)
    header, rows, js = read_results(tmp_path)
    assert header == CSV_HEADER
    check_level_rows(rows, js, "rate", [100, 200])
    assert all(int(row["concurrency"]) == 0 for row in rows)
    assert "rate/s" in r.stdout


def test_batch_size_and_input_file(server, dais_bin, tmp_path):
    data = tmp_path / "input.json"
    data.write_text(json.dumps({"data": [{"INPUT__0": [0.5] * 16},
                                         {"INPUT__0": {"content": [[1.0] * 8, [2.0] * 8],
                                                       "shape": [16]}}]}))
    r = run_perf(dais_bin, "-m", "mlp_small", "-u", f"127.0.0.1:{server.http_port}", "-b", 4,
                 "--input-data", data, "--concurrency-range", 2, "--measurement-interval-ms", 300,
                 "--max-trials", 3, "--warmup-secs", 0.2, "--no-progress",
                 "--csv", tmp_path / "out.csv", "--json", tmp_path / "out.json")
    assert r.returncode == 0, explain(r)
    _, rows, js = read_results(tmp_path)
    check_level_rows(rows, js, "concurrency", [2])
    # Every request carries 4 inferences, so the server's batches hold at least 4.
    assert float(rows[0]["avg_batch"]) >= 3.9, rows


# --------------------------------------------------------------------------------------------
# Failures.


def test_unknown_model_fails_naming_it(server, dais_bin):
    r = run_perf(dais_bin, "-m", "no_such_model_xyz", "-u", f"127.0.0.1:{server.http_port}",
                 "--no-progress", timeout=30)
    assert r.returncode != 0, explain(r)
    assert "no_such_model_xyz" in r.stderr, explain(r)


def test_unknown_model_over_grpc(server, dais_bin):
    require_grpc(server)
    r = run_perf(dais_bin, "-m", "no_such_model_xyz", "-i", "grpc",
                 "-u", f"127.0.0.1:{server.grpc_port}", "--no-progress", timeout=30)
    assert r.returncode != 0, explain(r)
    assert "no_such_model_xyz" in r.stderr, explain(r)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_unreachable_server_fails_quickly(dais_bin, protocol):
    port = free_port()
    start = time.monotonic()
    r = run_perf(dais_bin, "-m", "mlp_small", "-i", protocol, "-u", f"127.0.0.1:{port}",
                 "--no-progress", timeout=60)
    elapsed = time.monotonic() - start
    assert r.returncode != 0, explain(r)
    assert "cannot reach" in r.stderr and str(port) in r.stderr, explain(r)
    assert elapsed < 15, f"took {elapsed:.1f} s to give up"


def test_every_request_failing_is_an_error(server, dais_bin, tmp_path):
    # 15 values with a declared shape of [15]: the server rejects every request (400).
    data = tmp_path / "bad.json"
    data.write_text(json.dumps({"data": [{"INPUT__0": {"content": [1.0] * 15, "shape": [15]}}]}))
    r = run_perf(dais_bin, "-m", "mlp_small", "-u", f"127.0.0.1:{server.http_port}",
                 "--input-data", data, "--measurement-interval-ms", 200, "--warmup-secs", 0,
                 "--no-progress", timeout=60)
    assert r.returncode != 0, explain(r)
    assert "every request failed" in r.stderr, explain(r)
    assert r.stderr.count("first error:") == 1, explain(r)


@pytest.mark.parametrize("stub", [False, True])
def test_every_grpc_request_failing_is_an_error(server, dais_bin, tmp_path, stub):
    """The server's gRPC status and message reach the report, from dais perf's own HTTP/2
    client (a Trailers-Only answer) and from grpc++'s stub alike."""
    require_grpc(server)
    data = tmp_path / "bad.json"
    data.write_text(json.dumps({"data": [{"INPUT__0": {"content": [1.0] * 15, "shape": [15]}}]}))
    r = run_perf(dais_bin, "-m", "mlp_small", "-i", "grpc", "-u", f"127.0.0.1:{server.grpc_port}",
                 "--input-data", data, "--measurement-interval-ms", 200, "--warmup-secs", 0,
                 "--no-progress", *(["--grpc-stub"] if stub else []), timeout=60)
    assert r.returncode != 0, explain(r)
    assert "every request failed" in r.stderr, explain(r)
    assert "INVALID_ARGUMENT" in r.stderr and "INPUT__0" in r.stderr, explain(r)


def test_bad_flags(dais_bin):
    r = run_perf(dais_bin, "-m", "m", "--concurrency-range", "4:1", timeout=30)
    assert r.returncode != 0 and "--concurrency-range" in r.stderr, explain(r)
    r = run_perf(dais_bin, "-m", "m", "--concurrency-range", "1:2", "--request-rate-range", "5",
                 timeout=30)
    assert r.returncode != 0, explain(r)
    r = run_perf(dais_bin, "-m", "m", "--grpc-connections", "2", timeout=30)
    assert r.returncode != 0 and "--grpc-connections" in r.stderr, explain(r)
    r = run_perf(dais_bin, "--help", timeout=30)
    assert r.returncode == 0
    for flag in ("--model-name", "--model-version", "--url", "--protocol", "--http-binary",
                 "--batch-size", "--concurrency-range", "--request-rate-range",
                 "--request-distribution", "--input-data", "--seed", "--warmup-secs",
                 "--measurement-interval-ms", "--stability-percentage", "--max-trials", "--csv",
                 "--json", "--no-progress", "--grpc-stub", "--grpc-connections"):
        assert flag in r.stdout, f"--help does not mention {flag}:\n{r.stdout}"


# --------------------------------------------------------------------------------------------
# A KServe v2 server without the statistics and configuration endpoints.


class _StubHandler(BaseHTTPRequestHandler):
    """Model "stub": input IN INT32 [-1, 4], output OUT; no /config, no /stats."""
    protocol_version = "HTTP/1.1"
    requests_seen = 0
    bad_bodies: list = []
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: dict):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        if self.path == "/v2/models/stub":
            self._send(200, {"name": "stub", "versions": ["1"], "platform": "stub",
                             "inputs": [{"name": "IN", "datatype": "INT32", "shape": [-1, 4]}],
                             "outputs": [{"name": "OUT", "datatype": "INT32", "shape": [-1, 4]}]})
        else:
            self._send(404, {"error": f"not found: {self.path}"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v2/models/stub/infer":
            return self._send(404, {"error": "not found"})
        try:
            req = json.loads(body)
            (inp,) = req["inputs"]
            ok = (inp["name"] == "IN" and inp["datatype"] == "INT32" and inp["shape"] == [1, 4]
                  and len(inp["data"]) == 4 and all(0 <= v <= 127 for v in inp["data"]))
        except (ValueError, KeyError, TypeError):
            ok = False
        with _StubHandler.lock:
            _StubHandler.requests_seen += 1
            if not ok:
                _StubHandler.bad_bodies.append(body[:300])
        if not ok:
            return self._send(400, {"error": "unexpected request"})
        self._send(200, {"model_name": "stub", "outputs": [
            {"name": "OUT", "datatype": "INT32", "shape": [1, 4], "data": inp["data"]}]})


@pytest.fixture
def stub_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _StubHandler)
    httpd.daemon_threads = True
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_server_without_statistics(stub_server, dais_bin, tmp_path):
    r = run_perf(dais_bin, "-m", "stub", "-u", f"127.0.0.1:{stub_server}",
                 "--concurrency-range", "1:2", "--measurement-interval-ms", 300,
                 "--max-trials", 3, "--warmup-secs", 0.2, "--no-progress",
                 "--csv", tmp_path / "out.csv", "--json", tmp_path / "out.json", timeout=60)
    assert r.returncode == 0, explain(r)
    assert "server statistics unavailable" in r.stderr, explain(r)
    assert not _StubHandler.bad_bodies, _StubHandler.bad_bodies[:3]
    assert _StubHandler.requests_seen > 0
    _, rows, js = read_results(tmp_path)
    check_level_rows(rows, js, "concurrency", [1, 2], server_stats=False)
