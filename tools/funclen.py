#!/usr/bin/env python3
"""funclen.py -- the longest C functions of the tree, for keeping functions a screen long.

    tools/funclen.py [-n 15] [--max N] [PATH...]      default paths: src examples bench tests

--max N: print the functions over N lines (none: nothing) and exit 1 if there is one.

A function is a definition whose body opens with `{` alone on a line at column 0 and closes
with `}` at column 0 (the house style); its length counts from the line that names it to the
closing brace."""
import argparse, os, re, sys

def functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            j = i - 1            # back to the line that starts the signature
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].rstrip().endswith((";", "}", "*/")) \
                    and lines[j - 1][:1] not in ("#", " ", "/"):
                j -= 1
            sig = " ".join(l.strip() for l in lines[j:i])
            m = re.search(r"(\w+)\s*\(", sig)
            k = i + 1
            while k < len(lines) and not lines[k].startswith("}"):
                k += 1
            if m and "=" not in sig.split("(")[0]:
                yield m.group(1), j + 1, k - j + 1
            i = k
        i += 1

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument("--max", type=int, default=0)
    ap.add_argument("paths", nargs="*", default=["src", "examples", "bench", "tests"])
    a = ap.parse_args()
    found = []
    for p in a.paths:
        for root, _, files in os.walk(p) if os.path.isdir(p) else [("", None, [p])]:
            for f in files:
                if f.endswith(".c"):
                    path = os.path.join(root, f)
                    found += [(n, name, path, line) for name, line, n in functions(path)]
    found.sort(reverse=True)
    if a.max:
        over = [f for f in found if f[0] > a.max]
        for n, name, path, line in over:
            print(f"{path}:{line}: {name} is {n} lines, over {a.max}: split it into named parts")
        return 1 if over else 0
    for n, name, path, line in found[:a.n]:
        print(f"{n:4d}  {name:28s} {path}:{line}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
