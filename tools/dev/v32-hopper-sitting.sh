#!/usr/bin/env bash
# DeepSeek-V3.2's per-token scales on the hopper family (its producer dequantizes each chunk
# with its token's scale; kpe by cp.async), on one GPU: "[fp8-token]" on auto (128 heads go to
# hopper) and forced to hopper, "[fp8]" on auto, racecheck and memcheck on the per-token
# sanitize case forced to hopper, `mlajit verify`, the Python V3.2 test, then `mlajit bench
# --kv-dtype e4m3 --kv-scales token128` on hopper and portable, with per-tensor e4m3 and bf16
# beside them, two rounds. Prepare: install the tree into carry/gpu/prefix with the GPU tests
# beside it (scripts/prepare-gpu-sitting.sh carry/gpu), this file as carry/gpu/e.sh.
# Device call, carry ["carry/gpu"]: bash carry/gpu/e.sh. Writes $OUT/e.txt and $OUT/e.tgz.
cd "$(dirname "$0")"; g=$PWD
RES=${OUT:-$g/out}; L=$g/logse; mkdir -p "$RES" "$L" "$g/csve"; log=$RES/e.txt
trap 'tar -C $g -czf $RES/e.tgz logse csve 2>/dev/null' EXIT
export LD_LIBRARY_PATH=$g/prefix/lib:/usr/local/cuda/lib64 MLAJIT_CACHE_DIR=$g/uc
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw --format=csv,noheader | tee -a $log
source ./sitting-lib.sh  # step()
step token_auto 120 ./mlajit_gpu_tests "[fp8-token]"
MLAJIT_TEST_KERNEL=hopper step token_hopper 120 ./mlajit_gpu_tests "[fp8-token]"
grep -E "FAILED|e4m3-t128" $L/token_auto.txt $L/token_hopper.txt | head -40 >> $log
step fp8_auto 100 ./mlajit_gpu_tests "[fp8]"
case="e4m3 per-token scales: one small shape per tier"
MLAJIT_TEST_KERNEL=hopper step race_token 100 compute-sanitizer --tool racecheck ./mlajit_gpu_tests "$case"
MLAJIT_TEST_KERNEL=hopper step mem_token 100 compute-sanitizer --tool memcheck ./mlajit_gpu_tests "$case"
step verify_auto 90 prefix/bin/mlajit verify
(cd $g/../../python/tests && MLAJIT_LIBRARY=$g/prefix/lib/libmlajit.so step py_v32 120 python3 -m unittest -v test_mla_torch)
grep -E "v32|ERROR|FAIL|Ran" $L/py_v32.txt | head -8 >> $log
shapes=(--shape 128,64,16384,64 --shape 128,128,1024,64 --shape 128,64,4096,1 --shape 128,64,4096,64,2,1
        --shape 64,64,16384,64 --shape 32,64,16384,64 --shape 16,128,16384,64)
for r in 1 2; do
  for run in "hopper e4m3 --kv-scales token128" "portable e4m3 --kv-scales token128" "hopper e4m3" "hopper bf16"; do
    set -- $run; fam=$1; shift; name="b_${fam}_${*}_r$r"; name=${name// /_}; name=${name//--/}
    step $name 90 prefix/bin/mlajit bench --kernel $fam --kv-dtype "$@" "${shapes[@]}" --csv $g/csve/$name.csv
    grep -E "^ *[0-9]+ +[0-9]+ " $L/$name.txt >> $log
  done
done
echo "--- $(date +%T) done" >> $log
