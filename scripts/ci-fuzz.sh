#!/usr/bin/env bash
# CI stage: builds the libFuzzer targets (fuzz/, a standalone CMake project, clang only) and
# runs each from its committed seed corpus for a bounded time.
#   FUZZ_SECONDS=60 scripts/ci-fuzz.sh [target...]   (default: every target, 60 s each)
# The targets run side by side (at most $(nproc) at once), each with -rss_limit_mb=2048 and a
# 10 s per-input timeout. New interesting inputs go to a scratch corpus, never into
# fuzz/corpus/; a crash leaves its input in ${FUZZ_BUILD_DIR:-build-fuzz}/artifacts/ and fails
# the stage, printing how to reproduce it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD_DIR:-build-fuzz}
targets=("$@")
((${#targets[@]})) || targets=(fuzz_cache_entry fuzz_kernel_spec fuzz_planner)
start=$SECONDS

scripts/install-deps.sh
if ! command -v clang++ >/dev/null || ! command -v clang >/dev/null; then
  echo "installing clang (libFuzzer needs it)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang
fi

CC=clang CXX=clang++ cmake -S fuzz -B "$build" -G Ninja >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
echo "== fuzz targets built in $((SECONDS - start)) s; running each for ${seconds} s"

max_len() {
  case $1 in
    fuzz_planner) echo 2048 ;;     # room for batches of up to 64 raw requests
    fuzz_kernel_spec) echo 512 ;;
    *) echo 8192 ;;
  esac
}

mkdir -p "$build/artifacts"
pids=()
for target in "${targets[@]}"; do
  scratch="$build/scratch-corpus/$target"
  rm -rf "$scratch" && mkdir -p "$scratch"
  dict=()
  [ -f "fuzz/$target.dict" ] && dict=(-dict="fuzz/$target.dict")
  # Throttle to the core count: wait for the oldest run before starting one more.
  if ((${#pids[@]} >= $(nproc))); then wait "${pids[0]}" || true; pids=("${pids[@]:1}"); fi
  (
    "$build/$target" "$scratch" "fuzz/corpus/$target" "${dict[@]}" \
      -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len="$(max_len "$target")" \
      -artifact_prefix="$build/artifacts/$target-" -print_final_stats=1 \
      >"$build/$target.log" 2>&1
    echo $? >"$build/$target.rc"
  ) &
  pids+=($!)
done
wait

failed=0
for target in "${targets[@]}"; do
  rc=$(cat "$build/$target.rc")
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$build/$target.log" | grep -o '[0-9]*$' || echo '?')
  if [ "$rc" = 0 ]; then
    echo "== $target: ok, $runs runs"
  else
    failed=1
    echo "== $target: FAILED (exit $rc); last lines of $build/$target.log:"
    tail -40 "$build/$target.log"
    for artifact in "$build/artifacts/$target-"*; do
      [ -e "$artifact" ] && echo "   reproduce: $build/$target $artifact"
    done
  fi
done
echo "== ci-fuzz: $((SECONDS - start)) s"
exit $failed
