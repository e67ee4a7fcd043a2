#!/usr/bin/env python3
"""Medians of `mlajit bench --csv` files side by side, a column per file, and ratios.

usage: bench_table.py DIR PREFIX [A/B ...]
Reads DIR/PREFIX*.csv; a column is named after its file (PREFIX and .csv cut off), a row is a
shape (heads, batch, kv_len, page, and q_len, causal where the CSV has them). Each A/B adds a
column: the sum of the A columns over the sum of the B columns, over the suffixes both have
("new/old" over new_r0/old_r0 and new_r1/old_r1; a round that ran one of them only is left
out). Used by the sittings in tools/dev that time variants.
"""
import collections
import csv
import glob
import os
import sys

SHAPE_FIELDS = ("heads", "batch", "kv_len", "page", "q_len", "causal")


def suffixes(names, variant):
    """What follows `variant` in the names of its columns: "" or "_r0", ..."""
    return {n[len(variant):] for n in names
            if n.startswith(variant) and (n == variant or n[len(variant)] == "_")}


def ratio(columns, names, numerator, denominator):
    shared = [s for s in sorted(suffixes(names, numerator) & suffixes(names, denominator))
              if numerator + s in columns and denominator + s in columns]
    if not shared:
        return "-"
    return "%.3f" % (sum(columns[numerator + s] for s in shared) /
                     sum(columns[denominator + s] for s in shared))


def main(directory, prefix, ratios):
    table = collections.defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(directory, prefix + "*.csv"))):
        name = os.path.basename(path)[len(prefix):-len(".csv")]
        with open(path) as f:
            for row in csv.DictReader(f):
                shape = ",".join(row[k] for k in SHAPE_FIELDS if k in row)
                table[shape][name] = float(row["median_us"])
    names = sorted({n for columns in table.values() for n in columns})
    pairs = [r.split("/", 1) for r in ratios]
    print("shape".ljust(22) + "".join(n[:13].rjust(14) for n in names + ratios))
    for shape, columns in table.items():
        print(shape.ljust(22) + "".join(
            (f"{columns[n]:.1f}" if n in columns else "-").rjust(14) for n in names) +
            "".join(ratio(columns, names, a, b).rjust(14) for a, b in pairs))


if __name__ == "__main__":
    if len(sys.argv) < 3 or any(r.count("/") != 1 for r in sys.argv[3:]):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
