# Shared steps of the tools/dev/prepare-*-sitting.sh scripts, which build carry/gpu for one
# device call from main plus prepared patches. Sourced from the repository root with
# `set -euo pipefail`; $build is the build folder.

# require_clean_tree NAME: the patches go on and come off main, so no tracked file may differ.
require_clean_tree() {
  if ! git diff --quiet HEAD --; then
    echo "$1: the tree has uncommitted changes; commit or stash them first" >&2
    exit 2
  fi
}

# apply_patch FILE / take_back: patches applied in order, taken back in reverse; take_back runs
# on exit too, so that a failed build leaves the tree at main.
applied_patches=()
apply_patch() { git apply "$1"; applied_patches+=("$1"); }
take_back() {
  for ((i = ${#applied_patches[@]} - 1; i >= 0; --i)); do git apply -R "${applied_patches[i]}"; done
  applied_patches=()
}
trap take_back EXIT

# install_variant PREFIX: the build folder as the tree now stands, installed without headers
# (a sitting's second or third library beside carry/gpu/prefix).
install_variant() {
  cmake --build "$build" >/dev/null
  cmake --install "$build" --prefix "$1" --strip >/dev/null
  rm -rf "$1/include"
}

# build_hopper_harness OUT [plain]: tools/dev/hopper_harness.cu over the kernels with clock
# stamps (tools/dev/trace/hopper_trace.py) as OUT/htrace/hopper_harness, and with `plain` also
# over the kernels as they are, as OUT/htrace/hopper_harness_plain.
build_hopper_harness() {
  local out=$1 nvcc=${NVCC:-/usr/local/cuda/bin/nvcc} trace
  local flags=(-gencode arch=compute_90a,code=sm_90a -O3 -std=c++17)
  trace=$(mktemp -d)
  python3 tools/dev/trace/hopper_trace.py "$trace" >/dev/null
  mkdir -p "$out/htrace"
  "$nvcc" "${flags[@]}" -I "$trace/kernels" -DHARNESS_TRACE tools/dev/hopper_harness.cu \
    -o "$out/htrace/hopper_harness" -lcuda
  rm -rf "$trace"
  if [[ ${2:-} == plain ]]; then
    "$nvcc" "${flags[@]}" -I kernels tools/dev/hopper_harness.cu -o "$out/htrace/hopper_harness_plain" -lcuda
  fi
}
