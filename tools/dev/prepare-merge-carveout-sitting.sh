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
# That call ran on 2026-12-07f (tools/dev/results/sitting-2026-12-07f/). The patches were made
# against 5f89e09; portable-merge.patch no longer applies to main as it is (README.md moved).
set -euo pipefail
cd "$(dirname "$0")/../.."
patches=tools/dev/results/prepared-2026-12-07e
out=carry/gpu
build=${BUILD_DIR:-build}
source tools/dev/prepare-lib.sh
require_clean_tree prepare-merge-carveout-sitting
apply_patch $patches/portable-merge.patch
scripts/prepare-gpu-sitting.sh $out
apply_patch $patches/carveout.patch
install_variant $out/carve/prefix
take_back
install_variant $out/old/prefix
build_hopper_harness $out
cp tools/dev/{portable-merge,carveout,item-trace,merge-carveout}-sitting.sh tools/dev/bench_table.py $out/
du -sh $out
