#!/usr/bin/env bash
# Builds carry/gpu for tools/dev/merge-carveout-sitting.sh (tools/dev/results/
# prepared-2026-12-07e/README.md), from a checkout of main with no changes to tracked files:
#   new   = main + portable-merge.patch   (carry/gpu/prefix, the GPU tests, the sm_90 cache)
#   carve = new + carveout.patch          (carry/gpu/carve/prefix)
#   old   = main                          (carry/gpu/old/prefix)
#   the stamped hopper harness            (carry/gpu/htrace/hopper_harness; nvcc)
# One build folder ($BUILD_DIR, default build), rebuilt incrementally between the three trees;
# the patches are taken back off whatever happens, leaving the tree and the build at main.
# Then the device call: carry ["carry/gpu"], bash carry/gpu/merge-carveout-sitting.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
patches=tools/dev/results/prepared-2026-12-07e
out=carry/gpu
build=${BUILD_DIR:-build}
if ! git diff --quiet HEAD --; then
  echo "prepare-merge-carveout-sitting: the tree has uncommitted changes; commit or stash them first" >&2
  exit 2
fi
applied=()
take_back() {
  for ((i = ${#applied[@]} - 1; i >= 0; --i)); do git apply -R "${applied[i]}"; done
  applied=()
}
trap take_back EXIT
apply() { git apply "$1"; applied+=("$1"); }

apply $patches/portable-merge.patch
scripts/prepare-gpu-sitting.sh $out
apply $patches/carveout.patch
cmake --build "$build" >/dev/null
cmake --install "$build" --prefix $out/carve/prefix --strip >/dev/null
take_back
cmake --build "$build" >/dev/null
cmake --install "$build" --prefix $out/old/prefix --strip >/dev/null
rm -rf $out/carve/prefix/include $out/old/prefix/include

trace=$(mktemp -d)
python3 tools/dev/trace/hopper_trace.py "$trace" >/dev/null
mkdir -p $out/htrace
"${NVCC:-/usr/local/cuda/bin/nvcc}" -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 \
  -I "$trace/kernels" -DHARNESS_TRACE tools/dev/hopper_harness.cu -o $out/htrace/hopper_harness -lcuda
rm -rf "$trace"

cp tools/dev/{portable-merge,carveout,item-trace,merge-carveout}-sitting.sh tools/dev/bench_table.py $out/
du -sh $out
