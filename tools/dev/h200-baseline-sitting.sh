#!/usr/bin/env bash
# One H200 sitting on main's tree: correctness (GPU suite on auto and forced to hopper, mlajit
# verify on auto and hopper), the whole `mlajit bench` on auto (the peers' ratios of issues 9
# and 10), the e4m3 shapes of issue 12 (hopper e4m3 at 32-128 heads against hopper bf16;
# portable e4m3 against portable bf16 at 16 heads), the host planning cost, compute-sanitizer on
# "[.sanitize-fp8]" forced to hopper, then the e4m3 producer variants of
# carry/gpu/var (part 2) and the traced harness. Prepared here with
# tools/dev/prepare-hopper-f16-sitting.sh. Device call: bash carry/gpu/h200-baseline-sitting.sh [part], carry ["carry/gpu"].
cd "$(dirname "$0")"; g=$PWD; part=${1:-1}
RES=${OUT:-$g/out}; OUT=$g/logs; mkdir -p "$RES" "$OUT"; log=$RES/sitting$part.txt; csvdir=$g/csv; mkdir -p $csvdir
# At most 8 files come back: the log, and everything else in one archive (also when timed out).
trap 'tar -C $g -czf $RES/logs$part.tgz logs csv vcsv 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$g/uc
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw --format=csv,noheader | tee -a $log
stamp() { echo "--- $(date +%T) $*" | tee -a $log; }
if [[ $part == 1 ]]; then
  stamp suite auto
  timeout 200 ./mlajit_gpu_tests > $OUT/suite_auto.txt 2>&1; echo "suite auto rc=$? $(tail -2 $OUT/suite_auto.txt | head -1)" | tee -a $log
  stamp suite hopper
  MLAJIT_TEST_KERNEL=hopper timeout 200 ./mlajit_gpu_tests > $OUT/suite_hopper.txt 2>&1; echo "suite hopper rc=$? $(tail -2 $OUT/suite_hopper.txt | head -1)" | tee -a $log
  grep -E "FAILED|with expansion" -A3 $OUT/suite_auto.txt $OUT/suite_hopper.txt | head -30 | tee -a $log
  for k in auto hopper; do
    timeout 100 prefix/bin/mlajit verify --kernel $k > $OUT/verify_$k.txt 2>&1; echo "verify $k rc=$? $(grep -E 'cases passed' $OUT/verify_$k.txt)" | tee -a $log
  done
  grep -E "e4m3" $OUT/verify_hopper.txt | head -6 | tee -a $log
  stamp plan_cost
  timeout 60 ./plan_cost 300 > $OUT/plan_cost.txt 2>&1; echo "plan_cost rc=$?" | tee -a $log
  stamp bench auto
  timeout 240 prefix/bin/mlajit bench --csv $csvdir/bench_auto.csv > $OUT/bench_auto.txt 2>&1; echo "bench auto rc=$?" | tee -a $log
  s128="128,1,1024,64 128,16,4096,64 128,64,4096,64 128,64,16384,64 128,128,1024,64 128,128,16384,64 128,64,4096,1 128,64,4096,64,2,1 64,64,16384,64 32,64,16384,64"
  s16="16,128,16384,64 16,64,16384,64 16,128,4096,64 16,16,16384,64 16,128,4096,1 16,128,4096,64,2,1"
  for run in "hopper e4m3 $s128" "hopper bf16 $s128" "portable e4m3 $s16" "portable bf16 $s16"; do
    set -- $run; fam=$1 kv=$2; shift 2; args=(); for s in "$@"; do args+=(--shape "$s"); done
    stamp bench $fam $kv
    timeout 120 prefix/bin/mlajit bench --kernel $fam --kv-dtype $kv "${args[@]}" --csv $csvdir/bench_${fam}_$kv.csv > $OUT/bench_${fam}_$kv.txt 2>&1; echo "bench $fam $kv rc=$?" | tee -a $log
  done
  stamp sanitizers
  for tool in memcheck racecheck synccheck; do
    MLAJIT_TEST_KERNEL=hopper timeout 100 compute-sanitizer --tool $tool ./mlajit_gpu_tests "[.sanitize-fp8]" > $OUT/san_fp8_$tool.txt 2>&1
    echo "hopper fp8 $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_fp8_$tool.txt | tail -1)" | tee -a $log
  done
  stamp done
  cat $OUT/plan_cost.txt | tail -20; tail -42 $OUT/bench_auto.txt
  for f in $OUT/bench_*_*.txt; do echo "== $f"; tail -17 $f; done
else
  OUT=$OUT bash ./variants.sh; cat $OUT/var.txt >> $log
  # Where a 128-head tile's time goes, over bf16 and over e4m3 (the tree's kernel, traced).
  for mode in --one --one8; do
    timeout 60 ./harness_trace $mode 128 64 16384 64 > $OUT/trace$mode.txt 2>&1
    echo "trace $mode rc=$?" | tee -a $log; grep -iE "steady|role|tile" $OUT/trace$mode.txt | head -30 >> $log
  done
fi
