#!/usr/bin/env bash
# Where the hopper kernel's roles wait (issue 10's next step after the three-stage kernel): ncu's
# per-instruction stall samples (SourceCounters, SASS view) of main's two-stage kernel at 128
# heads on the shapes short of issue 10's bar or at its edge: B64 L16384 page 64 (the
# compute-bound loop), causal q_len 2 B64 L4096 (0.79x FlashMLA on the H200) and, with
# STALL_PAGE1=1 as a sitting's time allows, page 1 B64 L4096 (the gather, 0.84x FA3). Before
# them, one bench round of shapes that separate what q_len 2 and page 1 cost: the same tile
# count at q_len 1, q_len 2 without the mask, and page sizes between 1 and 64.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; cp this file and stall_summary.py to
# carry/gpu.
# Device call, carry ["carry/gpu"]: bash carry/gpu/stall-profile-sitting.sh. Writes $OUT/s.txt and $OUT/s.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting s
B=prefix/bin/mlajit
# --no-ab: without the A/B shapes' round (causal-runtime-sitting.sh times them).
[[ $1 == --no-ab ]] ||
  step bench_ab 200 $B bench --kernel hopper "${HOPPER_AB_SHAPES[@]}" --iterations 50 --csv $C/ab.csv
step bench_q 200 $B bench --kernel hopper --shape 128,128,4096,64 --shape 128,64,4096,64,2,0 \
  --shape 128,64,4096,64,2,1 --shape 128,32,8192,64,2,1 --shape 128,64,8192,64 \
  --shape 128,64,4096,64 --shape 128,64,4096,1 --shape 128,64,4096,8 --shape 128,64,4096,32 \
  --shape 128,64,4096,16 --iterations 50 --csv $C/q.csv
python3 - "$C" >> $log <<'EOF'
import csv, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    for r in csv.DictReader(open(f)):
        print(f.split("/")[-1], *(r[k] for k in ("heads", "batch", "kv_len", "page", "q_len", "causal", "median_us", "min_us", "gbps", "tflops")))
EOF
for s in 128,64,16384,64 128,64,4096,64,2,1 ${STALL_PAGE1:+128,64,4096,1}; do
  n=${s//,/_}
  echo "--- $(date +%T) ncu $s" >> $log
  timeout 70 ncu --clock-control none -k regex:mla_hopper --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
    --section SourceCounters --import-source no -o $L/ncu_$n \
    $B bench --kernel hopper --shape $s --iterations 3 --warmup 1 > $L/ncu_$n.log 2>&1
  echo "ncu $s rc=$?" | tee -a $log
  ncu --import $L/ncu_$n.ncu-rep --page details > $L/ncu_${n}_details.txt 2>&1
  ncu --import $L/ncu_$n.ncu-rep --page source --print-source sass --csv > $L/sass_$n.csv 2>&1
  grep -E "Duration|Throughput|Issue Slots|Eligible|Warp Cycles|Stall" $L/ncu_${n}_details.txt \
    | head -30 >> $log
  python3 ./stall_summary.py $L/sass_$n.csv --top 12 --context 2 >> $log 2>&1
done
echo "--- $(date +%T) done" >> $log
