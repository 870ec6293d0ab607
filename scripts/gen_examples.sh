#!/usr/bin/env bash
# Generates the example model repository (seeded; small) into examples/model_repository.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f examples/model_repository/mlp_small/1/model.pt ]]; then
  /usr/bin/python3 scripts/gen_models.py examples/model_repository
fi
