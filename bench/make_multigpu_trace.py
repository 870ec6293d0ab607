#!/usr/bin/python3
"""Multi-GPU-heavy variants of the openb default trace (../shared/data/alibaba-gpu-2023), for
`dais scheduler simulate` and bench/scheduler_bench.py. Writes a pod list; never commit one.

Two ways to raise the share of multi-GPU tasks (num_gpu >= 2), both drawing those tasks with
replacement from the default trace's own multi-GPU tasks (seeded):

  append     as the public multigpuNN samples are made: the default trace unchanged, then
             multi-GPU tasks appended until they ask for SHARE of the trace's GPU demand. The
             simulator's arrivals reach them only after the default trace (near 100 % of the
             1,213-node cluster's capacity), but they change the workload's task classes
             (FGD's fragmentation measure) and the sampling once the trace is used up.
  resample   the default trace's task classes resampled in place: each GPU task is replaced,
             with a seeded coin, by a multi-GPU task, so that SHARE of the GPU tasks (by count)
             are multi-GPU, spread over the whole arrival order.

--mix reweights the GPU counts of the multi-GPU tasks drawn (e.g. 2=1,4=1,8=1: as many 2-, 4-
and 8-GPU tasks; default: as in the default trace).

usage: bench/make_multigpu_trace.py --mode append|resample --share 0.8 [--mix 2=1,8=3]
                                    [--seed 1] [--out /tmp/openb_pod_list_multigpu80a.csv]
"""
import argparse
import csv
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT.parent / "shared" / "data" / "alibaba-gpu-2023" / "openb_pod_list_default.csv"
COLUMNS = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"]


def demand(row):
    return int(row["num_gpu"]) * int(row["gpu_milli"])


def drawer(multi, mix, rng):
    """A function drawing one multi-GPU task, per GPU count weighted by `mix` when given."""
    if not mix:
        return lambda: rng.choice(multi)
    by_count = {}
    for r in multi:
        by_count.setdefault(int(r["num_gpu"]), []).append(r)
    counts = [c for c in mix if c in by_count]
    if not counts:
        sys.exit(f"--mix: the trace has no multi-GPU task of {sorted(mix)} GPUs "
                 f"(it has {sorted(by_count)})")
    weights = [mix[c] for c in counts]
    return lambda: rng.choice(by_count[rng.choices(counts, weights)[0]])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=["append", "resample"], required=True)
    ap.add_argument("--share", type=float, required=True,
                    help="append: multi-GPU share of GPU demand; resample: of GPU tasks")
    ap.add_argument("--mix", default="", help="GPU count weights, e.g. 2=1,4=1,8=1")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pods", default=str(DEFAULT), help="the trace to start from")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if not 0 < args.share < 1:
        sys.exit("--share must be in (0, 1)")
    mix = {int(k): float(v) for k, v in (p.split("=") for p in args.mix.split(",") if p)}
    rng = random.Random(args.seed)
    rows = [{c: r.get(c, "") for c in COLUMNS} for r in csv.DictReader(open(args.pods))]
    multi = [r for r in rows if int(r["num_gpu"]) >= 2]
    draw = drawer(multi, mix, rng)
    if args.mode == "append":
        total = sum(demand(r) for r in rows)
        multi_demand = sum(demand(r) for r in multi)
        while multi_demand < args.share * total:
            r = dict(draw())
            rows.append(r)
            total += demand(r)
            multi_demand += demand(r)
    else:
        gpu = [i for i, r in enumerate(rows) if int(r["num_gpu"]) > 0]
        already = sum(1 for i in gpu if int(rows[i]["num_gpu"]) >= 2)
        # Replace single-GPU tasks with this probability to reach the share by count.
        singles = len(gpu) - already
        p = max(0.0, (args.share * len(gpu) - already) / singles) if singles else 0.0
        for i in gpu:
            if int(rows[i]["num_gpu"]) < 2 and rng.random() < p:
                rows[i] = dict(draw())
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for i, r in enumerate(rows):
            r["name"] = f"openb-pod-{i:04d}"
            w.writerow(r)
    gpu_rows = [r for r in rows if int(r["num_gpu"]) > 0]
    n_multi = sum(1 for r in gpu_rows if int(r["num_gpu"]) >= 2)
    share_demand = sum(demand(r) for r in gpu_rows if int(r["num_gpu"]) >= 2) / max(
        1, sum(demand(r) for r in gpu_rows))
    print(f"{args.out}: {len(rows)} tasks, {n_multi} of {len(gpu_rows)} GPU tasks multi-GPU "
          f"({n_multi / max(1, len(gpu_rows)):.0%}), {share_demand:.0%} of GPU demand")


if __name__ == "__main__":
    main()
