#!/usr/bin/env bash
# Copies this tree's GPU tests (static: the library's objects and the check harness) and their
# compiler helper into carry/gpu/v32, and installs the tree (library and CLI) into
# carry/gpu/v32/prefix: what tools/dev/lean-sitting-2026-12-06.sh runs of DeepSeek-V3.2's
# per-token scales (tools/dev/results/sitting-2026-12-06/README.md says how to prepare it).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! grep -q KvScales include/mlajit/kernel_spec.h; then
  echo "this tree has no per-token scales: apply tools/dev/results/sitting-2026-12-06/v32/*.patch first" >&2
  exit 1
fi
cmake --build build >/dev/null
out=carry/gpu/v32
rm -rf "$out" && mkdir -p "$out"
cp build/tests/mlajit_gpu_tests build/tests/mlajit-compiler-helper "$out/"
strip "$out/mlajit_gpu_tests" "$out/mlajit-compiler-helper"
cmake --install build --prefix "$out/prefix" --strip >/dev/null
rm -rf "$out/prefix/include" "$out/prefix/share"
du -sh "$out"
