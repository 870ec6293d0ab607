"""Coordinated hot updates (issue 5): several real `dais serve` nodes share one model repository
in poll mode and coordinate their loads of new versions through locks in a real redis-server on
loopback (`--redis --node-id`, `--coordination hierarchy|global`).

The models are identity-backend models whose load sleeps `creation_delay_sec`, so a load's
duration is known and the update window can be compared with the serial sum of the loads.
Assertions are on responses, /metrics, /v2/repository/index and the lock keys in Redis; the
server's log is read only for what nothing else says (when a load began and ended, its fencing
token, "switch rejected")."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import (IDENTITY_BODY, load_events, metric_value, parse_prometheus, redis_call,
                      write_identity_model)

pytestmark = pytest.mark.slow

POLL = "1"  # --repository-poll-secs (whole seconds)


# --------------------------------------------------------------------------------------------
# Helpers.


def node_args(redis, node_id, *extra, lease_ms=None):
    # The identity models' load is a sleep that cannot crash: no load check process, whose
    # second load would double every load time these tests reason about.
    a = ["--redis", redis.addr, "--node-id", node_id, "--model-control-mode", "poll",
         "--repository-poll-secs", POLL, "--model-load-isolation", "none"]
    if lease_ms is not None:
        a += ["--lock-lease-ms", str(lease_ms)]
    return a + [str(x) for x in extra]


def start_nodes(start_server, specs):
    """Starts the nodes of `specs` [(repo, args)] at once (their first loads overlap);
    returns them in order, each ready."""
    with ThreadPoolExecutor(len(specs)) as ex:
        return list(ex.map(lambda s: start_server(s[0], *s[1]), specs))


def infer_version(srv, model, timeout=10.0):
    """The model_version of an unversioned inference on `srv`, None if it did not answer 200."""
    try:
        r = requests.post(f"{srv.url}/v2/models/{model}/infer", json=IDENTITY_BODY,
                          timeout=timeout)
    except requests.RequestException:
        return None
    if r.status_code != 200:
        return None
    return r.json().get("model_version")


def serves_only(srv, model, version: str) -> bool:
    """`version` answers unversioned requests and is the only version listed."""
    r = srv.get(f"/v2/models/{model}", timeout=5)
    return (r.status_code == 200 and r.json().get("versions") == [version]
            and infer_version(srv, model) == version)


def wait_converged(nodes, models, version: str, timeout: float) -> dict:
    """Waits until every node serves only `version` of every model; returns {(node index,
    model): monotonic time it was first seen so}."""
    seen = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(nodes) * len(models):
        for i, srv in enumerate(nodes):
            for m in models:
                if (i, m) not in seen and serves_only(srv, m, version):
                    seen[(i, m)] = time.monotonic()
        if len(seen) == len(nodes) * len(models):
            break
        if time.monotonic() > deadline:
            missing = sorted(set((i, m) for i in range(len(nodes)) for m in models) - set(seen))
            raise AssertionError(f"not converged on version {version} within {timeout} s: "
                                 f"{missing}")
        time.sleep(0.05)
    return seen


def metric(srv, name, **labels) -> float:
    v = metric_value(parse_prometheus(srv.metrics()), name, **labels)
    return 0.0 if v is None else v


def lock_keys(redis, model) -> list[str]:
    """The held locks of `model` (not the fence, intentions, waiters or wake-up lists)."""
    keys = redis_call(redis.port, "KEYS", f"dais:lock:{{{model}}}:*") or []
    names = [k.decode() for k in keys]
    return sorted(k for k in names
                  if k.split(":", 3)[3].split(":")[0] in ("model", "node", "version"))


def fence(redis, model) -> int:
    v = redis_call(redis.port, "GET", f"dais:lock:{{{model}}}:fence")
    return int(v) if v is not None else 0


def v2_loads(srv, model=None):
    return [e for e in load_events(srv.log_text())
            if e["version"] == 2 and (model is None or e["model"] == model)]


class Traffic:
    """Client threads sending unversioned requests to (node, model) pairs until stopped; keeps
    every answer as (monotonic time, version) and every failure."""

    def __init__(self, targets, pause_s=0.01):
        self.targets = list(targets)  # [(node index, srv, model)]
        self.pause_s = pause_s
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.answers = {(i, m): [] for i, _, m in self.targets}
        self.failures = []
        self.threads = [threading.Thread(target=self._run, args=(t,), daemon=True)
                        for t in self.targets]

    def _run(self, target):
        i, srv, model = target
        session = requests.Session()
        url = f"{srv.url}/v2/models/{model}/infer"
        while not self.stop_ev.is_set():
            t = time.monotonic()
            try:
                r = session.post(url, json=IDENTITY_BODY, timeout=30)
                ok = r.status_code == 200
                why = None if ok else f"{r.status_code} {r.text[:200]}"
                if ok:
                    body = r.json()
                    if body["outputs"][0]["data"] != [1, 2]:
                        ok, why = False, f"wrong output {body['outputs']}"
            except requests.RequestException as e:
                ok, why = False, repr(e)
            with self.lock:
                if ok:
                    self.answers[(i, model)].append((t, body.get("model_version")))
                else:
                    self.failures.append((t, i, model, why))
            time.sleep(self.pause_s)

    def __enter__(self):
        for th in self.threads:
            th.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.stop_ev.set()
        for th in self.threads:
            th.join(60)

    def check_switch(self, old: str, new: str, max_gap_s: float):
        """Every client saw `old`, then `new`, never `old` after `new`, and never waited longer
        than `max_gap_s` between two answers."""
        for key, answers in self.answers.items():
            versions = [v for _, v in answers]
            assert versions, f"{key}: no answers"
            assert versions[0] == old, f"{key}: first answer from version {versions[0]}"
            assert versions[-1] == new, f"{key}: last answer from version {versions[-1]}"
            first_new = versions.index(new)
            assert set(versions[:first_new]) == {old} and set(versions[first_new:]) == {new}, \
                f"{key}: versions interleave: {compress(versions)}"
            gaps = [b[0] - a[0] for a, b in zip(answers, answers[1:])]
            assert max(gaps) < max_gap_s, f"{key}: {max(gaps):.2f} s without an answer"


def compress(versions):
    out = []
    for v in versions:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return out


def assert_no_overlap(intervals, what):
    iv = sorted(intervals)
    for (s1, e1, n1), (s2, e2, n2) in zip(iv, iv[1:]):
        assert s2 >= e1 - 0.005, f"{what}: {n1} [{s1:.3f}, {e1:.3f}] overlaps {n2} [{s2:.3f}, " \
                                 f"{e2:.3f}]"


# --------------------------------------------------------------------------------------------
# 1. Three nodes, two models, continuous traffic.


def test_three_nodes_hot_update_under_traffic(start_server, start_redis, tmp_path):
    delay = 1.5
    redis = start_redis()
    repo = tmp_path / "repo"
    models = ("m", "n")
    for m in models:
        write_identity_model(repo, m, delay)
    nodes = start_nodes(start_server, [(repo, node_args(redis, f"node{k}")) for k in range(3)])
    wait_converged(nodes, models, "1", 10)

    targets = [(i, srv, m) for i, srv in enumerate(nodes) for m in models]
    with Traffic(targets) as traffic:
        time.sleep(0.5)
        t0_wall, t0 = time.time(), time.monotonic()
        for m in models:
            (repo / m / "2").mkdir()
        ready = wait_converged(nodes, models, "2", 30)
        window = max(ready.values()) - t0
        time.sleep(0.5)
    assert not traffic.failures, f"{len(traffic.failures)} failed requests: " \
                                 f"{traffic.failures[:5]}"
    traffic.check_switch("1", "2", max_gap_s=2.0)

    # Each node loaded each v2 exactly once, under a fencing token, and the loads ran in parallel.
    serial = len(nodes) * len(models) * delay
    loads = []
    for i, srv in enumerate(nodes):
        for m in models:
            ev = v2_loads(srv, m)
            assert len(ev) == 1, f"node {i} model {m}: loads of v2 {ev}"
            assert ev[0]["outcome"] == "ready" and ev[0]["token"], ev
            assert ev[0]["start"] >= t0_wall - 0.05, ev
            loads.append(ev[0])
    load_window = max(e["end"] for e in loads) - min(e["start"] for e in loads)
    print(f"update window: {window:.2f} s from the new directories to the last node serving v2; "
          f"{load_window:.2f} s first load start to last load ready; serial sum {serial:.1f} s")
    assert load_window < 0.5 * serial, (load_window, serial)  # about one load time, not six
    assert window < 0.75 * serial, (window, serial)

    for i, srv in enumerate(nodes):
        for m in models:
            assert metric(srv, "dais_model_load_failures_total", model=m) == 0
            assert metric(srv, "dais_model_switch_rejections_total", model=m) == 0
            assert metric(srv, "dais_model_ready", model=m, version="2") == 1
            assert srv.index_entry(m)["state"] == "READY"
    for m in models:
        assert lock_keys(redis, m) == [], "locks left behind after the update"
        assert fence(redis, m) >= max(e["token"] for e in loads if e["model"] == m)


# --------------------------------------------------------------------------------------------
# 2. A load failure on one node.


def test_load_failure_on_one_node_is_reported_and_does_not_stop_the_others(
        start_server, start_redis, tmp_path, gen_models):
    """Nodes a and b share a repository; node c reads a copy of it in which version 2 of the
    TorchScript model `f` is not a TorchScript file (the shared repository seen through a
    corrupted mount, say). c's failure must not hold up a and b, nor c's load of `n`."""
    redis = start_redis()
    repo, repo_c = tmp_path / "repo", tmp_path / "repo-c"
    write_identity_model(repo, "n", 1.0)
    fdir = repo / "f"
    fdir.mkdir(parents=True)
    (fdir / "config.pbtxt").write_text(gen_models.mlp_config("f", 16, 4, ""))
    gen_models.save_torchscript(gen_models.build_mlp(gen_models.SMALL_SIZES, 5), fdir / "1" /
                                "model.pt")
    shutil.copytree(repo, repo_c)
    a, b, c = start_nodes(start_server, [(repo, node_args(redis, "a")),
                                         (repo, node_args(redis, "b")),
                                         (repo_c, node_args(redis, "c"))])
    x = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 16],
                     "data": [0.5] * 16}]}

    def f_version(srv):
        r = srv.post("/v2/models/f/infer", json=x, timeout=10)
        return r.json().get("model_version") if r.status_code == 200 else None

    assert [f_version(s) for s in (a, b, c)] == ["1", "1", "1"]
    gen_models.save_torchscript(gen_models.build_mlp(gen_models.SMALL_SIZES, 6),
                                repo / "f" / "2" / "model.pt")
    (repo_c / "f" / "2").mkdir()
    (repo_c / "f" / "2" / "model.pt").write_bytes(b"this is not a TorchScript archive\n" * 8)
    (repo / "n" / "2").mkdir()
    (repo_c / "n" / "2").mkdir()

    wait_converged([a, b, c], ["n"], "2", 20)
    for srv in (a, b):
        srv.wait_until(lambda: f_version(srv) == "2", 20, "f v2 on a healthy node")

    def c_failed():
        entries = {e.get("version"): e for e in c.index() if e.get("name") == "f"}
        e = entries.get("2")
        return e if e and e.get("state") == "UNAVAILABLE" and e.get("reason") else None

    entry = c.wait_until(c_failed, 20, "f v2 UNAVAILABLE with a reason in c's index")
    print(f"node c index entry for f v2: {entry}")
    c.wait_until(lambda: metric(c, "dais_model_load_failures_total", model="f") >= 1, 10,
                 "dais_model_load_failures_total{model=f} on c")
    for srv in (a, b):
        assert metric(srv, "dais_model_load_failures_total", model="f") == 0
    # c's failure is not retried on every poll (unchanged broken version) and holds no lock.
    time.sleep(2.5)
    assert len(v2_loads(c, "f")) == 1
    assert lock_keys(redis, "f") == [] and lock_keys(redis, "n") == []
    # The failed version did not replace the one that serves: c keeps answering from v1.
    assert f_version(c) == "1", "node c stopped serving f after its v2 failed to load"
    assert c.model_ready("f")


# --------------------------------------------------------------------------------------------
# 3. kill -9 of a node that holds its NODE lock mid-load.


def test_kill_9_mid_load_blocks_nobody_beyond_the_lease(start_server, start_redis, tmp_path):
    lease_ms, delay = 2000, 3.0
    redis = start_redis()
    repo = tmp_path / "repo"
    write_identity_model(repo, "m", delay)
    a, b, c = start_nodes(start_server, [(repo, node_args(redis, n, lease_ms=lease_ms))
                                         for n in ("a", "b", "c")])
    key = "dais:lock:{m}:node:c"
    (repo / "m" / "2").mkdir()
    deadline = time.monotonic() + 10
    while not redis_call(redis.port, "EXISTS", key):
        assert time.monotonic() < deadline, "node c never took its NODE lock for v2"
        time.sleep(0.02)
    time.sleep(0.3)  # inside the 3 s load
    token_dead = int(redis_call(redis.port, "HGET", key, "token"))
    assert any(e["end"] is None for e in v2_loads(c, "m")), "c is not loading v2"
    c.proc.kill()
    t_kill = time.monotonic()
    c.wait(10)

    # A replacement with the same node id starts at once: it waits for the dead holder's lease.
    c2 = start_server(repo, *node_args(redis, "c", lease_ms=lease_ms), wait_ready=False)

    gone = None
    while gone is None:
        if not redis_call(redis.port, "EXISTS", key) or \
                redis_call(redis.port, "HGET", key, "token") != str(token_dead).encode():
            gone = time.monotonic() - t_kill
        assert time.monotonic() - t_kill < lease_ms / 1000 + 2, "dead holder's lock outlived " \
                                                                "its lease"
        time.sleep(0.02)
    print(f"dead holder's NODE lock gone {gone:.2f} s after kill -9 (lease {lease_ms} ms)")
    assert gone <= lease_ms / 1000 + 0.3

    # The other nodes were not held up; the replacement took the lock and loaded v2.
    wait_converged([a, b], ["m"], "2", delay + 5)
    for srv in (a, b):
        ev = v2_loads(srv, "m")
        assert len(ev) == 1 and ev[0]["outcome"] == "ready", ev
    c2.wait_until(lambda: serves_only(c2, "m", "2"), lease_ms / 1000 + delay + 8,
                  "the replacement serving v2")
    ev = v2_loads(c2, "m")
    assert len(ev) == 1 and ev[0]["token"] > token_dead, (ev, token_dead)
    assert lock_keys(redis, "m") == []


# --------------------------------------------------------------------------------------------
# 4. A node paused past its lease.


def test_node_paused_past_its_lease_is_fenced_then_converges(start_server, start_redis,
                                                             tmp_path):
    lease_ms, delay = 1500, 3.0
    redis = start_redis()
    repo = tmp_path / "repo"
    write_identity_model(repo, "m", delay)
    p, q = start_nodes(start_server, [(repo, node_args(redis, n, lease_ms=lease_ms))
                                      for n in ("p", "q")])
    key = "dais:lock:{m}:node:p"

    fences, stop = [], threading.Event()

    def sample_fence():
        while not stop.is_set():
            fences.append(fence(redis, "m"))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample_fence, daemon=True)
    sampler.start()
    traffic = Traffic([(0, p, "m"), (1, q, "m")], pause_s=0.05).__enter__()
    try:
        (repo / "m" / "2").mkdir()
        deadline = time.monotonic() + 10
        while not redis_call(redis.port, "EXISTS", key):
            assert time.monotonic() < deadline, "node p never took its NODE lock for v2"
            time.sleep(0.02)
        time.sleep(0.3)
        token1 = int(redis_call(redis.port, "HGET", key, "token"))
        os.kill(p.pid, signal.SIGSTOP)
        try:
            time.sleep(lease_ms / 1000 + 1.0)
            assert not redis_call(redis.port, "EXISTS", key), "lock outlived the paused holder's " \
                                                              "lease"
        finally:
            os.kill(p.pid, signal.SIGCONT)
        p.wait_until(lambda: metric(p, "dais_model_switch_rejections_total", model="m") >= 1,
                     delay + 5, "dais_model_switch_rejections_total{model=m} on p")
        # Loaded again at a later poll under a new, higher token, and then switched.
        p.wait_until(lambda: serves_only(p, "m", "2"), 2 * delay + 10, "p serving v2")
        wait_converged([q], ["m"], "2", 5)
        time.sleep(0.3)
    finally:
        stop.set()
        sampler.join(5)
        traffic.stop()


    assert "switch rejected" in p.log_text()
    ev = v2_loads(p, "m")
    assert [e["outcome"] for e in ev] == ["rejected", "ready"], ev
    assert ev[0]["token"] == token1 and ev[1]["token"] > token1, ev
    assert metric(p, "dais_model_switch_rejections_total", model="m") == 1
    assert metric(q, "dais_model_switch_rejections_total", model="m") == 0
    assert p.index_entry("m")["state"] == "READY"
    assert all(x <= y for x, y in zip(fences, fences[1:])), "the fence counter went down"
    assert fences[-1] >= ev[1]["token"]
    # p's requests waited out the pause; none failed: v1 served until v2 was switched in, also
    # across the rejected switch and the reload.
    assert not traffic.failures, f"{len(traffic.failures)} failed requests: " \
                                 f"{traffic.failures[:5]}"
    traffic.check_switch("1", "2", max_gap_s=lease_ms / 1000 + 4)


# --------------------------------------------------------------------------------------------
# 5. One global lock serialises; the hierarchy parallelises.


@pytest.mark.parametrize("policy", ["global", "hierarchy"])
def test_global_lock_serialises_hierarchy_parallelises(start_server, start_redis, tmp_path,
                                                       policy):
    delay, models = 1.0, ("m", "n")
    redis = start_redis()
    repo = tmp_path / "repo"
    for m in models:
        write_identity_model(repo, m, delay)
    nodes = start_nodes(start_server, [(repo, node_args(redis, n, "--coordination", policy))
                                       for n in ("a", "b")])
    t0 = time.monotonic()
    for m in models:
        (repo / m / "2").mkdir()
    ready = wait_converged(nodes, models, "2", 30)
    window = max(ready.values()) - t0
    serial = len(nodes) * len(models) * delay
    loads = [(e["start"], e["end"], f"node {i} {e['model']}")
             for i, srv in enumerate(nodes) for e in v2_loads(srv)]
    assert len(loads) == len(nodes) * len(models), loads
    load_window = max(e for _, e, _ in loads) - min(s for s, _, _ in loads)
    print(f"{policy}: window {window:.2f} s (loads {load_window:.2f} s), serial sum {serial} s")
    if policy == "global":
        assert_no_overlap(loads, "global lock")
        assert load_window >= 0.95 * serial
        assert lock_keys(redis, "__global__") == []
    else:
        assert load_window < 0.6 * serial
        assert window < 0.75 * serial
