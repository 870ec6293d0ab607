"""TLS on dais serve's listeners (issue 17, docs/tls.md): HTTPS and gRPC over TLS with
tritonserver's flag names, mutual TLS, refusals of bad handshakes (counted, the server keeps
serving), bounded handshakes, and certificate reload under traffic with no failed request.

Certificates are made per module by scripts/make_certs.sh (openssl), as docs/tls.md shows."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import requests

import grpc_client
from conftest import dais_binary, free_port, make_certs
from grpc_client import GrpcClient

X = np.random.default_rng(7).normal(size=(1, 16)).astype(np.float32)


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    return grpc_client.generate_stubs(tmp_path_factory.mktemp("grpc_stubs"))


def tls_args(certs: Path, prefix: str, mutual: bool = False, leaf: str = "server"):
    args = [f"--{prefix}-use-ssl", "true", f"--{prefix}-server-cert", certs / f"{leaf}.crt",
            f"--{prefix}-server-key", certs / f"{leaf}.key"]
    if mutual:
        args += [f"--{prefix}-use-ssl-mutual", "true", f"--{prefix}-root-cert", certs / "ca.crt"]
    return args


def creds(certs: Path, client: str | None = None, ca: str = "ca"):
    key = chain = None
    if client:
        key = (certs / f"{client}.key").read_bytes()
        chain = (certs / f"{client}.crt").read_bytes()
    return grpc.ssl_channel_credentials((certs / f"{ca}.crt").read_bytes(), key, chain)


def metric(srv, name: str, **labels) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in srv.metrics().splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
        if not labels and line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_metric(srv, name, at_least, timeout=10.0, **labels):
    deadline = time.monotonic() + timeout
    while True:
        v = metric(srv, name, **labels)
        if v >= at_least:
            return v
        assert time.monotonic() < deadline, f"{name}{labels} = {v}, expected >= {at_least}\n" \
                                            f"{srv.log_tail(30)}"
        time.sleep(0.05)


def infer_json(srv, **kw):
    body = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 16],
                        "data": X.reshape(-1).tolist()}]}
    return srv.post("/v2/models/mlp_small/infer", json=body, **kw)


def grpc_infer(client: GrpcClient):
    req = client.request("mlp_small", {"INPUT__0": X})
    return client.stub.ModelInfer(req, timeout=10)


def tls_connect(port: int, certs: Path, alpn=None, client=None, ca="ca", host="localhost"):
    """A raw TLS connection (Python's ssl); returns the socket or raises ssl.SSLError."""
    ctx = ssl.create_default_context(cafile=str(certs / f"{ca}.crt"))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    if client:
        ctx.load_cert_chain(certs / f"{client}.crt", certs / f"{client}.key")
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        return ctx.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise


@pytest.fixture(scope="module")
def tls_server(model_repo, certs, start_module_server):
    return start_module_server(model_repo, *tls_args(certs, "http"), *tls_args(certs, "grpc"),
                               "--metrics-port", free_port(),
                               "--tls-handshake-timeout-ms", "700", "--tls-max-handshakes", "8")


def test_https_and_grpc_over_tls_serve_inference(tls_server, certs, stubs):
    r = infer_json(tls_server)
    assert r.status_code == 200, r.text
    assert tls_server.url.startswith("https://")
    c = GrpcClient(stubs, tls_server.grpc_port, credentials=creds(certs))
    try:
        assert c.stub.ServerLive(c.pb.ServerLiveRequest(), timeout=10).live
        out = grpc_infer(c)
        assert out.model_name == "mlp_small" and out.raw_output_contents
    finally:
        c.close()
    # Both handshakes counted; the expiry gauge is the certificate's notAfter.
    assert metric(tls_server, "dais_tls_handshakes_total", listener="http") >= 1
    assert metric(tls_server, "dais_tls_handshakes_total", listener="grpc") >= 1
    not_after = ssl.cert_time_to_seconds(
        ssl._ssl._test_decode_cert(str(certs / "server.crt"))["notAfter"])
    assert metric(tls_server, "dais_tls_certificate_expiry_timestamp_seconds",
                  listener="grpc") == pytest.approx(not_after, abs=1)
    with tls_connect(tls_server.grpc_port, certs, alpn=["h2"]) as s:
        assert s.version() in ("TLSv1.2", "TLSv1.3") and s.selected_alpn_protocol() == "h2"
    with tls_connect(tls_server.http_port, certs, alpn=["h2", "http/1.1"]) as s:
        assert s.selected_alpn_protocol() == "http/1.1"


def test_old_protocols_and_plain_text_are_refused_and_counted(tls_server, certs):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs / "ca.crt")
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", tls_server.http_port), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            ctx.wrap_socket(raw, server_hostname="localhost")
    wait_metric(tls_server, "dais_tls_handshake_failures_total", 1, listener="http",
                reason="protocol_version")
    # Plain HTTP on the HTTPS port: a readable 400 (as nginx's 497), counted.
    r = requests.get(f"http://127.0.0.1:{tls_server.http_port}/v2/health/ready", timeout=10)
    assert r.status_code == 400 and "HTTPS port" in r.text, r.text
    wait_metric(tls_server, "dais_tls_handshake_failures_total", 1, listener="http",
                reason="http_request")
    # A plain-text gRPC client on the TLS gRPC port: refused, counted as not_tls.
    ch = grpc.insecure_channel(f"127.0.0.1:{tls_server.grpc_port}")
    with pytest.raises(grpc.FutureTimeoutError):
        grpc.channel_ready_future(ch).result(timeout=2)
    ch.close()
    wait_metric(tls_server, "dais_tls_handshake_failures_total", 1, listener="grpc",
                reason="not_tls")
    # A TLS client on the plain metrics port.
    with socket.create_connection(("127.0.0.1", tls_server.metrics_port), timeout=10) as raw:
        ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            ctx.wrap_socket(raw, server_hostname="localhost")
    wait_metric(tls_server, "dais_tls_handshake_failures_total", 1, listener="metrics",
                reason="tls_on_plain_port")
    # ALPN without h2 on the gRPC port.
    with pytest.raises(ssl.SSLError):
        tls_connect(tls_server.grpc_port, certs, alpn=["http/1.1"])
    wait_metric(tls_server, "dais_tls_handshake_failures_total", 1, listener="grpc",
                reason="alpn")
    # A client that does not trust the server's CA: its alert is counted.
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_connect(tls_server.grpc_port, certs, alpn=["h2"], ca="other-ca")
    wait_metric(tls_server, "dais_tls_handshake_failures_total", 1, listener="grpc",
                reason="peer_rejected_certificate")
    assert "TLS handshake on grpc from 127.0.0.1 failed" in tls_server.log_text()
    assert infer_json(tls_server).status_code == 200  # still serving


