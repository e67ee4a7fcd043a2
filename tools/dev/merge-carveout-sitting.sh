#!/usr/bin/env bash
# One device call for three prepared sittings (machine starts are scarce): the portable family's
# merge program (portable-merge-sitting.sh, 2 rounds), then the largest-carveout variant
# (carveout-sitting.sh, 2 rounds), then the clock trace of short hopper items
# (item-trace-sitting.sh) where time is left. Prepare each as its header says, in carry/gpu.
# Device call, carry ["carry/gpu"]: bash carry/gpu/merge-carveout-sitting.sh
cd "$(dirname "$0")"
# Every step ends by then (sitting-lib.sh): the call's limit is 600 s, a few go to packing.
export SITTING_DEADLINE=${SITTING_DEADLINE:-$(($(date +%s) + 560))}
bash ./portable-merge-sitting.sh 2
bash ./carveout-sitting.sh 2
bash ./item-trace-sitting.sh
