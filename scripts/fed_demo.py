#!/usr/bin/python3
"""Federated learning end to end (docs/federated.md): `dais fed serve` and ten `dais fed join`
trainers on loopback learn scikit-learn's digits (shipped by python3-sklearn, nothing
downloaded) split non-IID (each trainer holds mostly two digits), while 30 % of the trainers
are killed or slowed for some rounds. The same model, initialisation and SGD trained centrally
on the union of the trainers' rows is the reference; accuracy per round on the same held-out
rows is printed for both (and plotted with --svg).

    scripts/fed_demo.py --build build/release [--rounds 30] [--secure] [--int8] [--svg F]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
DAY = "dt=2026-12-07"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_rows(folder: Path, x: np.ndarray, y: np.ndarray) -> None:
    (folder / DAY).mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / DAY / "part-0.jsonl.gz", "wt") as f:
        for xi, yi in zip(x, y):
            f.write(json.dumps({"x": [round(float(v), 5) for v in xi], "y": int(yi)}) + "\n")


class Mlp(torch.nn.Module):
    def __init__(self, inputs: int, hidden: int, classes: int):
        super().__init__()
        self.fc1 = torch.nn.Linear(inputs, hidden)
        self.fc2 = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def make_model(inputs: int, classes: int, hidden: int = 32, seed: int = 0) -> Mlp:
    torch.manual_seed(seed)
    return Mlp(inputs, hidden, classes)


def write_repository(repo: Path, name: str, model: Mlp, inputs: int, classes: int) -> None:
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    torch.jit.script(model).save(str(repo / name / "1" / "model.pt"))
    (repo / name / "config.pbtxt").write_text(f"""name: "{name}"
platform: "pytorch_libtorch"
max_batch_size: 64
input [ {{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ {inputs} ] }} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ {classes} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
""")


def non_iid_split(x, y, clients: int, seed: int, alpha: float = 0):
    """Sorted by label, cut into 2 x clients shards, two shards per trainer (McMahan et al.); or
    with alpha > 0, each digit's rows shared among the trainers by Dirichlet(alpha) proportions
    (Hsu et al. 2019: smaller is more skewed)."""
    if alpha > 0:
        rng = np.random.default_rng(seed)
        parts = [[] for _ in range(clients)]
        for c in np.unique(y):
            rows = rng.permutation(np.flatnonzero(y == c))
            cuts = (np.cumsum(rng.dirichlet([alpha] * clients)) * len(rows)).astype(int)[:-1]
            for i, chunk in enumerate(np.split(rows, cuts)):
                parts[i].extend(chunk.tolist())
        return [np.array(sorted(p), dtype=int) for p in parts]
    order = np.argsort(y, kind="stable")
    shards = np.array_split(order, 2 * clients)
    perm = np.random.default_rng(seed).permutation(2 * clients)
    return [np.concatenate([shards[perm[2 * i]], shards[perm[2 * i + 1]]]) for i in range(clients)]


def centralized(model: Mlp, x, y, xh, yh, rounds: int, epochs: int, lr: float, batch: int):
    """The reference: the same model and SGD on all the rows; accuracy after each round."""
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.long)
    xht = torch.tensor(xh, dtype=torch.float32)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(0)
    out = []
    for _ in range(rounds):
        for _ in range(epochs):
            perm = torch.randperm(len(xt), generator=gen)
            for b in range(0, len(xt), batch):
                idx = perm[b:b + batch]
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
                opt.step()
        with torch.no_grad():
            out.append(float((model(xht).argmax(1).numpy() == yh).mean()))
    return out


def federation_yaml(path: Path, rounds: int, clients: int, quorum: int, deadline: str,
                    epochs: int, lr: float, batch: int, secure: bool, extra: str = "") -> None:
    path.write_text(f"""kind: federation
