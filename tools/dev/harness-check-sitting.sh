#!/usr/bin/env bash
# Why the stamped hopper harness failed on 2026-12-07f (every `--one` shape: "unspecified
# launch failure" after its warm-up launches): the harness built without the stamps on the same
# shape, then compute-sanitizer memcheck on each build, B=1 (a split plan) and B=128 L=1024.
# Prepare: carry/gpu/htrace/hopper_harness (stamped, as item-trace-sitting.sh says) and
# hopper_harness_plain (nvcc on tools/dev/hopper_harness.cu with -I kernels); this file beside
# sitting-lib.sh. Device call, carry ["carry/gpu"]: bash carry/gpu/harness-check-sitting.sh.
# Writes $OUT/h.txt, $OUT/h.tgz.
cd "$(dirname "$0")"; source ./sitting-lib.sh; begin_sitting h
step plain_128_128_1024 60 ./htrace/hopper_harness_plain --one 128 128 1024 64
step plain_128_1_1024 60 ./htrace/hopper_harness_plain --one 128 1 1024 64
for b in plain ""; do
  bin=./htrace/hopper_harness${b:+_$b}
  step memcheck_${b:-stamped}_1 90 compute-sanitizer --tool memcheck --print-limit 5 $bin --one 128 1 1024 64
  grep -m3 -E "Invalid|Address|at .*\+0x|Error" $L/memcheck_${b:-stamped}_1.txt >> $log
done
echo "--- $(date +%T) h done" >> $log
