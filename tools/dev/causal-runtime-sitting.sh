#!/usr/bin/env bash
# The causal mask as a run-time value (MlaParams::causal; one spec serves causal and not):
# verify on both families, the GPU suite forced to each, then this tree's build against main's
# (old/prefix) in rotated order: the hopper A/B shapes (bf16, and e4m3 at 128 heads) and the
# portable family on each forced tier, causal and not, 128 and 16 heads. Last, issue 10's
# stall profile (stall-profile-sitting.sh, without its A/B round) on this tree's hopper kernel.
# Prepare: tools/dev/prepare-causal-sitting.sh (this tree's sitting, f10fd63's build in
# carry/gpu/old/prefix, and the kernel variants narrow/ and narrowall/ below).
# Device call, carry ["carry/gpu"]: bash carry/gpu/causal-runtime-sitting.sh. Writes
# $OUT/c.txt, $OUT/c.tgz (and the stall profile's $OUT/s.txt, $OUT/s.tgz).
cd "$(dirname "$0")"
source ./sitting-lib.sh  # step, begin_sitting, HOPPER_AB_SHAPES
begin_sitting c
new=prefix/bin/mlajit old=old/prefix/bin/mlajit
# Two calls when one would outrun the device's 10 minutes: ROUNDS=0 NO_STALL=1, then
# NO_CHECKS=1 ROUNDS=1 (the summary reads every round's CSVs left in the folder).
[[ -n $NO_CHECKS ]] || for family in hopper portable; do
  step verify_$family 90 env MLAJIT_CACHE_DIR=$g/uc $new verify --kernel $family
done
[[ -n $NO_CHECKS ]] || for family in hopper portable; do
  step suite_$family 150 env MLAJIT_TEST_KERNEL=$family MLAJIT_CACHE_DIR=$g/uc ./mlajit_gpu_tests
done
grep -hE "FAILED|with expansion|REQUIRE" -A3 $L/suite_*.txt 2>/dev/null | head -30 >> $log
# BASELINE=1: this tree's `mlajit bench` on auto over the baseline shapes (ratios to the peers
# are the H200's).
[[ -z $BASELINE ]] || step bench_auto 240 env MLAJIT_CACHE_DIR=$g/uc $new bench --csv $C/auto.csv
PORTABLE_SHAPES=(--shape 128,64,4096,64 --shape 128,64,4096,64,2,1 --shape 128,1,1024,64
                 --shape 16,128,4096,64 --shape 16,64,4096,64,2,1 --shape 16,32,4096,1,4,1)
# narrow: this tree's library with the narrow layout forced back into every large-tier kernel
# (narrow/kernels): against new, what rows=wide (128 heads) changes; against old, the causal
# mask at run time alone.
# narrowall: the narrow layout in every kernel, every tier (narrowall/kernels): verify, and
# tiers 2-3 timed (what landed on 2026-12-07 for head counts that can use it).
# NO_FULL=" " leaves the variants out (new and old only); VARIANTS names those to run.
# SHORT=1 (a sitting's last minutes): one round, tier 1, no e4m3 and no variant.
# Portable tier 1 over an e4m3 cache, as variant $v of round $r runs it ($uc, $b).
bench_portable_e4m3() {
  step bpe_${v}_r$r 60 env $uc $b bench --kernel portable --tier 1 --kv-dtype e4m3 \
    --shape 128,64,16384,64 --shape 128,64,4096,64,2,1 --shape 16,128,4096,64 --csv $C/bpe_${v}_r$r.csv
}
[[ -n $SHORT ]] && { rounds=0; tiers=1; NO_FULL=" "; } || { rounds=${ROUNDS:-0 1}; tiers="1 2 3"; }
for r in $rounds; do
  middle=${VARIANTS:-${NO_FULL:-narrow}}  # VARIANTS="narrow": between new and old, only it
  for v in $( ((r % 2)) && echo "old $middle new" || echo "new $middle old"); do
    b=${!v:-$new}; uc=MLAJIT_CACHE_DIR=$g/uc-$v
    [[ $v == narrow* ]] && uc="$uc MLAJIT_KERNEL_DIR=$g/$v/kernels"
    # The CLI's RUNPATH yields to LD_LIBRARY_PATH (begin_sitting's is this tree's library).
    [[ $v == old ]] && uc="$uc LD_LIBRARY_PATH=$g/old/prefix/lib:/usr/local/cuda/lib64"
    if [[ $v == narrowall ]]; then  # the narrow layout on every tier: correct? 16 heads faster?
      [[ $r != 0 ]] || step verify_narrowall 90 env $uc $b verify --kernel portable
      for t in 2 3; do
        step bp${t}_${v}_r$r 90 env $uc $b bench --kernel portable --tier $t "${PORTABLE_SHAPES[@]}" --csv $C/bp${t}_${v}_r$r.csv
      done
      continue
    fi
    if [[ $v == narrow ]]; then  # tier 1 only: the other tiers have no narrow code
      step bp1_${v}_r$r 90 env $uc $b bench --kernel portable --tier 1 "${PORTABLE_SHAPES[@]}" --csv $C/bp1_${v}_r$r.csv
      [[ -n $SHORT ]] || bench_portable_e4m3
      continue
    fi
    step bh_${v}_r$r 120 env $uc $b bench --kernel hopper "${HOPPER_AB_SHAPES[@]}" --csv $C/bh_${v}_r$r.csv
    [[ -n $SHORT ]] || step be_${v}_r$r 60 env $uc $b bench --kernel hopper --kv-dtype e4m3 --shape 128,64,16384,64 \
      --shape 128,64,4096,64,2,1 --csv $C/be_${v}_r$r.csv
    [[ -n $SHORT ]] || bench_portable_e4m3
    for t in $tiers; do
      step bp${t}_${v}_r$r 90 env $uc $b bench --kernel portable --tier $t "${PORTABLE_SHAPES[@]}" \
        --csv $C/bp${t}_${v}_r$r.csv
    done
  done
done
for kind in bh be bpe bp1 bp2 bp3; do
  python3 ./bench_table.py $C ${kind}_ new/old new/narrow narrow/old narrowall/new >> $log
done
echo "--- $(date +%T) c done" >> $log
[[ -n $NO_STALL ]] || timeout 170 bash ./stall-profile-sitting.sh --no-ab  # NO_STALL=1: not