def test_stalled_and_flooding_handshakes_are_bounded(tls_server, certs, stubs):
    c = GrpcClient(stubs, tls_server.grpc_port, credentials=creds(certs))
    try:
        grpc_infer(c)  # established before the flood
        evicted = metric(tls_server, "dais_tls_handshake_failures_total", listener="grpc",
                         reason="evicted")
        silent = metric(tls_server, "dais_tls_handshake_failures_total", listener="grpc",
                        reason="silent_timeout")
        # 20 connections that never send a ClientHello: 8 hold the handshake slots, each later
        # one closes the oldest silent one for itself (issue 32: they used to be refused, and
        # the silent ones kept every slot for the whole handshake timeout); the last 8 are
        # closed when their first byte does not come.
        flood = [socket.create_connection(("127.0.0.1", tls_server.grpc_port)) for _ in range(20)]
        wait_metric(tls_server, "dais_tls_handshake_failures_total", evicted + 12,
                    listener="grpc", reason="evicted")
        for _ in range(20):
            assert grpc_infer(c).raw_output_contents  # the established channel is not starved
        wait_metric(tls_server, "dais_tls_handshake_failures_total", silent + 8, listener="grpc",
                    reason="silent_timeout")
        for s in flood:
            s.settimeout(5)
            assert s.recv(1) == b"", "a stalled handshake was not closed"
            s.close()
        # With the slots free again, new clients connect.
        c2 = GrpcClient(stubs, tls_server.grpc_port, credentials=creds(certs))
        grpc_infer(c2)
        c2.close()
    finally:
        c.close()


