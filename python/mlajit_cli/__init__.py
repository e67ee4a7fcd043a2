"""The `mlajit` command of the wheel: runs the CLI binary shipped inside the mlajit package.

The binary sits beside libmlajit.so (mlajit/bin/mlajit, rpath $ORIGIN/..), where it finds the
library whatever the Python version or install scheme; this module only locates and executes
it. It is a package of its own so that starting the CLI does not import mlajit (and torch)."""
import importlib.util
import os
import sys


def binary_path():
    spec = importlib.util.find_spec("mlajit")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("mlajit: the mlajit package is not installed beside this command")
    return os.path.join(list(spec.submodule_search_locations)[0], "bin", "mlajit")


def main():
    path = binary_path()
    if not os.access(path, os.X_OK):
        raise SystemExit(f"mlajit: the CLI binary {path} is missing or not executable; "
                         "reinstall the mlajit wheel")
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
