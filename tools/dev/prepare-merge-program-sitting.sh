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
out=carry/gpu
build=${BUILD_DIR:-build}
source tools/dev/prepare-lib.sh
require_clean_tree prepare-merge-program-sitting
apply_patch tools/dev/results/sitting-2026-12-07f/portable-merge-program.patch
scripts/prepare-gpu-sitting.sh $out
take_back
install_variant $out/old/prefix
build_hopper_harness $out plain
cp tools/dev/{portable-merge,harness-check,merge-program-harness}-sitting.sh tools/dev/bench_table.py $out/
du -sh $out
