"""Helpers of the cluster tests (issue 14): a `dais scheduler` process, `dais ctl`, and reading
the cluster's state from etcd."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

from conftest import wait_for

TTL = 2


class Scheduler:
    def __init__(self, dais_bin, etcd, name, log_dir, *extra):
        self.name = name
        self.log_path = log_dir / f"scheduler-{name}.log"
        self.proc = subprocess.Popen(
            [str(dais_bin), "scheduler", "--etcd", etcd.endpoint, "--id", name,
             "--lease-ttl-secs", str(TTL), *extra],
            stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT)

    def metrics_port(self) -> int:
        """The port of --metrics-port 0, from the log."""
        found = wait_for(lambda: re.search(r"ports: metrics=(\d+)", self.log()), 20,
                         f"scheduler {self.name}'s metrics port")
        return int(found.group(1))

    def log(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.proc.kill()
            self.proc.wait(10)


def leader(etcd):
    return etcd.get_prefix("/dais/scheduler/leader").get("/dais/scheduler/leader")


def ctl(dais_bin, etcd, *args, check=True):
    r = subprocess.run([str(dais_bin), "ctl", "--etcd", etcd.endpoint, *args],
                       capture_output=True, text=True, timeout=30)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def apply(dais_bin, etcd, tmp_path, spec: str):
    path = tmp_path / f"spec-{time.monotonic_ns()}.yaml"
    path.write_text(spec)
    return ctl(dais_bin, etcd, "apply", "-f", str(path))


def ready(etcd, model):
    """{node: state} of the model's instances."""
    out = {}
    for key, value in etcd.get_prefix("/dais/instances/").items():
        v = json.loads(value)
        if v["model"] == model:
            out[v["node"]] = v["state"]
    return out


def assigned(etcd, model):
    return sorted(k.split("/")[3] for k in etcd.get_prefix("/dais/assignments/")
                  if k.endswith("/" + model))


def status(etcd, deployment):
    """The scheduler's /dais/status/<deployment>, or None."""
    raw = etcd.get_prefix(f"/dais/status/{deployment}").get(f"/dais/status/{deployment}")
    return json.loads(raw) if raw else None


def instances(etcd, model):
    """{node: instance JSON} of the model's instances."""
    out = {}
    for value in etcd.get_prefix("/dais/instances/").values():
        v = json.loads(value)
        if v["model"] == model:
            out[v["node"]] = v
    return out


class Gateway:
    """A `dais gateway` process on a free port (read from its log)."""

    def __init__(self, dais_bin, etcd, log_dir, *extra, name="g1"):
        self.log_path = log_dir / f"gateway-{name}.log"
        self.proc = subprocess.Popen(
            [str(dais_bin), "gateway", "--etcd", etcd.endpoint, "--http-port", "0",
             "--grpc-port", "0", *extra],
            stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT)
        found = wait_for(lambda: self.proc.poll() is None and re.search(
            r"ports: http=(\d+)(?: grpc=(\d+))?", self.log()) or
            (self.proc.poll() is not None and "exited"), 20, "the gateway's port")
        assert found != "exited", self.log()
        self.url = f"http://127.0.0.1:{found.group(1)}"
        self.grpc_port = int(found.group(2)) if found.group(2) else None

    def log(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Prometheus:
    """A real Prometheus (Debian's `prometheus`) on `port`, scraping `targets` every second."""

    def __init__(self, port, targets, work_dir, scrape_configs: str | None = None,
                 rule_files=()):
        """`scrape_configs`: the YAML list under scrape_configs (instead of static `targets`);
        `rule_files`: alerting rule files it evaluates (every second)."""
        import requests
        self.dir = work_dir / "prometheus"
        self.dir.mkdir()
        config = self.dir / "prometheus.yml"
        if scrape_configs is None:
            scrape_configs = ("  - job_name: dais\n    static_configs:\n"
                              f"      - targets: {json.dumps(list(targets))}\n")
        rules = f"rule_files: {json.dumps([str(r) for r in rule_files])}\n" if rule_files else ""
        config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n" + rules +
                          "scrape_configs:\n" + scrape_configs)
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=open(self.dir / "log", "wb"), stderr=subprocess.STDOUT)

        def ready():
            try:
                return requests.get(self.url + "/-/ready", timeout=2).status_code == 200
            except requests.RequestException:
                return False
        wait_for(ready, 60, "Prometheus ready")

    def api(self, path, **params):
        import requests
        r = requests.get(self.url + "/api/v1/" + path, params=params, timeout=5)
        r.raise_for_status()
        return r.json()["data"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
