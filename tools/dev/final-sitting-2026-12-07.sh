#!/usr/bin/env bash
# The session's last sitting: this tree's `mlajit bench` on auto over the baseline shapes (with
# the peers' ratios where the card is an H200), and issue 12's 16-head e4m3 cache against bf16
# on each portable tier (the narrow streams now run on tiers 2-3 too).
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; cp this file and bench_table.py there.
# Device call, carry ["carry/gpu"]: bash carry/gpu/final-sitting-2026-12-07.sh. Writes $OUT/f.txt, $OUT/f.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting f
B=prefix/bin/mlajit
step auto 200 env MLAJIT_CACHE_DIR=$g/uc $B bench --csv $C/auto.csv
S=(--shape 16,128,16384,64 --shape 16,64,16384,64 --shape 16,128,4096,64)
for t in 1 2 3; do
  for kv in bf16 e4m3; do
    step t${t}_$kv 90 env MLAJIT_CACHE_DIR=$g/uc $B bench --kernel portable --tier $t --kv-dtype $kv "${S[@]}" --csv $C/t${t}_$kv.csv
  done
done
python3 - "$C" >> $log <<'PY'
import csv, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    for r in csv.DictReader(open(f)):
        print(f.split("/")[-1], *(r.get(k, "") for k in ("heads", "batch", "kv_len", "page", "q_len", "causal", "variant", "median_us", "gbps", "tflops", "vs_fa2", "vs_fa3", "vs_flashmla")))
PY
echo "--- $(date +%T) f done" >> $log
