#!/usr/bin/env python3
"""Medians of `mlajit bench --csv` files side by side, a column per file.

usage: bench_table.py DIR PREFIX
Reads DIR/PREFIX*.csv; a column is named after its file (PREFIX and .csv cut off), a row is a
shape (heads, batch, kv_len, page). Used by the sittings in tools/dev that time variants.
"""
import collections
import csv
import glob
import os
import sys


def main(directory, prefix):
    table = collections.defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(directory, prefix + "*.csv"))):
        name = os.path.basename(path)[len(prefix):-len(".csv")]
        with open(path) as f:
            for row in csv.DictReader(f):
                shape = ",".join(row[k] for k in ("heads", "batch", "kv_len", "page"))
                table[shape][name] = float(row["median_us"])
    names = sorted({n for columns in table.values() for n in columns})
    print("shape".ljust(18) + "".join(n[:13].rjust(14) for n in names))
    for shape, columns in table.items():
        print(shape.ljust(18) + "".join(
            (f"{columns[n]:.1f}" if n in columns else "-").rjust(14) for n in names))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
