#!/usr/bin/env bash
# The fixed-cost sitting on the GPU machine, from the folders that
# tools/dev/prepare-fixed-cost-sitting.sh makes. Timings of kernel variants on the short
# shapes with both families (VARIANTS, default every folder of carry/fc), the attention GPU tests
# on this checkout's kernels forced to each family, verify, a second timing round of tree and
# base, then memcheck. Everything goes to $OUT/fc.txt as it comes (a cut-short call still
# returns it), the CSVs to $OUT/csv.tgz: few files, as the device tool returns at most 8.
cd "$(dirname "$0")/.."
here=$PWD
g=$here/gpu
OUT=${OUT:-$here/out}; mkdir -p "$OUT"
log=$OUT/fc.txt
csvdir=$here/csv; mkdir -p $csvdir
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache
variants=(${VARIANTS:-$(cd fc && ls -d */ | tr -d /)})  # default: every variant prepared
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a $log
shapes=()
for s in 128,1,1024,64 128,1,4096,64 128,1,16384,64 128,16,1024,64 128,16,4096,64 128,16,16384,64 \
         128,64,1024,64 128,128,1024,64 128,16,16384,64,2,1 16,16,4096,64 16,128,4096,64; do
  shapes+=(--shape "$s")
done
bench() {  # variant family round
  echo "=== $1 $2" >> $log
  MLAJIT_CACHE_DIR=$here/uc-$1 MLAJIT_KERNEL_DIR=$here/fc/$1 \
    timeout 60 $g/prefix/bin/mlajit bench --kernel "$2" --iterations 50 --warmup 10 "${shapes[@]}" \
    --csv $csvdir/bench_$1_$2_r$3.csv >> $log 2>&1
  echo "$1 $2 rc=$?" >> $log
}
summary() {  # the median of each variant, shape by shape
  tar -C $here -czf $OUT/csv.tgz csv
  python3 - "$csvdir" "${variants[*]}" <<'EOF' | tee -a $log
import csv, glob, os, sys, collections
table = collections.defaultdict(lambda: collections.defaultdict(dict))  # (family, round) -> shape -> variant
for path in sorted(glob.glob(os.path.join(sys.argv[1], "bench_*.csv"))):
    variant, family, rnd = os.path.basename(path)[6:-4].split("_")
    with open(path) as f:
        for r in csv.DictReader(f):
            key = ",".join(r[k] for k in ("heads", "batch", "kv_len", "page", "q_len", "causal"))
            table[(family, rnd)][key][variant] = float(r["median_us"])
variants = sys.argv[2].split()
for (family, rnd), shapes in sorted(table.items()):
    print(f"--- {family} {rnd} (median us)")
    print("shape".ljust(22) + "".join(v.rjust(10) for v in variants))
    for key, v in shapes.items():
        print(key.ljust(22) + "".join((f"{v[n]:.1f}" if n in v else "-").rjust(10) for n in variants))
EOF
}
tests() {  # family timeout: the attention cases, on this checkout's kernels
  echo "=== GPU tests ($1)" | tee -a $log
  MLAJIT_TEST_KERNEL=$1 MLAJIT_CACHE_DIR=$here/uc-tests timeout $2 $g/mlajit_gpu_tests --durations yes \
    "decode matches*,edge kv lengths*,speculative decode*,ragged batches*,both head-dim*,every tier*,natural-log*,the hopper family on*,a batch-invariant*,a CUDA graph*" \
    > $here/tests_$1.txt 2>&1
  echo "gpu tests $1 rc=$?" | tee -a $log
  grep -E "FAILED|failed|passed|skipped| s: " $here/tests_$1.txt | tail -16 | tee -a $log
}
for family in hopper portable; do for v in "${variants[@]}"; do bench $v $family 1; done; done
summary
tests hopper 120
tests portable 90
echo "=== verify" | tee -a $log
MLAJIT_CACHE_DIR=$here/uc-verify timeout 90 $g/prefix/bin/mlajit verify > $here/verify.txt 2>&1
echo "verify rc=$?" | tee -a $log; grep -E "cases passed|FAIL" $here/verify.txt | tail -3 | tee -a $log
for family in hopper portable; do for v in tree base; do bench $v $family 2; done; done
summary
MLAJIT_TEST_KERNEL=hopper MLAJIT_CACHE_DIR=$here/uc-tests timeout 90 compute-sanitizer --tool memcheck \
  $g/mlajit_gpu_tests "[.sanitize]" > $here/memcheck.txt 2>&1
echo "memcheck hopper rc=$? $(grep -E 'ERROR SUMMARY' $here/memcheck.txt | tail -1)" | tee -a $log
echo "=== done" >> $log
