#!/usr/bin/env bash
# Regenerates the screenshots of docs/console.md (docs/img/console/*.png) from a real run: the
# console's browser tests against a loopback cluster (etcd, two nodes, a scheduler, a gateway
# with traffic; 1,000 trace nodes), in Debian's headless Chromium. Needs a build (README).
set -euo pipefail
cd "$(dirname "$0")/.."
DAIS_ARTIFACTS_DIR="$PWD/docs/img" DAIS_REQUIRE_BIN=1 DAIS_BIN="$PWD/build/release/src/cmd/dais" \
  /usr/bin/python3 -m pytest tests/integration/test_console.py -q -s -p no:cacheprovider \
  -k "browser or thousand"
ls -l docs/img/console/
