#!/usr/bin/env python3
"""reading_path.py -- the afternoon read of docs/reading-order.md, counted.

    tools/reading_path.py [--check] [--quiet] [--max 2000] [--root .] [DOC...]

Reads the table of docs/reading-order.md (default; docs/reading-order.zh-CN.md too), whose rows
are `| step | `path` or `path: func, func` | lines | what to look for |`, and counts each row's
lines in the tree: a whole file, or the named functions of a file (each from the line that
names it to its closing brace, as tools/funclen.py counts). Prints every row and the total.
--check: exit 1 when a row's count differs from the tree (the doc would not be true), a file
or function is missing, or the total is over --max, or a step's file includes a header
("#include \"...\"") that is neither a step of the path nor named in the doc's paragraph that
starts with "**skip**" (following the path then needs no file it does not name).
--quiet: only the rows that are wrong, and each doc's total."""
import argparse, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from funclen import functions  # noqa: E402

ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([^`]+)`\s*\|\s*(\d+)\s*\|")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
INCLUDE_DIRS = ["src", "examples/char_lm"]   # the Makefile's -I


def includes(root, path):
    """The headers path includes with quotes, as paths from root (unresolved ones as written)."""
    out = []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for line in f:
            m = INCLUDE.match(line)
            if not m:
                continue
            for base in [os.path.dirname(path)] + INCLUDE_DIRS:
                cand = os.path.normpath(os.path.join(base, m.group(1)))
                if os.path.isfile(os.path.join(root, cand)):
                    out.append(cand)
                    break
            else:
                out.append(m.group(1))
    return out


def unnamed_includes(root, doc_text, files):
    """(file, header) for every header a step's file includes that the doc neither walks nor skips."""
    skip = set()
    for para in re.split(r"\n\s*\n", doc_text):
        if para.lstrip().startswith("**skip**"):
            skip.update(re.findall(r"`([^`]+)`", para))
    seen = {}
    for f in files:
        if os.path.isfile(os.path.join(root, f)):
            for h in includes(root, f):
                if h not in files and h not in skip:
                    seen.setdefault(h, f)   # each header once, with the first step that needs it
    return [(f, h) for h, f in seen.items()]


def count(root, spec):
    """Lines of spec ("path" or "path: f, g") in the tree under root, or an error string."""
    path, _, funcs = spec.partition(":")
    full = os.path.join(root, path.strip())
    if not os.path.isfile(full):
        return None, f"{path.strip()}: no such file"
    if not funcs.strip():
        with open(full, encoding="utf-8", errors="replace") as f:
            return sum(1 for _ in f), None
    have = {name: n for name, _, n in functions(full)}
    total = 0
    for name in (s.strip() for s in funcs.split(",")):
        if name not in have:
            return None, f"{path.strip()}: no function {name}"
        total += have[name]
    return total, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--max", type=int, default=2000)
    ap.add_argument("--root", default=".")
    ap.add_argument("docs", nargs="*", default=["docs/reading-order.md", "docs/reading-order.zh-CN.md"])
    a = ap.parse_args()
    bad = 0
    for doc in a.docs:
        total, rows, files = 0, 0, []
        with open(os.path.join(a.root, doc), encoding="utf-8") as f:
            text = f.read()
            for line in text.splitlines():
                m = ROW.match(line)
                if not m:
                    continue
                rows += 1
                step, spec, said = m.group(1), m.group(2), int(m.group(3))
                files.append(spec.partition(":")[0].strip())
                n, err = count(a.root, spec)
                if err:
                    print(f"{doc}: step {step}: {err}")
                    bad += 1
                    continue
                total += n
                flag = "" if n == said else f"   <- the doc says {said}"
                bad += n != said
                if flag or not a.quiet:
                    print(f"{step:>3}  {n:5d}  {spec}{flag}")
        for f, h in unnamed_includes(a.root, text, files):
            print(f"{doc}: {f} includes {h}, which is neither a step nor named under **skip**")
            bad += 1
        print(f"{doc}: {rows} steps, {total} lines (at most {a.max})")
        if rows == 0 or total > a.max:
            bad += 1
    if a.check and bad:
        print("reading_path: the reading order is not true of the tree: update the table's line counts, "
              "the path or its **skip** paragraph in the docs named above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
