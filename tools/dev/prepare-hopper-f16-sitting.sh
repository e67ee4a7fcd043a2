#!/usr/bin/env bash
# Builds here everything one sitting needs to compare the hopper family's e4m3 path computed in
# f16 (raw code values in the stages; the scales on q_pe, the scores and O:
# tools/dev/results/sitting-2026-12-05d) against the kernels of BASE (default 56f1bcc: codes
# dequantized to Q's type), at three register splits between the scores and producer
# warpgroups, and with a whole tile of codes held ahead; the traced harness on the f16 kernel;
# and the baseline sitting (tools/dev/h200-baseline-sitting.sh, with plan_cost). Works from a
# tree with or without the f16 change. Device call, carry ["carry/gpu"]:
#   bash carry/gpu/h200-baseline-sitting.sh 2   (every variant; or 1: the baseline)
# The short form, with the V3.2 patches beside it: tools/dev/lean-sitting-2026-12-06.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${BASE:-56f1bcc}
results=tools/dev/results/sitting-2026-12-05d
scripts/prepare-gpu-sitting.sh carry/gpu
rm -rf carry/gpu/var && mkdir -p carry/gpu/var/v0head
git archive "$base" kernels | tar -x -C carry/gpu/var/v0head
# The f16 kernels: the tree's when it has the change, else BASE's with the patch.
f16=$(mktemp -d)
if grep -q StageTypeOf kernels/hopper/mla_hopper.cuh; then
  cp -r kernels "$f16/"
else
  git archive "$base" kernels | tar -x -C "$f16"
  (cd "$f16" && patch -s -p1 < "$OLDPWD/$results/hopper-e4m3-f16.patch")
fi
split() {  # name scores producer: the f16 kernels with that e4m3 register split
  mkdir -p "carry/gpu/var/$1" && cp -r "$f16/kernels" "carry/gpu/var/$1/"
  sed -i "s/kScoresRegisters = kKvCodes ? [0-9]* : 120/kScoresRegisters = kKvCodes ? $2 : 120/; \
          s/kProducerRegisters = kKvCodes ? [0-9]* : 56/kProducerRegisters = kKvCodes ? $3 : 56/" \
      "carry/gpu/var/$1/kernels/hopper/mla_hopper.cuh"
  grep -q "kKvCodes ? $3 : 56" "carry/gpu/var/$1/kernels/hopper/mla_hopper.cuh"
}
split v1f16r112 112 80
split v2f16r104 104 88
split v3f16r96 96 96
# The whole next tile of codes in registers (80 / 112: no spills), on the f16 path.
mkdir -p carry/gpu/var/v4f16full && cp -r "$f16/kernels" carry/gpu/var/v4f16full/
(cd carry/gpu/var/v4f16full && patch -s -p1 < "$OLDPWD/$results/hopper-e4m3-f16-full-tile.patch")
# A 16-bit cache: regions 0-3 of each tile through the producer's registers a tile ahead, the
# rest by TMA (setmaxnreg 96 / 160 / 160 / 96 over bf16), on the f16 kernels.
mkdir -p carry/gpu/var/v5bf16staged && cp -r "$f16/kernels" carry/gpu/var/v5bf16staged/
(cd carry/gpu/var/v5bf16staged && patch -s -p1 < "$OLDPWD/$results/hopper-bf16-staged-regions.patch")
cp tools/dev/hopper-fp8-variants-sitting.sh carry/gpu/variants.sh
cp tools/dev/bench_table.py carry/gpu/
# The harness with the clock64 stamps (tools/dev/trace/README.md), on the f16 kernels.
(cd "$f16" && patch -s -p1 < "$OLDPWD/$results/hopper-trace-f16.patch")
nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I "$f16/kernels" -DHARNESS_TRACE \
  tools/dev/hopper_harness.cu -o carry/gpu/harness_trace -L/usr/local/cuda/lib64/stubs -lcuda
rm -rf "$f16"
cp tools/dev/h200-baseline-sitting.sh carry/gpu/
cp build/tests/plan_cost carry/gpu/ && strip carry/gpu/plan_cost
ls carry/gpu/var; du -sh carry/gpu
