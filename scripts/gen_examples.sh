#!/usr/bin/env bash
# Generates the example model repository (seeded; small) into examples/model_repository, and
# examples/feature_repository/mlp_features: mlp_small's network with the features.yaml and
# config.pbtxt of examples/features/mlp_features (feature-enriched inference).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f examples/model_repository/mlp_small/1/model.pt ]]; then
  /usr/bin/python3 scripts/gen_models.py examples/model_repository
fi
dst=examples/feature_repository/mlp_features
mkdir -p "$dst/1"
cp examples/features/mlp_features/config.pbtxt examples/features/mlp_features/features.yaml "$dst/"
cp examples/model_repository/mlp_small/1/model.pt "$dst/1/model.pt"

# Sample offline feature data for `dais features import` (README, docs/features.md): user
# profiles 1..1000 in today's partition, as a batch job would write them (seeded, deterministic
# but for the date, which is today's so that the rows are within the group's max_age).
day=$(date -u +%F)
offline=examples/offline/user_profile
if [[ ! -d "$offline/dt=$day" ]]; then
  rm -rf "$offline"
  mkdir -p "$offline/dt=$day"
  /usr/bin/python3 - "$offline/dt=$day/part-0000.csv" "$day" <<'PY'
import csv, random, sys
path, day = sys.argv[1], sys.argv[2]
rng = random.Random(7)
with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["user_id", "event_timestamp", "age", "clicks_15d"])
    for user in range(1, 1001):
        clicks = [rng.randint(0, 5) for _ in range(15)]
        w.writerow([user, f"{day}T00:00:00Z", rng.randint(18, 80), str(clicks)])
PY
fi
