#!/usr/bin/env bash
# One device call (2026-12-07f): the portable family's split tiles merged by the merge program
# from sm_90 with its kernel unchanged (tools/dev/results/sitting-2026-12-07f/
# portable-merge-program.patch; portable-merge-sitting.sh, 3 rounds against main), then the
# check of the stamped hopper harness (harness-check-sitting.sh).
# Prepare: the patch applied, scripts/prepare-gpu-sitting.sh carry/gpu, main's install in
# carry/gpu/old/prefix, the two harness builds in carry/gpu/htrace, the scripts beside them.
# Device call, carry ["carry/gpu"]: bash carry/gpu/merge-program-harness-sitting.sh
cd "$(dirname "$0")"
export SITTING_DEADLINE=${SITTING_DEADLINE:-$(($(date +%s) + 400))}
bash ./portable-merge-sitting.sh 3
bash ./harness-check-sitting.sh
