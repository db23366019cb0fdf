#!/usr/bin/env python3
"""layers.py -- the library's layering, checked (issue 31: the trainer names no model).

    tools/layers.py [--root DIR]

Fails (exit 1, one line per finding) when
  - code in src/train (comments and strings left out) names a GPT, characters or a vocabulary:
    an identifier ag_gpt_*, AG_GPT_*, ag_chars_*, ag_vocab*, ag_serve_chars_* or vocab*; those
    are src/lm's (lm/lm.h) or the nets' (nn/nn.h), which sit above or beside the trainer;
  - a file of a module below src/lm (tensor, params, io, data, nn, optim, check, dist, train)
    includes lm/ or serve/ (they depend on it, never the other way)."""
import argparse, os, re, sys

BELOW_LM = ("tensor", "params", "io", "data", "nn", "optim", "check", "dist", "train")
MODEL_NAME = re.compile(r"\b(ag_gpt\w*|AG_GPT\w*|ag_chars\w*|ag_vocab\w*|ag_serve_chars\w*|vocab\w*)\b")
INCLUDE_UP = re.compile(r'^\s*#\s*include\s*"(?:\.\./)+(lm|serve)/')

def code_only(text):
    """text with comments and string/char literals blanked, newlines kept (line numbers hold)."""
    pat = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pat.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)

def sources(root, module):
    top = os.path.join(root, "src", module)
    for dirpath, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.join(dirpath, f)

def findings(root):
    for module in BELOW_LM:
        for path in sources(root, module):
            text = open(path, encoding="utf-8", errors="replace").read()
            rel = os.path.relpath(path, root)
            for n, line in enumerate(text.split("\n"), 1):
                m = INCLUDE_UP.match(line)
                if m:
                    yield f"{rel}:{n}: includes {m.group(1)}/, which sits above src/{module}"
            if module != "train":
                continue
            for n, line in enumerate(code_only(text).split("\n"), 1):
                for m in MODEL_NAME.finditer(line):
                    yield f"{rel}:{n}: names {m.group(1)}: the trainer names no model (move it to src/lm)"

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    found = list(findings(ap.parse_args().root))
    for f in found:
        print(f)
    return 1 if found else 0

if __name__ == "__main__":
    sys.exit(main())
