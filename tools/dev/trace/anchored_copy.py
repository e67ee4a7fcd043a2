"""Shared by the trace scripts (portable_trace.py, hopper_trace.py): a copy of kernels/ whose
files of one family carry the script's edits, each found at an anchor that must match exactly
where the script says, so that a kernel change which moved an anchor is reported, not traced
wrong."""
import pathlib
import shutil
import sys


def write_edited_copy(script: str, out_dir: str, family: str, edits) -> int:
    """Copies the repository's kernels/ to OUT_DIR/kernels and applies `edits` to the .cuh files
    of kernels/FAMILY together. Each edit is (anchor, replacement) or (anchor, replacement,
    times): the anchor must occur `times` times (default once), all in one file, and each
    occurrence is replaced. Returns the exit status for the script's main()."""
    repo = pathlib.Path(script).resolve().parents[3]
    out = pathlib.Path(out_dir) / "kernels"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(repo / "kernels", out)
    texts = {path: path.read_text() for path in sorted((out / family).glob("*.cuh"))}
    for anchor, replacement, *times in edits:
        want = times[0] if times else 1
        holders = [path for path, text in texts.items() if anchor in text]
        count = sum(texts[path].count(anchor) for path in holders)
        if count != want or len(holders) > 1:
            print(f"anchor found {count} times in {len(holders)} files (want {want} in one), "
                  f"fix it in {script}:\n{anchor}", file=sys.stderr)
            return 1
        texts[holders[0]] = texts[holders[0]].replace(anchor, replacement)
    for path, text in texts.items():
        path.write_text(text)
    print(f"traced kernels in {out}")
    return 0
