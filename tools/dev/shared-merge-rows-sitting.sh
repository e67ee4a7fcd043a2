# Run from the sitting folder: cp this file into carry/gpu (scripts/prepare-gpu-sitting.sh; the
# final sitting also wants build/tests/plan_cost there), then `bash carry/gpu/<this file>` on the device.
# The merge's shared rows on the GPU: correctness against the float64 reference (auto and each
# family) and compute-sanitizer racecheck / synccheck on "[.sanitize]" (its new shared case).
cd "$(dirname "$0")"
g=$PWD
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=/tmp/uc-shared
log=$OUT/shared.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $log
for k in "" hopper portable; do
  echo "--- family ${k:-auto}" | tee -a $log
  env ${k:+MLAJIT_TEST_KERNEL=$k} timeout 120 ./mlajit_gpu_tests "a lone long request*" 2>&1 | grep -E "lone request|passed|failed|FAIL" | tee -a $log
done
for k in hopper portable; do
  for tool in racecheck synccheck; do
    MLAJIT_TEST_KERNEL=$k timeout 150 compute-sanitizer --tool $tool ./mlajit_gpu_tests "[.sanitize]" > /tmp/$tool-$k.txt 2>&1
    echo "$tool $k rc=$? $(grep -E 'SUMMARY' /tmp/$tool-$k.txt | tail -1) $(grep -c 'sanitize shared merge rows' /tmp/$tool-$k.txt) shared-case lines" | tee -a $log
    grep "sanitize shared" /tmp/$tool-$k.txt | head -1 | tee -a $log
  done
done
