#!/usr/bin/env bash
# Sitting: the hopper family over an e4m3 KV cache (producer dequantizes codes into the
# stages). Correctness first (the [fp8] GPU cases and mlajit verify forced to hopper), then
# mlajit bench: hopper e4m3, portable e4m3 and hopper bf16 on the same shapes, two rounds;
# then compute-sanitizer on "[.sanitize-fp8]" forced to hopper. Log: $OUT/fp8.txt; CSVs in
# $OUT/csv.tgz. Prepared here: scripts/prepare-gpu-sitting.sh carry/gpu; copy this script to
# carry/gpu, and the base commit's kernels to carry/gpu/old (git archive BASE kernels | tar -x
# -C carry/gpu/old) for the portable A/B. Device call: bash carry/gpu/hopper-fp8-sitting.sh [part], carry ["carry/gpu"];
# part 1 = correctness + bench round 1, part 2 = bench round 2 + sanitizers + the GPU suite.
cd "$(dirname "$0")"
g=$PWD; part=${1:-1}
OUT=${OUT:-$g/out}; mkdir -p "$OUT"; log=$OUT/fp8.txt
csvdir=$g/csv; mkdir -p $csvdir
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache
export MLAJIT_CACHE_DIR=$g/uc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a $log
shapes128="128,1,1024,64 128,16,4096,64 128,64,4096,64 128,64,16384,64 128,128,1024,64 128,128,16384,64 128,64,4096,1 128,64,4096,64,2,1"
shapes16="16,128,16384,64 16,64,16384,64 16,128,4096,64 16,16,16384,64 16,128,4096,1 16,128,4096,64,2,1"
bench() {  # family kv_dtype round [old: HEAD's kernels from carry/gpu/old]
  local args=(); for s in $shapes128 $shapes16; do args+=(--shape "$s"); done
  local dir="" name=$1_$2; [[ $4 == old ]] && dir=$g/old/kernels name=$1old_$2
  echo "=== bench $name r$3" >> $log
  MLAJIT_KERNEL_DIR=$dir MLAJIT_CACHE_DIR=$g/uc$4 timeout 200 $g/prefix/bin/mlajit bench \
    --kernel $1 --kv-dtype $2 "${args[@]}" --csv $csvdir/bench_${name}_r$3.csv >> $log 2>&1
  echo "bench $name r$3 rc=$?" | tee -a $log
}
table() {  # medians of every CSV, and hopper e4m3 against portable e4m3 and hopper bf16
  python3 - $csvdir <<'PY' | tee -a $log
import csv, glob, os, sys, collections
t = collections.defaultdict(dict)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "bench_*.csv"))):
    name = os.path.basename(path)[6:-4]
    for r in csv.DictReader(open(path)):
        key = ",".join(r[k] for k in ("heads", "batch", "kv_len", "page", "q_len"))
        t[key][name] = float(r["median_us"])
names = sorted({n for v in t.values() for n in v})
print("shape".ljust(24) + "".join(n.replace("_r", "/").rjust(18) for n in names) + "  h8/p8  h8/h16  p8/p8old")
def ratio(a, b):
    return f"{a / b:.3f}" if a and b else "-"
for k, v in t.items():
    h8 = v.get("hopper_e4m3_r1"); p8 = v.get("portable_e4m3_r1"); h16 = v.get("hopper_bf16_r1")
    old = v.get("portableold_e4m3_r1")
    print(k.ljust(24) + "".join((f"{v[n]:.1f}" if n in v else "-").rjust(18) for n in names) +
          f"  {ratio(h8, p8)}  {ratio(h8, h16)}  {ratio(p8, old)}")
PY
}
if [[ $part == 1 ]]; then
  echo "=== [fp8] forced to hopper" | tee -a $log
  MLAJIT_TEST_KERNEL=hopper timeout 200 $g/mlajit_gpu_tests "[fp8]" -s > $OUT/tests_fp8_hopper.txt 2>&1
  echo "fp8 hopper rc=$?" | tee -a $log
  grep -E "rel|FAILED|failed|passed|skipped" $OUT/tests_fp8_hopper.txt | tail -30 | tee -a $log
  echo "=== verify --kernel hopper" | tee -a $log
  timeout 100 $g/prefix/bin/mlajit verify --kernel hopper > $OUT/verify.txt 2>&1; echo "verify rc=$?" | tee -a $log
  grep -E "e4m3|cases passed|FAIL" $OUT/verify.txt | tail -12 | tee -a $log
  bench hopper e4m3 1; bench portable e4m3 1; bench portable e4m3 1 old; bench hopper bf16 1
  table
else
  bench hopper e4m3 2; bench portable e4m3 2 old; bench portable e4m3 2
  echo "=== sanitizers on [.sanitize-fp8] (hopper)" | tee -a $log
  for tool in racecheck synccheck memcheck; do
    MLAJIT_TEST_KERNEL=hopper timeout 150 compute-sanitizer --tool $tool $g/mlajit_gpu_tests "[.sanitize-fp8]" > $OUT/san_$tool.txt 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.txt | tail -1)" | tee -a $log
  done
  echo "=== GPU suite forced to hopper" | tee -a $log
  MLAJIT_TEST_KERNEL=hopper timeout 200 $g/mlajit_gpu_tests > $OUT/tests_hopper.txt 2>&1
  echo "gpu tests hopper rc=$?" | tee -a $log
  grep -E "FAILED|failed|passed|skipped" $OUT/tests_hopper.txt | tail -6 | tee -a $log
  table
fi
tar -C $g -czf $OUT/csv.tgz csv
