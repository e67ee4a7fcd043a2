# Run from the sitting folder: cp this file into carry/gpu (scripts/prepare-gpu-sitting.sh; the
# final sitting also wants build/tests/plan_cost there), then `bash carry/gpu/<this file>` on the device.
# The final sitting of 2026-12-05: correctness of the tree's kernels (suite on auto and forced
# to hopper, the FP8 cases, verify), the host planning cost with the upload, the whole auto
# bench and the 16-head e4m3 shapes. Everything to $OUT.
cd "$(dirname "$0")"
g=$PWD
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=/tmp/uc-final
log=$OUT/final.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $log
timeout 200 ./mlajit_gpu_tests > $OUT/suite_auto.txt 2>&1; echo "suite auto rc=$? $(tail -2 $OUT/suite_auto.txt | head -1)" | tee -a $log
MLAJIT_TEST_KERNEL=hopper timeout 200 ./mlajit_gpu_tests > /tmp/suite_h.txt 2>&1; echo "suite hopper rc=$? $(tail -2 /tmp/suite_h.txt | head -1)" | tee -a $log
timeout 120 ./mlajit_gpu_tests "[fp8]" > /tmp/fp8.txt 2>&1; echo "fp8 rc=$? $(tail -2 /tmp/fp8.txt | head -1)" | tee -a $log
timeout 90 prefix/bin/mlajit verify > /tmp/verify.txt 2>&1; echo "verify rc=$? $(grep -E 'cases passed' /tmp/verify.txt)" | tee -a $log
timeout 120 ./plan_cost 300 > $OUT/plan_cost.txt 2>&1; echo "plan_cost rc=$?" | tee -a $log
timeout 240 prefix/bin/mlajit bench --csv $OUT/bench_auto.csv > /tmp/bench.txt 2>&1; echo "bench auto rc=$?" | tee -a $log
timeout 120 prefix/bin/mlajit bench --kernel portable --kv-dtype e4m3 --shape 16,128,16384,64 --shape 16,64,4096,64 --shape 16,16,16384,64 --shape 16,128,4096,1 --csv $OUT/bench_e4m3.csv > /tmp/b8.txt 2>&1; echo "bench e4m3 rc=$?" | tee -a $log
cat $OUT/plan_cost.txt; tail -42 /tmp/bench.txt; tail -8 /tmp/b8.txt
