#!/usr/bin/env bash
# Builds here everything one sitting needs to compare the hopper family's e4m3 producer
# variants and to trace it: carry/gpu (scripts/prepare-gpu-sitting.sh), the variants' kernel
# trees in carry/gpu/var/NAME/kernels (the landed kernel, and the patches of
# tools/dev/results/sitting-2026-12-05c, each also without the evict-first hint), and the
# hopper harness with the trace patch (carry/gpu/harness_trace). Device call:
#   bash carry/gpu/variants.sh        carry ["carry/gpu"]
# then, in the same or a second call, the trace of the landed kernel:
#   carry/gpu/harness_trace --one8 128 64 16384 64; carry/gpu/harness_trace --one 128 64 16384 64
set -euo pipefail
cd "$(dirname "$0")/../.."
results=tools/dev/results/sitting-2026-12-05c
scripts/prepare-gpu-sitting.sh carry/gpu
rm -rf carry/gpu/var && mkdir -p carry/gpu/var
variant() {  # name [patch]
  local dir=carry/gpu/var/$1
  mkdir -p "$dir" && cp -r kernels "$dir/"
  if [[ -n ${2:-} ]]; then (cd "$dir" && patch -s -p1 < "$OLDPWD/$2"); fi
}
no_hint() {  # name from
  variant "$1" && cp -r "carry/gpu/var/$2/kernels" "carry/gpu/var/$1/"
  sed -i 's/.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, \[%4\], %6;/.v4.u32 {%0, %1, %2, %3}, [%4];/' \
    "carry/gpu/var/$1/kernels/hopper/mla_hopper.cuh"
}
variant v0landed
variant v1half8 $results/hopper-e4m3-v1half8.patch
variant v2full8 $results/hopper-e4m3-v2full8.patch
no_hint v5half8nohint v0landed
no_hint v6full8nohint v2full8
cp tools/dev/hopper-fp8-variants-sitting.sh carry/gpu/variants.sh
cp tools/dev/bench_table.py carry/gpu/
# The harness with the clock64 stamps (tools/dev/trace/README.md).
trace=$(mktemp -d)
cp -r kernels "$trace/" && (cd "$trace" && patch -s -p1 < "$OLDPWD/tools/dev/trace/hopper-trace.patch")
nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I "$trace/kernels" -DHARNESS_TRACE \
  tools/dev/hopper_harness.cu -o carry/gpu/harness_trace -L/usr/local/cuda/lib64/stubs -lcuda
rm -rf "$trace"
ls carry/gpu/var
