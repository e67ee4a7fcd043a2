"""Which mlajit the tests import.

By default the source tree's: python/ goes first on sys.path, and when MLAJIT_LIBRARY is unset
and build/libmlajit.so exists, the tests use that build (so a plain `python3 -m unittest` after
scripts/test.sh runs the library tests instead of skipping them).

With MLAJIT_TEST_INSTALLED=1, the installed package as it is (`pip install .`; the CI's wheel
stage): nothing is added to sys.path or to the environment, and test_args checks that the
package and its library came from the installation, not from this tree."""
import os
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.path.dirname(TESTS)
ROOT = os.path.dirname(PYTHON)


def testing_installed():
    return os.environ.get("MLAJIT_TEST_INSTALLED") == "1"


def use_source_tree():
    """Puts the tree's package (and build) in place unless the installed package is tested."""
    if testing_installed():
        return
    if PYTHON not in sys.path:
        sys.path.insert(0, PYTHON)
    build = os.path.join(ROOT, "build", "libmlajit.so")
    if not os.environ.get("MLAJIT_LIBRARY") and os.path.exists(build):
        os.environ["MLAJIT_LIBRARY"] = build
