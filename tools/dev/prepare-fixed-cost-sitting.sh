#!/usr/bin/env bash
# Builds here (no GPU needed) a sitting that places the fixed costs of a launch (the merge, the
# grid barrier, the attention items, the launch itself) by timing kernel variants that leave
# one out, beside this checkout's kernels:
#   tools/dev/prepare-fixed-cost-sitting.sh [BASE_REV]     (default HEAD)
# carry/gpu is this checkout (scripts/prepare-gpu-sitting.sh); carry/fc/<variant>/ are kernel
# folders for MLAJIT_KERNEL_DIR, cut from BASE_REV's kernels/:
#   base       BASE_REV's kernels as they are
#   nomerge    no merge after the grid barrier
#   nobarrier  no merge and no grid barrier
#   empty      every CTA returns at once (the launch alone)
#   tree       this checkout's kernels (what carry/gpu embeds)
#   tree16     the tree's kernels with 16 merge chunks in flight per thread instead of 8 (only
#              with the batched merge, tools/dev/results/sitting-2026-12-04/*.patch)
# Only the timings of base and tree mean results; the others compute wrong outputs on purpose.
# Then, with the device tool: run `VARIANTS="..." bash carry/fc/fixed-cost-sitting.sh` with carry
# ["carry/gpu", "carry/fc"] (default: every variant; the call must stay under 10 minutes).
set -euo pipefail
cd "$(dirname "$0")/../.."
base_rev=${1:-HEAD}
git rev-parse --verify --quiet "$base_rev^{commit}" >/dev/null ||
  { echo "prepare-fixed-cost-sitting: '$base_rev' is not a commit of this repository" >&2; exit 2; }
[[ ${SKIP_GPU_BUILD:-0} == 1 ]] || scripts/prepare-gpu-sitting.sh carry/gpu
rm -rf carry/fc && mkdir -p carry/fc
for variant in base nomerge nobarrier empty; do
  mkdir -p carry/fc/$variant
  git archive "$base_rev" kernels | tar -x -C carry/fc/$variant --strip-components=1
done
cp -r kernels carry/fc/tree
edit() {  # file perl-expression: the edit must change the file
  local before; before=$(md5sum "$1")
  perl -0pi -e "$2" "$1"
  [[ $(md5sum "$1") != "$before" ]] || { echo "prepare-fixed-cost-sitting: no match in $1" >&2; exit 1; }
}
no_merge='s/(merge_partials\(const MlaParams& params(?:, float\* scratch)?\) \{\n)/$1  if (params.phase >= 0) return;\n/'
for variant in nomerge nobarrier empty; do edit carry/fc/$variant/common/mla_merge.cuh "$no_merge"; done
for variant in nobarrier empty; do
  edit carry/fc/$variant/common/grid_barrier.cuh 's/(unsigned num_blocks\) \{\n)/$1  if (num_blocks > 0) return;\n/'
done
edit carry/fc/empty/hopper/mla_hopper.cuh 's/(mla_hopper_kernel\([^)]*\) \{\n)/$1  if (params.num_heads > 0) return;\n/'
edit carry/fc/empty/portable/mla_fa2.cuh 's/(mla_fa2_kernel\([^)]*\) \{\n)/$1  if (params.num_heads > 0) return;\n/'
if grep -q 'kMergeBatch = 8;' kernels/hopper/mla_hopper.cuh; then  # the batched merge
  cp -r kernels carry/fc/tree16
  edit carry/fc/tree16/hopper/mla_hopper.cuh 's/kMergeBatch = 8;/kMergeBatch = 16;/'
  edit carry/fc/tree16/common/mla_merge.cuh 's/int BATCH = 8>/int BATCH = 16>/'
else
  echo "prepare-fixed-cost-sitting: these kernels have no batched merge: no tree16 variant" >&2
fi
cp tools/dev/fixed-cost-sitting.sh carry/fc/
du -sh carry/gpu carry/fc
