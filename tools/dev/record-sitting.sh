#!/usr/bin/env bash
# This tree's record in one call: `mlajit verify`, `mlajit bench` on auto and per family over the
# default shapes, and e4m3 against bf16 at 16 and 128 heads. On an H200 the CLI adds the peers'
# ratios (the issues' one-run checks); elsewhere it is the tree's record on that card.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; this file and bench_table.py beside it.
# Device call, carry ["carry/gpu"]: bash carry/gpu/record-sitting.sh. Writes $OUT/r.txt, $OUT/r.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting r
record_tree env MLAJIT_CACHE_DIR=$g/uc
echo "--- $(date +%T) r done" >> $log
