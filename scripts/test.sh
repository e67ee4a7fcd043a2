#!/usr/bin/env bash
# Builds and runs the whole test suite (CPU tests; GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 1200
