#!/usr/bin/env bash
# Builds carry/gpu for tools/dev/merge-program-harness-sitting.sh (tools/dev/results/
# sitting-2026-12-07f/README.md), from a checkout of main with no changes to tracked files:
#   new = main + portable-merge-program.patch  (carry/gpu/prefix, the GPU tests, the sm_90 cache)
#   old = main                                  (carry/gpu/old/prefix)
#   the hopper harness with and without the trace stamps (carry/gpu/htrace; nvcc)
# One build folder ($BUILD_DIR, default build); the patch is taken back off whatever happens,
# leaving the tree and the build at main.
# Then the device call: carry ["carry/gpu"], bash carry/gpu/merge-program-harness-sitting.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
patch=tools/dev/results/sitting-2026-12-07f/portable-merge-program.patch
out=carry/gpu
build=${BUILD_DIR:-build}
if ! git diff --quiet HEAD --; then
  echo "prepare-merge-program-sitting: the tree has uncommitted changes; commit or stash them first" >&2
  exit 2
fi
applied=0
take_back() { if ((applied)); then git apply -R "$patch"; applied=0; fi; }
trap take_back EXIT
git apply "$patch"; applied=1
scripts/prepare-gpu-sitting.sh $out
take_back
cmake --build "$build" >/dev/null
cmake --install "$build" --prefix $out/old/prefix --strip >/dev/null
rm -rf $out/old/prefix/include

nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
flags=(-gencode arch=compute_90a,code=sm_90a -O3 -std=c++17)
trace=$(mktemp -d)
python3 tools/dev/trace/hopper_trace.py "$trace" >/dev/null
mkdir -p $out/htrace
"$nvcc" "${flags[@]}" -I "$trace/kernels" -DHARNESS_TRACE tools/dev/hopper_harness.cu -o $out/htrace/hopper_harness -lcuda
"$nvcc" "${flags[@]}" -I kernels tools/dev/hopper_harness.cu -o $out/htrace/hopper_harness_plain -lcuda
rm -rf "$trace"

cp tools/dev/{portable-merge,harness-check,merge-program-harness}-sitting.sh tools/dev/bench_table.py $out/
du -sh $out
