#!/usr/bin/env bash
# The main job: build, precompile the default fleet matrix into the user cache, and on a
# machine with a GPU verify the kernel against the CPU reference and benchmark it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cli="${BUILD_DIR:-build}/tools/mlajit"
"$cli" precompile
if "$cli" info --json | grep -q '"gpus": \[ *{'; then
  "$cli" verify
  "$cli" bench
else
  echo "no GPU here: skipping verify and bench (the cache above serves any GPU of the profiled archs)"
fi
