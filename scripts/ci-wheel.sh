#!/usr/bin/env bash
# CI stage: the Python wheel, as a user gets it from a fresh clone.
#   1. pip wheel . (scikit-build-core runs CMake in a fresh build folder: no reuse of build/)
#   2. the wheel holds mlajit/libmlajit.so, its compiler helper and the mlajit CLI, and nothing
#      from the C/C++ install
#   3. pip install of that wheel into a fresh virtual environment (no torch, no CUDA wheel)
#   4. from outside the tree, with MLAJIT_LIBRARY unset: import mlajit; print(mlajit.version()),
#      and the mlajit command on the venv's PATH
#   5. a compile from the installed library (through the binding, then the CLI) runs in the
#      installed helper, site-packages/mlajit/mlajit-compiler-helper (skipped without NVRTC)
#   6. python/tests/test_args.py and test_torch_op.py against the installed package
#      (MLAJIT_TEST_INSTALLED=1; without torch, the op tests check that mlajit says why)
# Usage: scripts/ci-wheel.sh   (WHEEL_KEEP=DIR keeps the wheel in DIR; WHEEL=FILE checks that
# wheel instead of building one, to try the checks: CI builds). Exits non-zero, saying which
# check failed, on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/mlajit-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { echo "ci-wheel: FAIL: $*" >&2; exit 1; }
step() { echo "== $* ($((SECONDS - start)) s)"; }

scripts/install-deps.sh  # the wheel build needs them; pip does not install Debian packages
python=${PYTHON:-python3}
"$python" -c 'import venv, ensurepip' 2>/dev/null ||
  fail "$python lacks venv/ensurepip (Debian: apt-get install python3-venv)"

mkdir -p "$work/dist"
if [[ -n ${WHEEL:-} ]]; then
  step "checking the given wheel $WHEEL (not built here)"
  cp "$WHEEL" "$work/dist/"
else
  step "pip wheel . (fresh CMake build of libmlajit.so and the CLI)"
  # An isolated build environment with scikit-build-core from PyPI, as pip install . does; the
  # log is printed only on failure (the CMake build is long and says nothing unusual otherwise).
  "$python" -m pip wheel --no-deps --wheel-dir "$work/dist" "$root" \
    >"$work/build.log" 2>&1 || { tail -80 "$work/build.log"; fail "pip wheel . failed"; }
