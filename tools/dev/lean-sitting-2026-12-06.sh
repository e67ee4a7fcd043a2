#!/usr/bin/env bash
# One device call for what both prepared sittings most need, most valuable first, so that a
# call cut short still answers the first questions: the hopper e4m3 path in f16 (var/v1f16r112,
# var/v4f16full: tools/dev/results/sitting-2026-12-05d) on "[fp8]" forced to hopper; DeepSeek-
# V3.2's per-token scales (v32/: this tree's tests and CLI) on "[fp8-token]"; one bench round
# of each; the sanitizers; the bf16 staged-regions variant (var/v5bf16staged) on the whole
# suite forced to hopper; a second bench round with it. From carry/gpu (tools/dev/prepare-hopper-
# f16-sitting.sh, then tools/dev/prepare-token-scales-sitting.sh). Device call, carry
# ["carry/gpu"]: bash carry/gpu/lean.sh. Writes $OUT/lean.txt and $OUT/lean-logs.tgz.
cd "$(dirname "$0")"; g=$PWD; RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L" "$g/csv"
log=$RES/lean.txt
trap 'tar -C $g -czf $RES/lean-logs.tgz logs csv 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$g/uc
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step()
var() { local v=$1; shift; MLAJIT_KERNEL_DIR=$g/var/$v/kernels MLAJIT_CACHE_DIR=$g/uc-$v MLAJIT_TEST_KERNEL=hopper "$@"; }
t32() { (cd $g/v32 && LD_LIBRARY_PATH=$g/v32/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_DIR=$g/v32/uc "$@"); }
hshapes=(--shape 128,64,16384,64 --shape 128,128,1024,64 --shape 64,64,16384,64 --shape 16,128,16384,64)
tshapes=(--shape 16,128,16384,64 --shape 16,64,16384,64 --shape 128,64,16384,64 --shape 128,128,1024,64)
hbench() {  # variant round
  local v=$1 kv=e4m3 dir=$g/var/$1/kernels
  [[ $v == bf16 ]] && kv=bf16 dir=""
  [[ $v == v5bf16staged ]] && kv=bf16
  MLAJIT_KERNEL_DIR=$dir MLAJIT_CACHE_DIR=$g/uc-$v step hb_${v}_r$2 60 prefix/bin/mlajit bench --kernel hopper \
    --kv-dtype $kv "${hshapes[@]}" --csv $g/csv/s_${v}_r$2.csv
}
tbench() {  # kv-args... : the portable family over bf16, e4m3, V3.2 rows
  local all="$*"; local name=tb_${all// /_}; name=${name//--/}
  t32 step $name 60 prefix/bin/mlajit bench --kernel portable --kv-dtype "$@" "${tshapes[@]}"
  grep -E "^ *1[26]" $L/$name.txt | head -6 >> $log
}
var v1f16r112 step t_v1 60 ./mlajit_gpu_tests "[fp8]"
var v4f16full step t_v4 60 ./mlajit_gpu_tests "[fp8]"
t32 step token 90 ./mlajit_gpu_tests "[fp8-token]"
grep -E "FAIL" $L/t_v1.txt $L/t_v4.txt $L/token.txt | head -20 >> $log
# The Python binding's V3.2 test under torch (python/ travels with the working tree).
(cd $g/../../python/tests && MLAJIT_LIBRARY=$g/v32/prefix/lib/libmlajit.so MLAJIT_CACHE_DIR=$g/v32/uc \
  step py_v32 90 python3 -m unittest -v test_mla_torch)
grep -E "v32|ERROR|FAIL|Ran" $L/py_v32.txt | head -12 >> $log
for v in v0head v1f16r112 v4f16full bf16; do hbench $v 1; done
tbench bf16; tbench e4m3; tbench e4m3 --kv-scales token128
python3 ./bench_table.py $g/csv s_ | tee -a $log
var v4f16full step race_v4 60 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize-fp8]"
t32 step race_token 70 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "e4m3 per-token scales: one small shape per tier"
t32 step mem_token 60 compute-sanitizer --tool memcheck ./mlajit_gpu_tests "e4m3 per-token scales: one small shape per tier"
t32 step fp8_v32 60 ./mlajit_gpu_tests "[fp8]"
t32 step verify_v32 70 prefix/bin/mlajit verify
var v5bf16staged step t_v5 120 ./mlajit_gpu_tests
for v in v0head v1f16r112 v4f16full bf16 v5bf16staged; do hbench $v 2; done
var v5bf16staged step race_v5 60 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
var v1f16r112 step race_v1 60 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize-fp8]"
var v4f16full step mem_v4 60 compute-sanitizer --tool memcheck ./mlajit_gpu_tests "[.sanitize-fp8]"
python3 ./bench_table.py $g/csv s_ | tee -a $log
