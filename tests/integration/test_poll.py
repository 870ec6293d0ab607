"""--model-control-mode poll: versions appear, change and disappear while clients keep sending
requests; no request fails and every response matches the version that answered it."""

import os
import threading
import time

import numpy as np
import pytest
import requests
import torch


@pytest.mark.slow
def test_poll_mode_version_changes_under_load(start_server, repo_copy, tmp_path, gen_models,
                                              refs, kv):
    srv = start_server(repo_copy, "--model-control-mode", "poll", "--repository-poll-secs", "1")
    model_dir = repo_copy / "mlp_small"
    x = np.random.default_rng(71).normal(size=(2, 16)).astype(np.float32)

    m2a = gen_models.build_mlp(gen_models.SMALL_SIZES, 101)
    m2b = gen_models.build_mlp(gen_models.SMALL_SIZES, 102)
    with torch.no_grad():
        ref2a = m2a(torch.from_numpy(x)).numpy()
        ref2b = m2b(torch.from_numpy(x)).numpy()
    ref1 = refs.mlp(repo_copy, "mlp_small", x)
    assert not np.allclose(ref1, ref2a) and not np.allclose(ref2a, ref2b)
    refs_by_version = {"1": [("v1", ref1)], "2": [("v2a", ref2a), ("v2b", ref2b)]}

    def close(a, b):
        return np.allclose(a, b, rtol=1e-5, atol=1e-5)

    # -- clients -------------------------------------------------------------------------------
    stop = threading.Event()
    failures, counts = [], {}
    lock = threading.Lock()
    url = srv.url + "/v2/models/mlp_small/infer"
    body = kv.infer_body({"INPUT__0": x})

    def client(k):
        session = requests.Session()
        while not stop.is_set():
            t = time.monotonic()
            try:
                r = session.post(url, json=body, timeout=30)
            except requests.RequestException as e:
                with lock:
                    failures.append((t, f"client {k}: {e!r}"))
                continue
            if r.status_code != 200:
                with lock:
                    failures.append((t, f"client {k}: {r.status_code} {r.text[:200]}"))
                continue
            b = r.json()
            version = b.get("model_version")
            out = np.asarray(b["outputs"][0]["data"], np.float32).reshape(2, 4)
            tags = [tag for tag, ref in refs_by_version.get(version, []) if close(out, ref)]
            with lock:
                if not tags:
                    failures.append((t, f"client {k}: version {version!r} output matches "
                                        f"no reference for it: {out.tolist()}"))
                else:
                    counts[tags[0]] = counts.get(tags[0], 0) + 1
            time.sleep(0.005)

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()

    def versions():
        r = srv.get("/v2/models/mlp_small")
        return r.json()["versions"] if r.status_code == 200 else None

    def probe_matches(version, ref):
        r = srv.infer("mlp_small", {"INPUT__0": x})
        if r.status_code != 200:
            return False
        out = kv.json_outputs(r)["OUTPUT__0"]
        return r.json().get("model_version") == version and close(out, ref)

    log = []
    t0 = time.monotonic()

    def mark(what):
        log.append(f"{time.monotonic() - t0:6.2f} s  {what}")

    try:
        srv.wait_until(lambda: sum(counts.values()) >= 20, 30, "clients to get going")
        mark(f"clients running, versions {versions()}")

        # 1. Add version 2: staged outside the repository and moved in at once.
        staging = tmp_path / "staging"
        gen_models.save_torchscript(m2a, staging / "2" / "model.pt")
        os.rename(staging / "2", model_dir / "2")
        mark("added version 2")
        srv.wait_until(lambda: "2" in (versions() or []), 10, "version 2 in the metadata")
        mark(f"metadata versions {versions()}")
        srv.wait_until(lambda: probe_matches("2", ref2a), 10, "version 2 to answer")
        srv.wait_until(lambda: versions() == ["2"], 10,
                       "version 1 to unload (version policy latest 1)")
        mark(f"settled on version 2, versions {versions()}")

        # 2. Replace version 2's weights (new mtime; atomic rename of the file).
        time.sleep(1.1)
        gen_models.save_torchscript(m2b, model_dir / "2" / "model.pt")
        mark("modified version 2")
        srv.wait_until(lambda: probe_matches("2", ref2b), 15, "the modified version 2")
        mark("settled on modified version 2")

        # 3. Delete version 2 (moved out at once): back to version 1.
        time.sleep(1.1)
        os.rename(model_dir / "2", tmp_path / "removed-2")
        mark("deleted version 2")
        srv.wait_until(lambda: probe_matches("1", ref1), 15, "version 1 to answer again")
        srv.wait_until(lambda: versions() == ["1"], 10, "metadata versions back to ['1']")
        mark(f"settled on version 1, versions {versions()}")
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join(35)
        print("\n".join(log))
        print(f"responses by weights: {counts}; failures: {len(failures)}")

    assert not failures, f"{len(failures)} failed requests, first: " + \
        "; ".join(f"{t - t0:.2f} s {what}" for t, what in failures[:5])
    assert counts.get("v1", 0) > 0 and counts.get("v2a", 0) > 0 and counts.get("v2b", 0) > 0, \
        counts
    assert srv.running()


def test_issue5_failed_new_version_keeps_the_old_one_serving(start_server, repo_copy, kv):
    """Regression (issue 5): a new version that fails to load must not take the serving one
    down with it: the old version keeps answering and the index shows why the new one is not
    served."""
    srv = start_server(repo_copy, "--model-control-mode", "poll", "--repository-poll-secs", "1")
    x = np.zeros((1, 16), np.float32)
    url = srv.url + "/v2/models/mlp_small/infer"
    body = kv.infer_body({"INPUT__0": x})
    assert requests.post(url, json=body, timeout=10).json()["model_version"] == "1"
    bad = repo_copy / "mlp_small" / "2"
    bad.mkdir()
    (bad / "model.pt").write_bytes(b"not a TorchScript archive")
    deadline = time.monotonic() + 20
    state = None
    while time.monotonic() < deadline:
        r = requests.post(url, json=body, timeout=10)
        assert r.status_code == 200, r.text
        assert r.json()["model_version"] == "1"
        index = requests.post(srv.url + "/v2/repository/index", json={}, timeout=10).json()
        state = {(e["name"], e.get("version")): e for e in index}
        v2 = state.get(("mlp_small", "2"))
        if v2 is not None and v2.get("state") == "UNAVAILABLE":
            break
        time.sleep(0.2)
    assert state[("mlp_small", "2")]["state"] == "UNAVAILABLE", state
    assert state[("mlp_small", "2")]["reason"], state
    assert state[("mlp_small", "1")]["state"] == "READY", state
    for _ in range(3):  # still serving after more polls
        time.sleep(1.0)
        r = requests.post(url, json=body, timeout=10)
        assert r.status_code == 200 and r.json()["model_version"] == "1", r.text
        # ... and the server stays ready: a version of every model serves.
        ready = requests.get(srv.url + "/v2/health/ready", timeout=10)
        assert ready.status_code == 200, ready.text
