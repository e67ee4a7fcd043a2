#!/usr/bin/env bash
# The final build of 2026-12-06d on a GPU, in one device call: the GPU suite on auto, both
# installed examples (their C ABI init calls are the header's macros now), the Python binding's
# argument and PyTorch tests; on an H200 also the default `mlajit bench` (auto; against the
# PERF.md tables and the peers) and the 16-head e4m3 / bf16 pair of issue 12.
# Prepare: scripts/prepare-gpu-sitting.sh carry/gpu; cp this file to carry/gpu/f.sh.
# Device call, carry ["carry/gpu"]: [H200_ONLY=1] bash carry/gpu/f.sh. Writes $OUT/f.txt, $OUT/f.tgz.
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logs; mkdir -p "$RES" "$L" "$g/csv"; log=$RES/f.txt
trap 'tar -C $g -czf $RES/f.tgz logs csv 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_PATH=$g/cache MLAJIT_CACHE_DIR=$g/uc
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step()
# H200_ONLY=1: nothing but the H200 part (a call that got another card costs only its start).
[[ ${H200_ONLY:-0} == 1 && $name != *H200* ]] && { echo "--- not an H200: stopping" >> $log; exit 0; }
if [[ $name == *H200* ]]; then
  step bench_auto 240 prefix/bin/mlajit bench --csv $g/csv/auto.csv
  step e4m3_16h 120 prefix/bin/mlajit bench --kv-dtype e4m3 --shape 16,128,16384,64 --shape 16,64,4096,64 --shape 16,128,4096,64,2,1 --csv $g/csv/e4m3_16h.csv
  step bf16_16h 120 prefix/bin/mlajit bench --shape 16,128,16384,64 --shape 16,64,4096,64 --shape 16,128,4096,64,2,1 --csv $g/csv/bf16_16h.csv
  for f in $L/bench_auto.txt $L/e4m3_16h.txt $L/bf16_16h.txt; do grep -E "^ *[0-9]+ +[0-9]+ |ragged" $f | sed "s/^/$(basename $f .txt) /" >> $log; done
fi
step suite_auto 150 ./mlajit_gpu_tests
grep -E "FAILED" -A3 $L/suite_auto.txt | head -8 >> $log
step c_decode 30 ./c_decode
step cpp_decode 30 ./cpp_decode
tail -2 $L/c_decode.txt $L/cpp_decode.txt >> $log
step python 240 env -C ../../python/tests MLAJIT_LIBRARY=$g/prefix/lib/libmlajit.so python3 -m pytest -q -x -rs test_args.py test_mla_torch.py
tail -3 $L/python.txt >> $log
echo "--- $(date +%T) done" >> $log
