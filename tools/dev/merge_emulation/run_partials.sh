#!/usr/bin/env bash
# Host emulation of the MLA kernels' in-launch merge (kernels/common/mla_merge.cuh, or the one
# under KERNEL_DIR/common/): the kernel's own source with its two ld.global.cg asm loads
# replaced by plain loads, PTX helpers by host versions (common/), every CTA and thread of a
# 512- and a 256-thread block run in turn, the result compared with a float64 merge of the
# same partial rows. Chunk counts 2..70 (whole and partial batches), merge pieces of 1..8 rows,
# empty chunks (lse -inf, zero rows, as the attention writes them), a row empty in every
# chunk, bf16/f16, both LSE bases, strided outputs.
#   tools/dev/merge_emulation/run_partials.sh [KERNEL_DIR]
# Not a test of the compiled kernel: the GPU tests are. Exits non-zero on a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kernels=${1:-$here/../../../kernels}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/common"
cp "$kernels/common/mla_params.cuh" "$work/common/"
perl -0 -pe 's/asm volatile\("ld\.global\.cg\.v4\.u32.*?"l"\(pointer\)\);/std::memcpy(&v, pointer, 16);/s;
           s/asm volatile\("ld\.global\.cg\.f32.*?"l"\(pointer\)\);/v = *pointer;/s' \
  "$kernels/common/mla_merge.cuh" > "$work/mla_merge_host.cuh"
[[ $(grep -c 'asm' "$work/mla_merge_host.cuh") == 0 ]] ||
  { echo "mla_merge.cuh holds asm this emulation does not replace: update run_partials.sh" >&2; exit 1; }
g++ -std=c++17 -O1 -pthread -I"$work" -I"$here" "$here/emulate_partials.cpp" -o "$work/emulate_partials"
"$work/emulate_partials"
