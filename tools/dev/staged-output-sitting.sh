#!/usr/bin/env bash
# Sitting: the hopper family's output staged through the last KV stage (write_output) against
# HEAD's kernels (carry/old/kernels): harness correctness + traces, GPU tests forced to hopper,
# verify, bench A/B in two rounds, racecheck/synccheck. Log: $OUT/ob.txt; CSVs: $OUT/csv.tgz.
# Prepared here: scripts/prepare-gpu-sitting.sh carry/gpu; the base kernels in carry/old
# (git archive BASE kernels | tar -x -C carry/old); this script and the harness binaries in
# carry/ob (tools/dev/hopper_harness.cu built with nvcc -gencode arch=compute_90a,code=sm_90a,
# as hopper_harness_new, and with -DHARNESS_TRACE on a tree with
# results/sitting-2026-12-05b/hopper-item-trace.patch applied, as hopper_harness_trace_new).
# Device call: bash carry/ob/sitting.sh, carry ["carry/gpu", "carry/ob", "carry/old"].
cd "$(dirname "$0")/.."
here=$PWD; g=$here/gpu
OUT=${OUT:-$here/out}; mkdir -p "$OUT"; log=$OUT/ob.txt
csvdir=$here/csv; mkdir -p $csvdir
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a $log
echo "=== harness correctness (new kernel)" | tee -a $log
timeout 120 ob/hopper_harness_new --correctness > $OUT/harness.txt 2>&1; echo "harness rc=$?" | tee -a $log
grep -E "failing|FAIL" $OUT/harness.txt | tail -5 | tee -a $log
echo "=== traces (new kernel)" >> $log
for shape in "128 1 1024 64" "128 64 1024 64" "128 128 1024 64"; do
  timeout 60 ob/hopper_harness_trace_new --one $shape | grep -v "^seed\|^device" >> $OUT/trace_new.txt 2>&1
done
grep -E "TIME|CTAS|^item[01] out|^item[01] scores" $OUT/trace_new.txt | tee -a $log
bench() {  # variant round
  local dir=""; [[ $1 == old ]] && dir=$here/old/kernels
  echo "=== bench hopper $1 r$2" >> $log
  MLAJIT_CACHE_DIR=$here/uc-$1 MLAJIT_KERNEL_DIR=$dir timeout 150 $g/prefix/bin/mlajit bench --kernel hopper \
    --csv $csvdir/bench_$1_r$2.csv >> $log 2>&1
  echo "bench $1 r$2 rc=$?" | tee -a $log
}
table() {  # the medians of every CSV so far, shape by shape, and new/old of round 1
  python3 - $csvdir <<'PY' | tee -a $log
import csv, glob, os, sys, collections
t = collections.defaultdict(dict)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "bench_*.csv"))):
    name = os.path.basename(path)[6:-4]
    for r in csv.DictReader(open(path)):
        key = ",".join(r[k] for k in ("heads", "batch", "kv_len", "page", "q_len", "variant"))
        t[key][name] = float(r["median_us"])
names = sorted({n for v in t.values() for n in v})
print("shape".ljust(48) + "".join(n.rjust(10) for n in names) + "  new/old")
for k, v in t.items():
    ratio = v.get("new_r1", 0) / v["old_r1"] if "old_r1" in v else 0
    print(k.ljust(48) + "".join((f"{v[n]:.1f}" if n in v else "-").rjust(10) for n in names) + f"  {ratio:.3f}")
PY
}
bench new 1; bench old 1
table
echo "=== GPU tests forced to hopper" | tee -a $log
MLAJIT_TEST_KERNEL=hopper MLAJIT_CACHE_DIR=$here/uc-tests timeout 200 $g/mlajit_gpu_tests > $OUT/tests_hopper.txt 2>&1
echo "gpu tests hopper rc=$?" | tee -a $log
grep -E "FAILED|failed|passed|skipped" $OUT/tests_hopper.txt | tail -6 | tee -a $log
echo "=== verify --kernel hopper" | tee -a $log
MLAJIT_CACHE_DIR=$here/uc-new timeout 100 $g/prefix/bin/mlajit verify --kernel hopper > $OUT/verify.txt 2>&1; echo "verify rc=$?" | tee -a $log
grep -E "cases passed|FAIL" $OUT/verify.txt | tail -3 | tee -a $log
bench new 2; bench old 2
tar -C $here -czf $OUT/csv.tgz csv
echo "=== sanitizers (hopper)" | tee -a $log
for tool in racecheck synccheck memcheck; do
  MLAJIT_TEST_KERNEL=hopper MLAJIT_CACHE_DIR=$here/uc-tests timeout 100 compute-sanitizer --tool $tool $g/mlajit_gpu_tests "[.sanitize]" > $OUT/san_$tool.txt 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.txt | tail -1)" | tee -a $log
done
table
