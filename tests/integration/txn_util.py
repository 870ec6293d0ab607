"""Helpers for the `dais txn` tests and benchmarks: real PostgreSQL servers (initdb in a temporary
folder, run as the `postgres` user since PostgreSQL refuses root, on a free loopback port, with
max_prepared_transactions > 0), the `dais txn serve` process, and the shop example's schema,
transactions file and invariant checker."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg2
import requests

from conftest import REPO_ROOT, dais_binary, free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")
EXAMPLE = REPO_ROOT / "examples" / "transactions"
PORTS_RE = re.compile(r"ports: http=(\d+)(?: grpc=(\d+))?")


class PgServer:
    """One PostgreSQL server: initdb'd into a fresh folder under /tmp (owned by `postgres`), started
    on a free port. kill()/freeze()/thaw()/start() act on the postmaster's PID only."""

    def __init__(self, name: str, fsync: bool = False, max_connections: int = 300):
        if not (PG_BIN / "postgres").exists():
            raise RuntimeError("PostgreSQL 15 is not installed (apt-get install postgresql)")
        self.name = name
        self.fsync = fsync
        self.max_connections = max_connections
        self.root = Path(tempfile.mkdtemp(prefix=f"dais-pg-{name}-"))
        self.data = self.root / "data"
        self.log_path = self.root / "postgres.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._chown(self.root)
        r = subprocess.run([str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                            "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"],
                           capture_output=True, text=True, timeout=120, **self._as_postgres())
        if r.returncode != 0:
            raise RuntimeError(f"initdb failed: {r.stdout}\n{r.stderr}")
        self.start()

    @staticmethod
    def _as_postgres() -> dict:
        if os.geteuid() != 0:
            return {}
        pw = pwd.getpwnam("postgres")
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    @staticmethod
    def _chown(path: Path):
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def start(self, timeout: float = 30.0):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(PG_BIN / "postgres"), "-D", str(self.data), "-p", str(self.port),
             "-k", str(self.root), "-c", "listen_addresses=127.0.0.1",
             "-c", "max_prepared_transactions=400",
             "-c", f"max_connections={self.max_connections}",
             "-c", f"fsync={'on' if self.fsync else 'off'}",
             "-c", "shared_buffers=64MB"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            **self._as_postgres())
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres",
                                 dbname="postgres", connect_timeout=2).close()
                return
            except psycopg2.OperationalError as e:
                last = e
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"postgres {self.name} did not start: {last}\n{self.log_tail()}")
            time.sleep(0.05)

    def conninfo(self, db: str) -> str:
        return f"host=127.0.0.1 port={self.port} dbname={db} user=postgres"

    def connect(self, db: str):
        c = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=db,
                             connect_timeout=5)
        c.autocommit = True
        return c

    def query(self, db: str, sql: str, params=()) -> list[tuple]:
        with self.connect(db) as c, c.cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall() if cur.description else []
        c.close()
        return rows

    def execute(self, db: str, sql: str, params=()):
        c = self.connect(db)
        with c.cursor() as cur:
            cur.execute(sql, params)
        c.close()

    def create_db(self, db: str, schema_file: Path | None = None):
        self.execute("postgres", f"CREATE DATABASE {db}")
        if schema_file:
            self.execute(db, schema_file.read_text())

    def prepared(self, db: str) -> list[str]:
        return [r[0] for r in self.query(db, "SELECT gid FROM pg_prepared_xacts "
                                             "WHERE database = current_database()")]

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL to the postmaster (its backends exit when they notice), then wait for them."""
        if self.running():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        # Orphaned backends still hold the shared memory: wait for them to go.
        deadline = time.monotonic() + 30
        pid_file = self.data / "postmaster.pid"
        while time.monotonic() < deadline and self._pids():
            time.sleep(0.05)
        if pid_file.exists():
            pid_file.unlink()

    def restart(self, timeout: float = 30.0):
        """A clean restart, as `pg_ctl restart -m fast`: SIGINT (fast shutdown: every session gets
        a FATAL and is closed), wait for the postmaster, start again; returns once it accepts
        connections."""
        if self.running():
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=timeout)
        self.start(timeout)

    def freeze(self):
        """SIGSTOP the postmaster and its backends (a hung server: connections accepted, no
        answers)."""
        for pid in self._pids():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self):
        for pid in self._pids():
            os.kill(pid, signal.SIGCONT)

    def _pids(self) -> list[int]:
        # The postmaster and its backends (re-parented after the postmaster's SIGKILL): every
        # process whose working directory is this data folder.
        out = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    if os.readlink(f"/proc/{pid}/cwd") == str(self.data):
                        out.append(int(pid))
                except OSError:
                    pass
        return out

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.running():
            self.thaw()
            self.proc.send_signal(signal.SIGQUIT)  # immediate shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


class TxnProcess:
    """One `dais txn serve` process; output goes to a log file."""

    def __init__(self, args: list[str], log_dir: Path, wait: bool = True):
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"txn-{time.monotonic_ns()}.log"
        self.args = [str(dais_binary()), "txn", "serve", "--http-port", "0", *map(str, args)]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        self.port = self.grpc_port = None
        if wait:
            self.wait_started()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_started(self, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while self.port is None:
            m = PORTS_RE.search(self.log_text())
            if m:
                self.port = int(m.group(1))
                self.grpc_port = int(m.group(2)) if m.group(2) else None
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"dais txn exited with {self.proc.returncode}:\n"
                                   f"{self.log_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"dais txn did not start:\n{self.log_text()[-4000:]}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def place(self, params: dict, type_: str = "place_order", key: str | None = None,
              timeout: float = 10.0) -> requests.Response:
        headers = {"Idempotency-Key": key} if key else {}
        return requests.post(f"{self.url}/v1/txn/{type_}", json=params, headers=headers,
                             timeout=timeout)

    def metrics(self) -> str:
        return requests.get(f"{self.url}/metrics", timeout=5).text

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_exit(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def write_txn_yaml(path: Path, orders: PgServer, inventory: PgServer, log: PgServer,
                   prepare_timeout_ms: int = 300, gate_timeout_ms: int = 50):
    """(The tests pass longer budgets than the example's 300 / 50 ms: on a shared 2-core machine
    running three PostgreSQL servers a scheduling hiccup must not decide a test.)"""
    """The example's transactions file with these servers' ports, plus `place_order_allow` (the
    same with on_error: allow) and `place_order_nogate` (no gate)."""
    import yaml
    spec = yaml.safe_load((EXAMPLE / "txn.yaml").read_text())
    spec["participants"] = {"orders": orders.conninfo("shop"),
                            "inventory": inventory.conninfo("shop")}
    spec["log"] = log.conninfo("coordinator")
    spec["prepare_timeout_ms"] = prepare_timeout_ms
    base = spec["types"]["place_order"]
    base["gate"]["timeout_ms"] = gate_timeout_ms
    allow = yaml.safe_load(yaml.safe_dump(base))
    allow["gate"]["on_error"] = "allow"
    nogate = yaml.safe_load(yaml.safe_dump(base))
    del nogate["gate"]
    spec["types"]["place_order_allow"] = allow
    spec["types"]["place_order_nogate"] = nogate
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def setup_shop(orders: PgServer, inventory: PgServer, log: PgServer, items: dict[int, int]):
    orders.create_db("shop", EXAMPLE / "schema_orders.sql")
    inventory.create_db("shop", EXAMPLE / "schema_inventory.sql")
    log.create_db("coordinator")
    with inventory.connect("shop") as c, c.cursor() as cur:
        for item, qty in items.items():
            cur.execute("INSERT INTO stock (item_id, qty) VALUES (%s, %s)", (item, qty))


def check_invariants(orders: PgServer, inventory: PgServer, initial: dict[int, int],
                     accepted: set[str] = frozenset(), refused: set[str] = frozenset()):
    """stock + sold = initial stock per item; accepted orders exist once, refused ones not at all;
    no prepared transaction left on either participant."""
    assert orders.prepared("shop") == [], "prepared transactions left on orders"
    assert inventory.prepared("shop") == [], "prepared transactions left on inventory"
    stock = dict(inventory.query("shop", "SELECT item_id, qty FROM stock"))
    sold = dict(orders.query("shop", "SELECT item_id, sum(quantity) FROM orders GROUP BY item_id"))
    for item, qty in initial.items():
        assert stock[item] + int(sold.get(item, 0)) == qty, \
            f"item {item}: stock {stock[item]} + sold {sold.get(item, 0)} != initial {qty}"
    ids = [r[0] for r in orders.query("shop", "SELECT order_id FROM orders")]
    assert len(ids) == len(set(ids))
    have = set(ids)
    assert accepted <= have, f"accepted but missing: {sorted(accepted - have)}"
    assert not (refused & have), f"refused but present: {sorted(refused & have)}"
    return have


def start_shop_services(tmp: Path, procs: list) -> tuple[int, int, Path, int]:
    """For the benchmark and the demo: a redis-server and `dais serve` on the shop's models (the
    fraud model from scripts/gen_fraud_model.py, `recommend` fed from the feature store), on free
    ports, appended to `procs` (the caller stops them). Returns (redis port, dais serve's gRPC
    port, the model repository, dais serve's HTTP port)."""
    redis_port = free_port()
    procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "",
                                   "--appendonly", "no", "--dir", str(tmp)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    repo = tmp / "repo"
    subprocess.run(["/usr/bin/python3", str(REPO_ROOT / "scripts/gen_fraud_model.py"), str(repo)],
                   check=True, capture_output=True)
    shutil.copytree(EXAMPLE / "recommend", repo / "recommend")
    http, grpc = free_port(), free_port()
    procs.append(subprocess.Popen([str(dais_binary()), "serve", "--model-repository", str(repo),
                                   "--http-port", str(http), "--grpc-port", str(grpc),
                                   "--metrics-port", "0", "--redis", f"127.0.0.1:{redis_port}"],
                                  stdout=open(tmp / "serve.log", "wb"), stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"http://127.0.0.1:{http}/v2/health/ready", timeout=1).ok:
                return redis_port, grpc, repo, http
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"dais serve did not get ready: see {tmp / 'serve.log'}")
        time.sleep(0.1)


def stop_all(procs: list, pgs: list, tmp: Path):
    """Stops what start_shop_services and the PgServers started, and removes `tmp`."""
    for p in procs:
        p.terminate()
        p.wait()
    for pg in pgs:
        pg.stop()
    shutil.rmtree(tmp, ignore_errors=True)
