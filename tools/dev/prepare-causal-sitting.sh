#!/usr/bin/env bash
# Prepares carry/gpu for causal-runtime-sitting.sh: this tree's sitting (prepare-gpu-sitting.sh),
# main's f10fd63 (before the run-time mask) installed into old/prefix from a worktree build,
# and two kernel variants: narrow/ (the narrow layout in every large-tier kernel, as before
# rows=wide) and narrowall/ (in every kernel, rows=wide or not). The third, full/ (the whole
# portable P V loop), landed for sm_90 on 2026-12-07.
set -euo pipefail
cd "$(dirname "$0")/../.."
OLD_REV=${OLD_REV:-f10fd63} wt=${OLD_WORKTREE:-/tmp/oldwt}
scripts/prepare-gpu-sitting.sh carry/gpu
[[ -d $wt ]] || git worktree add "$wt" "$OLD_REV" >/dev/null
cmake -S "$wt" -B "$wt/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMLAJIT_BUILD_TESTS=OFF >/dev/null
cmake --build "$wt/build" >/dev/null
cmake --install "$wt/build" --prefix carry/gpu/old/prefix --strip >/dev/null
for v in narrow narrowall; do rm -rf carry/gpu/$v && mkdir -p carry/gpu/$v && cp -r kernels carry/gpu/$v/kernels; done
config=portable/portable_config.cuh
sed -i 's/static constexpr bool kNarrowTiles = NARROW_TILES;/static constexpr bool kNarrowTiles = NARROW_TILES || (KV_TILE >= 64 \&\& NUM_STAGES >= 2);/' \
  carry/gpu/narrow/kernels/$config
sed -i 's/static constexpr bool kNarrowTiles = NARROW_TILES;/static constexpr bool kNarrowTiles = true;/' \
  carry/gpu/narrowall/kernels/$config
# Each variant differs from kernels/ by its one line, or the sitting would measure nothing.
[[ $(diff -r kernels carry/gpu/narrow/kernels | grep -c '^>') == 1 ]]
[[ $(diff -r kernels carry/gpu/narrowall/kernels | grep -c '^>') == 1 ]]
cp tools/dev/causal-runtime-sitting.sh tools/dev/causal-quick-sitting.sh tools/dev/causal-plan-sitting.sh tools/dev/tail-cost-sitting.sh tools/dev/stall-profile-sitting.sh tools/dev/stall_summary.py \
  tools/dev/bench_table.py carry/gpu/
du -sh carry/gpu
