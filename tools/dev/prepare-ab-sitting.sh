#!/usr/bin/env bash
# Builds here (no GPU needed) an A/B sitting of two commits for one device call:
#   tools/dev/prepare-ab-sitting.sh OLD_REV
# "new" is this checkout (built by scripts/prepare-gpu-sitting.sh into carry/gpu), "old" is
# OLD_REV (built in a temporary worktree into carry/old). Each side's kernels/ is copied too,
# so the sitting also runs each build with the other's kernels (MLAJIT_KERNEL_DIR), which
# splits a host-side change (planner) from a kernel change. Then, with the device tool:
#   run `bash carry/ab-sitting.sh` with carry ["carry/gpu", "carry/old", "carry/new", "carry/ab-sitting.sh"]
set -euo pipefail
cd "$(dirname "$0")/../.."
old_rev=${1:?usage: tools/dev/prepare-ab-sitting.sh OLD_REV}
git rev-parse --verify --quiet "$old_rev^{commit}" >/dev/null ||
  { echo "prepare-ab-sitting: '$old_rev' is not a commit of this repository" >&2; exit 2; }
scripts/prepare-gpu-sitting.sh carry/gpu
worktree=$(mktemp -d /tmp/mlajit-ab-old.XXXXXX)
trap 'git worktree remove --force "$worktree" >/dev/null 2>&1 || true' EXIT
git worktree add -q --detach "$worktree" "$old_rev"
cmake -S "$worktree" -B "$worktree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMLAJIT_BUILD_TESTS=OFF -DMLAJIT_BUILD_TOOLS=ON >/dev/null
cmake --build "$worktree/build" -j "$(nproc)"
rm -rf carry/old carry/new && mkdir -p carry/old carry/new
cmake --install "$worktree/build" --prefix carry/old/prefix --strip >/dev/null
cp -r "$worktree/kernels" carry/old/kernels
cp -r kernels carry/new/kernels
carry/old/prefix/bin/mlajit precompile --arch sm_90 --all-tiers --out carry/old/cache -q
cp tools/dev/ab-sitting.sh carry/
du -sh carry/gpu carry/old carry/new
