#!/usr/bin/env bash
# This tree's record in one call: `mlajit verify`, `mlajit bench` on auto and per family over the
# default shapes, and e4m3 against bf16 at 16 and 128 heads. On an H200 the CLI adds the peers'
# ratios (the issues' one-run checks); elsewhere it is the tree's record on that card.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; this file and bench_table.py beside it.
# Device call, carry ["carry/gpu"]: bash carry/gpu/record-sitting.sh. Writes $OUT/r.txt, $OUT/r.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting r
B=prefix/bin/mlajit
U=(env MLAJIT_CACHE_DIR=$g/uc)
step verify 150 "${U[@]}" $B verify
step auto 200 "${U[@]}" $B bench --csv $C/auto.csv
step portable 200 "${U[@]}" $B bench --kernel portable --csv $C/portable.csv
step hopper 200 "${U[@]}" $B bench --kernel hopper --csv $C/hopper.csv
S16=(--shape 16,128,16384,64 --shape 16,64,16384,64 --shape 16,128,4096,64 --shape 16,64,4096,64
     --shape 16,16,16384,64 --shape 16,16,4096,64)
S128=(--shape 128,64,16384,64 --shape 128,128,16384,64 --shape 128,128,1024,64 --shape 128,64,4096,64)
for kv in bf16 e4m3; do
  step k16_$kv 120 "${U[@]}" $B bench --kv-dtype $kv "${S16[@]}" --csv $C/k16_$kv.csv
  step k128_$kv 120 "${U[@]}" $B bench --kv-dtype $kv "${S128[@]}" --csv $C/k128_$kv.csv
done
python3 ./bench_table.py $C k16_ e4m3/bf16 >> $log 2>&1
python3 ./bench_table.py $C k128_ e4m3/bf16 >> $log 2>&1
python3 - "$C" >> $log <<'PY'
import csv, sys
for name in ("auto", "portable", "hopper"):
    print("===", name)
    for r in csv.DictReader(open(sys.argv[1] + "/" + name + ".csv")):
        print(*(r.get(k, "") for k in ("heads", "batch", "kv_len", "page", "q_len", "causal", "variant",
                                       "median_us", "gbps", "tflops", "vs_fa2", "vs_fa3", "vs_flashmla")))
PY
echo "--- $(date +%T) r done" >> $log
