#!/usr/bin/python3
"""Generate the fraud model of the `dais txn` example and tests: an XGBoost binary classifier
trained on a small, seeded synthetic order data set with known fraud patterns.

usage: gen_fraud_model.py OUT_REPO

Writes OUT_REPO/fraud/config.pbtxt and OUT_REPO/fraud/1/xgboost.json (Triton FIL layout, as
xgb_binary in gen_models.py): input__0 FP32 [5] -> output__0 FP32 [2] = [1 - p, p].

Features, in order (the gate's `vector:` in examples/transactions/txn.yaml):
  0 amount            order amount
  1 quantity          items ordered
  2 account_age_days  from the feature store (user_risk group)
  3 chargebacks_90d   from the feature store
  4 orders_24h        from the feature store
Fraud (the labels, with 1 % noise): a large order (amount > 800) from an account younger than
7 days; or 3+ chargebacks in 90 days; or more than 20 orders in a day. Everything else is
legitimate. Run it with Debian's /usr/bin/python3 (python3-xgboost, python3-numpy).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import xgboost as xgb

SEED = 16
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_models import XGB_BINARY_CONFIG  # noqa: E402  (the same FIL layout, 5 features)

CONFIG = XGB_BINARY_CONFIG.replace('name: "xgb_binary"', 'name: "fraud"').replace(
    "dims: [ 8 ]", "dims: [ 5 ]")


def synthetic(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    amount = rng.gamma(2.0, 120.0, n)
    big = rng.random(n) < 0.2
    amount[big] = rng.uniform(500, 3000, big.sum())
    quantity = rng.integers(1, 6, n).astype(float)
    age = rng.exponential(200.0, n)
    young = rng.random(n) < 0.2
    age[young] = rng.uniform(0, 14, young.sum())
    chargebacks = rng.poisson(0.3, n).astype(float)
    risky = rng.random(n) < 0.05
    chargebacks[risky] = rng.integers(3, 8, risky.sum())
    orders = rng.poisson(2.0, n).astype(float)
    bursty = rng.random(n) < 0.03
    orders[bursty] = rng.integers(21, 60, bursty.sum())
    x = np.stack([amount, quantity, age, chargebacks, orders], axis=1).astype(np.float32)
    y = ((amount > 800) & (age < 7)) | (chargebacks >= 3) | (orders > 20)
    noise = rng.random(n) < 0.01
    y = np.where(noise, ~y, y).astype(np.float32)
    return x, y


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0]) / "fraud"
    (out / "1").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    x, y = synthetic(20000, rng)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 4, "eta": 0.3,
                         "seed": SEED, "nthread": 1}, xgb.DMatrix(x, label=y), num_boost_round=30)
    booster.save_model(str(out / "1" / "xgboost.json"))
    (out / "config.pbtxt").write_text(CONFIG)
    xt, yt = synthetic(5000, np.random.default_rng(SEED + 1))
    p = booster.predict(xgb.DMatrix(xt))
    acc = float(((p > 0.5) == (yt > 0.5)).mean())
    print(f"fraud model: {out} (30 trees, depth 4), held-out accuracy {acc:.3f}, "
          f"fraud rate {float(yt.mean()):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
