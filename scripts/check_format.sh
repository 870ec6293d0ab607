#!/usr/bin/env bash
# Fails when a C++ file differs from .clang-format's output.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cc' '*.h')
bad=()
for f in $files; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]})); then
  echo "format check failed; run: clang-format -i ${bad[*]}"
  exit 1
fi
echo "format check: $(echo "$files" | wc -w) files ok"
