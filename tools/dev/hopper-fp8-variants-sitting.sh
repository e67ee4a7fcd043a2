#!/usr/bin/env bash
# Variants of the hopper e4m3 path (carry/gpu/var/*/kernels): each checked on [fp8]
# forced to hopper and timed (hopper bf16 and portable e4m3 beside them); the fastest at
# 32-128 heads is timed again and then run through compute-sanitizer on [.sanitize-fp8]
# forced to hopper, the whole GPU suite on auto and mlajit verify.
cd "$(dirname "$0")"; g=$PWD
OUT=${OUT:-$g/out}; mkdir -p "$OUT"; log=$OUT/var.txt; csvdir=$g/vcsv; mkdir -p $csvdir
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee -a $log
shapes="128,64,16384,64 128,128,16384,64 128,128,1024,64 128,1,1024,64 128,64,4096,1 128,64,4096,64,2,1 64,64,16384,64 32,64,16384,64 16,128,16384,64 16,128,4096,1 16,128,4096,64,2,1"
args=(); for s in $shapes; do args+=(--shape "$s"); done
bench() {  # variant round
  local dir="" kv=e4m3 fam=hopper
  if [[ $1 == bf16 ]]; then kv=bf16; elif [[ $1 == portable ]]; then fam=portable; else dir=$g/var/$1/kernels; fi
  MLAJIT_KERNEL_DIR=$dir MLAJIT_CACHE_DIR=$g/uc-$1 timeout 90 $g/prefix/bin/mlajit bench --kernel $fam --kv-dtype $kv "${args[@]}" --csv $csvdir/b_$1_r$2.csv > /dev/null 2>&1
  echo "bench $1 r$2 rc=$?" >> $log
}
table() { python3 $g/bench_table.py $csvdir b_ | tee -a $log; }
for v in $(ls var | grep -v nohint); do
  MLAJIT_KERNEL_DIR=$g/var/$v/kernels MLAJIT_CACHE_DIR=$g/uc-$v MLAJIT_TEST_KERNEL=hopper timeout 60 $g/mlajit_gpu_tests "[fp8]" > $OUT/t_$v.txt 2>&1
  echo "$v fp8 tests rc=$? $(tail -1 $OUT/t_$v.txt)" | tee -a $log
done
for v in $(ls var) bf16 portable; do bench $v 1; done
table
best=$(python3 - $csvdir <<'PY'
import csv, glob, os, sys, math
score = {}
for path in glob.glob(os.path.join(sys.argv[1], "b_v*_r1.csv")):
    name = os.path.basename(path)[2:-7]
    rows = [r for r in csv.DictReader(open(path)) if int(r["heads"]) >= 32]
    if rows: score[name] = sum(math.log(float(r["median_us"])) for r in rows) / len(rows)
print(min(score, key=score.get))
PY
)
echo "best: $best" | tee -a $log
bench $best 2; bench bf16 2; bench $(ls var | head -1) 2
table
tar -C $g -czf $OUT/vcsv.tgz vcsv
export MLAJIT_KERNEL_DIR=$g/var/$best/kernels MLAJIT_CACHE_DIR=$g/uc-$best
for tool in racecheck synccheck memcheck; do
  MLAJIT_TEST_KERNEL=hopper timeout 60 compute-sanitizer --tool $tool $g/mlajit_gpu_tests "[.sanitize-fp8]" > $OUT/san_$tool.txt 2>&1
  echo "$best $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.txt | tail -1)" | tee -a $log
done
timeout 120 $g/mlajit_gpu_tests > $OUT/suite_auto.txt 2>&1
echo "$best GPU suite (auto) rc=$? $(tail -1 $OUT/suite_auto.txt)" | tee -a $log
timeout 60 $g/prefix/bin/mlajit verify > $OUT/verify.txt 2>&1
echo "$best verify (auto) rc=$? $(grep 'cases passed' $OUT/verify.txt)" | tee -a $log
