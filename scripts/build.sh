#!/usr/bin/env bash
# Configures (once) and builds a preset: release (default), debug (ASan+UBSan), clang, fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET="${1:-release}"
if [[ ! -f "build/$PRESET/build.ninja" ]]; then
  cmake --preset "$PRESET"
fi
# 2-core machines: torch translation units need ~1 GiB each; keep -j at the core count.
cmake --build --preset "$PRESET" -j "$(nproc)"
