#!/usr/bin/env bash
# A/B sitting on the GPU machine, from the folders tools/dev/prepare-ab-sitting.sh makes:
# verify the new build, bench old and new (and each with the other's kernels, through
# MLAJIT_KERNEL_DIR) on the shapes nearest the FA2 bar, the GPU tests, then a second bench
# round. Every result goes to $OUT/ab.txt as soon as it exists, so a cut-short call still
# returns what it measured.
cd "$(dirname "$0")"
g=$PWD/gpu
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
log=$OUT/ab.txt
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee -a $log
echo "=== verify new (no JIT, CPU-built cache)" | tee -a $log
MLAJIT_NO_JIT=1 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$PWD/empty LD_LIBRARY_PATH=$g/prefix/lib:$LD_LIBRARY_PATH \
  timeout 60 $g/prefix/bin/mlajit verify >> $log 2>&1; echo "verify rc=$?" | tee -a $log
shapes=(--shape 128,1,1024,64 --shape 128,1,4096,64 --shape 128,1,16384,64 --shape 128,16,1024,64 --shape 128,16,4096,64 --shape 128,64,4096,64 --shape 16,128,16384,64)
bench() {  # name prefix-dir kernel-dir args...
  local name=$1 prefix=$2 kdir=$3; shift 3
  local cache=$g/cache; [[ $prefix == $PWD/old/prefix ]] && cache=$PWD/old/cache
  echo "=== $name $*" >> $log
  env MLAJIT_CACHE_PATH=$cache MLAJIT_CACHE_DIR=$PWD/uc-$name LD_LIBRARY_PATH=$prefix/lib:$LD_LIBRARY_PATH ${kdir:+MLAJIT_KERNEL_DIR=$kdir} \
    timeout 40 $prefix/bin/mlajit bench --iterations 100 --warmup 10 "$@" >> $log 2>&1
  echo "$name rc=$?" >> $log
}
round() {
  bench new   $g/prefix         ""            "${shapes[@]}"
  bench old   $PWD/old/prefix   ""            "${shapes[@]}"
  bench newplan_oldmerge $g/prefix $PWD/old/kernels "${shapes[@]}"
  bench oldplan_newmerge $PWD/old/prefix $PWD/new/kernels "${shapes[@]}"
  bench new   $g/prefix         ""            --causal --qlen 2 --shape 128,16,16384,64 --shape 128,64,4096,64
  bench old   $PWD/old/prefix   ""            --causal --qlen 2 --shape 128,16,16384,64 --shape 128,64,4096,64
}
round
echo "=== GPU tests (new)" | tee -a $log
MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$PWD/uc-new LD_LIBRARY_PATH=$g/prefix/lib:$LD_LIBRARY_PATH timeout 120 $g/mlajit_gpu_tests > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?" | tee -a $log
grep -E "FAIL|failed|passed|skipped" $OUT/gpu_tests.txt | tail -5 | tee -a $log
echo "=== round 2" >> $log
round
echo "=== done" >> $log
