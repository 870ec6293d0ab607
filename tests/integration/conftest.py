"""Fixtures for dais's integration tests: a generated model repository, a way to start the real
server binary on it, and small KServe v2 client helpers.

Run: /usr/bin/python3 -m pytest tests/integration -q
Env: DAIS_BIN (default <repo>/build/release/src/cmd/dais); when the binary is missing the tests
are skipped, unless DAIS_REQUIRE_BIN=1, in which case they fail.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import shutil
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
GEN_MODELS = REPO_ROOT / "scripts" / "gen_models.py"
PORTS_RE = re.compile(r"ports: http=(\d+) metrics=(\d+) grpc=(\d+)")
START_TIMEOUT_S = 60.0
HTTP_TIMEOUT_S = 30.0
MODELS = ("mlp_small", "mlp_heavy", "xgb_binary", "xgb_multiclass")

_LIVE_SERVERS: list["DaisServer"] = []
_LIVE_REDIS: list["RedisServer"] = []


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes tens of seconds (still runs by default)")


# --------------------------------------------------------------------------------------------
# Printing the server's log when a test fails.


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when in ("setup", "call"):
        for srv in list(_LIVE_SERVERS):
            report.sections.append(
                (f"dais log ({srv.describe()}), last 150 lines", srv.log_tail(150)))
        for rs in list(_LIVE_REDIS):
            report.sections.append((f"redis-server log (port {rs.port}), last 30 lines",
                                    rs.log_tail(30)))


# --------------------------------------------------------------------------------------------
# Generated models.


def load_gen_models():
    """scripts/gen_models.py as a module (builders for new model versions)."""
    spec = importlib.util.spec_from_file_location("dais_gen_models", GEN_MODELS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def gen_models():
    return load_gen_models()


@pytest.fixture(scope="session")
def model_repo(tmp_path_factory) -> Path:
    """The generated repository, shared by the whole session: do not modify it (use repo_copy)."""
    out = tmp_path_factory.mktemp("models") / "repo"
    r = subprocess.run([sys.executable, str(GEN_MODELS), str(out)], capture_output=True,
                       text=True, timeout=180)
    if r.returncode != 0:
        pytest.fail(f"gen_models.py failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    print(r.stdout)
    return out


@pytest.fixture
def repo_copy(model_repo, tmp_path) -> Path:
    """A private copy of the repository that the test may change."""
    dst = tmp_path / "repo"
    shutil.copytree(model_repo, dst)
    return dst


class References:
    """Expected outputs, computed with torch / xgboost from the very files the server loads."""

    def __init__(self):
        self._cache = {}

    def torch(self, model_file: Path, x: np.ndarray) -> np.ndarray:
        import torch
        key = ("torch", str(model_file), os.stat(model_file).st_mtime_ns)
        if key not in self._cache:
            self._cache[key] = torch.jit.load(str(model_file)).eval()
        with torch.no_grad():
            return self._cache[key](torch.from_numpy(np.ascontiguousarray(x, np.float32))).numpy()

    def mlp(self, repo: Path, model: str, x: np.ndarray, version: int = 1) -> np.ndarray:
        return self.torch(Path(repo) / model / str(version) / "model.pt", x)

    def xgb(self, repo: Path, model: str, x: np.ndarray, version: int = 1) -> np.ndarray:
        import xgboost
        path = Path(repo) / model / str(version) / "xgboost.json"
        key = ("xgb", str(path))
        if key not in self._cache:
            self._cache[key] = xgboost.Booster(model_file=str(path))
        return self._cache[key].predict(xgboost.DMatrix(np.asarray(x, np.float32)))


@pytest.fixture(scope="session")
def refs() -> References:
    return References()


# --------------------------------------------------------------------------------------------
# The server.


def dais_binary() -> Path:
    env = os.environ.get("DAIS_BIN")
    path = Path(env) if env else REPO_ROOT / "build" / "release" / "src" / "cmd" / "dais"
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not (path.is_file() and os.access(path, os.X_OK)):
        msg = f"dais binary not found at {path} (set DAIS_BIN)"
        if os.environ.get("DAIS_REQUIRE_BIN") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def dais_bin() -> Path:
    return dais_binary()


class ServerStartError(Exception):
    pass


class DaisServer:
    """One `dais serve` subprocess. Output (stdout and stderr) goes to a log file."""

    def __init__(self, repo: Path, extra_args=(), log_dir: Path | None = None,
                 wait_ready: bool = True, env: dict | None = None, command: str = "serve"):
        self.repo = Path(repo)
        self.extra_args = [str(a) for a in extra_args]
        self.log_dir = Path(log_dir or self.repo.parent)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"dais-{time.monotonic_ns()}.log"
        ports = [a for flag in ("--http-port", "--metrics-port", "--grpc-port")
                 if flag not in self.extra_args for a in (flag, "0")]
        self.args = [str(dais_binary()), command, "--model-repository", str(self.repo),
                     *ports, *self.extra_args]
        self.http_port = self.metrics_port = self.grpc_port = None
        # HTTPS (--http-use-ssl): requests verify against the CA beside the server certificate
        # (scripts/make_certs.sh puts ca.crt there) and, under mutual TLS, present client.crt.
        self.scheme, self.verify, self.cert = "http", True, None
        if "--http-use-ssl" in self.extra_args or "--http-use-ssl-mutual" in self.extra_args:
            cert_dir = Path(self.extra_args[self.extra_args.index("--http-server-cert") + 1]).parent
            self.scheme, self.verify = "https", str(cert_dir / "ca.crt")
            if "--http-use-ssl-mutual" in self.extra_args:
                self.cert = (str(cert_dir / "client.crt"), str(cert_dir / "client.key"))
        self.returncode = None
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env)
        _LIVE_SERVERS.append(self)
        try:
            self._wait_started(wait_ready)
        except BaseException:
            self.stop()
            raise

    # -- lifecycle -------------------------------------------------------------------------

    def describe(self) -> str:
        return f"pid {self.proc.pid}, http {self.http_port}, args {' '.join(self.args[2:])}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError as e:
            return f"<cannot read {self.log_path}: {e}>"

    def log_tail(self, n: int = 100) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def _fail(self, why: str):
        raise ServerStartError(f"{why}\ncommand: {' '.join(self.args)}\n--- server log ---\n"
                               f"{self.log_tail(200)}")

    def _wait_started(self, wait_ready: bool):
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            m = PORTS_RE.search(self.log_text())
            if m:
                self.http_port, self.metrics_port, self.grpc_port = map(int, m.groups())
                break
            if self.proc.poll() is not None:
                self._fail(f"dais exited with {self.proc.returncode} before printing its ports")
            if time.monotonic() > deadline:
                self._fail(f"no line matching {PORTS_RE.pattern!r} within {START_TIMEOUT_S} s")
            time.sleep(0.05)
        path = "/v2/health/ready" if wait_ready else "/v2/health/live"
        last = None
        while True:
            try:
                last = requests.get(self.url + path, timeout=5, verify=self.verify,
                                    cert=self.cert).status_code
                # (403: answering, with health behind --http-restricted-api.)
                if last == 200 or (not wait_ready and last == 403):
                    return
            except requests.RequestException as e:
                last = repr(e)
            if self.proc.poll() is not None:
                self._fail(f"dais exited with {self.proc.returncode} while waiting for {path}")
            if time.monotonic() > deadline:
                self._fail(f"GET {path} not 200 within {START_TIMEOUT_S} s (last: {last})")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig=signal.SIGTERM):
        if self.running():
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        self.returncode = self.proc.wait(timeout=timeout)
        return self.returncode

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait, SIGKILL if it does not exit. Returns the exit status."""
        try:
            if self.running():
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    print(f"dais pid {self.pid} ignored SIGTERM for {timeout} s: SIGKILL")
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            self.returncode = self.proc.returncode
            return self.returncode
        finally:
            self._log.close()
            if self in _LIVE_SERVERS:
                _LIVE_SERVERS.remove(self)

    def rss_kib(self) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    # -- HTTP --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host = "localhost" if self.scheme == "https" else "127.0.0.1"
        return f"{self.scheme}://{host}:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        if not self.metrics_port or self.metrics_port == self.http_port:
            return self.url + "/metrics"
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def get(self, path: str, **kw) -> requests.Response:
        kw.setdefault("timeout", HTTP_TIMEOUT_S)
        kw.setdefault("verify", self.verify)
        kw.setdefault("cert", self.cert)
        return requests.get(self.url + path, **kw)

    def post(self, path: str, **kw) -> requests.Response:
        kw.setdefault("timeout", HTTP_TIMEOUT_S)
        kw.setdefault("verify", self.verify)
        kw.setdefault("cert", self.cert)
        return requests.post(self.url + path, **kw)

    def metrics(self) -> str:
        r = requests.get(self.metrics_url, timeout=HTTP_TIMEOUT_S, verify=self.verify,
                         cert=self.cert)
        assert r.status_code == 200, f"GET {self.metrics_url}: {r.status_code} {r.text[:300]}"
        return r.text

    def infer(self, model: str, inputs, version=None, **kw) -> requests.Response:
        """POST a JSON inference request. `inputs`: {name: ndarray} or a list of input objects;
        extra keyword arguments (outputs=, id=, parameters=) go into the body."""
        body = infer_body(inputs, **kw)
        return self.post(model_path(model, version) + "/infer", json=body)

    def index(self, ready: bool | None = None) -> list[dict]:
        body = {} if ready is None else {"ready": ready}
        r = self.post("/v2/repository/index", json=body)
        assert r.status_code == 200, f"repository index: {r.status_code} {r.text}"
        return r.json()

    def index_entry(self, model: str) -> dict | None:
        """The index entry for `model` (the READY one if several versions are listed)."""
        entries = [e for e in self.index() if e.get("name") == model]
        for e in entries:
            if e.get("state") == "READY":
                return e
        return entries[0] if entries else None

    def model_ready(self, model: str) -> bool:
        return self.get(f"/v2/models/{model}/ready").status_code == 200

    def stats(self, model: str, version=None) -> dict:
        r = self.get(model_path(model, version) + "/stats")
        assert r.status_code == 200, f"stats: {r.status_code} {r.text}"
        stats = r.json()["model_stats"]
        assert len(stats) >= 1, stats
        return stats[0]

    def wait_until(self, pred, timeout: float, what: str, interval: float = 0.1):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = pred()
                if last:
                    return last
            except (requests.RequestException, AssertionError, KeyError, ValueError) as e:
                last = repr(e)
            if not self.running():
                raise AssertionError(f"dais exited ({self.proc.returncode}) waiting for {what}")
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")

    def wait_models_settled(self, models, timeout: float = 60.0) -> dict:
        """Waits until every model in `models` is in the index as READY or UNAVAILABLE (no
        longer loading); returns {name: entry}."""
        def settled():
            by_name = {}
            for e in self.index():
                if e.get("name") in models:
                    prev = by_name.get(e["name"])
                    if prev is None or e.get("state") == "READY":
                        by_name[e["name"]] = e
            ok = all(by_name.get(m, {}).get("state") in ("READY", "UNAVAILABLE") for m in models)
            return by_name if ok else None
        return self.wait_until(settled, timeout, f"models {models} to settle")


