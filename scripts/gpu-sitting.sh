#!/usr/bin/env bash
# One sitting on a GPU machine (the H200 kinds of the device tool), from a folder made by
# scripts/prepare-gpu-sitting.sh: no-JIT verify from the CPU-built cache, the GPU tests (two
# GPUs at once where there are two), bench with plot, the Python binding against PyTorch, host
# overheads, the installed examples, compute-sanitizer. Logs go to $OUT (or ./out).
cd "$(dirname "$0")"
here=$PWD
OUT=${OUT:-$here/out}; mkdir -p "$OUT"
export MLAJIT_CACHE_DIR=$here/usercache LD_LIBRARY_PATH=$here/prefix/lib:/usr/local/cuda/lib64
nvidia-smi -L | tee $OUT/nvsmi.txt
echo "=== no-JIT verify from the CPU-built cache"
MLAJIT_NO_JIT=1 MLAJIT_CACHE_PATH=$here/cache MLAJIT_CACHE_DIR=$here/empty SPDLOG_LEVEL=mlajit.cache=debug ./prefix/bin/mlajit verify > $OUT/verify_nojit.txt 2>&1; echo "verify rc=$?"
grep -E "cases passed|stats" $OUT/verify_nojit.txt | tail -2
echo "=== GPU tests"
timeout 240 ./mlajit_gpu_tests > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$?"
grep -E "FAIL|failed|passed|skipped|two GPUs|graph" $OUT/gpu_tests.txt | tail -12
# The same suite with every case on one family: the portable one (auto gives most shapes to
# hopper on compute capability 9.0) and, where the device has 9.0, the hopper one; cases a
# family cannot run say so and are skipped.
families=portable
nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | grep -q '^9.0' && families="portable hopper"
for family in $families; do
  echo "=== GPU tests on the $family family"
  MLAJIT_TEST_KERNEL=$family timeout 240 ./mlajit_gpu_tests > $OUT/gpu_tests_$family.txt 2>&1; echo "$family gpu tests rc=$?"
  grep -E "FAIL|failed|passed" $OUT/gpu_tests_$family.txt | tail -4
  echo "=== verify --kernel $family"
  timeout 120 ./prefix/bin/mlajit verify --kernel $family > $OUT/verify_$family.txt 2>&1; echo "verify $family rc=$?"
  grep -E "cases passed|FAIL" $OUT/verify_$family.txt | tail -3
done
echo "=== bench"
timeout 150 ./prefix/bin/mlajit bench --csv $OUT/bench.csv --plot $OUT/roofline.png > $OUT/bench.txt 2>&1; echo "bench rc=$?"
cat $OUT/bench.txt | tail -40
for family in $families; do
  echo "=== bench --kernel $family"
  timeout 150 ./prefix/bin/mlajit bench --kernel $family --csv $OUT/bench_$family.csv > $OUT/bench_$family.txt 2>&1; echo "bench $family rc=$?"
  cat $OUT/bench_$family.txt | tail -40
done
echo "=== python"
(cd ../../python/tests && MLAJIT_LIBRARY=$here/prefix/lib/libmlajit.so timeout 300 python3 -m pytest -q -x -rs test_mla_torch.py test_args.py test_torch_op.py test_engine_example.py 2>&1 | tail -25) | tee $OUT/python.txt
(cd ../../python/tests && MLAJIT_LIBRARY=$here/prefix/lib/libmlajit.so PYTHONPATH=.. timeout 60 python3 bench_overhead.py 2>&1 | tail -5) | tee -a $OUT/python.txt
echo "=== overhead"
timeout 60 ./run_overhead 2>&1 | tail -6 | tee $OUT/overhead.txt
echo "=== examples"
timeout 30 ./cpp_decode 2>&1 | tail -3; timeout 30 ./c_decode 2>&1 | tail -3
for kv in bf16 e4m3; do  # the engine-shaped Python loop (examples/engine_decode), full size
  (cd ../.. && MLAJIT_LIBRARY=$here/prefix/lib/libmlajit.so timeout 180 python3 examples/engine_decode/engine_decode.py --steps 8 --kv-dtype $kv 2>&1 | tail -12) | tee $OUT/engine_decode_$kv.txt
done
echo "=== compute-sanitizer"
for family in $families; do
  for tool in memcheck racecheck synccheck; do
    MLAJIT_TEST_KERNEL=$family timeout 100 compute-sanitizer --tool $tool ./mlajit_gpu_tests "[.sanitize]" > $OUT/sanitize_${family}_$tool.txt 2>&1
    echo "$family $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|errors' $OUT/sanitize_${family}_$tool.txt | tail -2 | tr '\n' ' ')"
  done
done
