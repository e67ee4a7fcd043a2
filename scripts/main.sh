#!/usr/bin/env bash
# The main job: build, precompile the default fleet matrix into the user cache, and on a
# machine with a GPU verify the kernel against the CPU reference and benchmark it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cli="${BUILD_DIR:-build}/tools/mlajit"
"$cli" precompile
if [ "$("$cli" info --gpu-count)" -gt 0 ]; then
  "$cli" verify
  "$cli" bench --csv "${BUILD_DIR:-build}/bench.csv"
else
  echo "no GPU here: skipping verify and bench (the cache above serves GPUs of every profiled arch)"
fi