@pytest.fixture
def start_server(tmp_path):
    """start_server(repo, *extra_args, wait_ready=True) -> DaisServer; stopped at teardown."""
    started: list[DaisServer] = []

    def start(repo, *extra_args, wait_ready=True, env=None, command="serve") -> DaisServer:
        dais_binary()
        try:
            srv = DaisServer(repo, extra_args, log_dir=tmp_path / "logs", wait_ready=wait_ready,
                             env=env, command=command)
        except ServerStartError as e:
            pytest.fail(str(e), pytrace=False)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        rc = srv.stop()
        print(f"dais pid {srv.pid} exit status {rc}; log {srv.log_path}:\n{srv.log_tail(60)}")


@pytest.fixture(scope="session")
def server(model_repo, tmp_path_factory) -> DaisServer:
    """One server on the generated repository shared by the read-mostly tests."""
    dais_binary()
    try:
        srv = DaisServer(model_repo, (), log_dir=tmp_path_factory.mktemp("shared-logs"))
    except ServerStartError as e:
        pytest.fail(str(e), pytrace=False)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def start_module_server(tmp_path_factory):
    """start_server for module-scoped fixtures: the servers live until the module ends."""
    started: list[DaisServer] = []
    log_dir = tmp_path_factory.mktemp("module-logs")

    def start(repo, *extra_args, wait_ready=True, env=None, command="serve") -> DaisServer:
        dais_binary()
        try:
            srv = DaisServer(repo, extra_args, log_dir=log_dir, wait_ready=wait_ready, env=env,
                             command=command)
        except ServerStartError as e:
            pytest.fail(str(e), pytrace=False)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        rc = srv.stop()
        print(f"dais pid {srv.pid} exit status {rc}; log {srv.log_path}:\n{srv.log_tail(60)}")