fi
wheels=("$work"/dist/mlajit-*.whl)
((${#wheels[@]} == 1)) && [[ -f ${wheels[0]} ]] ||
  fail "expected one mlajit wheel, got: ${wheels[*]}"
wheel=${wheels[0]}
echo "$(basename "$wheel"), $(du -h "$wheel" | cut -f1)"
if [[ -n ${WHEEL_KEEP:-} ]]; then mkdir -p "$WHEEL_KEEP" && cp "$wheel" "$WHEEL_KEEP/"; fi

step "wheel contents"
"$python" - "$wheel" <<'EOF' || fail "the wheel's contents are not as expected (above)"
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
required = ["mlajit/__init__.py", "mlajit/torch_ops.py", "mlajit/libmlajit.so",
            "mlajit/mlajit-compiler-helper", "mlajit_cli/__init__.py"]
missing = [n for n in required if n not in names]
cli = [n for n in names if n == "mlajit/bin/mlajit"]
# Only the Python packages, the library, the CLI and the wheel's metadata: no headers, CMake or
# pkg-config files, and no versioned copies of the library (a zip holds no symlinks).
stray = [n for n in names if not n.startswith(("mlajit/", "mlajit_cli/"))
         and ".dist-info/" not in n]
stray += [n for n in names if n.startswith("mlajit/libmlajit.so.") or "__pycache__" in n]
print("\n".join(sorted(names)))
# Executables must keep their mode bits in the zip: pip restores only what the wheel records.
not_executable = [n for n in ("mlajit/bin/mlajit", "mlajit/mlajit-compiler-helper") if n in names
                  and not (zipfile.ZipFile(sys.argv[1]).getinfo(n).external_attr >> 16) & 0o100]
if missing or not cli or stray or not_executable:
    sys.exit(f"missing {missing}, CLI script {cli or 'missing'}, unexpected {stray}, "
             f"not executable {not_executable}")
EOF

step "fresh virtual environment + pip install of the wheel"
"$python" -m venv "$work/venv"
venv_python=$work/venv/bin/python
# --no-index: the wheel must install with no dependency from any index (it declares none).
"$venv_python" -m pip install --quiet --no-index "$wheel" || fail "pip install of the wheel failed"
if "$venv_python" -m pip list --format=freeze | grep -i '^torch=='; then
  fail "torch came with the wheel"
fi

step "import mlajit from the installed package (no MLAJIT_LIBRARY, outside the tree)"
cd "$work"  # so that nothing of the tree is importable by accident
version=$(env -u MLAJIT_LIBRARY "$venv_python" -c "import mlajit; print(mlajit.version())") ||
  fail "import mlajit; mlajit.version() failed in the fresh environment"
echo "mlajit.version() = $version"
location=$(env -u MLAJIT_LIBRARY "$venv_python" -c "import mlajit; print(mlajit.__file__)")
[[ $location == "$work/venv/"* ]] || fail "mlajit was imported from $location, not the venv"
cli=$work/venv/bin/mlajit
[[ -x $cli ]] || fail "the wheel installed no executable $cli"
cli_version=$(env -u MLAJIT_LIBRARY PATH="$work/venv/bin:$PATH" mlajit --version) ||
  fail "the installed mlajit CLI does not run"
echo "mlajit --version: $cli_version"
[[ $cli_version == *"$version"* ]] || fail "the CLI says '$cli_version', the library $version"
ldd "$work"/venv/lib/python*/site-packages/mlajit/bin/mlajit > "$work/ldd_cli.txt"
if grep -E 'not found' "$work/ldd_cli.txt" >&2 || ! grep -Eq 'libmlajit.so => .*/site-packages/mlajit/(bin/\.\./)?libmlajit.so' "$work/ldd_cli.txt"; then
  cat "$work/ldd_cli.txt" >&2
  fail "the wheel's CLI binary does not load the libmlajit.so beside it"
fi
ldd "$work"/venv/lib/python*/site-packages/mlajit/libmlajit.so > "$work/ldd.txt"
if grep -Ei 'not found|fmt|spdlog|libcuda|nvrtc|cudart' "$work/ldd.txt" >&2; then
  fail "the wheel's libmlajit.so needs a library it must load at run time or not at all"
fi

step "a compile in the installed package runs in the installed compiler helper"
package=$(dirname "$location")
helper=$package/mlajit-compiler-helper
[[ -x $helper ]] || fail "the wheel installed no executable $helper"
if ldd "$helper" | grep 'not found' >&2; then fail "the installed helper lacks a library"; fi
# MLAJIT_COMPILE_MODE=process: no helper is an error, not an in-process compile; at debug level
# the library names the helper it started, which must be the package's own.
compile_env=(env -u MLAJIT_LIBRARY -u MLAJIT_COMPILER_HELPER MLAJIT_COMPILE_MODE=process
             MLAJIT_CACHE_DIR="$work/helper-cache" SPDLOG_LEVEL=mlajit.jit=debug)
set +e
"${compile_env[@]}" "$venv_python" - > "$work/helper_compile.txt" 2>&1 <<'EOF_PY'
import sys
import mlajit
try:
    print(mlajit.precompile("spin;q=bf16;kv=bf16;o=bf16;ckv=512;kpe=64;stages=2;"
                            "kv_tile=64;qk_shard=1;q_tile=64;arch=sm_90"))
except mlajit.MlajitError as error:
    print(error)
    # Without NVRTC every compile mode gives NO_COMPILER naming libnvrtc; a missing helper in
    # process mode is NO_COMPILER too, but names the helper: that one is a failure.
    sys.exit(77 if error.code == "NO_COMPILER" and "libnvrtc could not be loaded" in str(error)
             else 1)
EOF_PY
code=$?
set -e
cat "$work/helper_compile.txt"
if [[ $code == 77 ]]; then
  echo "(no NVRTC on this host: the helper check is skipped)"
else
  [[ $code == 0 ]] || fail "the installed package did not compile through its helper (exit $code)"
  grep -qF "started compiler helper $helper " "$work/helper_compile.txt" ||
    fail "the installed library did not start the package's helper $helper"
  "${compile_env[@]}" PATH="$work/venv/bin:$PATH" mlajit precompile --arch sm_90 --dtype bf16 \
    --head-dims 256/32 --out "$work/cli-cache" -q > "$work/cli_compile.txt" 2>&1 ||
    { cat "$work/cli_compile.txt"; fail "the installed CLI did not compile through a helper"; }
  grep -qF "started compiler helper $helper " "$work/cli_compile.txt" ||
    { cat "$work/cli_compile.txt"; fail "the installed CLI did not start the package's helper"; }
  echo "the binding and the CLI compiled in $helper"
fi

step "python/tests/test_args.py, test_torch_op.py against the installed package"
if ! (cd "$root/python/tests" &&
        env -u MLAJIT_LIBRARY MLAJIT_TEST_INSTALLED=1 "$venv_python" -m unittest -v test_args test_torch_op) \
     > "$work/tests.txt" 2>&1; then
  cat "$work/tests.txt"
  fail "the Python tests failed against the installed package"
fi
cat "$work/tests.txt"
# The checks that the installed package (not the tree) was tested must have run, not skipped.
if grep -E 'InstalledPackage.*(skipped|ERROR|FAIL)' "$work/tests.txt" >&2; then
  fail "the installed-package checks did not pass"
fi
echo "ci-wheel: ok in $((SECONDS - start)) s"
