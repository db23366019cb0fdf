#!/usr/bin/env python3
"""path_coverage.py -- is the afternoon read (docs/reading-order.md) the code a default run executes?

    tools/path_coverage.py [--build build/cov] [--kernels reference] [--iters 20] [--list]

Runs a short default `char_lm train` (--config tiny, --max-iters ITERS, the kernel table
--kernels, on the shipped data/tinyshakespeare.txt, into a mktemp dir) with the char_lm of
BUILD, a build with gcov's --coverage (`make check-path-coverage` makes it in build/cov and
calls this), then reads the counts with `gcov --json-format` and checks that every function on
the reading path ran at least once: for a step that names functions (`path: f, g`), those; for a
whole file, every function defined in it (as gcov saw them, and as tools/funclen.py finds them,
so that a function no one compiled in counts too). Prints the functions that did not run, and
exits 1 then. --list: every function of the path with its count.

NOT_RUN below names the few functions of the path's whole files that a default run has no call
for, each with the reason (an error path, an entry point of the API that char_lm does not take,
the fast table's choice): they do not fail the check, but one of them that does run fails it,
so that the list stays true.

The path's functions are what the reader reads to know what a run does; one that a default run
never calls is a page that teaches code the program does not run."""
import argparse, glob, gzip, json, os, re, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from funclen import functions  # noqa: E402

ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([^`]+)`\s*\|\s*(\d+)\s*\|")

API = "an entry point of the API that char_lm does not take"
NOT_RUN = {
    ("src/tensor/ctx.c", "ag_ctx_fail"): "the sticky error: a run without an error never sets one",
    ("src/tensor/ctx.c", "ag_ctx_error"): "the sticky error's message: read after a failure",
    ("src/tensor/ctx.c", "ag_tensor_leaf"): API,
    ("src/tensor/ctx.c", "ag_tensor_like"): API + " (the ops without a fast twin that use it: mul, rmsnorm, silu)",
    ("src/tensor/ctx.c", "ag_tensor_new3"): API,
    ("src/tensor/tape.c", "ag_backward"): "the seed of 1: each shard of a pass seeds its loss with b_j / B (ag_backward_from)",
    ("src/tensor/ops/cross_entropy.c", "ag_cross_entropy_ignore"): "padded targets (examples/reverse): char_lm has none",
    ("src/nn/attention.c", "ag_attention"): "attention without weights, for tests and lessons",
    ("src/nn/attention.c", "fusable"): "asked only when the kernel table has a fused attention: the fast one",
    ("src/optim/adam.c", "ag_adam_step"): API + " (Adam, L2)",
    ("src/optim/adam.c", "ag_adam_step_scaled"): API + " (Adam, L2)",
    ("src/optim/adam.c", "ag_adamw_step"): "AdamW without the clip factor: char_lm folds the clip in (_scaled)",
    ("src/optim/adam.c", "ag_adamw_step_not_hidden"): "Muon's other half (--optimizer muon): a default run is AdamW's",
    ("src/optim/clip.c", "ag_clip_grad_norm"): "clipping as a pass of its own: char_lm folds the factor into AdamW",
    ("src/optim/clip.c", "ag_scale_grads"): "clipping as a pass of its own: char_lm folds the factor into AdamW",
}


def path_rows(doc):
    """[(step, file, [functions] or None for the whole file)] from the doc's table"""
    rows = []
    with open(doc, encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line)
            if m:
                path, _, funcs = m.group(2).partition(":")
                names = [s.strip() for s in funcs.split(",") if s.strip()] or None
                rows.append((int(m.group(1)), path.strip(), names))
    return rows


def run_train(build, kernels, iters, data):
    """the default train of build's char_lm in a scratch dir; its output on failure"""
    out = tempfile.mkdtemp(prefix="path_coverage.")
    try:
        cmd = [os.path.join(build, "char_lm"), "train", "--data", data, "--out", os.path.join(out, "run"),
               "--config", "tiny", "--max-iters", str(iters), "--kernels", kernels]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit("path_coverage: %s failed (exit %d):\n%s" % (" ".join(cmd), r.returncode, r.stdout + r.stderr))
        return " ".join(cmd[1:])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def counts(build):
    """{(source path, function name): the most times any object ran it} from build's .gcda files"""
    seen = {}
    work = tempfile.mkdtemp(prefix="path_coverage_gcov.")
    try:
        for gcda in sorted(glob.glob(os.path.join(build, "f32", "**", "*.gcda"), recursive=True)):
            r = subprocess.run(["gcov", "--json-format", "--object-directory", os.path.dirname(os.path.abspath(gcda)),
                                os.path.abspath(gcda)], cwd=work, capture_output=True)
            if r.returncode != 0:
                sys.exit("path_coverage: gcov failed on %s:\n%s" % (gcda, r.stderr.decode(errors="replace")))
            for gz in glob.glob(os.path.join(work, "*.gcov.json.gz")):
                with gzip.open(gz, "rt") as f:
                    doc = json.load(f)
                os.remove(gz)
                for src in doc["files"]:
                    path = os.path.normpath(src["file"])
                    for fn in src["functions"]:
                        key = (path, fn["name"])
                        seen[key] = max(seen.get(key, 0), fn["execution_count"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return seen


def path_functions(rows, seen):
    """[(step, file, function, count)] of every function on the path (count None: never compiled in)"""
    out = []
    for step, path, names in rows:
        if names is None:  # the whole file: what gcov saw of it, and what is defined in it
            names = sorted({n for p, n in seen if p == path} | {n for n, _, _ in functions(path)})
        for n in names:
            out.append((step, path, n, seen.get((path, n))))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build/cov", help="the --coverage build (make check-path-coverage's)")
    ap.add_argument("--kernels", default="reference", help="the kernel table of the run (the path teaches reference)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--data", default="data/tinyshakespeare.txt")
    ap.add_argument("--doc", default="docs/reading-order.md")
    ap.add_argument("--list", action="store_true", help="every path function with its count")
    a = ap.parse_args()
    for old in glob.glob(os.path.join(a.build, "f32", "**", "*.gcda"), recursive=True):
        os.remove(old)  # counts of this run only
    what = run_train(a.build, a.kernels, a.iters, a.data)
    fns = path_functions(path_rows(a.doc), counts(a.build))
    missed = [f for f in fns if not f[3] and (f[1], f[2]) not in NOT_RUN]
    stale = [f for f in fns if f[3] and (f[1], f[2]) in NOT_RUN]
    for step, path, name, n in fns if a.list else missed + stale:
        why = NOT_RUN.get((path, name), "")
        print("%3d  %-36s %-28s %-15s %s" % (step, path, name, "not compiled in" if n is None else n, why))
    ran = sum(1 for f in fns if f[3])
    print("path_coverage: `char_lm %s`: %d of the path's %d functions ran, %d not run by design (NOT_RUN)" % (
        what, ran, len(fns), len(fns) - ran - len(missed)))
    if missed:
        print("path_coverage: %d functions of the reading path (%s) did not run: the path teaches code a "
              "default run does not execute" % (len(missed), a.doc), file=sys.stderr)
    if stale:
        print("path_coverage: %d functions listed in NOT_RUN did run: take them off the list" % len(stale),
              file=sys.stderr)
    return 1 if missed or stale else 0


if __name__ == "__main__":
    sys.exit(main())