# --------------------------------------------------------------------------------------------
# Redis: real redis-server processes on free loopback ports (no mocks), a 3-master Redis Cluster
# made with `redis-cli --cluster create`, and a small RESP2 client (python3-redis is not
# installed). redis-server / redis-cli missing is a failure, not a skip.

REDIS_START_TIMEOUT_S = 15.0


def redis_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: the feature store tests need real Redis "
                    "(apt-get install redis-server redis-tools)", pytrace=False)
    return path


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def make_certs(directory: Path) -> Path:
    """A CA and certificates made by scripts/make_certs.sh (openssl) in `directory`: ca.crt,
    server.crt/.key (localhost, 127.0.0.1), server2, client, expired, future, other-ca, other."""
    subprocess.run([str(REPO_ROOT / "scripts" / "make_certs.sh"), str(directory)], check=True,
                   capture_output=True, timeout=60)
    return Path(directory)


def free_port(cluster_bus: bool = False) -> int:
    """A loopback TCP port that is free now (for a cluster node, port + 10000 too, its bus)."""
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(500):
        port = rng.randrange(20000, 45000)
        if _bindable(port) and (not cluster_bus or _bindable(port + 10000)):
            return port
    raise RuntimeError("no free loopback port")


class RespError(Exception):
    """A Redis error reply (-ERR ..., -MOVED ..., -ASK ...)."""


