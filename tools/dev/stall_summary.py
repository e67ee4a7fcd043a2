#!/usr/bin/env python3
"""Summarizes ncu's per-instruction stall samples of one kernel (the SASS view of the source
page, as stall-profile-sitting.sh writes it: ncu --import R --page source --print-source sass
--csv > sass.csv): the share of samples per opcode, and the instructions that hold the most,
each with the instructions before it (what it waits on is usually one of them).

usage: stall_summary.py SASS_CSV [--top N] [--context K]
"""
import argparse
import collections
import csv
import io
import sys


def load_rows(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    # ncu prints a few lines (==PROF== ...) before the table: start at the header.
    start = text.find('"Address"')
    if start < 0:
        start = text.find("Address,")
    if start < 0:
        sys.exit(f"{path}: no 'Address' header: not an ncu source-page CSV")
    return list(csv.DictReader(io.StringIO(text[start:])))


def number(value):
    try:
        return float(str(value).replace(",", ""))
    except ValueError:
        return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--context", type=int, default=3)
    args = parser.parse_args()
    rows = load_rows(args.csv)
    if not rows:
        sys.exit("no instructions in the table")
    columns = rows[0].keys()
    sample_column = next((c for c in columns if c.startswith("Warp Stall Sampling (All")), None)
    if sample_column is None:
        sys.exit(f"no 'Warp Stall Sampling (All Samples)' column; columns: {list(columns)}")
    idle_column = next((c for c in columns if c.startswith("Warp Stall Sampling (Not")), None)
    samples = [number(r[sample_column]) for r in rows]
    total = sum(samples) or 1.0
    print(f"{len(rows)} instructions, {total:.0f} samples ({sample_column})")

    by_opcode = collections.Counter()
    for row, count in zip(rows, samples):
        source = row.get("Source", "").strip()
        opcode = source.split()[0] if source else "?"
        if opcode.startswith("@"):  # predicate
            opcode = source.split()[1] if len(source.split()) > 1 else opcode
        by_opcode[opcode.split(".")[0]] += count
    print("\nsamples by opcode:")
    for opcode, count in by_opcode.most_common(15):
        print(f"  {100 * count / total:5.1f}%  {opcode}")

    print(f"\nthe {args.top} instructions holding the most samples (with {args.context} before):")
    order = sorted(range(len(rows)), key=lambda i: -samples[i])[: args.top]
    for i in sorted(order):
        idle = f" not-issued {number(rows[i][idle_column]):.0f}" if idle_column else ""
        print(f"\n  {100 * samples[i] / total:5.1f}% {rows[i]['Address']}{idle}")
        for j in range(max(0, i - args.context), i + 1):
            mark = ">" if j == i else " "
            print(f"   {mark} {rows[j]['Address']} {samples[j]:7.0f}  {rows[j].get('Source', '').strip()}")


if __name__ == "__main__":
    main()
