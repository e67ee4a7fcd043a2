#!/usr/bin/env bash
# Where an e4m3 tile's time goes at 128 heads against bf16 (issue 12's bar: e4m3 no slower than
# bf16): ncu of the hopper kernel at H128 B64 L16384 over bf16 and e4m3 (one launch each,
# clocks left alone): throughput, the shared-memory pipes and bank conflicts, warp stalls by
# reason, and the instruction mix.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; cp this file to carry/gpu/e.sh.
# Device call, carry ["carry/gpu"]: bash carry/gpu/e.sh. Writes $OUT/e.txt and $OUT/e.tgz.
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L"; log=$RES/e.txt
trap 'tar -C $g -czf $RES/e.tgz logs 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$g/uc
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $log
for kv in bf16 e4m3; do
  echo "--- $(date +%T) ncu $kv" >> $log
  timeout 200 ncu --clock-control none -k regex:mla_hopper --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section InstructionStats \
    --section SchedulerStats --import-source no -o $L/ncu_$kv \
    prefix/bin/mlajit bench --kernel hopper --kv-dtype $kv --shape 128,64,16384,64 > $L/ncu_$kv.log 2>&1
  echo "ncu $kv rc=$?" | tee -a $log
  ncu --import $L/ncu_$kv.ncu-rep --page details > $L/ncu_${kv}_details.txt 2>&1
  ncu --import $L/ncu_$kv.ncu-rep --page raw --csv > $L/ncu_${kv}_raw.csv 2>&1
  grep -E "Duration|Throughput|Pipe|Shared|Bank|Stall|Issue Slots|Eligible|Executed Ipc|Warp Cycles" \
    $L/ncu_${kv}_details.txt | sed "s/^/$kv /" | head -60 >> $log
done
# Per-instruction shared-memory wavefronts and stall samples of the e4m3 launch (SASS view).
timeout 200 ncu --clock-control none -k regex:mla_hopper --launch-skip 3 --launch-count 1 \
  --section SourceCounters -o $L/src_e4m3 prefix/bin/mlajit bench --kernel hopper --kv-dtype e4m3 \
  --shape 128,64,16384,64 > $L/src_e4m3.log 2>&1
ncu --import $L/src_e4m3.ncu-rep --page source --print-source sass --csv > $L/src_e4m3_sass.csv 2>&1
echo "--- $(date +%T) done" >> $log