def test_silent_connections_do_not_lock_tls_clients_out(tls_server, certs, stubs):
    """Issue 32: ~260 connections that never sent a ClientHello held the 256 handshake slots and
    new TLS clients were reset (1 of 8 probes answered). Each new client now closes the oldest
    silent handshake; every probe is answered while the silent connections keep coming."""
    for port, listener in ((tls_server.http_port, "http"), (tls_server.grpc_port, "grpc")):
        before = metric(tls_server, "dais_tls_handshake_failures_total", listener=listener,
                        reason="evicted")
        flood = []
        try:
            for i in range(8):
                flood += [socket.create_connection(("127.0.0.1", port)) for _ in range(12)]
                if listener == "http":
                    r = requests.get(f"https://localhost:{port}/v2/health/live",
                                     verify=str(certs / "ca.crt"), timeout=10)
                    assert r.status_code == 200
                else:
                    probe = GrpcClient(stubs, port, credentials=creds(certs),
                                       options=[("grpc.use_local_subchannel_pool", 1)])
                    assert probe.stub.ServerLive(probe.pb.ServerLiveRequest(), timeout=10).live
                    probe.close()
            assert metric(tls_server, "dais_tls_handshake_failures_total", listener=listener,
                          reason="evicted") >= before + 8
        finally:
            for s in flood:
                s.close()


def test_mutual_tls(model_repo, certs, stubs, start_server):
    srv = start_server(model_repo, *tls_args(certs, "http", mutual=True),
                       *tls_args(certs, "grpc", mutual=True))
    assert infer_json(srv).status_code == 200  # conftest presents client.crt
    with pytest.raises(requests.exceptions.SSLError):
        infer_json(srv, cert=None)
    wait_metric(srv, "dais_tls_handshake_failures_total", 1, listener="http",
                reason="no_client_certificate")
    good = GrpcClient(stubs, srv.grpc_port, credentials=creds(certs, client="client"))
    assert grpc_infer(good).raw_output_contents
    good.close()
    for client, reason in ((None, "no_client_certificate"), ("other", "unknown_ca")):
        with pytest.raises((grpc.FutureTimeoutError, grpc.RpcError)):
            GrpcClient(stubs, srv.grpc_port, connect_timeout=2,
                       credentials=creds(certs, client=client))
        wait_metric(srv, "dais_tls_handshake_failures_total", 1, listener="grpc", reason=reason)
    assert infer_json(srv).status_code == 200


