#!/usr/bin/env bash
# The whole test suite: setup, build, format check, unit tests, integration tests against real
# `dais serve` processes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
echo "== format check"
scripts/check_format.sh
echo "== structure check (docs/architecture.md: layering, code size)"
scripts/check_layers.py
scripts/check_sizes.py
echo "== unit tests"
ctest --test-dir build/release --output-on-failure -j 2
echo "== integration tests"
DAIS_REQUIRE_PROMTOOL=1 DAIS_REQUIRE_BIN=1 DAIS_REQUIRE_GRPC=1 DAIS_BIN="$PWD/build/release/src/cmd/dais" /usr/bin/python3 -m pytest tests/integration -q -x \
  -p no:cacheprovider "$@"
