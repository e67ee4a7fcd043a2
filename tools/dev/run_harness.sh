#!/usr/bin/env bash
# Builds (when asked, or when no binary is there) and runs the MLA kernel harness.
#   [HARNESS_FLAGS=-DMLAJIT_DEV_...] tools/dev/run_harness.sh [--build] [--correctness|--timing]
# HARNESS_FLAGS: extra nvcc flags, e.g. the development switches listed in mla_kernel_harness.cu.
# Layout: run from the repository (kernels/ and tools/dev/ beside each other) or from a flat
# copy holding mla_kernel_harness.cu, run_harness.sh and a kernels/ folder (with its
# common/, portable/ and utility/ subfolders: kernel files include each other by those paths).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ -d "$here/kernels" ]]; then kernels="$here/kernels"; else kernels="$here/../../kernels"; fi
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
binary="$here/mla_kernel_harness"
build=0
if [[ "${1:-}" == "--build" ]]; then build=1; shift; fi
if [[ $build == 1 || ! -x "$binary" ]]; then
  # shellcheck disable=SC2086
  "$nvcc" -arch=sm_90 -O3 -std=c++17 -I "$kernels" -Xptxas -v ${HARNESS_FLAGS:-} "$here/mla_kernel_harness.cu" \
    -o "$binary" 2>&1 | grep -E "error|warning|spill|Used" || true
  [[ -x "$binary" ]] || { echo "build failed"; exit 1; }
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv 2>/dev/null || true
"$binary" "$@"
