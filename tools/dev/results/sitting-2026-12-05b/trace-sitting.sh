#!/usr/bin/env bash
# Sitting: hopper item start-up trace + L sweep (harness), then mlajit bench auto.
cd "$(dirname "$0")"; here=$PWD
OUT=${OUT:-$here/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total --format=csv | tee $OUT/trace.txt
{
echo "=== L sweep, plain harness (H128, 1 item per CTA pair at B=64)"
for L in 64 128 256 512 1024 2048 4096 16384; do ./hopper_harness_plain --one 128 64 $L 64 | grep TIME; done
echo "=== 2 items per pair"
for L in 64 1024 4096; do ./hopper_harness_plain --one 128 128 $L 64 | grep TIME; done
echo "=== B=1"
for L in 1024 4096 16384; do ./hopper_harness_plain --one 128 1 $L 64 | grep TIME; done
echo "=== 16 heads"
for L in 1024 4096; do ./hopper_harness_plain --one 16 128 $L 64 | grep TIME; done
echo "=== traces"
for shape in "128 1 1024 64" "128 64 1024 64" "128 128 1024 64" "128 64 4096 64" "128 66 64 64"; do
  ./hopper_harness_trace --one $shape | grep -v "^seed\|^device"
done
} >> $OUT/trace.txt 2>&1
echo "trace rc=$?"
grep -E "TIME|CTAS" $OUT/trace.txt | head -60
