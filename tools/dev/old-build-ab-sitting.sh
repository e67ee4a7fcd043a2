#!/usr/bin/env bash
# A hopper kernel change built into the library against an older build of main (its install
# prefix), in one device call: `mlajit verify --kernel hopper` first (the call stops there if it
# fails: a hang would only burn the rest), the GPU suite forced to hopper, then `mlajit bench
# --kernel hopper` rounds of new and old in turn (bf16 and e4m3 shapes), the suite on auto, and
# racecheck / synccheck of both sanitize cases forced to hopper. For changes whose host side
# differs too (shared memory, barriers), where a kernel copy under MLAJIT_KERNEL_DIR would not
# match the host. Used for a20ed18 (stage halves) and the softmax split of 2026-12-06d.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; the old build's install prefix in
# carry/gpu/old/prefix (a worktree of the old commit, cmake -DMLAJIT_BUILD_TESTS=OFF,
# cmake --install); cp this file to carry/gpu/h.sh.
# Device call, carry ["carry/gpu"]: bash carry/gpu/h.sh [ROUNDS]. Writes $OUT/h.txt, $OUT/h.tgz.
cd "$(dirname "$0")"; g=$PWD; rounds=${1:-2}
RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L" "$g/csv"; log=$RES/h.txt
trap 'tar -C $g -czf $RES/h.tgz logs csv 2>/dev/null' EXIT
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step()
new=(env LD_LIBRARY_PATH=$g/prefix/lib:$LD_LIBRARY_PATH MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$g/uc)
old=(env LD_LIBRARY_PATH=$g/old/prefix/lib:$LD_LIBRARY_PATH MLAJIT_CACHE_DIR=$g/uc-old)
bf16="128,64,16384,64 128,128,16384,64 128,128,1024,64 128,16,4096,64 128,1,1024,64 128,64,4096,64,2,1 128,64,4096,64,4,1 128,64,4096,1 64,64,16384,64 16,128,16384,64 16,128,4096,64,2,1"
fp8="128,64,16384,64 128,128,1024,64 64,64,16384,64"
bench() {  # side(new|old) name kv-args... -- shapes...
  local side=$1 name=$2; shift 2; local kv=(); while [[ $1 != -- ]]; do kv+=("$1"); shift; done; shift
  local args=(); for s in "$@"; do args+=(--shape "$s"); done
  local -n cmd=$side
  step ${name} 150 "${cmd[@]}" $g/${side/new/.}/prefix/bin/mlajit bench --kernel hopper "${kv[@]}" "${args[@]}" --csv $g/csv/$name.csv
  grep -E "^ *[0-9]+ +[0-9]+ " $L/$name.txt | sed "s/^/$name /" >> $log
}
step verify 60 "${new[@]}" $g/prefix/bin/mlajit verify --kernel hopper
grep -q "^verify rc=0" $log || { echo "--- verify failed: stopping" >> $log; exit 1; }
step suite_hopper 150 "${new[@]}" MLAJIT_TEST_KERNEL=hopper ./mlajit_gpu_tests
grep -E "FAILED" -A3 $L/suite_hopper.txt | head -12 >> $log
for r in $(seq 1 $rounds); do
  bench new new_r$r --kv-dtype bf16 -- $bf16
  bench old old_r$r --kv-dtype bf16 -- $bf16
  bench new new_e4m3_r$r --kv-dtype e4m3 -- $fp8
  bench old old_e4m3_r$r --kv-dtype e4m3 -- $fp8
done
step suite_auto 150 "${new[@]}" ./mlajit_gpu_tests
grep -E "FAILED" -A3 $L/suite_*.txt | head -12 >> $log
step race 150 "${new[@]}" MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize]"
step race_fp8 150 "${new[@]}" MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool racecheck ./mlajit_gpu_tests "[.sanitize-fp8]"
step sync 120 "${new[@]}" MLAJIT_TEST_KERNEL=hopper compute-sanitizer --tool synccheck ./mlajit_gpu_tests "[.sanitize]"
echo "--- $(date +%T) done" >> $log
