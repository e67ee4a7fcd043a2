#!/usr/bin/env bash
# The GPU checks of DeepSeek-V3.2's per-token e4m3 scales (KvScales::kPerToken128), from a
# directory holding this tree's mlajit_gpu_tests and mlajit-compiler-helper (copied beside it by
# tools/dev/prepare-token-scales-sitting.sh): the "[fp8-token]" cases, the per-tensor "[fp8]"
# cases again (the check harness changed), racecheck and memcheck of the small shapes, `mlajit
# verify` (its two V3.2 cases), then `mlajit bench` of the portable family over bf16, per-tensor
# e4m3 and V3.2's rows on four shapes (prefix/: this tree installed). Writes $OUT/token.txt and
# $OUT/token-logs.tgz.
cd "$(dirname "$0")"; d=$PWD; RES=${OUT:-$d/out}; mkdir -p "$RES" "$d/logs"; log=$RES/token.txt
trap 'tar -C $d -czf $RES/token-logs.tgz logs 2>/dev/null' EXIT
export MLAJIT_CACHE_DIR=$d/uc
step() {  # name seconds command...: runs it, logs rc and the summary lines
  local name=$1 limit=$2; shift 2
  echo "--- $(date +%T) $name" | tee -a $log
  timeout $limit "$@" > $d/logs/$name.txt 2>&1
  echo "$name rc=$? $(grep -E 'test cases|ERROR SUMMARY|RACECHECK SUMMARY' $d/logs/$name.txt | tail -1)" | tee -a $log
  grep -E "FAIL|e4m3-t128" $d/logs/$name.txt | head -40 >> $log
}
step token 150 ./mlajit_gpu_tests "[fp8-token]"
step fp8 120 ./mlajit_gpu_tests "[fp8]"
step race 120 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "e4m3 per-token scales: one small shape per tier"
step mem 100 compute-sanitizer --tool memcheck ./mlajit_gpu_tests "e4m3 per-token scales: one small shape per tier"
export LD_LIBRARY_PATH=$d/prefix/lib:/usr/local/cuda/lib64
step verify 100 prefix/bin/mlajit verify
grep -E "per-token|cases passed" $d/logs/verify.txt >> $log
shapes=(--shape 16,128,16384,64 --shape 16,64,16384,64 --shape 128,64,16384,64 --shape 128,128,1024,64)
for kv in "bf16" "e4m3" "e4m3 --kv-scales token128"; do
  name=bench_${kv// /_}; name=${name//--/}
  step $name 100 prefix/bin/mlajit bench --kernel portable --kv-dtype $kv "${shapes[@]}"
  tail -8 $d/logs/$name.txt >> $log
done
