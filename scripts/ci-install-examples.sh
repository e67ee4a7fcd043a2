#!/usr/bin/env bash
# Installs mlajit to a temporary prefix and proves the installed package is usable on its own:
#   1. configure + build (reusing BUILD_DIR / $1 when given) and `cmake --install` to a temp prefix
#   2. build examples/cpp_decode (find_package) and examples/c_decode (pkg-config) against that
#      prefix only, and run them (without a GPU they print why and exit 0)
#   3. `nm -D --defined-only` of the installed library shows only mlajit symbols, the public
#      API the CLI is built on among them; the library holds no CLI-only code (the reference,
#      checks and bench live in tools/check, linked into the CLI)
#   4. `ldd` of it shows no fmt/spdlog/CUDA/NVRTC library; the installed CLI loads the
#      installed library (RPATH), the CLI being a client of the shared library
#   5. the installed library and the installed CLI find the installed compiler helper
#      (<libdir>/mlajit-compiler-helper) and compile through it (MLAJIT_COMPILE_MODE=process)
# Usage: scripts/ci-install-examples.sh [BUILD_DIR]   (default: $BUILD_DIR or build)
# Exits non-zero, saying which check failed, on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build_dir=$(realpath -m "${1:-${BUILD_DIR:-build}}")
work=$(mktemp -d "${TMPDIR:-/tmp}/mlajit-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "ci-install-examples: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "build + install to $prefix"
if [[ ! -f $build_dir/CMakeCache.txt ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
fi
cmake --build "$build_dir" -j "$(nproc)" --target mlajit mlajit_cli >/dev/null
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
libdir=$prefix/lib
[[ -d $libdir ]] || libdir=$(dirname "$(find "$prefix" -name 'libmlajit.so' | head -1)")
lib=$(realpath "$libdir/libmlajit.so")
for f in "$prefix/include/mlajit/mlajit.h" "$prefix/include/mlajit/version.h" \
         "$libdir/cmake/mlajit/mlajitConfig.cmake" "$libdir/pkgconfig/mlajit.pc" \
         "$prefix/bin/mlajit" "$libdir/mlajit-compiler-helper"; do
  [[ -e $f ]] || fail "the install lacks $f"
done
"$prefix/bin/mlajit" --version >/dev/null || fail "the installed CLI does not run"

step "exported symbols of $lib"
# Standard symbols a shared library always defines; everything else must be mlajit's:
# C names mlajit_*, C++ names in namespace mlajit (functions, typeinfo, vtables).
nm -D --defined-only "$lib" | awk '{print $NF}' > "$work/symbols.txt"
c++filt < "$work/symbols.txt" > "$work/demangled.txt"
paste -d '\t' "$work/symbols.txt" "$work/demangled.txt" |
  awk -F '\t' '
    $1 ~ /^(_init|_fini|_edata|_end|__bss_start)$/ { next }
    $1 ~ /^mlajit_/ { next }
    $2 ~ /^(typeinfo for |typeinfo name for |vtable for )?mlajit::/ { next }
    { print }' > "$work/foreign.txt"
if [[ -s $work/foreign.txt ]]; then
  echo "symbols exported from outside mlajit:" >&2
  head -30 "$work/foreign.txt" >&2
  fail "libmlajit.so exports $(wc -l < "$work/foreign.txt") symbol(s) that are not mlajit's"
fi
grep -q '^mlajit_attention_run' "$work/symbols.txt" || fail "mlajit_attention_run is not exported"
# The C++ API, the parts the CLI uses beside BatchMlaAttention included (docs/API.md).
for symbol in 'mlajit::BatchMlaAttention::run' 'mlajit::fleet_matrix(' \
              'mlajit::KernelCache::KernelCache(' 'mlajit::KernelCache::list(' \
              'mlajit::KernelCache::prune(' 'mlajit::KernelCache::precompile(' \
              'mlajit::CacheSettings::from_environment(' 'mlajit::compiler_info(' \
              'mlajit::driver_version(' 'mlajit::time_launches(' 'mlajit::device_memset(' \
              'mlajit::copy_device_to_device(' 'mlajit::device_summary('; do
  grep -qF "$symbol" "$work/demangled.txt" || fail "$symbol is not exported"
done
if grep -E 'mlajit::(jit|driver|plan|capi|family|detail)::' "$work/demangled.txt" >&2; then
  fail "internal mlajit namespaces are exported"
fi
echo "$(wc -l < "$work/symbols.txt") symbols, all mlajit's"
# The full symbol table (local symbols too) of the unstripped install: it has the internal
# layers, and none of the verification and benchmark code that only the CLI and tests use.
nm -C "$lib" > "$work/all_symbols.txt"
grep -q 'mlajit::jit::KernelRegistry' "$work/all_symbols.txt" ||
  fail "the installed library has no symbol table to check (stripped?)"
if grep -E 'mlajit::(mla_reference|run_mla_check|make_device_problem|MlaBench|ragged_bench_shape)' \
     "$work/all_symbols.txt" >&2; then
  fail "libmlajit.so carries CLI-only code (tools/check belongs in the CLI and the tests)"
fi

step "shared-library dependencies"
ldd "$lib" | tee "$work/ldd.txt"
if grep -Ei 'fmt|spdlog|libcuda|nvrtc|cudart' "$work/ldd.txt" >&2; then
  fail "libmlajit.so links a library it must load at run time or not at all"
fi
cli_lib=$(ldd "$prefix/bin/mlajit" | awk '/libmlajit\.so/ { print $3 }')
if [[ -z $cli_lib || $(realpath "$cli_lib") != "$lib" ]]; then
  ldd "$prefix/bin/mlajit" >&2
  fail "the installed CLI does not load the installed libmlajit.so (found: ${cli_lib:-none})"
fi

export PKG_CONFIG_PATH=$libdir/pkgconfig
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
step "examples/cpp_decode against the installed package (find_package)"
cmake -S "$root/examples/cpp_decode" -B "$work/cpp" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >/dev/null
cmake --build "$work/cpp" >/dev/null
"$work/cpp/cpp_decode" || fail "cpp_decode exited $?"

step "examples/c_decode against the installed package (pkg-config via CMake)"
cmake -S "$root/examples/c_decode" -B "$work/c" >/dev/null
cmake --build "$work/c" >/dev/null
"$work/c/c_decode" || fail "c_decode exited $?"

step "examples/c_decode as plain C99 with pkg-config"
cc -std=c99 -Wall -Wextra -pedantic -Werror -o "$work/c_decode_cc" "$root/examples/c_decode/main.c" \
  $(pkg-config --cflags --libs mlajit) -lm
"$work/c_decode_cc" >/dev/null || fail "c_decode (cc) exited $?"
step "the installed library and CLI compile through the installed compiler helper"
# Only where NVRTC loads (the helper needs it as the library does); a driver-only host skips.
cat > "$work/helper_check.c" <<'EOF_C'
#include <stdio.h>
#include "mlajit/mlajit.h"
int main(void) {
  mlajit_precompile_result result;
  result.struct_size = sizeof(result);
  mlajit_status status = mlajit_precompile("spin;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;"
                                           "stages=2;kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90",
                                           &result);
  if (status != MLAJIT_OK) {
    printf("status %d: %s\n", (int)status, mlajit_last_error());
    return status == MLAJIT_ERROR_NO_COMPILER ? 77 : 1;
  }
  printf("compiled %llu bytes\n", (unsigned long long)result.bytes);
  return 0;
}
EOF_C
cc -std=c99 -o "$work/helper_check" "$work/helper_check.c" $(pkg-config --cflags --libs mlajit)
set +e
# SPDLOG_LEVEL=debug: the library names the helper it started; it must be the installed one.
MLAJIT_COMPILE_MODE=process MLAJIT_CACHE_DIR=$work/helper-cache SPDLOG_LEVEL=mlajit.jit=debug \
  "$work/helper_check" > "$work/helper_check.txt" 2>&1
code=$?
set -e
cat "$work/helper_check.txt"
if [[ $code == 77 ]] && grep -q "libnvrtc could not be loaded" "$work/helper_check.txt"; then
  echo "(no NVRTC on this host: the helper check is skipped)"
else
  [[ $code == 0 ]] || fail "the installed library did not compile through a helper (exit $code)"
  grep -q "started compiler helper $libdir/mlajit-compiler-helper" "$work/helper_check.txt" ||
    fail "the installed library did not start the installed helper $libdir/mlajit-compiler-helper"
  MLAJIT_COMPILE_MODE=process "$prefix/bin/mlajit" precompile --arch sm_90 --dtype bf16 \
    --head-dims 256/32 --out "$work/cli-cache" -q >/dev/null ||
    fail "the installed CLI did not compile through the installed helper"
fi
echo "ci-install-examples: ok"