class Resp:
    """One RESP2 connection: call(*args) sends a command and returns the decoded reply (bytes
    for bulk strings, str for simple strings, int, list, None), raising RespError for errors."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0, ssl_ctx=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_ctx is not None:
            self.sock = ssl_ctx.wrap_socket(self.sock, server_hostname="localhost")
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def encode(args) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            elif isinstance(a, int):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ValueError(f"bad RESP line {line!r}")

    def call(self, *args):
        self.sock.sendall(self.encode(args))
        reply = self.read()
        if isinstance(reply, RespError):
            raise reply
        return reply


def redis_call(port: int, *args, timeout: float = 5.0, ssl_ctx=None):
    """One command on a fresh connection (over TLS with ssl_ctx)."""
    with Resp(port, timeout=timeout, ssl_ctx=ssl_ctx) as c:
        return c.call(*args)


class RedisServer:
    """One redis-server process, no persistence, on 127.0.0.1:port (a free port if None)."""

    def __init__(self, data_dir: Path, port: int | None = None, cluster: bool = False,
                 tls: Path | None = None):
        """tls: a directory made by scripts/make_certs.sh: the server listens with TLS only
        (tls-port; client certificates optional) and, in a cluster, its bus speaks TLS too."""
        self.cluster = cluster
        self.tls = Path(tls) if tls else None
        self.ssl_ctx = None
        if self.tls:
            import ssl
            self.ssl_ctx = ssl.create_default_context(cafile=str(self.tls / "ca.crt"))
        self.port = port or free_port(cluster_bus=cluster)
        self.dir = Path(data_dir) / f"redis-{self.port}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / "redis.log"
        self.proc = None
        self.start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def args(self) -> list[str]:
        a = [redis_tool("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.dir),
             "--logfile", str(self.log_path)]
        if self.tls:
            a[2] = "0"
            a += ["--tls-port", str(self.port), "--tls-cert-file", str(self.tls / "server.crt"),
                  "--tls-key-file", str(self.tls / "server.key"),
                  "--tls-ca-cert-file", str(self.tls / "ca.crt"),
                  "--tls-auth-clients", "optional"]
            if self.cluster:
                a += ["--tls-cluster", "yes"]
        if self.cluster:
            a += ["--cluster-enabled", "yes",
                  "--cluster-config-file", str(self.dir / f"nodes-{self.port}.conf"),
                  "--cluster-node-timeout", "5000"]
        return a

    def start(self):
        """Starts (or restarts, on the same port) and waits for PING."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        if self not in _LIVE_REDIS:
            _LIVE_REDIS.append(self)
        deadline = time.monotonic() + REDIS_START_TIMEOUT_S
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server on port {self.port} exited with "
                                   f"{self.proc.returncode}:\n{self.log_tail(30)}")
            try:
                if redis_call(self.port, "PING", timeout=1, ssl_ctx=self.ssl_ctx) == "PONG":
                    return
            except (OSError, RespError, ConnectionError) as e:
                last = e
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING within "
                           f"{REDIS_START_TIMEOUT_S} s ({last!r}):\n{self.log_tail(30)}")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL (a crash: nothing is saved, clients see the connection drop)."""
        if self.running():
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self):
        if self.running():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self in _LIVE_REDIS:
            _LIVE_REDIS.remove(self)

    def call(self, *args):
        return redis_call(self.port, *args, ssl_ctx=self.ssl_ctx)

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError as e:
            return f"<cannot read {self.log_path}: {e}>"


class RedisCluster:
    """Three masters (no replicas) joined by `redis-cli --cluster create`."""

    def __init__(self, data_dir: Path, masters: int = 3, tls: Path | None = None):
        self.nodes: list[RedisServer] = []
        try:
            for _ in range(masters):
                self.nodes.append(RedisServer(data_dir, cluster=True, tls=tls))
            tls_args = ["--tls", "--cacert", str(Path(tls) / "ca.crt")] if tls else []
            r = subprocess.run([redis_tool("redis-cli"), *tls_args, "--cluster", "create",
                                *[n.addr for n in self.nodes], "--cluster-yes"],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed ({r.returncode}):\n"
                                   f"{r.stdout}\n{r.stderr}")
            self.wait_ok()
        except BaseException:
            self.stop()
            raise

    def wait_ok(self, timeout: float = 30.0):
        """Until every node says cluster_state:ok and they all agree on who owns which slot."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                states = [n.call("CLUSTER", "INFO").decode() for n in self.nodes]
                ok = all("cluster_state:ok" in s for s in states)
                views = {tuple(sorted((s[0], s[1], s[2][1]) for s in n.call("CLUSTER", "SLOTS")))
                         for n in self.nodes}
                if ok and len(views) == 1:
                    return
                last = (states, len(views))
            except (OSError, RespError, ConnectionError) as e:
                last = e
            time.sleep(0.1)
        raise RuntimeError(f"cluster not ok within {timeout} s: {last!r}")

    @property
    def seeds(self) -> str:
        return ",".join(n.addr for n in self.nodes)

    def node_id(self, node: RedisServer) -> str:
        return node.call("CLUSTER", "MYID").decode()

    def keyslot(self, key) -> int:
        return self.nodes[0].call("CLUSTER", "KEYSLOT", key)

    def owner(self, slot: int) -> RedisServer:
        for start, end, master, *_ in self.nodes[0].call("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                port = master[1]
                return next(n for n in self.nodes if n.port == port)
        raise AssertionError(f"no node owns slot {slot}")

    def owner_of_key(self, key) -> RedisServer:
        return self.owner(self.keyslot(key))

    def call_key(self, key, *args):
        """A command on the node that owns `key` (no redirections)."""
        return self.owner_of_key(key).call(*args)

    def stop(self):
        for n in self.nodes:
            n.stop()


@pytest.fixture
def start_redis(tmp_path):
    """start_redis(port=None) -> RedisServer; stopped at teardown."""
    started: list[RedisServer] = []

    def start(port=None) -> RedisServer:
        try:
            rs = RedisServer(tmp_path / "redis", port=port)
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
        started.append(rs)
        return rs

    yield start
    for rs in started:
        rs.stop()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """One standalone redis-server shared by a module."""
    try:
        rs = RedisServer(tmp_path_factory.mktemp("redis"))
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    yield rs
    rs.stop()


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    """A 3-master Redis Cluster shared by a module."""
    try:
        cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    yield cluster
    cluster.stop()


# --------------------------------------------------------------------------------------------
# Feature store helpers.

# The example spec: mlp_small's INPUT__0 [16] = user_profile age (1) + clicks (15).
SHOP_SPEC = """\
domain: shop
entities: [{{name: user_id, key_type: int64}}]
feature_groups:
  - name: user_profile
    entity: user_id
    version: {version}
    max_age: 1h
    ttl: {ttl}
    features:
      - {{name: age, dtype: FP32, default: {age_default}}}
      - {{name: clicks, dtype: FP32, shape: [15], default: 0}}
{extra}"""
SHOP_MODEL_INPUTS = """\
inputs: [{name: INPUT__0, features: [user_profile:age, user_profile:clicks]}]
"""


def shop_spec(version: int = 1, ttl: str = "7d", age_default: float = 0, model: bool = False,
              entity_input: str | None = "USER_ID") -> str:
    extra = ""
    if model:
        extra = SHOP_MODEL_INPUTS
        if entity_input:
            extra += f"entity_input: {entity_input}\n"
    return SHOP_SPEC.format(version=version, ttl=ttl, age_default=age_default, extra=extra)


def add_feature_model(model_repo: Path, repo: Path, name: str, spec_text: str,
                      source: str = "mlp_small") -> Path:
    """Copies `source` from the generated repository into `repo` as `name` (renamed in its
    config.pbtxt) with `spec_text` as its features.yaml. Returns the model directory."""
    d = Path(repo) / name
    shutil.copytree(Path(model_repo) / source, d)
    cfg = d / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace(f'name: "{source}"', f'name: "{name}"'))
    (d / "features.yaml").write_text(spec_text)
    return d


