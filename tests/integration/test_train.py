"""Issue 33, part 3: `dais train`. Predictions served by a real `dais serve` (feedback stream) and
labels posted to it (label stream), both archived by `dais archive`, are joined point in time
(no label received after the cut-off), an XGBoost candidate is trained and scored against the
serving version on the same held-out rows, and published as the next version only when better.
Real redis-server, real `dais serve`, real XGBoost."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np

MODEL = "xgb_binary"


def run_train(dais_bin, spec, *extra):
    return subprocess.run([str(dais_bin), "train", "--config", str(spec), *extra],
                          capture_output=True, text=True, timeout=300)


def archive(dais_bin, redis_server, stream, root, dataset):
    r = subprocess.run([str(dais_bin), "archive", "--redis", redis_server.addr, "--stream",
                        stream, "--consumer", "t1", "--root", str(root), "--dataset", dataset,
                        "--drain"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def write_spec(path, repo, root, holdout_ms, **extra):
    lines = [f"model: {MODEL}", f"repository: {repo}", f"feedback: {root}/feedback",
             f"labels: {root}/labels", "label: fraud", "input: input__0", "window: 1h",
             f"holdout: {holdout_ms}ms", "metric: auc",
             "xgboost: {rounds: 30, params: {max_depth: 3, eta: 0.3, "
             "objective: 'binary:logistic'}}"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_publishes_a_better_candidate_and_only_then(start_server, repo_copy, redis_server,
                                                         dais_bin, tmp_path):
    srv = start_server(repo_copy,
                       "--feedback-stream", f"redis://127.0.0.1:{redis_server.port}/fb",
                       "--label-stream", f"redis://127.0.0.1:{redis_server.port}/labels")
    rng = np.random.default_rng(7)
    x = rng.random((600, 8), dtype=np.float32)
    fraud = (x[:, 0] + x[:, 1] > 1.0).astype(int)  # a pattern the serving version never saw
    split_ms = None
    for i in range(600):
        if i == 400:
            time.sleep(0.01)
            split_ms = int(time.time() * 1000)
        r = srv.infer(MODEL, {"input__0": x[i:i + 1]}, id=f"tx-{i}")
        assert r.status_code == 200, r.text
    labels = [{"request_id": f"tx-{i}", "labels": {"fraud": int(fraud[i])}, "source": "cb"}
              for i in range(600)]
    assert srv.post("/labels", json={"labels": labels}).json() == {"accepted": 600}
    time.sleep(0.01)
    cutoff_ms = int(time.time() * 1000)
    # Labels that arrive after the cut-off, flipped: were they used, the candidate would be worse.
    late = [{"request_id": f"tx-{i}", "labels": {"fraud": 1 - int(fraud[i])}, "source": "cb"}
            for i in range(600)]
    time.sleep(0.01)
    assert srv.post("/labels", json={"labels": late}).json() == {"accepted": 600}

    root = tmp_path / "offline"
    archive(dais_bin, redis_server, "fb", root, "feedback")
    archive(dais_bin, redis_server, "labels", root, "labels")

    spec = write_spec(tmp_path / "training.yaml", repo_copy, root, cutoff_ms - split_ms,
                      min_improvement=0.05)
    r = run_train(dais_bin, spec, "--cutoff-ms", str(cutoff_ms))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"published {MODEL} version 2" in r.stdout, r.stdout
    assert "round 30/30" in r.stderr, r.stderr  # progress
    v2 = repo_copy / MODEL / "2"
    metrics = json.loads((v2 / "metrics.json").read_text())
    assert (v2 / "xgboost.json").exists()
    assert metrics["published"] is True and metrics["base_version"] == 1
    assert metrics["join"]["labels"] == 600 and metrics["join"]["labels_after_cutoff"] == 600
    assert metrics["join"]["labeled"] == 600
    assert metrics["data"]["train_rows"] == 400 and metrics["data"]["holdout_rows"] == 200
    assert metrics["candidate"]["auc"] > metrics["serving"]["auc"] + 0.05, metrics
    assert metrics["candidate"]["auc"] > 0.9, metrics  # the late, flipped labels were not used
    assert not list((repo_copy / MODEL).glob(".train-*"))

    # The published version loads and serves.
    srv2 = start_server(repo_copy)
    assert srv2.get(f"/v2/models/{MODEL}/versions/2/ready").status_code == 200

    # Continued from the serving version's booster (now version 2), compared, not published.
    spec = write_spec(tmp_path / "continue.yaml", repo_copy, root, cutoff_ms - split_ms)
    spec.write_text(spec.read_text().replace("{rounds: 30,", "{rounds: 30, continue: true,"))
    r = run_train(dais_bin, spec, "--cutoff-ms", str(cutoff_ms), "--dry-run")
    assert r.returncode in (0, 3), r.stdout + r.stderr
    assert "round 30/30" in r.stderr and "serving (version 2)" in r.stdout, r.stdout + r.stderr
    assert not (repo_copy / MODEL / "3").exists()

    # A candidate that is not better by the margin is not published.
    spec = write_spec(tmp_path / "strict.yaml", repo_copy, root, cutoff_ms - split_ms,
                      min_improvement=1.5)
    r = run_train(dais_bin, spec, "--cutoff-ms", str(cutoff_ms))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "not published" in r.stdout and "at least +1.5" in r.stdout, r.stdout
    assert not (repo_copy / MODEL / "3").exists()

    # An empty held-out window: a clear error, nothing published.
    r = run_train(dais_bin, spec, "--cutoff-ms", str(split_ms - 60_000))
    assert r.returncode == 1 and "nothing to train on" in r.stderr, r.stderr
    spec = write_spec(tmp_path / "tiny.yaml", repo_copy, root, 1)
    r = run_train(dais_bin, spec, "--cutoff-ms", str(cutoff_ms))
    assert r.returncode == 1 and "holdout:" in r.stderr and "both need rows" in r.stderr, r.stderr
    assert not (repo_copy / MODEL / "3").exists()


def test_train_spec_errors_name_the_field(repo_copy, dais_bin, tmp_path):
    root = tmp_path / "offline"
    (root / "feedback").mkdir(parents=True)
    spec = write_spec(tmp_path / "t.yaml", repo_copy, root, 1000)
    r = run_train(dais_bin, spec)
    assert r.returncode == 2 and "labels: no directory" in r.stderr, r.stderr
    (root / "labels").mkdir()
    spec.write_text(spec.read_text().replace(f"model: {MODEL}", "model: nosuch"))
    r = run_train(dais_bin, spec)
    assert r.returncode == 2 and "model: no directory" in r.stderr, r.stderr
    spec.write_text(spec.read_text().replace("model: nosuch", f"model: {MODEL}")
                    .replace("metric: auc", "metric: f1"))
    r = run_train(dais_bin, spec)
    assert r.returncode == 2 and "metric: auc, logloss or accuracy" in r.stderr, r.stderr
    spec.write_text(spec.read_text().replace("metric: f1", "metric: auc\nfeatures: [a]"))
    r = run_train(dais_bin, spec)
    assert r.returncode == 2 and "features: unknown field" in r.stderr, r.stderr
    r = run_train(dais_bin, tmp_path / "missing.yaml")
    assert r.returncode == 2 and "cannot read the training spec" in r.stderr, r.stderr
    # No data in the datasets: nothing to train on.
    spec.write_text(spec.read_text().replace("\nfeatures: [a]", ""))
    r = run_train(dais_bin, spec)
    assert r.returncode == 1 and "nothing to train on" in r.stderr, r.stderr




def test_train_continues_a_torchscript_mlp_with_libtorch(start_server, repo_copy, redis_server,
                                                         dais_bin, tmp_path):
    """The MLP example (TorchScript, 16 inputs -> 4 logits) trained further with the LibTorch C++
    API on labels that name a class, scored against the serving version on accuracy, published
    as version 2 and served."""
    srv = start_server(repo_copy,
                       "--feedback-stream", f"redis://127.0.0.1:{redis_server.port}/fb",
                       "--label-stream", f"redis://127.0.0.1:{redis_server.port}/labels")
    rng = np.random.default_rng(3)
    x = rng.random((800, 16), dtype=np.float32)
    cls = x[:, :4].argmax(axis=1)  # the class: which of the first four features is largest
    for i in range(800):
        r = srv.infer("mlp_small", {"INPUT__0": x[i:i + 1]}, id=f"m-{i}")
        assert r.status_code == 200, r.text
    labels = [{"request_id": f"m-{i}", "labels": {"cls": int(cls[i])}, "source": "t"}
              for i in range(800)]
    assert srv.post("/labels", json={"labels": labels}).json() == {"accepted": 800}
    root = tmp_path / "offline"
    archive(dais_bin, redis_server, "fb", root, "feedback")
    archive(dais_bin, redis_server, "labels", root, "labels")
    spec = tmp_path / "mlp.yaml"
    spec.write_text("\n".join([
        "model: mlp_small", f"repository: {repo_copy}", f"feedback: {root}/feedback",
        f"labels: {root}/labels", "label: cls", "input: INPUT__0", "window: 1h",
        "holdout: 25%", "metric: accuracy", "min_improvement: 0.1",
        "torch: {epochs: 40, learning_rate: 0.01, batch_size: 32}"]) + "\n")
    r = run_train(dais_bin, spec)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "published mlp_small version 2" in r.stdout, r.stdout
    assert "epoch 40/40" in r.stderr, r.stderr
    metrics = json.loads((repo_copy / "mlp_small" / "2" / "metrics.json").read_text())
    assert 190 <= metrics["data"]["holdout_rows"] <= 210, metrics  # 25 %, ties in ms aside
    assert metrics["candidate"]["accuracy"] > metrics["serving"]["accuracy"] + 0.1, metrics
    assert (repo_copy / "mlp_small" / "2" / "model.pt").exists()
    print(json.dumps({k: metrics[k] for k in ("candidate", "serving", "rounds")}))
    srv2 = start_server(repo_copy)
    assert srv2.get("/v2/models/mlp_small/versions/2/ready").status_code == 200

    # AUC needs a binary model: refused naming the field, nothing published.
    spec.write_text(spec.read_text().replace("metric: accuracy", "metric: auc"))
    r = run_train(dais_bin, spec)
    assert r.returncode == 1 and "metric: auc needs a binary model" in r.stderr, r.stderr
    assert not (repo_copy / "mlp_small" / "3").exists()