def test_bad_certificate_at_start_is_a_clear_error(model_repo, certs, tmp_path):
    for leaf, words in (("expired", "has expired"), ("future", "not valid yet")):
        r = subprocess.run([str(dais_binary()), "serve", "--model-repository", str(model_repo),
                            "--http-port", "0", "--grpc-port", "0",
                            *map(str, tls_args(certs, "grpc", leaf=leaf))],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0
        assert words in r.stderr + r.stdout and f"{leaf}.crt" in r.stderr + r.stdout, r.stderr
    r = subprocess.run([str(dais_binary()), "serve", "--model-repository", str(model_repo),
                        "--http-port", "0", "--grpc-port", "0", "--grpc-use-ssl", "true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--grpc-server-cert" in r.stderr + r.stdout, r.stderr


EXPIRED_REFUSED = (r"TLS on http: reload \((SIGHUP|file change)\) refused, keeping the current "
                   r"certificate: .*has expired")


def served_serial(port: int, certs: Path) -> int:
    with tls_connect(port, certs, alpn=["h2"]) as s:
        return int(s.getpeercert()["serialNumber"], 16)


def file_serial(path: Path) -> int:
    out = subprocess.run(["openssl", "x509", "-in", str(path), "-noout", "-serial"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.strip().split("=")[1], 16)


def test_reload_under_traffic_drops_nothing(model_repo, certs, stubs, start_server, tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(certs / "server.crt", live / "tls.crt")
    shutil.copy(certs / "server.key", live / "tls.key")
    shutil.copy(certs / "ca.crt", live / "ca.crt")
    args = ["--use-ssl", "true", "--server-cert", live / "tls.crt", "--server-key",
            live / "tls.key"]
    srv = start_server(model_repo, *[a.replace("--", "--http-", 1) if isinstance(a, str) else a
                                     for a in args],
                       *[a.replace("--", "--grpc-", 1) if isinstance(a, str) else a
                         for a in args])
    assert served_serial(srv.grpc_port, certs) == file_serial(certs / "server.crt")

    stop = threading.Event()
    failures, counts = [], {"http": 0, "grpc": 0}

    def http_traffic():
        with requests.Session() as s:  # keep-alive: its connection outlives the reloads
            while not stop.is_set():
                try:
                    r = infer_json(srv) if counts["http"] % 2 else \
                        s.post(srv.url + "/v2/models/mlp_small/infer", verify=srv.verify,
                               timeout=10, json={"inputs": [{"name": "INPUT__0",
                                                             "datatype": "FP32",
                                                             "shape": [1, 16],
                                                             "data": X.reshape(-1).tolist()}]})
                    if r.status_code != 200:
                        failures.append(f"http {r.status_code}")
                except Exception as e:  # noqa: BLE001 - every failure counts
                    failures.append(f"http {e!r}")
                counts["http"] += 1

    def grpc_traffic():
        c = GrpcClient(stubs, srv.grpc_port, credentials=creds(certs))
        while not stop.is_set():
            try:
                grpc_infer(c)
            except Exception as e:  # noqa: BLE001
                failures.append(f"grpc {e!r}")
            counts["grpc"] += 1
        c.close()

    threads = [threading.Thread(target=http_traffic), threading.Thread(target=grpc_traffic)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        # A renewal written over the files: picked up on its own (file change).
        shutil.copy(certs / "server2.key", live / "tls.key.new")
        shutil.copy(certs / "server2.crt", live / "tls.crt.new")
        (live / "tls.key.new").rename(live / "tls.key")
        (live / "tls.crt.new").rename(live / "tls.crt")
        wait_metric(srv, "dais_tls_certificate_reloads_total", 1, listener="grpc", result="ok")
        srv.wait_until(lambda: served_serial(srv.grpc_port, certs) ==
                       file_serial(certs / "server2.crt"), 10, "the renewed certificate served")
        # A bad one (expired) then SIGHUP: refused, logged, the renewal kept.
        shutil.copy(certs / "expired.key", live / "tls.key")
        shutil.copy(certs / "expired.crt", live / "tls.crt")
        srv.signal(signal.SIGHUP)
        srv.wait_until(lambda: re.search(EXPIRED_REFUSED, srv.log_text()), 10,
                       "the expired certificate refused")
        time.sleep(0.3)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not failures, failures[:5]
    assert counts["http"] > 10 and counts["grpc"] > 10, counts
    assert served_serial(srv.grpc_port, certs) == file_serial(certs / "server2.crt")
    assert metric(srv, "dais_tls_certificate_reloads_total", listener="http", result="error") >= 1
    assert srv.running()


def test_dais_perf_over_tls(tls_server, certs, dais_bin):
    """dais perf with perf_analyzer's --ssl-* flags, over HTTPS and gRPC over TLS (its own
    HTTP/2 connection and the grpc++ stub); a CA it does not trust is a clear error."""
    base = [str(dais_bin), "perf", "-m", "mlp_small", "--concurrency-range", "2",
            "--measurement-interval-ms", "300", "--max-trials", "2", "--no-progress"]
    runs = {
        "https": ["-u", f"https://localhost:{tls_server.http_port}",
                  "--ssl-https-ca-certificates-file", certs / "ca.crt"],
        "grpc": ["-i", "grpc", "-u", f"localhost:{tls_server.grpc_port}", "--ssl-grpc-use-ssl",
                 "--ssl-grpc-root-certifications-file", certs / "ca.crt"],
        "grpc-stub": ["-i", "grpc", "--grpc-stub", "-u", f"grpcs://localhost:{tls_server.grpc_port}",
                      "--ssl-grpc-root-certifications-file", certs / "ca.crt"],
    }
    for name, args in runs.items():
        r = subprocess.run(base + [str(a) for a in args], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, f"{name}: {r.stdout}\n{r.stderr}"
        row = [line for line in r.stdout.splitlines() if line.strip().startswith("2 ")]
        assert row and float(row[0].split()[1]) > 0, f"{name}: {r.stdout}"
        assert int(row[0].split()[7]) == 0, f"{name}: errors in {row[0]}"
    r = subprocess.run(base + ["-u", f"https://localhost:{tls_server.http_port}",
                               "--ssl-https-ca-certificates-file", str(certs / "other-ca.crt")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "TLS handshake" in r.stderr + r.stdout \
        and "unknown_ca" in r.stderr + r.stdout, r.stderr


def test_metrics_port_over_tls(model_repo, certs, start_server):
    """--metrics-use-ssl: the separate metrics port speaks HTTPS (Prometheus scrapes it with
    scheme: https and the CA); plain HTTP to it gets the readable 400."""
    srv = start_server(model_repo, "--metrics-port", free_port(), *tls_args(certs, "metrics"))
    r = requests.get(f"https://localhost:{srv.metrics_port}/metrics", timeout=10,
                     verify=str(certs / "ca.crt"))
    assert r.status_code == 200 and "dais_tls_handshakes_total" in r.text, r.text[:300]
    r = requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10)
    assert r.status_code == 400 and "HTTPS port" in r.text
