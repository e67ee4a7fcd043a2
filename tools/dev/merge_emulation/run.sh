#!/usr/bin/env bash
# Host emulation of kernels/merge/merge_states.cuh, for checking its indexing and math without
# a GPU: the kernel's own source (its 16-byte store asm replaced by a memcpy), PTX helpers
# replaced by host versions (common/), every block and lane run in turn (lane 0 last, as after
# __syncwarp), the result compared with a float64 merge. Strided and empty (NaN-poisoned) parts,
# a row empty in every part, head_dim 264 and 512, 1..9 parts, bf16/f16, both LSE bases.
# Not a test of the compiled kernel: the GPU tests ([merge]) are. Exits non-zero on a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed -e 's|  asm volatile("st.global.v4.u32 \[%0\], {%1, %2, %3, %4};" ::"l"(pointer), "r"(v.w\[0\]),|  std::memcpy(pointer, \&v, 16); /*|' \
    -e 's|               : "memory");|*/|' "$here/../../../kernels/merge/merge_states.cuh" \
    > "$work/merge_states_host.cuh"
grep -q 'std::memcpy(pointer' "$work/merge_states_host.cuh" || { echo "the store's asm changed: update run.sh" >&2; exit 1; }
g++ -std=c++17 -O1 -I"$here" -I"$work" "$here/emulate.cpp" -o "$work/emulate"
"$work/emulate"
