"""Issue 39: federated learning with real processes — `dais fed serve` and `dais fed join`
trainers on loopback (LibTorch training in each), rounds with a quorum and stragglers, the
aggregator killed and resumed, malformed updates refused by name, secure aggregation equal to
plain averaging with a dropped trainer recovered, differential privacy's epsilon, and the result
published as a repository version that `dais serve` serves."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import torch

from conftest import dais_binary, wait_for
from grpc_client import generate_stubs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import fed_demo  # noqa: E402  (the demo's pieces: data files, the model, the processes)

FEATURES, CLASSES = 8, 3


def blobs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(0, 2, (CLASSES, FEATURES))
    y = rng.integers(0, CLASSES, n)
    return (centres[y] + rng.normal(0, 1, (n, FEATURES))).astype(np.float32), y


def make_federation(work: Path, trainers: list[str], rounds: int, quorum: int, deadline: str,
                    secure: bool = False, extra: str = "") -> fed_demo.Federation:
    """A federation of `trainers` (each with 90 rows of its own), a held-out set, model v1."""
    for i, name in enumerate(trainers):
        fed_demo.write_rows(work / "data" / name, *blobs(90, seed=i))
    fed_demo.write_rows(work / "data" / "holdout", *blobs(300, seed=1000))
    fed_demo.write_repository(work / "models", "digits",
                              fed_demo.make_model(FEATURES, CLASSES, hidden=16), FEATURES, CLASSES)
    # The rounds wait for every trainer (the tests say who is selected), not 0.4 s after a quorum:
    # on a loaded machine a trainer's process can take seconds to start.
    fed_demo.federation_yaml(work / "federation.yaml", rounds, len(trainers), quorum, deadline,
                             1, 0.1, 16, secure, "wait_for_trainers: 120s\n" + extra)
    return fed_demo.Federation(str(dais_binary()), work, retry_ms=50)


@pytest.fixture
def federation(tmp_path):
    made = []

    def make(name, *args, **kw):
        f = make_federation(tmp_path / name, *args, **kw)
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop()
        print(f"aggregator log of {f.work}:\n{f.log('aggregator')[-4000:]}")


def finish(f: fed_demo.Federation, rounds: int, timeout: float = 120) -> dict:
    f.wait_round(rounds, timeout)
    assert f.server.wait(timeout=30) == 0, f.log("aggregator")[-3000:]
    return f.state()  # as the aggregator left it (the publication is recorded after the round)


def test_rounds_finish_with_a_straggler_and_the_published_version_is_served(
        federation, start_server):
    f = federation("plain", ["a", "b", "c", "d"], rounds=3, quorum=3, deadline="1500ms")
    f.start_server()
    for name in "abc":
        f.start_trainer(name)
    f.start_trainer("d", "--delay-ms", "2500")  # always past the deadline
    state = finish(f, 3)
    assert [h["round"] for h in state["history"]] == [1, 2, 3]
    for h in state["history"]:
        assert (h["selected"], h["contributed"], h["dropped"], h["refused"]) == (4, 3, 1, 0), h
        assert h["samples"] == 270 and h["bytes_in"] > 0 and h["bytes_out"] > 0
    for name in "abc":
        assert f.trainers[name].wait(timeout=30) == 0, f.log(name)
    assert "past the deadline: not sent" in f.log("d")
    log = f.log("aggregator")
    first = float(log.split("round 0: held-out accuracy ")[1].split()[0])
    assert state["history"][-1]["accuracy"] > first + 0.2, log
    # The last round is version 2, whole (model.pt and metrics.json), and dais serve serves it.
    assert state["published_version"] == 2
    v2 = f.work / "models" / "digits" / "2"
    assert json.loads((v2 / "metrics.json").read_text())["round"] == 3
    srv = start_server(f.work / "models")
    x, y = blobs(50, seed=1000)
    r = srv.infer("digits", {"INPUT__0": x}, version="2")
    assert r.status_code == 200, r.text
    served = np.array(r.json()["outputs"][0]["data"], dtype=np.float32).reshape(50, CLASSES)
    want = torch.jit.load(str(v2 / "model.pt"))(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(served, want, rtol=1e-4, atol=1e-5)
    assert (served.argmax(1) == y).mean() > 0.8


def test_a_killed_aggregator_resumes_after_its_last_completed_round(federation):
    # A version per round: the resumed aggregator goes on from the version it started from (not
    # the newest, its own) and never publishes a round twice.
    f = federation("resume", ["a", "b", "c"], rounds=6, quorum=3, deadline="5s")
    text = (f.work / "federation.yaml").read_text().replace("publish: final", "publish: every_round")
    (f.work / "federation.yaml").write_text(text)
    f.start_server()
    for name in "abc":
        f.start_trainer(name)
    f.wait_round(2)
    f.server.send_signal(signal.SIGKILL)
    f.server.wait()
    killed_at = f.state()["completed_round"]
    f.start_server()  # same --state-dir
    state = finish(f, 6)
    assert [h["round"] for h in state["history"]] == [1, 2, 3, 4, 5, 6]
    assert f"resumed after round {killed_at}" in f.log("aggregator")
    for name in "abc":  # the trainers waited for it and carried on
        assert f.trainers[name].wait(timeout=30) == 0, f.log(name)
    versions = sorted(int(p.name) for p in (f.work / "models" / "digits").iterdir()
                      if p.name.isdigit())
    assert versions == list(range(1, 8)) and state["published_version"] == 7, versions
    rounds = [json.loads((f.work / "models" / "digits" / str(v) / "metrics.json").read_text())
              ["round"] for v in range(2, 8)]
    assert rounds == [1, 2, 3, 4, 5, 6]


def test_malformed_updates_are_refused_by_name_and_do_not_poison_the_model(federation, tmp_path):
    stubs = generate_stubs(tmp_path / "stubs")
    pb = stubs.fed_pb
    f = federation("bad", ["a", "b", "rogue"], rounds=1, quorum=2, deadline="4s")
    f.start_server()
    channel = grpc.insecure_channel(f"127.0.0.1:{f.port}")
    stub = stubs.fed_grpc.FederationStub(channel)
    # The rogue polls first (a trainer like the others to the aggregator), then the honest two.
    wait_for(lambda: _ready(stub, pb), 30, "the aggregator's port")
    for name in "ab":
        f.start_trainer(name)

    def task():
        return stub.Poll(pb.PollRequest(federation="digits", client="rogue"))

    t = wait_for(lambda: [t for t in [task()] if t.kind == pb.Task.TRAIN], 30, "a TRAIN task")[0]
    n = len(t.weights)

    def submit(**kw):
        with pytest.raises(grpc.RpcError) as e:
            stub.Submit(pb.UpdateRequest(federation="digits", client="rogue", round=t.round,
                                         **kw))
        return e.value

    nan = [0.0] * n
    nan[7] = float("nan")
    e = submit(samples=10, delta=nan)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "client rogue" in e.details() and "parameter 7 is NaN" in e.details(), e.details()
    e = submit(samples=10, delta=[0.0] * (n - 1))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"{n - 1} parameters, the model {n}" in e.details(), e.details()
    e = submit(samples=0, delta=[1.0] * n)
    assert "samples must be positive" in e.details(), e.details()
    e = submit(samples=10, delta=[1.0] * n, masked=[1, 2])
    assert "no secure aggregation" in e.details(), e.details()
    with pytest.raises(grpc.RpcError) as bad_key:  # a low-order point would break every mask
        stub.Poll(pb.PollRequest(federation="digits", client="rogue", public_key=bytes(32),
                                 key_round=1))
    assert bad_key.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "low-order" in bad_key.value.details()
    with pytest.raises(grpc.RpcError) as other:
        stub.Poll(pb.PollRequest(federation="nope", client="rogue"))
    assert other.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as bad_id:
        stub.Poll(pb.PollRequest(federation="digits", client="no spaces"))
    assert bad_id.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    state = finish(f, 1)
    h = state["history"][0]
    assert (h["contributed"], h["dropped"], h["refused"]) == (2, 1, 1), h  # one trainer
    log = f.log("aggregator")
    assert "update of rogue refused: client rogue: parameter 7 is NaN" in log
    glob = global_params(f)
    assert glob.size == n and np.isfinite(glob).all()


def global_params(f: fed_demo.Federation) -> np.ndarray:
    """The parameters after the last completed round (the file state.json names)."""
    return np.fromfile(f.work / "state" / f.state()["global"], dtype=np.float32)


def _ready(stub, pb) -> bool:
    try:
        stub.Poll(pb.PollRequest(federation="digits", client="rogue"), timeout=2,
                  wait_for_ready=True)
        return True
    except grpc.RpcError:
        return False


def test_secure_aggregation_equals_plain_averaging_and_recovers_a_dropped_trainer(federation):
    globals_ = {}
    for secure in (False, True):
        f = federation("secure" if secure else "plain", ["a", "b", "c", "d"], rounds=1,
                       quorum=3, deadline="2500ms", secure=secure)
        f.start_server()
        for name in "abc":
            f.start_trainer(name)
        f.start_trainer("d", "--delay-ms", "4000")  # keyed in, then never sends
        state = finish(f, 1)
        h = state["history"][0]
        assert (h["contributed"], h["dropped"]) == (3, 1), h
        globals_[secure] = global_params(f)
        if secure:
            log = f.log("aggregator")
            assert "roster of 4 fixed" in log, log
            assert "1 dropped (d): asking the 3 survivors for their seeds" in log, log
            assert "seeds with 1 dropped trainer(s) revealed" in f.log("a")
            assert h["train_loss"] is None  # the aggregator never saw a plain update
            # Masked updates are the encoding (8 bytes a value) plus the weight.
            assert h["bytes_in"] > 3 * 8 * len(globals_[secure])
    # The masks cancelled: the same mean as plain FedAvg of the same three updates, to the
    # fixed point's resolution (2^-20 per weighted value).
    np.testing.assert_allclose(globals_[True], globals_[False], atol=1e-5)
    assert np.abs(globals_[True]).sum() > 0


def test_differential_privacy_reports_epsilon_per_round(federation):
    f = federation("dp", ["a", "b", "c"], rounds=3, quorum=3, deadline="5s",
                   extra="privacy: {clip_norm: 0.5, noise_multiplier: 1.0, delta: 1e-5}\n")
    f.start_server()
    for name in "abc":
        f.start_trainer(name)
    state = finish(f, 3)
    eps = [h["epsilon"] for h in state["history"]]
    assert 0 < eps[0] < eps[1] < eps[2], eps
    assert all(h["samples"] == 3 for h in state["history"])  # unweighted: each trainer counts 1
    # The noise was applied: the mean of updates clipped to 0.5 has a norm of at most 0.5; the
    # noise (deviation 1.0 x 0.5 / 3 on each of the 195 parameters) adds about 2.3.
    assert all(h["update_norm"] > 1.0 for h in state["history"]), state["history"]
    assert "epsilon" in f.log("aggregator")


def test_a_bad_federation_spec_is_refused_naming_the_field(tmp_path):
    f = make_federation(tmp_path / "spec", ["a", "b"], rounds=1, quorum=3, deadline="1s")
    r = subprocess.run([str(dais_binary()), "fed", "serve", "--config",
                        str(f.work / "federation.yaml"), "--state-dir", str(tmp_path / "s")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "min_clients: must not exceed clients_per_round" in r.stderr, r.stderr
    text = (f.work / "federation.yaml").read_text().replace("min_clients: 3", "min_clients: 1")
    (f.work / "federation.yaml").write_text(text + "aggregation: fedmedian\n")
    r = subprocess.run([str(dais_binary()), "fed", "serve", "--config",
                        str(f.work / "federation.yaml"), "--state-dir", str(tmp_path / "s")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "aggregation: 'fedmedian' is not fedavg or fedprox" in r.stderr


def test_a_federation_applied_to_the_cluster_is_released_by_canary(
        federation, etcd_server, start_server, dais_bin, tmp_path):
    from cluster_util import TTL, Scheduler, apply, ctl, instances
    f = federation("canary", ["a", "b"], rounds=2, quorum=2, deadline="5s",
                   extra="release: {strategy: canary, route: digits, deployment: digits-v1, "
                         "steps: [10, 100], interval: 1h, ready_timeout: 2m}\n")
    for node in ("n1", "n2"):  # a node holds one version of a model: v2 goes to the other one
        start_server(f.work / "models", "--etcd", etcd_server.endpoint, "--node-id", node,
                     "--lease-ttl-secs", str(TTL), command="node")
    sched = Scheduler(dais_bin, etcd_server, "s1", tmp_path)
    try:
        apply(dais_bin, etcd_server, tmp_path,
              "name: digits-v1\nmodel: digits\nversion: 1\nreplicas: 1\n")
        apply(dais_bin, etcd_server, tmp_path, "kind: route\nname: digits\nmodel: digits\n"
              "versions: [{version: 1, weight: 100}]\n")
        wait_for(lambda: [i for i in instances(etcd_server, "digits").values()
                          if i["state"] == "READY"], 60, "v1 READY")
        # The spec goes to etcd with `dais ctl apply` (paths made absolute); the aggregator reads it.
        out = ctl(dais_bin, etcd_server, "apply", "-f", str(f.work / "federation.yaml")).stdout
        assert "federation digits applied (2 rounds of digits" in out, out
        stored = etcd_server.get_prefix("/dais/federations/")["/dais/federations/digits"]
        assert f"repository: {f.work / 'models'}" in stored, stored
        bad = f.work / "bad.yaml"
        bad.write_text("kind: federation\nname: x\nmodel: m\nrepository: r\nrounds: 0\n")
        refused = ctl(dais_bin, etcd_server, "apply", "-f", str(bad), check=False)
        assert refused.returncode != 0 and "rounds: an integer from 1" in refused.stderr
        f.start_server("--federation", "digits", "--etcd", etcd_server.endpoint, config=False)
        for name in "ab":
            f.start_trainer(name)
        f.wait_round(2, timeout=180)
        assert f.server.wait(timeout=120) == 0, f.log("aggregator")[-3000:]
        state = f.state()
        assert state["published_version"] == 2
        route = json.loads(etcd_server.get_prefix("/dais/routes/digits")["/dais/routes/digits"])
        assert {v["version"]: v["weight"] for v in route["versions"]} == {1: 90, 2: 10}, route
        rollout = json.loads(etcd_server.get_prefix("/dais/rollouts/digits")
                             ["/dais/rollouts/digits"])
        assert (rollout["from"], rollout["to"], rollout["state"]) == (1, 2, "running"), rollout
        assert "canary rollout of digits v1 -> v2 started" in f.log("aggregator")
    finally:
        sched.stop()


def test_trainers_reach_the_aggregator_over_mutual_tls_only_with_a_certificate(federation,
                                                                               tmp_path):
    from conftest import make_certs
    certs = make_certs(tmp_path / "certs")
    f = federation("tls", ["a", "b"], rounds=1, quorum=2, deadline="5s")
    f.start_server("--fed-use-ssl-mutual", "true", "--fed-server-cert",
                   str(certs / "server.crt"), "--fed-server-key", str(certs / "server.key"),
                   "--fed-root-cert", str(certs / "ca.crt"))
    # No client certificate: the handshake is refused; the trainer gives up (exit 1).
    shutil.copytree(f.work / "data" / "a", f.work / "data" / "stranger")
    stranger = f.start_trainer("stranger", "--fed-tls-ca", str(certs / "ca.crt"),
                               "--give-up-s", "2")
    assert stranger.wait(timeout=60) == 1, f.log("stranger")
    assert "unreachable" in f.log("stranger")
    for name in "ab":
        f.start_trainer(name, "--fed-tls-ca", str(certs / "ca.crt"), "--fed-tls-cert",
                        str(certs / "client.crt"), "--fed-tls-key", str(certs / "client.key"),
                        "--fed-tls-server-name", "localhost")
    state = finish(f, 1)
    assert state["history"][0]["contributed"] == 2
    assert "(TLS)" in f.log("aggregator")
