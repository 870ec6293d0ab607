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
