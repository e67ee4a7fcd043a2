#!/usr/bin/env bash
# Builds here (no GPU needed) everything one sitting on a GPU machine runs, into DIR
# (default carry/gpu, git-ignored): the installed library and CLI, the GPU tests, the overhead
# probe, both examples, a cache precompiled for sm_90 (every tier) and scripts/gpu-sitting.sh.
# Then, with the device tool: run `bash carry/gpu/gpu-sitting.sh` with carry ["carry/gpu"].
# The installed CLI loads prefix/lib/libmlajit.so (its RPATH), which compiles in
# prefix/lib/mlajit-compiler-helper; the GPU tests carry the check library (tools/check) and the
# library's objects statically, and a copy of the helper beside them: nothing else is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-carry/gpu}
build=${BUILD_DIR:-build}
scripts/build.sh
rm -rf "$out" && mkdir -p "$out"
cmake --install "$build" --prefix "$out/prefix" --strip >/dev/null
for example in cpp_decode c_decode; do
  cmake -S "examples/$example" -B "$build/examples/$example" -G Ninja \
        -DCMAKE_PREFIX_PATH="$PWD/$out/prefix" >/dev/null
  cmake --build "$build/examples/$example" >/dev/null
  cp "$build/examples/$example/$example" "$out/"
done
cp "$build/tests/mlajit_gpu_tests" "$build/tests/run_overhead" "$out/"
strip "$out/mlajit_gpu_tests" "$out/run_overhead"
# The test binaries link mlajit statically and look for the compiler helper next to
# themselves; the installed library and CLI find theirs in prefix/lib.
cp "$out/prefix/lib/mlajit-compiler-helper" "$out/"
"$out/prefix/bin/mlajit" precompile --arch sm_90 --all-tiers --out "$out/cache" -q
cp scripts/gpu-sitting.sh "$out/"
cp tools/dev/sitting-lib.sh "$out/"  # the step logger of the tools/dev sitting scripts
du -sh "$out"