name: digits
model: digits
repository: models
rounds: {rounds}
clients_per_round: {clients}
min_clients: {quorum}
round_deadline: {deadline}
local: {{epochs: {epochs}, learning_rate: {lr}, batch_size: {batch}}}
max_update_norm: 5
secure_aggregation: {'true' if secure else 'false'}
holdout: data/holdout
publish: final
{extra}""")


class Federation:
    """An aggregator and its trainers as processes; their logs in the work folder."""

    def __init__(self, dais: str, work: Path, retry_ms: int = 100):
        self.dais, self.work, self.retry_ms = dais, work, retry_ms
        self.port = free_port()
        self.server = None
        self.trainers: dict[str, subprocess.Popen] = {}

    def start_server(self, *extra: str, config: bool = True) -> subprocess.Popen:
        """config=False: the spec comes from etcd (extra holds --federation and --etcd)."""
        log = open(self.work / "aggregator.log", "a")
        spec = ["--config", str(self.work / "federation.yaml")] if config else []
        self.server = subprocess.Popen(
            [self.dais, "fed", "serve", *spec, "--state-dir", str(self.work / "state"), "--address", "127.0.0.1", "--port",
             str(self.port), "--retry-after-ms", str(self.retry_ms), *extra],
            stdout=log, stderr=subprocess.STDOUT)
        return self.server

    def start_trainer(self, name: str, *extra: str) -> subprocess.Popen:
        log = open(self.work / f"{name}.log", "a")
        p = subprocess.Popen(
            [self.dais, "fed", "join", "--aggregator", f"127.0.0.1:{self.port}", "--federation",
             "digits", "--client", name, "--data", str(self.work / "data" / name), *extra],
            stdout=log, stderr=subprocess.STDOUT)
        self.trainers[name] = p
        return p

    def kill_trainer(self, name: str) -> None:
        p = self.trainers.pop(name)
        p.send_signal(signal.SIGKILL)
        p.wait()

    def state(self) -> dict:
        try:
            return json.loads((self.work / "state" / "state.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {"completed_round": 0, "history": []}

    def wait_round(self, n: int, timeout: float = 300) -> dict:
        end = time.time() + timeout
        while time.time() < end:
            s = self.state()
            if s["completed_round"] >= n:
                return s
            if self.server.poll() is not None:
                raise RuntimeError("the aggregator exited: " + self.log("aggregator")[-3000:])
            time.sleep(0.05)
        raise TimeoutError(f"round {n} not done in {timeout} s: " + self.log("aggregator")[-3000:])

    def log(self, name: str) -> str:
        try:
            return (self.work / f"{name}.log").read_text()
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        for p in list(self.trainers.values()) + ([self.server] if self.server else []):
            if p.poll() is None:
                p.kill()
                p.wait()


def svg_plot(path: Path, series: dict[str, list[float]], title: str) -> None:
    w, h, l, b = 640, 360, 50, 40
    rounds = max(len(v) for v in series.values())
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    def px(i, a):
        return l + (w - l - 20) * i / max(1, rounds - 1), h - b - (h - b - 30) * a
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             'font-family="sans-serif" font-size="12">',
             f'<text x="{w / 2}" y="18" text-anchor="middle">{title}</text>']
    for a in (0, 0.25, 0.5, 0.75, 1.0):
        _, y = px(0, a)
        parts.append(f'<line x1="{l}" y1="{y}" x2="{w - 20}" y2="{y}" stroke="#ddd"/>'
                     f'<text x="{l - 6}" y="{y + 4}" text-anchor="end">{a:.2f}</text>')
    parts.append(f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle">round</text>')
    for k, (name, vals) in enumerate(series.items()):
        pts = " ".join(f"{px(i, v)[0]:.1f},{px(i, v)[1]:.1f}" for i, v in enumerate(vals))
        parts.append(f'<polyline fill="none" stroke="{colors[k % 4]}" stroke-width="2" '
                     f'points="{pts}"/>')
        parts.append(f'<text x="{l + 10}" y="{40 + 16 * k}" fill="{colors[k % 4]}">{name}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--secure", action="store_true", help="secure aggregation (pairwise masks)")
    ap.add_argument("--int8", action="store_true", help="8-bit updates")
    ap.add_argument("--no-faults", action="store_true", help="no trainer killed or slowed")
    ap.add_argument("--alpha", type=float, default=0.5,
                    help="each digit's rows shared by Dirichlet(alpha) proportions; 0: two "
                    "digits per trainer (the pathological split)")
    ap.add_argument("--fedprox", type=float, default=0, metavar="MU",
                    help="FedProx with this proximal term instead of FedAvg")
    ap.add_argument("--epochs", type=int, default=2, help="local epochs per round")
    ap.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    ap.add_argument("--svg", help="plot accuracy per round here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()
    from sklearn.datasets import load_digits

    dais = str(Path(a.build) / "src/cmd/dais")
    work = Path(tempfile.mkdtemp(prefix="dais-fed-demo-"))
    digits = load_digits()
    x, y = (digits.data / 16.0).astype(np.float32), digits.target
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(y))
    held = perm[: len(y) // 5]
    train = perm[len(y) // 5:]
    write_rows(work / "data" / "holdout", x[held], y[held])
    parts = non_iid_split(x[train], y[train], a.clients, seed=1, alpha=a.alpha)
    names = [f"edge-{i}" for i in range(a.clients)]
    for name, idx in zip(names, parts):
        write_rows(work / "data" / name, x[train][idx], y[train][idx])
    epochs, lr, batch = a.epochs, a.lr, 16
    write_repository(work / "models", "digits", make_model(64, 10), 64, 10)
    quorum = max(1, int(a.clients * 0.6))
    federation_yaml(work / "federation.yaml", a.rounds, a.clients, quorum, "6s", epochs, lr,
                    batch, a.secure,
                    f"aggregation: fedprox\nproximal_mu: {a.fedprox}\n" if a.fedprox else "")
    split = f"Dirichlet({a.alpha}) per digit" if a.alpha > 0 else "two digits each"
    print(f"digits: {len(train)} rows for {a.clients} trainers ({split}, "
          f"{', '.join(str(len(p)) for p in parts)} rows), {len(held)} held out; "
          f"{a.rounds} rounds, quorum {quorum}, {epochs} local epochs, SGD lr {lr}")
    ref = centralized(make_model(64, 10), x[train], y[train], x[held], y[held], a.rounds, epochs,
                      lr, batch)
    fed = Federation(dais, work)
    extra = ["--int8"] if a.int8 else []
    faulty = names[: max(1, round(a.clients * 0.3))]
    fault_from, fault_to = a.rounds // 5 + 1, a.rounds // 2
    try:
        fed.start_server()
        for n in names:
            fed.start_trainer(n, *extra)
        if not a.no_faults:
            fed.wait_round(fault_from - 1)
            print(f"round {fault_from}: {', '.join(faulty[:-1])} killed (SIGKILL), "
                  f"{faulty[-1]} slowed past the deadline, until round {fault_to}")
            for n in faulty:
                fed.kill_trainer(n)
            fed.start_trainer(faulty[-1], "--delay-ms", "7000", *extra)
            fed.wait_round(fault_to)
            fed.kill_trainer(faulty[-1])
            for n in faulty:
                fed.start_trainer(n, *extra)
            print(f"round {fault_to + 1}: the three are back")
        fed.wait_round(a.rounds)
        fed.server.wait(timeout=60)
        state = fed.state()  # as the aggregator left it: the publication is recorded last
        for p in fed.trainers.values():
            p.wait(timeout=60)
    finally:
        fed.stop()
    hist = state["history"]
    print()
    print("| round | trainers | dropped | federated accuracy | centralized accuracy | "
          "bytes in per trainer | bytes out per trainer | seconds |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for h in hist:
        r = h["round"]
        print(f"| {r} | {h['contributed']} | {h['dropped']} | {h['accuracy']:.4f} | "
              f"{ref[r - 1]:.4f} | {h['bytes_in'] // max(1, h['contributed'])} | "
              f"{h['bytes_out'] // max(1, h['sent_to'])} | {h['seconds']:.2f} |")
    final, central = hist[-1]["accuracy"], ref[-1]
    within = next((h["round"] for h in hist if h["accuracy"] >= ref[h["round"] - 1] - 0.02), None)
    print(f"\nafter {a.rounds} rounds: federated {final:.4f}, centralized {central:.4f} "
          f"({(final - central) * 100:+.2f} points); published version "
          f"{state['published_version']}; first within 2 points of centralized at round "
          f"{within}")
    if a.svg:
        svg_plot(Path(a.svg), {"centralized": ref, "federated" + (" (secure)" if a.secure else "")
                               + (" int8" if a.int8 else ""): [h["accuracy"] for h in hist]},
                 f"digits, {a.clients} non-IID trainers, 30 % killed or slowed in rounds "
                 f"{fault_from}-{fault_to}")
    if a.keep:
        print(f"work folder: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
