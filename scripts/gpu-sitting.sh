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
# The same suite with every case on the hopper family where the device has it (compute
# capability 9.0); cases it cannot run say so and are skipped.
if nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | grep -q '^9.0'; then
  echo "=== GPU tests on the hopper family"
  MLAJIT_TEST_KERNEL=hopper timeout 240 ./mlajit_gpu_tests > $OUT/gpu_tests_hopper.txt 2>&1; echo "hopper gpu tests rc=$?"
  grep -E "FAIL|failed|passed|two GPUs|graph" $OUT/gpu_tests_hopper.txt | tail -8
  echo "=== verify --kernel hopper"
  timeout 120 ./prefix/bin/mlajit verify --kernel hopper > $OUT/verify_hopper.txt 2>&1; echo "verify hopper rc=$?"
  grep -E "cases passed|FAIL" $OUT/verify_hopper.txt | tail -3
fi
echo "=== bench"
timeout 150 ./prefix/bin/mlajit bench --csv $OUT/bench.csv --plot $OUT/roofline.png > $OUT/bench.txt 2>&1; echo "bench rc=$?"
cat $OUT/bench.txt | tail -40
if [ -f $OUT/gpu_tests_hopper.txt ]; then
  echo "=== bench --kernel hopper"
  timeout 150 ./prefix/bin/mlajit bench --kernel hopper --csv $OUT/bench_hopper.csv > $OUT/bench_hopper.txt 2>&1; echo "bench hopper rc=$?"
  cat $OUT/bench_hopper.txt | tail -40
fi
echo "=== python"
(cd ../../python/tests && MLAJIT_LIBRARY=$here/prefix/lib/libmlajit.so timeout 120 python3 -m pytest -q -x test_mla_torch.py test_args.py 2>&1 | tail -15) | tee $OUT/python.txt
(cd ../../python/tests && MLAJIT_LIBRARY=$here/prefix/lib/libmlajit.so PYTHONPATH=.. timeout 60 python3 bench_overhead.py 2>&1 | tail -5) | tee -a $OUT/python.txt
echo "=== overhead"
timeout 60 ./run_overhead 2>&1 | tail -6 | tee $OUT/overhead.txt
echo "=== examples"
timeout 30 ./cpp_decode 2>&1 | tail -3; timeout 30 ./c_decode 2>&1 | tail -3
echo "=== compute-sanitizer"
for family in portable hopper; do
  [ $family = hopper ] && [ ! -f $OUT/gpu_tests_hopper.txt ] && continue
  for tool in memcheck racecheck synccheck; do
    MLAJIT_TEST_KERNEL=$family timeout 100 compute-sanitizer --tool $tool ./mlajit_gpu_tests "[.sanitize]" > $OUT/sanitize_${family}_$tool.txt 2>&1
    echo "$family $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|errors' $OUT/sanitize_${family}_$tool.txt | tail -2 | tr '\n' ' ')"
  done
done
