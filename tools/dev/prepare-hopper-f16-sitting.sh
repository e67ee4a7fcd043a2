#!/usr/bin/env bash
# Builds here everything one sitting needs to compare the hopper family's e4m3 path computed in
# f16 (the working tree: raw code values in the stages, scales on q_pe, the scores and O) against
# HEAD's kernels (dequantized to Q's type), at three register splits between the scores and
# producer warpgroups; the traced harness; plus the baseline sitting (tools/dev/h200-baseline-sitting.sh, with
# plan_cost). Device call:
#   bash carry/gpu/h200-baseline-sitting.sh 1; bash carry/gpu/h200-baseline-sitting.sh 2
# with carry ["carry/gpu"] (part 2 runs carry/gpu/variants.sh over carry/gpu/var/*).
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/prepare-gpu-sitting.sh carry/gpu
rm -rf carry/gpu/var && mkdir -p carry/gpu/var/v0head
git archive HEAD kernels | tar -x -C carry/gpu/var/v0head
split() {  # name scores producer: the tree's kernels with that e4m3 register split
  mkdir -p "carry/gpu/var/$1" && cp -r kernels "carry/gpu/var/$1/"
  sed -i "s/kScoresRegisters = kKvCodes ? [0-9]* : 120/kScoresRegisters = kKvCodes ? $2 : 120/; \
          s/kProducerRegisters = kKvCodes ? [0-9]* : 56/kProducerRegisters = kKvCodes ? $3 : 56/" \
      "carry/gpu/var/$1/kernels/hopper/mla_hopper.cuh"
  grep -q "kKvCodes ? $3 : 56" "carry/gpu/var/$1/kernels/hopper/mla_hopper.cuh"
}
split v1f16r112 112 80
split v2f16r104 104 88
split v3f16r96 96 96
cp tools/dev/hopper-fp8-variants-sitting.sh carry/gpu/variants.sh
# The harness with the clock64 stamps (tools/dev/trace/README.md), on the tree's kernels.
trace=$(mktemp -d)
cp -r kernels "$trace/" && (cd "$trace" && patch -s -p1 < "$OLDPWD/tools/dev/trace/hopper-trace.patch")
nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I "$trace/kernels" -DHARNESS_TRACE \
  tools/dev/hopper_harness.cu -o carry/gpu/harness_trace -L/usr/local/cuda/lib64/stubs -lcuda
rm -rf "$trace"
cp tools/dev/h200-baseline-sitting.sh carry/gpu/
cp build/tests/plan_cost carry/gpu/ && strip carry/gpu/plan_cost
ls carry/gpu/var; du -sh carry/gpu
