#!/usr/bin/env bash
# Builds here (nvcc, no GPU needed) the portable kernel harness twice into carry/pt: as it is
# (mla_harness_plain) and on a traced copy of kernels/ (mla_harness_trace, see
# portable_trace.py), with the sitting script. Device call: bash carry/pt/sitting.sh, carry
# ["carry/pt"]; it prints per shape the harness time of both builds and the trace.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=carry/pt
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
rm -rf "$out" && mkdir -p "$out"
tools/dev/trace/portable_trace.py "$out/traced" >/dev/null
"$nvcc" -gencode arch=compute_90,code=sm_90 -O3 -std=c++17 -I "$out/traced/kernels" -DHARNESS_TRACE \
  tools/dev/mla_kernel_harness.cu -o "$out/mla_harness_trace"
"$nvcc" -gencode arch=compute_90,code=sm_90 -O3 -std=c++17 -I kernels \
  tools/dev/mla_kernel_harness.cu -o "$out/mla_harness_plain"
rm -rf "$out/traced"
cat > "$out/sitting.sh" <<'SITTING'
#!/usr/bin/env bash
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv | tee $OUT/ptrace.txt
for shape in "128 1 1024 64" "128 16 1024 64" "128 64 1024 64" "16 16 4096 64"; do
  echo "=== $shape" >> $OUT/ptrace.txt
  ./mla_harness_plain --one $shape | grep TIME >> $OUT/ptrace.txt
  ./mla_harness_trace --one $shape | grep -v "^seed\|^device" >> $OUT/ptrace.txt
done
grep -E "===|TIME|kernel|item0|CTAS" $OUT/ptrace.txt
SITTING
chmod +x "$out/sitting.sh"
du -sh "$out"