def iso(unix_s: float) -> str:
    """ISO-8601 UTC with seconds, as the Feast API prints event timestamps."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(unix_s)))


def push(srv, group: str, df: dict, project: str | None = None, expect: int = 200) -> dict:
    """POST /push; asserts the status and returns the JSON body."""
    body = {"push_source_name": group, "df": df, "to": "online"}
    if project is not None:
        body["project"] = project
    r = srv.post("/push", json=body, timeout=10)
    assert r.status_code == expect, f"/push {r.status_code}: {r.text[:500]}"
    return r.json()


def get_online(srv, features=None, entities=None, project=None, service=None,
               full_names=None, expect: int = 200, timeout: float = 10):
    """POST /get-online-features; asserts the status and returns the JSON body."""
    body = {"entities": entities}
    if features is not None:
        body["features"] = features
    if service is not None:
        body["feature_service"] = service
    if project is not None:
        body["project"] = project
    if full_names is not None:
        body["full_feature_names"] = full_names
    r = srv.post("/get-online-features", json=body, timeout=timeout)
    assert r.status_code == expect, f"/get-online-features {r.status_code}: {r.text[:500]}"
    return r.json()


def feast_columns(body: dict) -> dict[str, dict]:
    """{column name: {"values", "statuses", "event_timestamps"}} of a Feast response, checking
    its shape (one result per name, every column as long as the first)."""
    names = body["metadata"]["feature_names"]
    results = body["results"]
    assert len(names) == len(results), body
    n = len(results[0]["values"])
    cols = {}
    for name, res in zip(names, results):
        for k in ("values", "statuses", "event_timestamps"):
            assert len(res[k]) == n, f"column {name}: {k} has {len(res[k])} rows, not {n}"
        cols[name] = res
    return cols


def record_ts(raw: bytes) -> int:
    """The _ts field of a Redis feature record: 8 bytes little-endian int64 unix microseconds."""
    assert isinstance(raw, bytes) and len(raw) == 8, raw
    return struct.unpack("<q", raw)[0]


def shop_key(entity_id, version: int = 1, domain: str = "shop", group: str = "user_profile",
             entity: str = "user_id") -> str:
    """The Redis key of a record: dais:<domain>:{<entity>=<id>}:<group>:v<version>."""
    return f"dais:{domain}:{{{entity}={entity_id}}}:{group}:v{version}"


# --------------------------------------------------------------------------------------------
# KServe v2 helpers.


def model_path(model: str, version=None) -> str:
    p = f"/v2/models/{model}"
    if version is not None:
        p += f"/versions/{version}"
    return p


def tensor_json(name: str, arr: np.ndarray, datatype: str = "FP32", nested=False) -> dict:
    arr = np.asarray(arr)
    data = arr.tolist() if nested else arr.reshape(-1).tolist()
    return {"name": name, "shape": list(arr.shape), "datatype": datatype, "data": data}


def infer_body(inputs, **kw) -> dict:
    if isinstance(inputs, dict):
        inputs = [tensor_json(n, a) for n, a in inputs.items()]
    body = {"inputs": inputs}
    for k, v in kw.items():
        if v is not None:
            body[k] = v
    return body


NP_TYPES = {"FP32": np.float32, "FP64": np.float64, "INT32": np.int32, "INT64": np.int64,
            "UINT8": np.uint8, "INT8": np.int8, "BOOL": np.bool_, "FP16": np.float16}


def error_text(r: requests.Response) -> str:
    """The "error" string of an error response (asserting the JSON shape)."""
    try:
        body = r.json()
    except ValueError:
        raise AssertionError(f"error response {r.status_code} is not JSON: {r.text[:300]!r}")
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], \
        f"error response {r.status_code} lacks a non-empty 'error' string: {body!r}"
    return body["error"]


def json_outputs(r: requests.Response) -> dict[str, np.ndarray]:
    """{name: ndarray} from a JSON inference response (asserting 200)."""
    assert r.status_code == 200, f"inference failed: {r.status_code} {r.text[:500]}"
    body = r.json()
    out = {}
    for o in body["outputs"]:
        dt = NP_TYPES[o["datatype"]]
        out[o["name"]] = np.asarray(o["data"], dtype=dt).reshape(o["shape"])
    return out


def binary_request(inputs: dict[str, np.ndarray], json_extra: dict | None = None,
                   outputs: list[dict] | None = None, parameters: dict | None = None,
                   datatype: str = "FP32"):
    """(body, headers) for a request whose inputs all travel as raw little-endian bytes."""
    header = {"inputs": []}
    blobs = []
    for name, arr in inputs.items():
        raw = np.ascontiguousarray(arr).astype(np.asarray(arr).dtype.newbyteorder("<")).tobytes()
        header["inputs"].append({"name": name, "shape": list(np.shape(arr)),
                                 "datatype": datatype,
                                 "parameters": {"binary_data_size": len(raw)}})
        blobs.append(raw)
    if outputs is not None:
        header["outputs"] = outputs
    if parameters is not None:
        header["parameters"] = parameters
    if json_extra:
        header.update(json_extra)
    hdr = json.dumps(header).encode()
    body = hdr + b"".join(blobs)
    return body, {"Inference-Header-Content-Length": str(len(hdr)),
                  "Content-Type": "application/octet-stream"}


def decode_response(r: requests.Response):
    """(header_json, {name: ndarray}) from a response that may use the binary extension."""
    assert r.status_code == 200, f"inference failed: {r.status_code} {r.text[:500]!r}"
    content = r.content
    hlen = r.headers.get("Inference-Header-Content-Length")
    if hlen is None:
        header, rest = json.loads(content), b""
    else:
        hlen = int(hlen)
        assert 0 < hlen <= len(content), (hlen, len(content))
        header, rest = json.loads(content[:hlen]), content[hlen:]
    out = {}
    offset = 0
    for o in header["outputs"]:
        dt = np.dtype(NP_TYPES[o["datatype"]]).newbyteorder("<")
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            assert "data" not in o, f"output {o['name']} has both data and binary_data_size"
            chunk = rest[offset:offset + size]
            assert len(chunk) == size, f"binary output {o['name']} truncated"
            offset += size
            out[o["name"]] = np.frombuffer(chunk, dtype=dt).reshape(o["shape"])
        else:
            out[o["name"]] = np.asarray(o["data"], dtype=dt).reshape(o["shape"])
    assert offset == len(rest), f"{len(rest) - offset} unexplained bytes after the outputs"
    return header, out


def raw_post(port: int, path: str, body: bytes, headers: dict | None = None,
             timeout: float = HTTP_TIMEOUT_S):
    """POST with http.client (exact bytes, no retries). Returns (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def parse_prometheus(text: str) -> list[tuple[str, dict, float]]:
    """[(metric name, {label: value}, value)] for every sample line."""
    samples = []
    line_re = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$")
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        labels = dict(label_re.findall(m.group(3) or ""))
        samples.append((m.group(1), labels, float(m.group(4))))
    return samples


def metric_value(samples, name: str, **labels) -> float | None:
    """The value of the sample `name` whose labels include `labels`; None if absent."""
    for n, l, v in samples:
        if n == name and all(l.get(k) == str(want) for k, want in labels.items()):
            return v
    return None


def run_concurrently(fn, n: int, timeout: float = 120.0) -> list:
    """Runs fn(i) on n threads released together; returns results (exceptions as values)."""
    results = [None] * n
    barrier = threading.Barrier(n)

    def worker(i):
        try:
            results[i] = fn(i, barrier)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "client threads hung"
    return results


def concurrent_posts(port: int, path: str, bodies: list[bytes], headers=None,
                     timeout: float = 60.0) -> list:
    """POSTs every body at once from its own thread over a connection opened beforehand, so that
    the requests reach the server together. Returns [(status, body bytes) or exception]."""
    hdrs = {"Content-Type": "application/json", **(headers or {})}

    def one(i, barrier):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            conn.connect()
            barrier.wait()
            conn.request("POST", path, body=bodies[i], headers=hdrs)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    return run_concurrently(one, len(bodies), timeout=timeout + 30)


def wait_for(pred, timeout: float, what: str, interval: float = 0.05):
    """pred()'s first truthy value within `timeout` seconds; AssertionError naming `what` (and
    the last value) otherwise."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


# --------------------------------------------------------------------------------------------
# etcd: real etcd processes (Debian's etcd-server) on free loopback ports, killed by PID.


class EtcdServer:
    """One etcd member in its own folder; restartable on the same ports and data."""

    def __init__(self, data_dir: Path, name: str = "m0", cluster: str | None = None,
                 client_port: int | None = None, peer_port: int | None = None,
                 wait: bool = True, tls: Path | None = None):
        """tls: a directory made by scripts/make_certs.sh: clients must speak TLS and present a
        certificate of its CA (--client-cert-auth)."""
        self.name = name
        self.tls = Path(tls) if tls else None
        self.client_port = client_port or free_port()
        self.peer_port = peer_port or free_port()
        self.dir = Path(data_dir) / f"etcd-{name}-{self.client_port}"
        self.cluster = cluster or f"{name}=http://127.0.0.1:{self.peer_port}"
        self.proc = None
        self.start(wait)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"

    def start(self, wait: bool = True):
        self.dir.mkdir(parents=True, exist_ok=True)
        client = self.url
        tls = [] if not self.tls else [
            "--cert-file", str(self.tls / "server.crt"), "--key-file", str(self.tls / "server.key"),
            "--trusted-ca-file", str(self.tls / "ca.crt"), "--client-cert-auth"]
        peer = f"http://127.0.0.1:{self.peer_port}"
        self.log = open(self.dir.with_suffix(".log"), "ab")
        self.proc = subprocess.Popen(
            ["etcd", "--name", self.name, "--data-dir", str(self.dir / "data"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", self.cluster, "--initial-cluster-state", "new",
             "--heartbeat-interval", "50", "--election-timeout", "500", *tls],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        if wait:
            self.wait_ok()

    def wait_ok(self, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}: "
                                   f"{self.dir.with_suffix('.log').read_text()[-2000:]}")
            try:
                self.ctl("endpoint", "health", timeout=2)
                return
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                time.sleep(0.1)
        raise RuntimeError(f"etcd on {self.endpoint} not healthy within {timeout} s")

    def ctl(self, *args, timeout: float = 10) -> str:
        tls = [] if not self.tls else [
            "--cacert", str(self.tls / "ca.crt"), "--cert", str(self.tls / "client.crt"),
            "--key", str(self.tls / "client.key")]
        return subprocess.run(["etcdctl", "--endpoints", self.url, "--command-timeout=3s", *tls,
                               *args], capture_output=True, text=True, check=True,
                              timeout=timeout, env={**os.environ, "ETCDCTL_API": "3"}).stdout

    def get_prefix(self, prefix: str) -> dict[str, str]:
        """{key: value} of every key under prefix."""
        out = self.ctl("get", "--prefix", prefix).splitlines()
        return {out[i]: out[i + 1] for i in range(0, len(out) - 1, 2)}

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class EtcdCluster:
    """Three etcd members started together; `endpoint` lists them all (what the dais roles are
    given), get_prefix / ctl go through a member that is up."""

    def __init__(self, data_dir: Path, size: int = 3):
        ports = [(free_port(), free_port()) for _ in range(size)]
        initial = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, (_, p) in enumerate(ports))
        # Each member waits for a quorum: start all, then wait for each.
        self.members = [EtcdServer(data_dir, f"m{i}", initial, c, p, wait=False)
                        for i, (c, p) in enumerate(ports)]
        for m in self.members:
            m.wait_ok()
        self.endpoint = ",".join(m.endpoint for m in self.members)

    def live(self) -> EtcdServer:
        return next(m for m in self.members if m.proc.poll() is None)

    def get_prefix(self, prefix: str) -> dict[str, str]:
        return self.live().get_prefix(prefix)

    def stop(self):
        for m in self.members:
            m.stop()


@pytest.fixture
def etcd_cluster(tmp_path):
    """A 3-member etcd cluster on loopback; every member killed by PID after."""
    c = EtcdCluster(tmp_path)
    yield c
    c.stop()


@pytest.fixture
def etcd_server(tmp_path):
    """A one-member etcd on free loopback ports; killed by PID and its folder removed after."""
    srv = EtcdServer(tmp_path)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def kv():
    """This module's helpers (json_outputs, error_text, binary_request, ...) for the tests, which
    use them as kv.<name> rather than importing conftest."""
    return sys.modules[__name__]


# --------------------------------------------------------------------------------------------
# Coordinated updates (issue 5): identity models whose load takes a set time, and the load
# events of a server's log.

IDENTITY_CONFIG = """\
name: "{name}"
backend: "identity"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] }} ]
parameters [
  {{ key: "creation_delay_sec" value: {{ string_value: "{delay}" }} }},
  {{ key: "execute_delay_ms" value: {{ string_value: "{exec_ms}" }} }}
]
"""
IDENTITY_BODY = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 2],
                             "data": [1, 2]}]}


def write_identity_model(repo: Path, name: str, creation_delay_sec: float,
                         versions=(1,), execute_delay_ms: float = 0) -> Path:
    """An identity-backend model (OUTPUT0 = INPUT0, INT32 [2]) whose every instance takes
    `creation_delay_sec` to load; its version directories are empty. Returns the model dir."""
    d = Path(repo) / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.pbtxt").write_text(IDENTITY_CONFIG.format(name=name, delay=creation_delay_sec,
                                                           exec_ms=execute_delay_ms))
    for v in versions:
        (d / str(v)).mkdir(exist_ok=True)
    return d


LOG_LINE_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z (\w) (\S+)\] (.*)$")
LOAD_START_RE = re.compile(r"loading model '([^']+)' version (\d+)(?:.*fencing token (\d+))?")
LOAD_END_RE = re.compile(r"model '([^']+)' version (\d+) (ready:|failed to load)")
SWITCH_REJECTED_RE = re.compile(r"model '([^']+)' version (\d+): switch rejected")


def log_time(stamp: str) -> float:
    """Unix seconds of a log line's UTC timestamp (2026-11-30T21:56:04.284)."""
    import calendar
    base, _, frac = stamp.partition(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def load_events(log_text: str) -> list[dict]:
    """The model loads in a dais log: [{model, version, start, end, token, outcome}] (unix
    seconds; end None while loading; outcome "ready", "failed", "rejected" or None), in start
    order; a load whose switch was rejected after it finished is "rejected". Only a log says when
    a load began, so the window and overlap checks read it."""
    events, open_, done = [], {}, {}
    for line in log_text.splitlines():
        m = LOG_LINE_RE.match(line)
        if not m:
            continue
        t, msg = log_time(m.group(1)), m.group(4)
        s = LOAD_START_RE.match(msg)
        if s:
            ev = {"model": s.group(1), "version": int(s.group(2)), "start": t, "end": None,
                  "token": int(s.group(3)) if s.group(3) else None, "outcome": None}
            events.append(ev)
            open_.setdefault((ev["model"], ev["version"]), []).append(ev)
            continue
        e = LOAD_END_RE.match(msg)
        if e:
            pending = open_.get((e.group(1), int(e.group(2))))
            if pending:
                ev = pending.pop(0)
                ev["end"] = t
                ev["outcome"] = "ready" if e.group(3) == "ready:" else "failed"
                done[(ev["model"], ev["version"])] = ev
            continue
        r = SWITCH_REJECTED_RE.match(msg)
        if r and (r.group(1), int(r.group(2))) in done:
            done[(r.group(1), int(r.group(2)))]["outcome"] = "rejected"
    return events
