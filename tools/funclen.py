#!/usr/bin/env python3
"""funclen.py -- the longest C functions of the tree, for keeping functions a screen long.

    tools/funclen.py [-n 15] [PATH...]      default paths: src examples bench tests

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
    for n, name, path, line in found[:a.n]:
        print(f"{n:4d}  {name:28s} {path}:{line}")

if __name__ == "__main__":
    main()
