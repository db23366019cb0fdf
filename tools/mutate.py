#!/usr/bin/env python3
"""mutate.py -- mutation testing of the backward passes: does the test suite catch a broken backward?

Each mutation is a list of exact (old -> new) text replacements in one source file; `old` must
occur exactly once in the file (the script refuses otherwise, so a mutation never silently
applies to the wrong spot when the code changes). For every mutation, one at a time:
    save the file, apply the replacements, `make -j2 build/test_f64 build/test_f32 build/char_lm`,
    run the tests in both binaries, record which tests failed, restore the file.
A mutation is CAUGHT when at least one test of either binary fails (F) or crashes (E), or a
binary exits non-zero. When tests only ran out of time (check's limit, --timeout) it is TIMEOUT,
reported apart: on a loaded machine that can be the load (rerun those ids). After the loop the
tree is rebuilt unmodified.

Both kernel tables are mutated (src/tensor/kernel.h explains them); the default test binaries run
every gradient check on both, so neither needs another build. The id says which one:
    ref_<op>_...   the reference kernel in src/tensor/ops/<op>.c (the reference table)
    fast_<op>_...  the fast kernel in src/tensor/fast/<op>.c, fast.h or kernels.c (the fast table),
                   and nn/attention.c's choice of the fused attention (fast table only)
    both_<op>_...  code both paths run: the ops without a fast kernel (mul, scale, embedding,
                   heads, reshape), the one backward of cross-entropy, SiLU and dropout (their
                   fast twins are forwards only), a backward step's own code, what an op saves
                   for its backward, the tape
Mutations cover every backward and every forward quantity a backward reads (saved mean/rstd,
tanh, sigmoid, probabilities, attention weights, scale, ids). A RACE mutation (a threaded loop
split over the wrong index) is caught only when two threads really run at once: on a loaded
machine it may survive one run and not the next (tests/test_grad_gaps.c says why).

Which tests run (--suites):
    all   (default) the two whole test binaries: exhaustive, about 25 s per mutation on 2 cores
    auto  per mutation, only the suites that exercise its op (SUITES below): with --first (stop
          at the first suite that fails) 2 to 9 s each on 2 cores shared with other builds, 15 s
          for attention's; a mutation of fast.h, a header every object includes, rebuilds the
          library: 50 to 150 s (2026-12-04: all 450 in 54 min, every one caught)
    a,b   these suites (names of `Suite *<name>_suite(void)` in tests/*.c or examples/char_lm/tests/*.c) for every mutation
A suite runs as its own process (CK_RUN_SUITE=<name>).

It edits the tree it runs in, so run it in a private copy, never in a checkout (it refuses a
root that holds a .git unless --in-place). `make mutate` makes that copy in build/mutate and
runs --suites auto there (MUT_ONLY="fast_ln_ ref_sm_": only those ids; MUT_SUITES=all), and
`make check` runs --check. By hand: the test binaries need Makefile, src, tests, tools and
examples/char_lm (they link char_lm's code; the CLI tests run build/char_lm; tools/embed_web.sh
builds its page):
    M=$(mktemp -d) && mkdir -p $M/examples && cp -r Makefile src tests tools $M && cp -r examples/char_lm $M/examples
    python3 tools/mutate.py --root $M --suites auto --first  # all mutations, about an hour on 2 cores
    python3 tools/mutate.py --root $M                        # all mutations, whole binaries: 3 h
    python3 tools/mutate.py --list                           # ids, paths, suites; runs nothing
    python3 tools/mutate.py --check                          # every pattern applies (names each stale one)
    python3 tools/mutate.py --root $M fast_mm_ ref_ln_dx     # only ids starting with these
    python3 tools/mutate.py --show ref_ln_dx_no_gmean        # print the diff of one mutation
It writes <root>/mutation_results.md and .json (--out to change). Files are restored on exit,
also on Ctrl-C.
"""
import argparse
import difflib
import json
import os
import re
import signal
import subprocess
import sys
import time

OPS = "src/tensor/ops/"
FAST = "src/tensor/fast/"
TAPE = "src/tensor/tape.c"

# --suites auto: the suites that exercise an op (its own tests, its fast == reference cases, the
# gradchecks that go through it), by the mutated file's name. MODEL: the layer and whole-model
# gradchecks, which run every op of a GPT block.
MODEL = ["nn", "gpt", "torch_ref"]
SUITES = {
    "layernorm": ["norm_loss", "fast_ref_rows", "grad_gaps", "tape"] + MODEL,
    "rmsnorm": ["rmsnorm", "fast_ref_rows", "switches"],
    "cross_entropy": ["norm_loss", "fast_ref_rows", "padding", "grad_gaps", "tape"] + MODEL,
    "gelu": ["elementwise", "fast_ref_rows", "grad_gaps", "tape"] + MODEL,
    "silu": ["swiglu", "fast_ref_rows", "switches"],
    "softmax": ["softmax", "attention_ops", "fused", "matmul", "grad_gaps", "tape"] + MODEL,
    "linear": ["norm_loss", "fast_ref_products", "grad_gaps", "tape"] + MODEL,
    "matmul": ["matmul", "fast_ref_products", "attention_ops", "fused", "gradcheck", "grad_gaps", "tape"] + MODEL,
    "attention": ["fast_ref_products", "fused"] + MODEL,
    "add": ["elementwise", "fast_ref_products", "grad_gaps", "tape"] + MODEL,
    "mul": ["swiglu", "switches"],
    "scale": ["elementwise", "attention_ops", "fused", "grad_gaps", "tape", "fast_ref_rows"] + MODEL,
    "dropout": ["elementwise", "fast_ref_rows", "fast_targets", "fused", "grad_accum"] + MODEL,
    "embedding": ["norm_loss", "grad_gaps"] + MODEL,
    "heads": ["attention_ops", "fused", "grad_gaps"] + MODEL,
    "masked_fill": ["attention_ops", "fast_ref_rows", "padding", "fused", "tape"] + MODEL,
    "reshape": ["matmul", "attention_ops", "fused", "grad_gaps", "tape"] + MODEL,
    "tape": ["tape", "grad_gaps", "gradcheck", "elementwise", "attention_ops"] + MODEL,
    "grad": ["tape", "grad_gaps", "gradcheck", "elementwise", "attention_ops"] + MODEL,
    "recycle": ["tape", "gpt"],
    "kernels": ["fused", "attention_ops", "padding", "fast_ref_rows", "fast_ref_products", "rmsnorm", "softmax",
                "matmul"] + MODEL,  # fast/kernels.c: the fast table's backward steps
    "fast": ["parallel", "softmax", "fast_ref_rows", "fast_ref_products", "grad_gaps"] + MODEL,  # fast.h
}


def op_of(path):
    """the SUITES key of a mutated file: src/tensor/ops/gelu.c -> gelu, src/tensor/fast/fast.h -> fast"""
    return os.path.splitext(os.path.basename(path))[0]


MUTATIONS = []  # (id, file, backward under test, description, [(old, new), ...])


def mut(mid, path, fn, desc, reps):
    MUTATIONS.append((mid, path, fn, desc, reps))


def twin(op, name, fn, desc, ref, fast=None):
    """the same mutation of both paths: ref_<op>_<name> in ops/, fast_<op>_<name> in fast/ (fast
    defaults to the reference's replacements, for code the two files spell alike)"""
    mut("ref_%s_%s" % (op, name), OPS + op_file(op), fn + " (ref)", desc, ref)
    mut("fast_%s_%s" % (op, name), FAST + op_file(op), fn + " (fast)", desc, fast if fast is not None else ref)


def op_file(op):
    return {"ln": "layernorm.c", "rms": "rmsnorm.c", "ce": "cross_entropy.c", "gelu": "gelu.c", "silu": "silu.c",
            "sm": "softmax.c", "lin": "linear.c", "mm": "matmul.c", "attn": "attention.c", "add": "add.c",
            "do": "dropout.c"}[op]


# ---------------- layernorm: ops/layernorm.c, fast/layernorm.c ----------------
# The fast backward (fast/layernorm.c) sums g and g xhat of a row in AG_LANES lanes, then a tail
# loop (both loops are mutated alike), writes dx on first touch, and sums dw and db per chunk of
# rows (LN_CHUNKS) in column blocks, the chunks added in order at the end.
LN = "layernorm backward"
LNF = FAST + "layernorm.c"
LN_FX = "- g_mean - ((xr[c] - mean) * rstd) * gx_mean"          # the fast dx formula's two means
LN_LANE_G, LN_TAIL_G = "ag_real g = dyr[c + l] * w[c + l];", "ag_real g = dyr[c] * w[c];"
LN_LANE_GX, LN_TAIL_GX = "lgx[l] += g * ((xr[c + l] - mean) * rstd);", "lgx[l] += g * ((xr[c] - mean) * rstd);"
LN_DX_ROW = "backward_dx_row(dx + r * C, acc, dy + r * C, x + r * C, w, stats[2 * r], stats[2 * r + 1], C);"
LN_DW = "if (dw) dw[c] += part[(size_t)k * 2 * C + c];"
LN_DB = "if (db) db[c] += part[(size_t)k * 2 * C + C + c];"
twin("ln", "fwd_mean", "layernorm forward (saved mean)", "saved mean 0 (y still right)",
     [("stats[2 * r] = mean;", "stats[2 * r] = 0;")])
twin("ln", "fwd_rstd", "layernorm forward (saved rstd)", "saved rstd^2 (y still right)",
     [("stats[2 * r + 1] = rstd;", "stats[2 * r + 1] = rstd * rstd;")])
twin("ln", "fwd_var_Cm1", "layernorm forward (rstd)", "unbiased variance (/ C-1)",
     [("var /= C;", "var /= C - 1;")], [("ag__dot(yr, yr, C) / C;", "ag__dot(yr, yr, C) / (C - 1);")])
twin("ln", "dx_no_gmean", LN + " (dx)", "- mean(g) dropped", [("- g_mean - xhat * gx_mean", "- xhat * gx_mean")],
     [(LN_FX, "- ((xr[c] - mean) * rstd) * gx_mean")])
twin("ln", "dx_no_gxmean", LN + " (dx)", "- xhat mean(g xhat) dropped", [("- g_mean - xhat * gx_mean", "- g_mean")],
     [(LN_FX, "- g_mean")])
twin("ln", "dx_plus_gmean", LN + " (dx)", "- mean(g) -> + mean(g)", [("- g_mean - xhat * gx_mean", "+ g_mean - xhat * gx_mean")],
     [(LN_FX, "+ g_mean - ((xr[c] - mean) * rstd) * gx_mean")])
twin("ln", "dx_gx_noxhat", LN + " (dx)", "xhat mean(g xhat) -> mean(g xhat)", [("- g_mean - xhat * gx_mean", "- g_mean - gx_mean")],
     [(LN_FX, "- g_mean - gx_mean")])
twin("ln", "dx_gx_x2", LN + " (dx)", "xhat mean(g xhat) x2", [("- g_mean - xhat * gx_mean", "- g_mean - 2 * xhat * gx_mean")],
     [(LN_FX, "- g_mean - 2 * ((xr[c] - mean) * rstd) * gx_mean")])
twin("ln", "dx_norstd", LN + " (dx)", "rstd factor dropped",
     [("dxr[c] += rstd * (", "dxr[c] += (")], [("ag_real d = rstd * (", "ag_real d = (")])
twin("ln", "dx_rstd2", LN + " (dx)", "rstd -> rstd^2",
     [("dxr[c] += rstd * (", "dxr[c] += rstd * rstd * (")], [("ag_real d = rstd * (", "ag_real d = rstd * rstd * (")])
twin("ln", "dx_now", LN + " (dx)", "w dropped from the main term", [("(dyr[c] * w[c] - g_mean", "(dyr[c] - g_mean")])
twin("ln", "g_now", LN + " (dx)", "g = dy (w dropped in both means)", [("ag_real g = dyr[c] * w[c];", "ag_real g = dyr[c];")],
     [(LN_LANE_G, "ag_real g = dyr[c + l];"), (LN_TAIL_G, "ag_real g = dyr[c];")])
twin("ln", "gx_noxhat", LN + " (dx)", "mean(g xhat) -> mean(g)",
     [("gx_mean += g * xhat;", "gx_mean += g;")], [(LN_LANE_GX, "lgx[l] += g;"), (LN_TAIL_GX, "lgx[l] += g;")])
twin("ln", "gx_nomean", LN + " (dx)", "xhat in mean(g xhat) without - mean",
     [("ag_real xhat = (xr[c] - mean) * rstd;\n                ag_real g", "ag_real xhat = xr[c] * rstd;\n                ag_real g")],
     [(LN_LANE_GX, "lgx[l] += g * (xr[c + l] * rstd);"), (LN_TAIL_GX, "lgx[l] += g * (xr[c] * rstd);")])
twin("ln", "gmean_Cm1", LN + " (dx)", "mean(g) divides by C-1",
     [("g_mean /= C;", "g_mean /= C - 1;")],
     [("ag_real g_mean = ag__lanes_total(lg) / C,", "ag_real g_mean = ag__lanes_total(lg) / (C - 1),")])
twin("ln", "gxmean_noC", LN + " (dx)", "mean(g xhat) not divided by C",
     [("gx_mean /= C;", ";")], [("gx_mean = ag__lanes_total(lgx) / C;", "gx_mean = ag__lanes_total(lgx);")])
twin("ln", "dx_nomean", LN + " (dx)", "xhat without - mean in the dx loop",
     [("ag_real xhat = (xr[c] - mean) * rstd;\n                dxr", "ag_real xhat = xr[c] * rstd;\n                dxr")],
     [("((xr[c] - mean) * rstd) * gx_mean", "(xr[c] * rstd) * gx_mean")])
twin("ln", "dx_rowstats0", LN + " (dx)", "mean and rstd of row 0 for every row",
     [("ag_real mean = stats[2 * r], rstd = stats[2 * r + 1];", "ag_real mean = stats[0], rstd = stats[1];")],
     [(LN_DX_ROW, LN_DX_ROW.replace("stats[2 * r], stats[2 * r + 1]", "stats[0], stats[1]"))])
twin("ln", "dx_dyrow0", LN + " (dx)", "dy of row 0 for every row", [("*dyr = dy + r * C;", "*dyr = dy;")],
     [(LN_DX_ROW, LN_DX_ROW.replace("acc, dy + r * C,", "acc, dy,"))])
twin("ln", "dx_lastcol", LN + " (dx)", "last column of dx skipped (tail off by one)",
     [("for (int c = 0; c < C; c++) {\n                ag_real xhat = (xr[c] - mean) * rstd;\n                dxr",
       "for (int c = 0; c < C - 1; c++) {\n                ag_real xhat = (xr[c] - mean) * rstd;\n                dxr")],
     [("for (c = 0; c < C; c++) {\n        ag_real d", "for (c = 0; c < C - 1; c++) {\n        ag_real d")])
twin("ln", "sums_lastcol", LN + " (dx)", "last column left out of both means (fast: of the tail, C not a multiple of AG_LANES)",
     [("for (int c = 0; c < C; c++) {\n                ag_real xhat = (xr[c] - mean) * rstd;\n                ag_real g",
       "for (int c = 0; c < C - 1; c++) {\n                ag_real xhat = (xr[c] - mean) * rstd;\n                ag_real g")],
     [("for (int l = 0; c < C; c++, l++) {", "for (int l = 0; c < C - 1; c++, l++) {")])
mut("fast_ln_sums_notail", LNF, LN + " (dx) (fast)", "the tail (C % AG_LANES columns) left out of both means",
    [("for (int l = 0; c < C; c++, l++) {", "for (int l = 0; c < C && 0; c++, l++) {")])
mut("ref_ln_dx_assign", OPS + "layernorm.c", LN + " (dx) (ref)", "+= -> =", [("dxr[c] += rstd", "dxr[c] = rstd")])
mut("fast_ln_dx_always_write", LNF, LN + " (dx) (fast)", "dx always written (=), never added to",
    [("dxr[c] = acc ? dxr[c] + d : d;", "dxr[c] = d;")])
mut("fast_ln_dx_always_add", LNF, LN + " (dx) (fast)", "dx always added to (+=), also a fresh buffer",
    [("dxr[c] = acc ? dxr[c] + d : d;", "dxr[c] += d;")])
mut("fast_ln_dx_acc_inverted", LNF, LN + " (dx) (fast)", "accumulate flag inverted",
    [(LN_DX_ROW, LN_DX_ROW.replace("C, acc,", "C, !acc,"))])
twin("ln", "dw_noxhat", LN + " (dw)", "dw += dy (xhat dropped)",
     [("sum_w += dy[r * C + c] * xhat;", "sum_w += dy[r * C + c];")],
     [("bw[c] += dyr[c] * ((xr[c] - mean) * rstd);", "bw[c] += dyr[c];")])
twin("ln", "dw_timesw", LN + " (dw)", "dw += dy xhat w",
     [("sum_w += dy[r * C + c] * xhat;", "sum_w += dy[r * C + c] * xhat * w[c];")],
     [("bw[c] += dyr[c] * ((xr[c] - mean) * rstd);", "bw[c] += dyr[c] * ((xr[c] - mean) * rstd) * w[c0 + c];")])
twin("ln", "dw_assign", LN + " (dw)", "+= -> = (fast: only the last chunk of rows kept)",
     [("if (dw) dw[c] += sum_w;", "if (dw) dw[c] = sum_w;")], [(LN_DW, LN_DW.replace("+=", "="))])
twin("ln", "dw_neg", LN + " (dw)", "sign",
     [("if (dw) dw[c] += sum_w;", "if (dw) dw[c] -= sum_w;")], [(LN_DW, LN_DW.replace("+=", "-="))])
twin("ln", "dw_skip", LN + " (dw)", "dw dropped",
     [("if (dw) dw[c] += sum_w;", ";")], [(LN_DW, ";")])
twin("ln", "db_skip", LN + " (db)", "db dropped",
     [("if (db) db[c] += sum_b;", ";")], [(LN_DB, ";")])
twin("ln", "db_assign", LN + " (db)", "+= -> = (fast: only the last chunk of rows kept)",
     [("if (db) db[c] += sum_b;", "if (db) db[c] = sum_b;")], [(LN_DB, LN_DB.replace("+=", "="))])
twin("ln", "db_x2", LN + " (db)", "x2",
     [("if (db) db[c] += sum_b;", "if (db) db[c] += 2 * sum_b;")], [(LN_DB, LN_DB.replace("+= part", "+= 2 * part"))])
twin("ln", "db_timesw", LN + " (db)", "db += dy w",
     [("sum_b += dy[r * C + c];", "sum_b += dy[r * C + c] * w[c];")], [("bb[c] += dyr[c];", "bb[c] += dyr[c] * w[c0 + c];")])
twin("ln", "dwdb_row0rstd", LN + " (dw)", "rstd of row 0 for every row",
     [("ag_real xhat = (x[r * C + c] - stats[2 * r]) * stats[2 * r + 1];", "ag_real xhat = (x[r * C + c] - stats[2 * r]) * stats[1];")],
     [("ag_real mean = stats[2 * r], rstd = stats[2 * r + 1];", "ag_real mean = stats[2 * r], rstd = stats[1];")])
twin("ln", "dwdb_lastrow", LN + " (dw, db)", "last row left out of the sums over rows (fast: of each chunk)",
     [("for (size_t r = 0; r < R; r++) {\n            ag_real xhat = (x[r * C + c]",
       "for (size_t r = 0; r < R - 1; r++) {\n            ag_real xhat = (x[r * C + c]")],
     [("for (size_t r = r0; r < r1; r++) {\n            const ag_real *xr = x + r * C + c0",
       "for (size_t r = r0; r + 1 < r1; r++) {\n            const ag_real *xr = x + r * C + c0")])
twin("ln", "dwdb_lastcol", LN + " (dw, db)", "last column of dw and db skipped (tail off by one)",
     [("for (int c = 0; c < C && (dw || db); c++)", "for (int c = 0; c + 1 < C && (dw || db); c++)")],
     [("wd = C - c0 < AG_COL_BLOCK ? C - c0 : AG_COL_BLOCK;", "wd = C - c0 < AG_COL_BLOCK ? C - c0 - 1 : AG_COL_BLOCK;")])
twin("ln", "dw_db_swapped", LN + " (dw, db)", "dw and db swapped in the call",
     [("layernorm_backward(dx, dw, db,", "layernorm_backward(dx, db, dw,")],
     [("rows(dx, acc, sw, sw ? sw + C : NULL,", "rows(dx, acc, sw ? sw + C : NULL, sw,")])
mut("fast_ln_dwdb_noblocktail", LNF, LN + " (dw, db) (fast)", "the last, partial column block dropped",
    [("for (int c0 = 0; sw && c0 < C; c0 += AG_COL_BLOCK) {", "for (int c0 = 0; sw && c0 + AG_COL_BLOCK <= C; c0 += AG_COL_BLOCK) {")])
mut("fast_ln_dwdb_dyoffset", LNF, LN + " (dw, db) (fast)", "dy of block 0 for every column block",
    [("*dyr = dy + r * C + c0;", "*dyr = dy + r * C;")])
mut("fast_ln_dwdb_xoffset", LNF, LN + " (dw) (fast)", "x of block 0 for every column block",
    [("*xr = x + r * C + c0,", "*xr = x + r * C,")])
mut("fast_ln_dwdb_lastchunk", LNF, LN + " (dw, db) (fast)", "the last chunk of rows left out of the chunks' sums",
    [("for (int k = 0; part && k < LN_CHUNKS; k++)", "for (int k = 0; part && k < LN_CHUNKS - 1; k++)")])
mut("fast_ln_dwdb_chunk0", LNF, LN + " (dw, db) (fast)", "every chunk's partial sums in chunk 0's (RACE when threaded)",
    [("ag_real *sw = part ? part + (size_t)k * 2 * C : NULL;", "ag_real *sw = part ? part : NULL;")])

# ---------------- rmsnorm: ops/rmsnorm.c, fast/rmsnorm.c ----------------
RMS = "rmsnorm backward"
twin("rms", "fwd_rstd", "rmsnorm forward (saved rstd)", "saved rstd^2 (y still right)", [("rstd[r] = rs;", "rstd[r] = rs * rs;")])
twin("rms", "fwd_ms_Cm1", "rmsnorm forward (rstd)", "mean square over C-1",
     [("ms /= C;", "ms /= C - 1;")], [("ag_real ms = ag__dot(xr, xr, C) / C;", "ag_real ms = ag__dot(xr, xr, C) / (C - 1);")])
twin("rms", "gx_nox", RMS + " (dx)", "mean(g xhat) -> mean(g)",
     [("gx_mean += dyr[c] * w[c] * (xr[c] * rs);", "gx_mean += dyr[c] * w[c];")],
     [("gx_sum += dyr[c] * w[c] * xr[c] * rs;", "gx_sum += dyr[c] * w[c];")])
twin("rms", "gx_now", RMS + " (dx)", "w dropped in mean(g xhat)",
     [("gx_mean += dyr[c] * w[c] * (xr[c] * rs);", "gx_mean += dyr[c] * (xr[c] * rs);")],
     [("gx_sum += dyr[c] * w[c] * xr[c] * rs;", "gx_sum += dyr[c] * xr[c] * rs;")])
twin("rms", "gx_nors", RMS + " (dx)", "x instead of xhat in mean(g xhat)",
     [("gx_mean += dyr[c] * w[c] * (xr[c] * rs);", "gx_mean += dyr[c] * w[c] * xr[c];")],
     [("gx_sum += dyr[c] * w[c] * xr[c] * rs;", "gx_sum += dyr[c] * w[c] * xr[c];")])
twin("rms", "gxmean_noC", RMS + " (dx)", "mean(g xhat) not divided by C",
     [("gx_mean /= C;", ";")], [("ag_real gx_mean = gx_sum / C;", "ag_real gx_mean = gx_sum;")])
twin("rms", "gxmean_Cm1", RMS + " (dx)", "mean(g xhat) divides by C-1",
     [("gx_mean /= C;", "gx_mean /= C - 1;")], [("ag_real gx_mean = gx_sum / C;", "ag_real gx_mean = gx_sum / (C - 1);")])
twin("rms", "dx_nogx", RMS + " (dx)", "- xhat mean(g xhat) dropped", [(" - xr[c] * rs * gx_mean)", ")")])
twin("rms", "dx_plusgx", RMS + " (dx)", "- xhat mean(g xhat) -> +", [("- xr[c] * rs * gx_mean)", "+ xr[c] * rs * gx_mean)")])
twin("rms", "dx_gx_nors", RMS + " (dx)", "xhat -> x in the second term", [("- xr[c] * rs * gx_mean)", "- xr[c] * gx_mean)")])
twin("rms", "dx_lnmean", RMS + " (dx)", "LayerNorm's - mean(g) term added (nothing was centred)",
     [("- xr[c] * rs * gx_mean)", "- xr[c] * rs * gx_mean - gx_mean)")])
twin("rms", "dx_norstd", RMS + " (dx)", "outer rstd dropped",
     [("dxr[c] += rs * (", "dxr[c] += (")], [("dx[r * C + c] += rs * (", "dx[r * C + c] += (")])
twin("rms", "dx_now", RMS + " (dx)", "w dropped from the main term", [("rs * (dyr[c] * w[c] - xr", "rs * (dyr[c] - xr")])
twin("rms", "dx_assign", RMS + " (dx)", "+= -> =",
     [("dxr[c] += rs", "dxr[c] = rs")], [("dx[r * C + c] += rs", "dx[r * C + c] = rs")])
twin("rms", "dx_row0rstd", RMS + " (dx)", "rstd of row 0 for every row",
     [("ag_real rs = rstd[r];", "ag_real rs = rstd[0];")],
     [("ag_real rs = rstd[r];\n            ag_real gx_sum", "ag_real rs = rstd[0];\n            ag_real gx_sum")])
twin("rms", "dx_lastcol", RMS + " (dx)", "last column of dx skipped",
     [("for (int c = 0; c < C; c++) dxr[c] +=", "for (int c = 0; c < C - 1; c++) dxr[c] +=")],
     [("for (int c = 0; c < C; c++) dx[r * C + c] +=", "for (int c = 0; c < C - 1; c++) dx[r * C + c] +=")])
twin("rms", "dw_noxhat", RMS + " (dw)", "dw += dy (xhat dropped)",
     [("sum_w += dy[r * C + c] * (x[r * C + c] * rstd[r]);", "sum_w += dy[r * C + c];")],
     [("sw[c] += dyr[c] * (xr[c] * rs);", "sw[c] += dyr[c];")])
twin("rms", "dw_nors", RMS + " (dw)", "dw += dy x (rstd dropped)",
     [("sum_w += dy[r * C + c] * (x[r * C + c] * rstd[r]);", "sum_w += dy[r * C + c] * x[r * C + c];")],
     [("sw[c] += dyr[c] * (xr[c] * rs);", "sw[c] += dyr[c] * xr[c];")])
twin("rms", "dw_timesw", RMS + " (dw)", "dw += dy xhat w",
     [("sum_w += dy[r * C + c] * (x[r * C + c] * rstd[r]);", "sum_w += dy[r * C + c] * (x[r * C + c] * rstd[r]) * w[c];")],
     [("sw[c] += dyr[c] * (xr[c] * rs);", "sw[c] += dyr[c] * (xr[c] * rs) * w[c0 + c];")])
twin("rms", "dw_row0rstd", RMS + " (dw)", "rstd of row 0 for every row",
     [("(x[r * C + c] * rstd[r]);", "(x[r * C + c] * rstd[0]);")],
     [("ag_real rs = rstd[r];\n                for", "ag_real rs = rstd[0];\n                for")])
twin("rms", "dw_assign", RMS + " (dw)", "+= -> =",
     [("dw[c] += sum_w;", "dw[c] = sum_w;")], [("dw[c0 + c] += sw[c];", "dw[c0 + c] = sw[c];")])
twin("rms", "dw_neg", RMS + " (dw)", "sign",
     [("dw[c] += sum_w;", "dw[c] -= sum_w;")], [("dw[c0 + c] += sw[c];", "dw[c0 + c] -= sw[c];")])
twin("rms", "dw_skip", RMS + " (dw)", "dw dropped",
     [("dw[c] += sum_w;", "(void)sum_w;")], [("dw[c0 + c] += sw[c];", "(void)sw;")])
twin("rms", "dw_lastrow", RMS + " (dw)", "last row left out of the sum over rows",
     [("for (size_t r = 0; r < R; r++) sum_w", "for (size_t r = 0; r < R - 1; r++) sum_w")],
     [("for (size_t r = 0; r < R; r++) {\n                const ag_real *xr = x + r * C + c0",
       "for (size_t r = 0; r < R - 1; r++) {\n                const ag_real *xr = x + r * C + c0")])
twin("rms", "dw_lastcol", RMS + " (dw)", "last column of dw skipped (tail off by one)",
     [("for (int c = 0; c < C && dw; c++)", "for (int c = 0; c + 1 < C && dw; c++)")],
     [("wd = C - c0 < AG_COL_BLOCK ? C - c0 : AG_COL_BLOCK;", "wd = C - c0 < AG_COL_BLOCK ? C - c0 - 1 : AG_COL_BLOCK;")])
mut("fast_rms_dw_noblocktail", FAST + "rmsnorm.c", RMS + " (dw) (fast)", "the last, partial column block dropped",
    [("int n_blocks = (C + AG_COL_BLOCK - 1) / AG_COL_BLOCK;", "int n_blocks = C / AG_COL_BLOCK;")])
mut("fast_rms_dw_dyoffset", FAST + "rmsnorm.c", RMS + " (dw) (fast)", "dy of block 0 for every column block",
    [("*dyr = dy + r * C + c0;", "*dyr = dy + r * C;")])
mut("fast_rms_dw_xoffset", FAST + "rmsnorm.c", RMS + " (dw) (fast)", "x of block 0 for every column block",
    [("*xr = x + r * C + c0,", "*xr = x + r * C,")])
mut("ref_rms_step_nodw", OPS + "rmsnorm.c", RMS + " step (ref)", "dw not passed to the reference kernel",
    [("    rmsnorm_backward(dx, dw,", "    rmsnorm_backward(dx, NULL,")])
mut("fast_rms_step_nodw", FAST + "kernels.c", RMS + " step (fast)", "dw not passed to the fast kernel",
    [("ag_fast_rmsnorm_backward(dx, dw,", "ag_fast_rmsnorm_backward(dx, NULL,")])

# ---------------- cross-entropy: one backward (ops/), a forward per path that saves probs ----------------
CE = "cross_entropy backward"
CEO = OPS + "cross_entropy.c"
mut("ref_ce_fwd_probs_nodiv", CEO, "cross_entropy forward (saved probs) (ref)", "saved probs not normalised (loss still right)",
    [("probs[r * V + j] = AG_EXP(zr[j] - m) / sum;", "probs[r * V + j] = AG_EXP(zr[j] - m);")])
mut("ref_ce_fwd_probs_nomax", CEO, "cross_entropy forward (saved probs) (ref)", "saved probs exp(z)/sum, max not subtracted",
    [("probs[r * V + j] = AG_EXP(zr[j] - m) / sum;", "probs[r * V + j] = AG_EXP(zr[j]) / sum;")])
mut("ref_ce_fwd_probs_lastcol", CEO, "cross_entropy forward (saved probs) (ref)", "last saved prob of a row not written",
    [("for (int j = 0; j < V; j++) probs[r * V + j]", "for (int j = 0; j < V - 1; j++) probs[r * V + j]")])
mut("fast_ce_fwd_probs_nodiv", FAST + "cross_entropy.c", "cross_entropy forward (saved probs) (fast)",
    "saved probs not normalised (loss still right)",
    [("for (int j = 0; j < V; j++) p[j] *= inv;", "(void)inv;")])
mut("fast_ce_fwd_probs_lastcol", FAST + "cross_entropy.c", "cross_entropy forward (saved probs) (fast)",
    "last saved prob of a row not normalised (tail off by one)",
    [("for (int j = 0; j < V; j++) p[j] *= inv;", "for (int j = 0; j < V - 1; j++) p[j] *= inv;")])
mut("fast_ce_fwd_probs_row0", FAST + "cross_entropy.c", "cross_entropy forward (saved probs) (fast)",
    "every row's probs saved in row 0 (loss still right)",
    [("ag_real *p = probs ? probs + r * V : NULL;", "ag_real *p = probs ? probs : NULL;")])
mut("both_ce_targets_not_saved", CEO, CE + " (saved targets)", "targets not copied for the backward",
    [("memcpy(s->targets, targets, R * sizeof(int));", "memset(s->targets, 0, R * sizeof(int));")])
CE_SCALE = "n->out->grad[0] / (ag_real)s->counted"  # dL / N, N the rows counted (not ignored)
mut("both_ce_timesR", CEO, CE, "scale by N instead of 1/N", [(CE_SCALE, "n->out->grad[0] * (ag_real)s->counted")])
mut("both_ce_noR", CEO, CE, "1/N dropped (sum, not mean)", [(CE_SCALE, "n->out->grad[0]")])
mut("both_ce_divV", CEO, CE, "divide by V instead of N", [(CE_SCALE, "n->out->grad[0] / (ag_real)ag_last(z)")])
mut("both_ce_noupstream", CEO, CE, "upstream dL ignored (assumes 1)", [(CE_SCALE, "1 / (ag_real)s->counted")])
mut("both_ce_counted_R", CEO, CE + " (saved N)", "N saved as every row, the ignored ones too",
    [("s->counted = counted;", "s->counted = R;")])
mut("both_ce_ignored_rows_grad", CEO, CE, "ignored rows get a gradient (p, no one-hot)",
    [("if (targets[r] == ignore_index) continue; /* not in L: zero gradient */", "")])
mut("both_ce_noonehot", CEO, CE, "one-hot term dropped", [("(p[j] - (j == targets[r]))", "p[j]")])
mut("both_ce_neg", CEO, CE, "sign", [("(p[j] - (j == targets[r]))", "((j == targets[r]) - p[j])")])
mut("both_ce_target0", CEO, CE, "target of row 0 for every row", [("(j == targets[r])", "(j == targets[0])")])
mut("both_ce_probsrow0", CEO, CE, "probs of row 0 for every row",
    [("const ag_real *p = probs + r * V;", "const ag_real *p = probs;")])
mut("both_ce_assign", CEO, CE, "+= -> =", [("dz[r * V + j] += scale", "dz[r * V + j] = scale")])
mut("both_ce_lastrow", CEO, CE, "last row skipped",
    [("for (size_t r = 0; r < R; r++) {\n        if (targets[r] == ignore_index) continue; /* not in L",
      "for (size_t r = 0; r < R - 1; r++) {\n        if (targets[r] == ignore_index) continue; /* not in L")])
mut("both_ce_lastcol", CEO, CE, "last logit of a row skipped",
    [("for (int j = 0; j < V; j++) dz[r * V + j]", "for (int j = 0; j < V - 1; j++) dz[r * V + j]")])

# ---------------- gelu: ops/gelu.c, fast/gelu.c ----------------
GE = "gelu backward"
twin("gelu", "fwd_th_nocubic", "gelu forward (saved tanh)", "saved tanh(sqrt(2/pi) x): no cubic term (y still right)",
     [("if (th) th[i] = t;", "if (th) th[i] = AG_TANH(GELU_K * x[i]);")],
     [("th[i] = t;", "th[i] = 1 - 2 / (1 + ag__exp(2 * GELU_K * x[i]));")])
mut("fast_gelu_fwd_th_span", FAST + "gelu.c", "gelu forward (saved tanh) (fast)", "every thread saves tanh at span 0 (threaded only)",
    [("th ? th + i0 : NULL", "th ? th : NULL")])
GE_REF = "(ag_real)0.5 * (1 + t) + (ag_real)0.5 * v * (1 - t * t) * GELU_K * (1 + 3 * GELU_A * v * v);"
GE_FAST = "half * (1 + t) + half * v * (1 - t * t) * GELU_K * (1 + 3 * GELU_A * v * v);"
twin("gelu", "no2nd", GE, "second (tanh') term dropped",
     [("ag_real dydx = " + GE_REF, "ag_real dydx = (ag_real)0.5 * (1 + t);")],
     [("ag_real local = " + GE_FAST, "ag_real local = half * (1 + t);")])
twin("gelu", "no1st", GE, "first term dropped",
     [("ag_real dydx = (ag_real)0.5 * (1 + t) + ", "ag_real dydx = ")], [("ag_real local = half * (1 + t) + ", "ag_real local = ")])
twin("gelu", "3a", GE, "3 A -> A", [("(1 + 3 * GELU_A * v * v)", "(1 + GELU_A * v * v)")])
twin("gelu", "nov2", GE, "A v^2 -> A v", [("(1 + 3 * GELU_A * v * v)", "(1 + 3 * GELU_A * v)")])
twin("gelu", "sech", GE, "1 - t^2 -> 1 - t", [("(1 - t * t)", "(1 - t)")])
twin("gelu", "2nd_x2", GE, "second term x2",
     [("+ (ag_real)0.5 * v * (1 - t * t)", "+ v * (1 - t * t)")], [("+ half * v * (1 - t * t)", "+ v * (1 - t * t)")])
twin("gelu", "2nd_nov", GE, "x dropped from the second term",
     [("+ (ag_real)0.5 * v * (1 - t * t)", "+ (ag_real)0.5 * (1 - t * t)")], [("+ half * v * (1 - t * t)", "+ half * (1 - t * t)")])
twin("gelu", "noK", GE, "sqrt(2/pi) dropped in the second term", [("* GELU_K * (1 + 3", "* (1 + 3")])
twin("gelu", "2nd_neg", GE, "second term sign",
     [("+ (ag_real)0.5 * v * (1 - t * t)", "- (ag_real)0.5 * v * (1 - t * t)")], [("+ half * v * (1 - t * t)", "- half * v * (1 - t * t)")])
twin("gelu", "1st_neg", GE, "1 + t -> 1 - t",
     [("(ag_real)0.5 * (1 + t) +", "(ag_real)0.5 * (1 - t) +")], [("half * (1 + t) +", "half * (1 - t) +")])
twin("gelu", "thshift", GE, "tanh of the next element (fast: within a thread's span)", [("t = th[i];", "t = th[(i + 1) % N];")],
     [("t = th[i];", "t = th[(i + 1) % n];")])
twin("gelu", "lastelem", GE, "last element skipped (fast: of each thread's span)",
     [("for (size_t i = 0; i < N; i++) {\n        ag_real v = x[i], t = th[i];", "for (size_t i = 0; i < N - 1; i++) {\n        ag_real v = x[i], t = th[i];")],
     [("for (size_t i = 0; i < n; i++) {\n        ag_real v = x[i], t = th[i];", "for (size_t i = 0; i + 1 < n; i++) {\n        ag_real v = x[i], t = th[i];")])
mut("ref_gelu_assign", OPS + "gelu.c", GE + " (ref)", "+= -> =", [("dx[i] += dy[i] * dydx", "dx[i] = dy[i] * dydx")])
mut("fast_gelu_always_write", FAST + "gelu.c", GE + " (fast)", "dx always written (=), never added to",
    [("dx[i] = acc ? dx[i] + dy[i] * local : dy[i] * local;", "dx[i] = dy[i] * local;")])
mut("fast_gelu_always_add", FAST + "gelu.c", GE + " (fast)", "dx always added to (+=), also a fresh buffer",
    [("dx[i] = acc ? dx[i] + dy[i] * local : dy[i] * local;", "dx[i] += dy[i] * local;")])
mut("fast_gelu_half1", FAST + "gelu.c", GE + " (fast)", "half = 1 (both terms x2)",
    [("const ag_real half = 0.5;", "const ag_real half = 1;")])

# ---------------- silu: one backward (ops/), a forward per path that saves sigmoid ----------------
SI = "silu backward"
twin("silu", "fwd_sig_neg", "silu forward (saved sigmoid)", "saved sigmoid(-x) (y still right)",
     [("if (sig) sig[i] = s;", "if (sig) sig[i] = 1 - s;")])
twin("silu", "fwd_sig_y", "silu forward (saved sigmoid)", "saved y = x s instead of s",
     [("if (sig) sig[i] = s;", "if (sig) sig[i] = x[i] * s;")])
SIO = OPS + "silu.c"
mut("both_silu_no2nd", SIO, SI, "x s (1 - s) term dropped",
    [("dx[i] += dy[i] * s * (1 + x[i] * (1 - s));", "dx[i] += dy[i] * s;")])
mut("both_silu_nos", SIO, SI, "outer s dropped", [("dx[i] += dy[i] * s * (", "dx[i] += dy[i] * (")])
mut("both_silu_neg2nd", SIO, SI, "second term sign", [("(1 + x[i] * (1 - s))", "(1 - x[i] * (1 - s))")])
mut("both_silu_1ms", SIO, SI, "1 - s -> s", [("x[i] * (1 - s))", "x[i] * s)")])
mut("both_silu_nox", SIO, SI, "x dropped from the second term", [("(1 + x[i] * (1 - s))", "(1 + (1 - s))")])
mut("both_silu_assign", SIO, SI, "+= -> =", [("dx[i] += dy[i] * s", "dx[i] = dy[i] * s")])
mut("both_silu_sigshift", SIO, SI, "sigmoid of the next element", [("ag_real s = sig[i];", "ag_real s = sig[(i + 1) % N];")])
mut("both_silu_lastelem", SIO, SI, "last element skipped",
    [("for (size_t i = 0; i < N; i++) {\n        ag_real s = sig[i];", "for (size_t i = 0; i < N - 1; i++) {\n        ag_real s = sig[i];")])

# ---------------- softmax: ops/softmax.c, fast/softmax.c ----------------
SM = "softmax backward"
twin("sm", "nodot", SM, "the - dot term dropped", [("yr[j] * (dyr[j] - dot)", "yr[j] * dyr[j]")])
twin("sm", "plusdot", SM, "- dot -> + dot", [("yr[j] * (dyr[j] - dot)", "yr[j] * (dyr[j] + dot)")])
twin("sm", "2dot", SM, "dot x2", [("yr[j] * (dyr[j] - dot)", "yr[j] * (dyr[j] - 2 * dot)")])
twin("sm", "noy", SM, "outer y factor dropped", [("dxr[j] += yr[j] * (dyr[j] - dot)", "dxr[j] += (dyr[j] - dot)")])
twin("sm", "assign", SM, "+= -> =", [("dxr[j] += yr[j]", "dxr[j] = yr[j]")])
twin("sm", "neg", SM, "sign", [("dxr[j] += yr[j]", "dxr[j] -= yr[j]")])
twin("sm", "dyrow0", SM, "dy of row 0 for every row", [("*dyr = dy + r * N;", "*dyr = dy;")])
twin("sm", "yrow0", SM, "y of row 0 for every row", [("const ag_real *yr = y + r * N, *dyr", "const ag_real *yr = y, *dyr")])
twin("sm", "dot_noy", SM, "dot = sum dy (y dropped)",
     [("dot += dyr[k] * yr[k]", "dot += dyr[k]")], [("ag_real dot = ag__dot(dyr, yr, N);", "ag_real dot = ag__sum(dyr, N);")])
twin("sm", "dot_lastk", SM, "last element left out of the dot (tail off by one)",
     [("for (int k = 0; k < N; k++) dot +=", "for (int k = 0; k < N - 1; k++) dot +=")],
     [("ag__dot(dyr, yr, N)", "ag__dot(dyr, yr, N - 1)")])
twin("sm", "dx_lastj", SM, "last element of dx skipped", [("for (int j = 0; j < N; j++) dxr[j] +=", "for (int j = 0; j < N - 1; j++) dxr[j] +=")])
mut("ref_sm_dot_noreset", OPS + "softmax.c", SM + " (ref)", "dot not reset per row (and shared by the threads)",
    [("#pragma omp parallel for schedule(static) if (R * N >= AG_PAR_MIN)\n    for (size_t r = 0; r < R; r++) {\n        const ag_real *yr = y + r * N, *dyr",
      "    ag_real dot = 0;\n#pragma omp parallel for schedule(static) if (R * N >= AG_PAR_MIN)\n    for (size_t r = 0; r < R; r++) {\n        const ag_real *yr = y + r * N, *dyr"),
     ("        ag_real dot = 0;                                    /* sum_k dy[k] y[k] */\n", "")])
mut("ref_sm_step_y_dy_swapped", OPS + "softmax.c", SM + " step (ref)", "y and dy swapped in the call",
    [("    softmax_backward(dx, y->data, y->grad,", "    softmax_backward(dx, y->grad, y->data,")])
mut("fast_sm_step_y_dy_swapped", FAST + "kernels.c", SM + " step (fast)", "y and dy swapped in the call",
    [("ag_fast_softmax_backward(dx, y->data, y->grad,", "ag_fast_softmax_backward(dx, y->grad, y->data,")])

# ---------------- fast.h: the lane reductions and column blocks the fast kernels share ----------------
FH = FAST + "fast.h"
mut("fast_h_dot_tail", FH, "ag__dot (fast)", "last element of the tail left out",
    [("for (int l = 0; i < n; i++, l++) lane[l] += x[i] * y[i];", "for (int l = 0; i < n - 1; i++, l++) lane[l] += x[i] * y[i];")])
mut("fast_h_sum_tail", FH, "ag__sum (fast)", "last element of the tail left out",
    [("for (int l = 0; i < n; i++, l++) lane[l] += x[i];", "for (int l = 0; i < n - 1; i++, l++) lane[l] += x[i];")])
mut("fast_h_sumrows_tail", FH, "ag__sum_rows_block (fast: linear db, add db)", "last column of a partial block skipped",
    [("for (int c = 0; c < w; c++) acc[c] += x", "for (int c = 0; c < w - 1; c++) acc[c] += x")])
mut("fast_h_sumrows_full_c0", FH, "ag__sum_rows_block (fast: linear db, add db)", "full blocks read block 0's columns",
    [("for (int c = 0; c < AG_COL_BLOCK; c++) acc[c] += x[r * (size_t)C + c0 + c];", "for (int c = 0; c < AG_COL_BLOCK; c++) acc[c] += x[r * (size_t)C + c];")])
mut("fast_h_sumrows_assign", FH, "ag__sum_rows_block (fast: linear db, add db)", "+= -> =",
    [("for (int c = 0; c < w; c++) out[c0 + c] += acc[c];", "for (int c = 0; c < w; c++) out[c0 + c] = acc[c];")])
mut("fast_h_sumrows_lastrow", FH, "ag__sum_rows_block (fast: linear db, add db)", "last row left out (partial blocks)",
    [("for (size_t r = 0; r < R; r++)\n            for (int c = 0; c < w; c++)", "for (size_t r = 0; r < R - 1; r++)\n            for (int c = 0; c < w; c++)")])
mut("fast_h_sumrows_noblocktail", FH, "ag__sum_rows (fast: add db)", "the last, partial column block dropped",
    [("int n_blocks = (C + AG_COL_BLOCK - 1) / AG_COL_BLOCK;\n#pragma", "int n_blocks = C / AG_COL_BLOCK;\n#pragma")])
mut("fast_h_sumrows_part_stride", FH, "ag__sum_rows_part (fast: linear db in the gemm pair)", "each thread sums every block from its first on",
    [("for (int blk = part; blk < n_blocks; blk += n_parts)", "for (int blk = part; blk < n_blocks; blk++)")])

# ---------------- linear: ops/linear.c, fast/linear.c ----------------
LI = "linear backward"
LIO, LIF = OPS + "linear.c", FAST + "linear.c"
REF_DX = "ag__matmul_add(dx, dy, W, R, Fin, Fout, false, false);"
REF_DW = "ag__matmul_add(dW, dy, x, Fout, Fin, R, true, false);"
mut("ref_lin_dx_transW", LIO, LI + " (dx) (ref)", "dx = dy W^T (W read transposed)",
    [(REF_DX, REF_DX.replace("false, false", "false, true"))])
mut("ref_lin_dx_lastrow", LIO, LI + " (dx) (ref)", "last row of dx skipped", [(REF_DX, REF_DX.replace("R, Fin", "R - 1, Fin"))])
mut("ref_lin_dx_x2", LIO, LI + " (dx) (ref)", "dx added twice", [(REF_DX, "{ %s %s }" % (REF_DX, REF_DX))])
mut("ref_lin_dx_overwrite", LIO, LI + " (dx) (ref)", "dx = instead of += (zeroed first)",
    [(REF_DX, "{ memset(dx, 0, (size_t)R * Fin * sizeof *dx); %s }" % REF_DX)])
mut("ref_lin_dx_skip", LIO, LI + " (dx) (ref)", "no dx", [("if (dx) " + REF_DX, "if (0) " + REF_DX)])
mut("ref_lin_dW_transdy", LIO, LI + " (dW) (ref)", "dy not transposed", [(REF_DW, REF_DW.replace("true, false", "false, false"))])
mut("ref_lin_dW_lastrow", LIO, LI + " (dW) (ref)", "last row of the batch left out",
    [(REF_DW, REF_DW.replace("Fin, R,", "Fin, R - 1,"))])
mut("ref_lin_dW_x2", LIO, LI + " (dW) (ref)", "dW added twice", [(REF_DW, "{ %s %s }" % (REF_DW, REF_DW))])
mut("ref_lin_dW_overwrite", LIO, LI + " (dW) (ref)", "dW = instead of += (zeroed first)",
    [(REF_DW, "{ memset(dW, 0, (size_t)Fout * Fin * sizeof *dW); %s }" % REF_DW)])
mut("ref_lin_dW_x_for_dy", LIO, LI + " (dW) (ref)", "dW = x^T dy's wrong operand: W itself",
    [(REF_DW, REF_DW.replace("dy, x,", "dy, W,"))])
mut("ref_lin_db_skip", LIO, LI + " (db) (ref)", "bias grad dropped", [("if (db) db_add_row_sums(db, dy, R, Fout);", "(void)db;")])
mut("ref_lin_db_firstrow", LIO, LI + " (db) (ref)", "bias grad from the first row only",
    [("if (db) db_add_row_sums(db, dy, R, Fout);", "if (db) db_add_row_sums(db, dy, 1, Fout);")])
mut("ref_lin_db_neg", LIO, LI + " (db) (ref)", "sign", [("db[o] += sum;", "db[o] -= sum;")])
mut("ref_lin_db_assign", LIO, LI + " (db) (ref)", "+= -> =", [("db[o] += sum;", "db[o] = sum;")])
mut("ref_lin_db_lastrow", LIO, LI + " (db) (ref)", "last row left out",
    [("for (int r = 0; r < R; r++) sum +=", "for (int r = 0; r < R - 1; r++) sum +=")])
mut("ref_lin_db_col0", LIO, LI + " (db) (ref)", "column 0 of dy for every output",
    [("sum += dy[(size_t)r * Fout + o];", "sum += dy[(size_t)r * Fout];")])
mut("ref_lin_db_lastcol", LIO, LI + " (db) (ref)", "last output skipped",
    [("for (int o = 0; o < Fout; o++) {\n        ag_real sum", "for (int o = 0; o < Fout - 1; o++) {\n        ag_real sum")])
FAST_DX = "{ false, false, R, Fin, Fout, 1, dy, Fout, W->data, Fin, acc ? 1 : 0, dx, Fin }"
FAST_DW = "{ true, false, Fout, Fin, R, 1, dy, Fout, x->data, Fin, 1, dW, Fin }"
mut("fast_lin_dx_transW", LIF, LI + " (dx) (fast)", "dx = dy W^T (W read transposed)",
    [(FAST_DX, FAST_DX.replace("false, false", "false, true").replace("W->data, Fin", "W->data, Fout"))])
mut("fast_lin_dx_x2", LIF, LI + " (dx) (fast)", "alpha 1 -> 2", [(FAST_DX, FAST_DX.replace("Fout, 1, dy", "Fout, 2, dy"))])
mut("fast_lin_dx_neg", LIF, LI + " (dx) (fast)", "alpha 1 -> -1", [(FAST_DX, FAST_DX.replace("Fout, 1, dy", "Fout, -1, dy"))])
mut("fast_lin_dx_lastrow", LIF, LI + " (dx) (fast)", "last row of dx skipped",
    [(FAST_DX, FAST_DX.replace("R, Fin", "R - 1, Fin"))])
mut("fast_lin_dx_always_write", LIF, LI + " (dx) (fast)", "beta 0 always (= instead of +=)",
    [(FAST_DX, FAST_DX.replace("acc ? 1 : 0", "0"))])
mut("fast_lin_dx_always_add", LIF, LI + " (dx) (fast)", "beta 1 always (adds to a fresh, unzeroed buffer)",
    [(FAST_DX, FAST_DX.replace("acc ? 1 : 0", "1"))])
mut("fast_lin_dx_skip", LIF, LI + " (dx) (fast)", "no dx", [("if (x->requires_grad) { /* dx += dy @ W */", "if (0) {")])
mut("fast_lin_dW_transdy", LIF, LI + " (dW) (fast)", "dy not transposed",
    [(FAST_DW, FAST_DW.replace("{ true, false", "{ false, false").replace("dy, Fout", "dy, R"))])
mut("fast_lin_dW_beta0", LIF, LI + " (dW) (fast)", "beta 1 -> 0 (= instead of +=)",
    [(FAST_DW, FAST_DW.replace("Fin, 1, dW", "Fin, 0, dW"))])
mut("fast_lin_dW_lastrow", LIF, LI + " (dW) (fast)", "last row of the batch left out",
    [(FAST_DW, FAST_DW.replace("Fin, R, 1", "Fin, R - 1, 1"))])
mut("fast_lin_dW_half", LIF, LI + " (dW) (fast)", "alpha 1 -> 0.5", [(FAST_DW, FAST_DW.replace("R, 1, dy", "R, 0.5, dy"))])
mut("fast_lin_dW_skip", LIF, LI + " (dW) (fast)", "no dW", [("if (W->requires_grad) { /* dW += dy^T @ x */", "if (0) {")])
mut("fast_lin_db_pair_skip", LIF, LI + " (db, gemm pair) (fast)", "bias grad dropped when dx and dW run as a pair",
    [("db ? bias_grad_part : NULL", "NULL")])
mut("fast_lin_db_pair_firstrow", LIF, LI + " (db, gemm pair) (fast)", "bias grad from the first row only",
    [("bias_grad bg = { db, dy, (size_t)R, Fout };", "bias_grad bg = { db, dy, 1, Fout };")])
mut("fast_lin_db_part_all", LIF, LI + " (db, gemm pair) (fast)", "every thread of the team sums every column block",
    [("bg->Fout, part, n_parts);", "bg->Fout, 0, 1);")])
mut("fast_lin_db_single_skip", LIF, LI + " (db, no pair) (fast)", "bias grad dropped without the pair",
    [("if (db) ag__sum_rows(db, dy, (size_t)R, Fout);", "(void)db;")])
mut("fast_lin_db_single_firstrow", LIF, LI + " (db, no pair) (fast)", "bias grad from the first row only",
    [("if (db) ag__sum_rows(db, dy, (size_t)R, Fout);", "if (db) ag__sum_rows(db, dy, 1, Fout);")])

# ---------------- matmul: ops/matmul.c, fast/matmul.c ----------------
MM = "matmul backward"
MMO, MMF = OPS + "matmul.c", FAST + "matmul.c"
REF_DA = "ag__matmul_add(dA + b * M * K, dC + b * M * N, batch_entry_B(B, b, K, N, shared_b), M, K, N, false, true);"
REF_SDB = "ag__matmul_add(dB, A, dC, K, N, (int)(batch * M), true, false);"
REF_BDB = "ag__matmul_add(dB + b * K * N, A + b * M * K, dC + b * M * N, K, N, M, true, false);"
mut("ref_mm_dA_transB", MMO, MM + " (dA) (ref)", "dA = dC B (transpose dropped)",
    [(REF_DA, REF_DA.replace("false, true", "false, false"))])
mut("ref_mm_dA_Bstride", MMO, MM + " (dA) (ref)", "B of batch entry 0 for every entry",
    [(REF_DA, REF_DA.replace("(B, b, K", "(B, 0, K"))])
mut("ref_mm_dA_dCstride", MMO, MM + " (dA) (ref)", "dC of batch entry 0 for every entry",
    [(REF_DA, REF_DA.replace("dC + b * M * N", "dC"))])
mut("ref_mm_dA_lastrow", MMO, MM + " (dA) (ref)", "last row of every dA_b skipped",
    [(REF_DA, REF_DA.replace("M, K, N, false", "M - 1, K, N, false"))])
mut("ref_mm_dA_x2", MMO, MM + " (dA) (ref)", "dA added twice", [(REF_DA, "{ %s %s }" % (REF_DA, REF_DA))])
mut("ref_mm_dA_lastbatch", MMO, MM + " (dA) (ref)", "last batch entry skipped",
    [("for (size_t b = 0; b < batch; b++) /* dA_b", "for (size_t b = 0; b < batch - 1; b++) /* dA_b")])
mut("ref_mm_dA_skip", MMO, MM + " (dA) (ref)", "no dA", [("if (dA)\n#pragma", "if (0)\n#pragma")])
mut("ref_mm_shr_dB_transA", MMO, MM + " (shared-B dB) (ref)", "dB = A dC (transpose dropped)",
    [(REF_SDB, REF_SDB.replace("true, false", "false, false"))])
mut("ref_mm_shr_dB_firstbatch", MMO, MM + " (shared-B dB) (ref)", "sum over the batch dropped (entry 0 only)",
    [(REF_SDB, REF_SDB.replace("(int)(batch * M)", "M"))])
mut("ref_mm_shr_dB_skip", MMO, MM + " (shared-B dB) (ref)", "no dB for a shared B", [(REF_SDB, ";")])
mut("ref_mm_bat_dB_transA", MMO, MM + " (batched dB) (ref)", "dB = A dC (transpose dropped)",
    [(REF_BDB, REF_BDB.replace("true, false", "false, false"))])
mut("ref_mm_bat_dB_Astride", MMO, MM + " (batched dB) (ref)", "A of batch entry 0 for every entry",
    [(REF_BDB, REF_BDB.replace("A + b * M * K", "A"))])
mut("ref_mm_bat_dB_dCstride", MMO, MM + " (batched dB) (ref)", "dC of batch entry 0 for every entry",
    [(REF_BDB, REF_BDB.replace("dC + b * M * N", "dC"))])
mut("ref_mm_bat_dB_lastbatch", MMO, MM + " (batched dB) (ref)", "last batch entry skipped",
    [("for (size_t b = 0; b < batch; b++) /* dB_b", "for (size_t b = 0; b < batch - 1; b++) /* dB_b")])
mut("ref_mm_bat_dB_x2", MMO, MM + " (batched dB) (ref)", "dB added twice", [(REF_BDB, "{ %s %s }" % (REF_BDB, REF_BDB))])
mut("both_mm_shared_detect", MMO, MM + " step", "a batched B taken for a shared one (B->ndim test dropped)",
    [("bool shared_b = B->ndim == 2 && A->ndim > 2;", "bool shared_b = A->ndim > 2;")])
mut("both_mm_batch1", MMO, MM + " step", "batch = 1 (only the first entry's gradients)",
    [("size_t batch = ag_numel(A) / ((size_t)M * K);\n    bool shared_b = B->ndim == 2 && A->ndim > 2;",
      "size_t batch = 1;\n    bool shared_b = B->ndim == 2 && A->ndim > 2;")])
FAST_SDA = "gemm(dA, dC, B, (int)(batch * M), K, N, false, true, 1);"
FAST_BDA = "gemm(dA + b * M * K, dC + b * M * N, B + b * K * N, M, K, N, false, true, 1);"
FAST_SDB = "gemm(dB, A, dC, K, N, (int)(batch * M), true, false, 1);"
FAST_BDB = "gemm(dB + b * K * N, A + b * M * K, dC + b * M * N, K, N, M, true, false, 1);"
mut("fast_mm_shr_dA_transB", MMF, MM + " (shared-B dA) (fast)", "dA = dC B (transpose dropped)",
    [(FAST_SDA, FAST_SDA.replace("false, true, 1", "false, false, 1"))])
mut("fast_mm_shr_dA_beta0", MMF, MM + " (shared-B dA) (fast)", "beta 1 -> 0 (= instead of +=)",
    [(FAST_SDA, FAST_SDA.replace("true, 1)", "true, 0)"))])
mut("fast_mm_shr_dA_firstbatch", MMF, MM + " (shared-B dA) (fast)", "rows M instead of batch*M",
    [(FAST_SDA, FAST_SDA.replace("(int)(batch * M)", "M"))])
mut("fast_mm_bat_dA_transB", MMF, MM + " (batched dA) (fast)", "dA = dC B (transpose dropped)",
    [(FAST_BDA, FAST_BDA.replace("false, true, 1", "false, false, 1"))])
mut("fast_mm_bat_dA_beta0", MMF, MM + " (batched dA) (fast)", "beta 1 -> 0",
    [(FAST_BDA, FAST_BDA.replace("true, 1)", "true, 0)"))])
mut("fast_mm_bat_dA_Bstride", MMF, MM + " (batched dA) (fast)", "B of batch entry 0 for every entry",
    [(FAST_BDA, FAST_BDA.replace("B + b * K * N", "B"))])
mut("fast_mm_bat_dA_dCstride", MMF, MM + " (batched dA) (fast)", "dC of batch entry 0 for every entry",
    [(FAST_BDA, FAST_BDA.replace("dC + b * M * N", "dC"))])
mut("fast_mm_bat_dA_lastbatch", MMF, MM + " (batched dA) (fast)", "last batch entry skipped",
    [("for (size_t b = 0; b < batch; b++) /* dA_b", "for (size_t b = 0; b < batch - 1; b++) /* dA_b")])
mut("fast_mm_shr_dB_transA", MMF, MM + " (shared-B dB) (fast)", "dB = A dC (transpose dropped)",
    [(FAST_SDB, FAST_SDB.replace("true, false, 1", "false, false, 1"))])
mut("fast_mm_shr_dB_beta0", MMF, MM + " (shared-B dB) (fast)", "beta 1 -> 0",
    [(FAST_SDB, FAST_SDB.replace("false, 1)", "false, 0)"))])
mut("fast_mm_shr_dB_firstbatch", MMF, MM + " (shared-B dB) (fast)", "sum over the batch dropped (entry 0 only)",
    [(FAST_SDB, FAST_SDB.replace("(int)(batch * M)", "M"))])
mut("fast_mm_bat_dB_transA", MMF, MM + " (batched dB) (fast)", "dB = A dC (transpose dropped)",
    [(FAST_BDB, FAST_BDB.replace("true, false, 1", "false, false, 1"))])
mut("fast_mm_bat_dB_beta0", MMF, MM + " (batched dB) (fast)", "beta 1 -> 0",
    [(FAST_BDB, FAST_BDB.replace("false, 1)", "false, 0)"))])
mut("fast_mm_bat_dB_Astride", MMF, MM + " (batched dB) (fast)", "A of batch entry 0 for every entry",
    [(FAST_BDB, FAST_BDB.replace("A + b * M * K", "A"))])
mut("fast_mm_bat_dB_dCstride", MMF, MM + " (batched dB) (fast)", "dC of batch entry 0 for every entry",
    [(FAST_BDB, FAST_BDB.replace("dC + b * M * N", "dC"))])
mut("fast_mm_bat_dB_lastbatch", MMF, MM + " (batched dB) (fast)", "last batch entry skipped",
    [("for (size_t b = 0; b < batch; b++) /* dB_b", "for (size_t b = 0; b < batch - 1; b++) /* dB_b")])
mut("fast_mm_skip_dA", MMF, MM + " (dA) (fast)", "no dA", [("if (dA) {", "if (0) {")])
mut("fast_mm_skip_dB", MMF, MM + " (dB) (fast)", "no dB", [("if (dB) {", "if (0) {")])

# ---------------- attention: fast/attention.c (its reference is the composed ops of
# src/nn/attention.c, attend(), whose own backwards are mutated under their ops), and
# nn/attention.c's choice of the fast twin (fusable(), attention()): both run on the fast table
# only. The fast backward works per (b, h) in tiles of rows (TILE, causal) or one tile (no mask):
# dV, then dAd = dO V^T, dropout's backward, softmax's, dQ and dK, each a gemm on the blocks. ----------------
AT = "attention backward"
ATF, ATN = FAST + "attention.c", "src/nn/attention.c"
FAST_DV = ("gemm_block(true, false, m, D, T - i0, 1, Adb + (size_t)i0 * T + c0, T, dO + (size_t)i0 * C, C, g->acc_v,\n"
           "                   g->dv + off + (size_t)c0 * C, C);")
FAST_DA = "gemm_block(false, true, m, keys, D, 1, dO + (size_t)r0 * C, C, v->data + off, C, 0, dS + (size_t)r0 * T, T);"
FAST_DQ = ("gemm_block(false, false, m, D, keys, scale, dS + (size_t)r0 * T, T, k->data + off, C, g->acc_q,\n"
           "                   g->dq + off + (size_t)r0 * C, C);")
FAST_DK = ("gemm_block(true, false, m, D, T - i0, scale, dS + (size_t)i0 * T + c0, T, q->data + off + (size_t)i0 * C, C,\n"
           "                   g->acc_k, g->dk + off + (size_t)c0 * C, C);")
AT_DS = "dr[j] = ar[j] * (dr[j] - dot);"
AT_DROP_BWD = "dr[j] = ar[j] != 0 ? dr[j] * keep : 0;"
mut("fast_attn_saved_scale", ATF, AT + " (saved scale) (fast)", "scale saved as 1", [("n->fparam[0] = scale;", "n->fparam[0] = 1;")])
mut("fast_attn_saved_H", ATF, AT + " (saved H) (fast)", "H saved as 1 (D = C)", [("n->iparam[0] = H;", "n->iparam[0] = 1;")])
mut("fast_attn_saved_p", ATF, AT + " (saved p) (fast)", "dropout p saved as 0 (the backward reads A for Ad)",
    [("n->fparam[1] = dropout;", "n->fparam[1] = 0;")])
mut("fast_attn_saved_causal", ATF, AT + " (saved mask kind) (fast)", "causal saved as false (the tiles of no mask)",
    [("n->iparam[1] = causal;", "n->iparam[1] = 0;")])
mut("fast_attn_kind_ignored", ATN, "attention's path (fusable) (fast)", "any [T,T] mask taken for causal (its kind ignored)",
    [("(ag_is_causal_mask(mask, q->shape[1]) &&", "(mask->ndim == 2 &&")])
mut("fast_attn_fill_ignored", ATN, "attention's path (fusable) (fast)", "a -1e9 fill takes the fast twin (-inf)",
    [(" && A->mask_fill == -INFINITY);", ");")])
mut("fast_attn_dropout_not_passed", ATN, "attention's path (fast)", "dropout on the weights not passed to the fast twin",
    [("A->scale, mask != NULL, p, opt->seed);", "A->scale, mask != NULL, 0, opt->seed);")])
mut("fast_attn_dropout_in_eval", ATN, "attention's path (fast)", "the fast twin drops weights in evaluation too",
    [("ag_real p = opt->train ? dropout : 0;", "ag_real p = dropout;")])
mut("fast_attn_dv_notransA", ATF, AT + " (dv) (fast)", "dV += Ad dO (Ad not transposed)",
    [(FAST_DV, FAST_DV.replace("(true, false", "(false, false"))])
mut("fast_attn_dv_always_write", ATF, AT + " (dv) (fast)", "beta 0 always (= instead of +=)",
    [(FAST_DV, FAST_DV.replace("g->acc_v", "0"))])
mut("fast_attn_dv_always_add", ATF, AT + " (dv) (fast)", "beta 1 always (adds to a fresh, unzeroed buffer)",
    [(FAST_DV, FAST_DV.replace("g->acc_v", "1"))])
mut("fast_attn_dv_skip", ATF, AT + " (dv) (fast)", "no dv",
    [("for (int c0 = 0; g->dv && c0 < T; c0 += tile) {", "for (int c0 = 0; 0 && c0 < T; c0 += tile) {")])
mut("fast_attn_dv_lastrow", ATF, AT + " (dv) (fast)", "last row (query) left out of dV's sum",
    [(FAST_DV, FAST_DV.replace("T - i0, 1,", "T - i0 - 1, 1,"))])
mut("fast_attn_dv_A_for_Ad", ATF, AT + " (dv) (fast)", "dV += A^T dO (the weights before dropout)",
    [(FAST_DV, FAST_DV.replace("1, Adb +", "1, Ab +"))])
mut("fast_attn_dA_k", ATF, AT + " (dA) (fast)", "dA = dO K^T (wrong operand)", [(FAST_DA, FAST_DA.replace("v->data", "k->data"))])
mut("fast_attn_dA_beta1", ATF, AT + " (dA) (fast)", "scratch not overwritten: dA adds to the last (b, h)'s dS",
    [(FAST_DA, FAST_DA.replace("C, 0, dS", "C, 1, dS"))])
mut("fast_attn_dA_lastkey", ATF, AT + " (dA) (fast)", "last key of a tile left out of dA",
    [(FAST_DA, FAST_DA.replace("m, keys, D", "m, keys - 1, D"))])
mut("fast_attn_dS_nodot", ATF, AT + " (dS) (fast)", "softmax backward without - rowsum", [(AT_DS, "dr[j] = ar[j] * dr[j];")])
mut("fast_attn_dS_noA", ATF, AT + " (dS) (fast)", "softmax backward without the A factor (masked entries too)",
    [(AT_DS, "dr[j] = dr[j] - dot;")])
mut("fast_attn_dS_plusdot", ATF, AT + " (dS) (fast)", "- rowsum -> + rowsum", [(AT_DS, "dr[j] = ar[j] * (dr[j] + dot);")])
mut("fast_attn_dS_dot_noA", ATF, AT + " (dS) (fast)", "rowsum(dA) instead of rowsum(dA A)",
    [("ag_real dot = ag__dot(dr, ar, n);", "ag_real dot = ag__sum(dr, n);")])
mut("fast_attn_dS_dot_lastj", ATF, AT + " (dS) (fast)", "last key left out of the rowsum",
    [("ag__dot(dr, ar, n)", "ag__dot(dr, ar, n - 1)")])
mut("fast_attn_dS_Arow0", ATF, AT + " (dS) (fast)", "row 0 of A for every row",
    [("ag_real *dr = dS + (size_t)i * T;\n        const ag_real *ar = A + (size_t)i * T;",
      "ag_real *dr = dS + (size_t)i * T;\n        const ag_real *ar = A;")])
mut("fast_attn_dS_upto_i", ATF, AT + " (dS) (fast)", "row i's dS up to key i, not its tile's end (stale dA past it)",
    [("int n = tile_end(i, tile, T);\n        ag_real dot", "int n = i + 1;\n        ag_real dot")])
mut("fast_attn_dS_Ad_for_A", ATF, AT + " (dS) (fast)", "softmax backward with the dropped weights Ad, not A",
    [("AG_PICK(ag__attention_softmax_backward_rows)(dS, Ab,", "AG_PICK(ag__attention_softmax_backward_rows)(dS, Adb,")])
mut("fast_attn_drop_nokeep", ATF, AT + " (dropout) (fast)", "dropout backward without 1/(1-p)",
    [(AT_DROP_BWD, "dr[j] = ar[j] != 0 ? dr[j] : 0;")])
mut("fast_attn_drop_nomask", ATF, AT + " (dropout) (fast)", "dropout backward ignores the mask",
    [(AT_DROP_BWD, "dr[j] = dr[j] * keep;")])
mut("fast_attn_drop_skipped", ATF, AT + " (dropout) (fast)", "dropout backward skipped",
    [("if (Adb != Ab) AG_PICK(ag__attention_dropout_backward_rows)", "if (0) AG_PICK(ag__attention_dropout_backward_rows)")])
mut("fast_attn_drop_saved_A", ATF, AT + " (dropout) (fast)", "the backward reads A for Ad",
    [("*Ad = n->fparam[1] > 0 ? A + BHTT : A;", "*Ad = A;")])
mut("fast_attn_dq_noscale", ATF, AT + " (dq) (fast)", "scale dropped", [(FAST_DQ, FAST_DQ.replace("keys, scale, dS", "keys, 1, dS"))])
mut("fast_attn_dq_transdS", ATF, AT + " (dq) (fast)", "dQ += s dS^T K",
    [(FAST_DQ, FAST_DQ.replace("(false, false", "(true, false"))])
mut("fast_attn_dq_q", ATF, AT + " (dq) (fast)", "dQ += s dS Q (wrong operand)",
    [(FAST_DQ, FAST_DQ.replace("k->data", "q->data"))])
mut("fast_attn_dq_always_write", ATF, AT + " (dq) (fast)", "beta 0 always", [(FAST_DQ, FAST_DQ.replace("g->acc_q", "0"))])
mut("fast_attn_dq_always_add", ATF, AT + " (dq) (fast)", "beta 1 always", [(FAST_DQ, FAST_DQ.replace("g->acc_q", "1"))])
mut("fast_attn_dq_skip", ATF, AT + " (dq) (fast)", "no dq",
    [("for (int r0 = 0; g->dq && r0 < T; r0 += tile) {", "for (int r0 = 0; 0 && r0 < T; r0 += tile) {")])
mut("fast_attn_dq_lastkey", ATF, AT + " (dq) (fast)", "last key of a tile left out of dQ",
    [(FAST_DQ, FAST_DQ.replace("m, D, keys,", "m, D, keys - 1,"))])
mut("fast_attn_dk_noscale", ATF, AT + " (dk) (fast)", "scale dropped", [(FAST_DK, FAST_DK.replace("T - i0, scale, dS", "T - i0, 1, dS"))])
mut("fast_attn_dk_notransdS", ATF, AT + " (dk) (fast)", "dK += s dS Q (dS not transposed)",
    [(FAST_DK, FAST_DK.replace("(true, false", "(false, false"))])
mut("fast_attn_dk_k", ATF, AT + " (dk) (fast)", "dK += s dS^T K (wrong operand)",
    [(FAST_DK, FAST_DK.replace("q->data", "k->data"))])
mut("fast_attn_dk_always_write", ATF, AT + " (dk) (fast)", "beta 0 always", [(FAST_DK, FAST_DK.replace("g->acc_k", "0"))])
mut("fast_attn_dk_always_add", ATF, AT + " (dk) (fast)", "beta 1 always", [(FAST_DK, FAST_DK.replace("g->acc_k", "1"))])
mut("fast_attn_dk_skip", ATF, AT + " (dk) (fast)", "no dk",
    [("for (int c0 = 0; g->dk && c0 < T; c0 += tile) {", "for (int c0 = 0; 0 && c0 < T; c0 += tile) {")])
mut("fast_attn_dk_lastrow", ATF, AT + " (dk) (fast)", "last row (query) left out of dK's sum",
    [(FAST_DK, FAST_DK.replace("T - i0, scale,", "T - i0 - 1, scale,"))])
mut("fast_attn_rows_from", ATF, AT + " (dv, dk) (fast)", "a key's rows from one past it (its own query left out)",
    [("static int rows_from(int c0, bool causal) { return causal ? c0 : 0; }",
      "static int rows_from(int c0, bool causal) { return causal ? c0 + 1 : 0; }")])
mut("fast_attn_dqdk_need_both", ATF, AT + " (dq, dk) (fast)", "dq and dk computed only when both are wanted",
    [("if (!g->dq && !g->dk) return;", "if (!g->dq || !g->dk) return;")])
mut("fast_attn_grad_order", ATF, AT + " (fresh grads) (fast)", "dq's buffer asked for before dv's (q = k = v breaks)",
    [("    g.dv = v->requires_grad ? ag__grad_into(ctx, v, &g.acc_v) : NULL;\n    g.dq = q->requires_grad ? ag__grad_into(ctx, q, &g.acc_q) : NULL;\n",
      "    g.dq = q->requires_grad ? ag__grad_into(ctx, q, &g.acc_q) : NULL;\n    g.dv = v->requires_grad ? ag__grad_into(ctx, v, &g.acc_v) : NULL;\n")])
mut("fast_attn_scratch_shared", ATF, AT + " (scratch) (fast)", "RACE: every thread uses thread 0's dS scratch",
    [("scratch + (size_t)omp_get_thread_num() * T * T);", "scratch);")])
mut("fast_attn_scale1", ATF, AT + " (fast)", "saved scale ignored (1)",
    [("ag_real scale = (ag_real)n->fparam[0], p", "ag_real scale = 1, p")])
mut("fast_attn_fwd_future", ATF, "attention forward (saved A) (fast)", "future weights of A not zeroed",
    [("for (int j = n; j < end; j++) row[j] = 0;", ";")])

# ---------------- add: ops/add.c, fast/add.c ----------------
AD = "add backward"
ADO, ADF = OPS + "add.c", FAST + "add.c"
mut("ref_add_da_assign", ADO, AD + " (da) (ref)", "+= -> =", [("i++) da[i] += dy[i];", "i++) da[i] = dy[i];")])
mut("ref_add_da_neg", ADO, AD + " (da) (ref)", "sign", [("i++) da[i] += dy[i];", "i++) da[i] -= dy[i];")])
mut("ref_add_da_x2", ADO, AD + " (da) (ref)", "x2", [("i++) da[i] += dy[i];", "i++) da[i] += 2 * dy[i];")])
mut("ref_add_da_skip", ADO, AD + " (da) (ref)", "da dropped", [("i++) da[i] += dy[i];", "i++) ;")])
mut("ref_add_da_lastelem", ADO, AD + " (da) (ref)", "last element skipped",
    [("for (size_t i = 0; i < n; i++) da[i]", "for (size_t i = 0; i < n - 1; i++) da[i]")])
mut("ref_add_db_assign", ADO, AD + " (db) (ref)", "+= -> =", [("db[j] += sum;", "db[j] = sum;")])
mut("ref_add_db_half", ADO, AD + " (db) (ref)", "x0.5", [("db[j] += sum;", "db[j] += 0.5 * sum;")])
mut("ref_add_db_skip", ADO, AD + " (db) (ref)", "db dropped", [("db[j] += sum;", "(void)sum;")])
mut("ref_add_db_firstblock", ADO, AD + " (db) (ref)", "no sum over the broadcast rows (row 0 only)",
    [("for (size_t i = j; i < n; i += nb) sum", "for (size_t i = j; i < nb; i += nb) sum")])
mut("ref_add_db_lastrow", ADO, AD + " (db) (ref)", "last broadcast row left out",
    [("for (size_t i = j; i < n; i += nb) sum", "for (size_t i = j; i + nb < n; i += nb) sum")])
mut("ref_add_db_shift", ADO, AD + " (db) (ref)", "off-by-one index", [("sum += dy[i];", "sum += dy[(i + 1) % n];")])
mut("ref_add_db_lastcol", ADO, AD + " (db) (ref)", "last column of db skipped",
    [("for (size_t j = 0; j < nb; j++) {", "for (size_t j = 0; j < nb - 1; j++) {")])
FAST_DA_ADD = "da[i] = acc ? da[i] + dy[i] : dy[i];"
FAST_DB_ADD = "db[i] = acc ? db[i] + dy[i] : dy[i];"
mut("fast_add_da_always_write", ADF, AD + " (da) (fast)", "da always written (=)", [(FAST_DA_ADD, "da[i] = dy[i];")])
mut("fast_add_da_always_add", ADF, AD + " (da) (fast)", "da always added to (+=), also a fresh buffer",
    [(FAST_DA_ADD, "da[i] += dy[i];")])
mut("fast_add_da_neg", ADF, AD + " (da) (fast)", "sign", [(FAST_DA_ADD, "da[i] = acc ? da[i] - dy[i] : -dy[i];")])
mut("fast_add_da_lastelem", ADF, AD + " (da) (fast)", "last element skipped",
    [("for (size_t i = 0; i < N; i++) da[i]", "for (size_t i = 0; i < N - 1; i++) da[i]")])
mut("fast_add_da_skip", ADF, AD + " (da) (fast)", "da dropped", [("if (a->requires_grad) {", "if (0) {")])
mut("fast_add_db_same_always_write", ADF, AD + " (db, same shape) (fast)", "db always written (=)",
    [(FAST_DB_ADD, "db[i] = dy[i];")])
mut("fast_add_db_same_always_add", ADF, AD + " (db, same shape) (fast)", "db always added to (+=)",
    [(FAST_DB_ADD, "db[i] += dy[i];")])
mut("fast_add_db_same_lastelem", ADF, AD + " (db, same shape) (fast)", "last element skipped",
    [("for (size_t i = 0; i < N; i++) db[i]", "for (size_t i = 0; i < N - 1; i++) db[i]")])
mut("fast_add_db_same_skip", ADF, AD + " (db, same shape) (fast)", "db dropped",
    [("if (b->requires_grad && nb == N) {", "if (nb == N) {} else if (0) {")])
mut("fast_add_db_bc_firstrow", ADF, AD + " (db, broadcast) (fast)", "no sum over the broadcast rows (row 0 only)",
    [("ag__sum_rows(db, dy, N / nb, (int)nb);", "ag__sum_rows(db, dy, 1, (int)nb);")])
mut("fast_add_db_bc_lastrow", ADF, AD + " (db, broadcast) (fast)", "last broadcast row left out",
    [("ag__sum_rows(db, dy, N / nb, (int)nb);", "ag__sum_rows(db, dy, N / nb - 1, (int)nb);")])
mut("fast_add_db_bc_skip", ADF, AD + " (db, broadcast) (fast)", "db dropped",
    [("ag__sum_rows(db, dy, N / nb, (int)nb);", "(void)db;")])

# ---------------- the ops with one path (no fast kernel): both paths run these ----------------
MU = OPS + "mul.c"
mut("both_mul_da_other", MU, "mul backward (da)", "da += dy a (own input, not the other)",
    [("mul_backward(da, dy, b->data, N);", "mul_backward(da, dy, a->data, N);")])
mut("both_mul_db_other", MU, "mul backward (db)", "db += dy b (own input, not the other)",
    [("mul_backward(db, dy, a->data, N);", "mul_backward(db, dy, b->data, N);")])
mut("both_mul_assign", MU, "mul backward", "+= -> = (a * a loses a term)",
    [("dx[i] += dy[i] * other[i];", "dx[i] = dy[i] * other[i];")])
mut("both_mul_neg", MU, "mul backward", "sign", [("dx[i] += dy[i] * other[i];", "dx[i] -= dy[i] * other[i];")])
mut("both_mul_noother", MU, "mul backward", "dx += dy (other factor dropped)",
    [("dx[i] += dy[i] * other[i];", "dx[i] += dy[i];")])
mut("both_mul_skip_db", MU, "mul backward (db)", "no db", [("if (b->requires_grad) {", "if (0) {")])
mut("both_mul_lastelem", MU, "mul backward", "last element skipped",
    [("for (size_t i = 0; i < N; i++) dx[i] +=", "for (size_t i = 0; i < N - 1; i++) dx[i] +=")])
SC = OPS + "scale.c"
mut("both_scale_nos", SC, "scale backward", "s dropped", [("dx[i] += s * dy[i]", "dx[i] += dy[i]")])
mut("both_scale_neg", SC, "scale backward", "sign", [("dx[i] += s * dy[i]", "dx[i] -= s * dy[i]")])
mut("both_scale_s2", SC, "scale backward", "s^2", [("dx[i] += s * dy[i]", "dx[i] += s * s * dy[i]")])
mut("both_scale_inv", SC, "scale backward", "1/s", [("dx[i] += s * dy[i]", "dx[i] += dy[i] / s")])
mut("both_scale_assign", SC, "scale backward", "+= -> =", [("dx[i] += s * dy[i]", "dx[i] = s * dy[i]")])
mut("both_scale_saved_s", SC, "scale backward (saved s)", "s saved as 1",
    [("if (n) n->fparam[0] = s;", "if (n) n->fparam[0] = 1;")])
DO = OPS + "dropout.c"
# dropout's forward has a fast twin (fast/dropout.c) that saves the mask; its backward is one
twin("do", "fwd_mask_noscale", "dropout forward (saved mask)", "mask saved without 1/(1-p) (y still right)",
     [("m[i] = ag__dropout_keeps(seed, i, threshold) ? scale : 0;\n        y[i] = x[i] * m[i];",
       "m[i] = ag__dropout_keeps(seed, i, threshold) ? 1 : 0;\n        y[i] = x[i] * m[i] * scale;")],
     [("m[i] = ag__dropout_keeps(seed, i0 + i, threshold) ? scale : 0;\n        y[i] = x[i] * m[i];",
       "m[i] = ag__dropout_keeps(seed, i0 + i, threshold) ? 1 : 0;\n        y[i] = x[i] * m[i] * scale;")])
mut("fast_do_fwd_mask_span", FAST + "dropout.c", "dropout forward (saved mask) (fast)",
    "every thread saves its mask at span 0 (threaded only; y still right)", [("span(y + i0, m + i0,", "span(y + i0, m,")])
mut("both_do_nomask", DO, "dropout backward", "mask ignored", [("dx[i] += dy[i] * m[i];", "dx[i] += dy[i];")])
mut("both_do_noscale", DO, "dropout backward", "1/(1-p) dropped", [("dx[i] += dy[i] * m[i];", "dx[i] += dy[i] * (m[i] != 0);")])
mut("both_do_scale2", DO, "dropout backward", "scale applied twice",
    [("dx[i] += dy[i] * m[i];", "dx[i] += dy[i] * m[i] * m[i];")])
mut("both_do_assign", DO, "dropout backward", "+= -> =", [("dx[i] += dy[i] * m[i];", "dx[i] = dy[i] * m[i];")])
mut("both_do_shift", DO, "dropout backward", "off-by-one mask index",
    [("dx[i] += dy[i] * m[i];", "dx[i] += dy[i] * m[(i + 1) % N];")])
EM = OPS + "embedding.c"
mut("both_emb_assign", EM, "embedding backward", "+= -> = (repeated ids lose contributions)",
    [("+ c] += dy[r * C + c]", "+ c] = dy[r * C + c]")])
mut("both_emb_idminus1", EM, "embedding backward", "row ids[r]-1 (clamped at 0)",
    [("dW[(size_t)ids[r] * C + c]", "dW[(size_t)(ids[r] ? ids[r] - 1 : 0) * C + c]")])
mut("both_emb_dyrow0", EM, "embedding backward", "dy of row 0 for every token", [("+= dy[r * C + c]", "+= dy[c]")])
mut("both_emb_stride", EM, "embedding backward", "row stride 1 instead of C",
    [("dW[(size_t)ids[r] * C + c]", "dW[(size_t)ids[r] + c]")])
mut("both_emb_lastrow", EM, "embedding backward", "last token skipped",
    [("for (size_t r = 0; r < R; r++)\n        for (int c = 0; c < C; c++) dW", "for (size_t r = 0; r < R - 1; r++)\n        for (int c = 0; c < C; c++) dW")])
mut("both_emb_reversed", EM, "embedding backward", "ids[R-1-r] (wrong token)",
    [("dW[(size_t)ids[r] * C + c]", "dW[(size_t)ids[R - 1 - r] * C + c]")])
mut("both_emb_neg", EM, "embedding backward", "sign", [("+ c] += dy[r * C + c]", "+ c] -= dy[r * C + c]")])
mut("both_emb_ids_not_copied", EM, "embedding backward (saved ids)", "the caller's ids kept, not a copy",
    [("n->saved = saved;", "n->saved = (void *)ids; (void)saved;")])
mut("both_emb_race", EM, "embedding backward", "RACE: tokens in parallel (a repeated id is a race)",
    [("    for (size_t r = 0; r < R; r++)\n        for (int c = 0; c < C; c++) dW",
      "#pragma omp parallel for schedule(static)\n    for (size_t r = 0; r < R; r++)\n        for (int c = 0; c < C; c++) dW")])
HE = OPS + "heads.c"
SPLIT = "permute_heads(dx, y->grad, y->shape[0], y->shape[2], y->shape[1], y->shape[3], false, true);"
MERGE = "permute_heads(y->grad, dx, x->shape[0], x->shape[2], x->shape[1], x->shape[3], true, true);"
mut("both_split_assign", HE, "split_heads backward", "accumulate -> copy (=)",
    [(SPLIT, SPLIT.replace("false, true", "false, false"))])
mut("both_split_dir", HE, "split_heads backward", "wrong direction (to_heads)",
    [(SPLIT, SPLIT.replace("false, true", "true, true"))])
mut("both_split_swapBH", HE, "split_heads backward", "B and H swapped",
    [(SPLIT, SPLIT.replace("y->shape[0], y->shape[2], y->shape[1]", "y->shape[1], y->shape[2], y->shape[0]"))])
mut("both_split_swapTH", HE, "split_heads backward", "T and H swapped",
    [(SPLIT, SPLIT.replace("y->shape[0], y->shape[2], y->shape[1]", "y->shape[0], y->shape[1], y->shape[2]"))])
mut("both_merge_assign", HE, "merge_heads backward", "accumulate -> copy (=)",
    [(MERGE, MERGE.replace("true, true", "true, false"))])
mut("both_merge_dir", HE, "merge_heads backward", "wrong direction", [(MERGE, MERGE.replace("true, true", "false, true"))])
mut("both_merge_swapBH", HE, "merge_heads backward", "B and H swapped",
    [(MERGE, MERGE.replace("x->shape[0], x->shape[2], x->shape[1]", "x->shape[1], x->shape[2], x->shape[0]"))])
mut("both_merge_swapTH", HE, "merge_heads backward", "T and H swapped",
    [(MERGE, MERGE.replace("x->shape[0], x->shape[2], x->shape[1]", "x->shape[0], x->shape[1], x->shape[2]"))])
mut("both_heads_kernel_neg", HE, "permute_heads (accumulate)", "sign of the accumulating copy",
    [("dst[d] = accumulate ? dst[d] + src[d]", "dst[d] = accumulate ? dst[d] - src[d]")])
# masked_fill: one select for both directions (ops/masked_fill.c's masked_select; the fast
# table's fast/masked_fill.c), the backward its `add` case with value 0. The reference's
# mutations touch that case only (`add`), so the forward stays right.
MF, MFF = OPS + "masked_fill.c", FAST + "masked_fill.c"
MF_SEL = "ag_real v = mask[mask_at(ms, i0, i1, i2, i3)] != 0 ? in[i] : value;"
MF_STEP = "masked_select(dx, n->out->grad, mask->data, 0, true, shape, ms);"
MF_FAST = "for (size_t j = 0; j < inner; j++) out_o[j] += m[j] != 0 ? in_o[j] : 0;"
MF_FSTEP = "ag_fast_masked_select(dx, n->out->grad, mask->data, 0, true, shape, ms);"
MFB = "masked_fill backward"
mut("ref_mf_inverted", MF, MFB + " (ref)", "mask inverted",
    [(MF_SEL, "ag_real v = (mask[mask_at(ms, i0, i1, i2, i3)] != 0) != add ? in[i] : value;")])
mut("ref_mf_nomask", MF, MFB + " (ref)", "mask ignored", [(MF_SEL, "ag_real v = mask[mask_at(ms, i0, i1, i2, i3)] != 0 || add ? in[i] : value;")])
mut("ref_mf_assign", MF, MFB + " (ref)", "+= -> =", [(MF_STEP, MF_STEP.replace("0, true,", "0, false,"))])
mut("ref_mf_neg", MF, MFB + " (ref)", "sign", [("out[i] = add ? out[i] + v : v;", "out[i] = add ? out[i] - v : v;")])
mut("ref_mf_fill1", MF, MFB + " (ref)", "masked entries get dy 1, not 0 (the fill value)",
    [(MF_STEP, MF_STEP.replace("mask->data, 0, true", "mask->data, 1, true"))])
mut("ref_mf_maskshift", MF, MFB + " (ref)", "off-by-one mask index (the last dim)",
    [(MF_SEL, "ag_real v = mask[mask_at(ms, i0, i1, i2, add ? (i3 + 1) % n[3] : i3)] != 0 ? in[i] : value;")])
mut("ref_mf_dyshift", MF, MFB + " (ref)", "dy of broadcast block 0 only",
    [(MF_SEL, "ag_real v = mask[mask_at(ms, i0, i1, i2, i3)] != 0 ? in[add ? mask_at(ms, i0, i1, i2, i3) : i] : value;")])
mut("ref_mf_y_for_dy", MF, MFB + " (ref)", "y passed for dy", [(MF_STEP, MF_STEP.replace("n->out->grad", "n->out->data"))])
mut("fast_mf_inverted", MFF, MFB + " (fast)", "mask inverted", [(MF_FAST, MF_FAST.replace("!= 0", "== 0"))])
mut("fast_mf_nomask", MFF, MFB + " (fast)", "mask ignored", [(MF_FAST, MF_FAST.replace("m[j] != 0 ? in_o[j] : 0", "in_o[j]"))])
mut("fast_mf_assign", MFF, MFB + " (fast)", "+= -> =", [(MF_FAST, MF_FAST.replace("out_o[j] +=", "out_o[j] ="))])
mut("fast_mf_neg", MFF, MFB + " (fast)", "sign", [(MF_FAST, MF_FAST.replace("out_o[j] +=", "out_o[j] -="))])
mut("fast_mf_fill1", MFF, MFB + " (fast)", "masked entries get dy 1, not 0",
    [(MF_FAST, MF_FAST.replace("in_o[j] : 0", "in_o[j] : 1"))])
mut("fast_mf_maskshift", MFF, MFB + " (fast)", "off-by-one mask index", [(MF_FAST, MF_FAST.replace("m[j]", "m[(j + 1) % inner]"))])
mut("fast_mf_dyshift", MFF, MFB + " (fast)", "dy of block 0 only", [(MF_FAST, MF_FAST.replace("in_o[j]", "in[j]"))])
mut("fast_mf_y_for_dy", FAST + "kernels.c", MFB + " step (fast)", "y passed for dy",
    [(MF_FSTEP, MF_FSTEP.replace("n->out->grad", "n->out->data"))])
RS = OPS + "reshape.c"
TRB = "transpose_rows(dx, y->grad, ag_numel(x) / ((size_t)M * N), N, M, true);"
mut("both_tr_MN", RS, "transpose backward", "M, N swapped in the back-transpose",
    [(TRB, TRB.replace("N, M, true", "M, N, true"))])
mut("both_tr_assign", RS, "transpose backward", "accumulate -> copy (=)", [(TRB, TRB.replace("N, M, true", "N, M, false"))])
mut("both_tr_batch1", RS, "transpose backward", "only the first batch entry",
    [(TRB, TRB.replace("ag_numel(x) / ((size_t)M * N)", "1"))])
mut("both_tr_kernel_neg", RS, "transpose backward", "sign (accumulate branch of the kernel)",
    [("if (accumulate) dst[(size_t)n * M + m] += src", "if (accumulate) dst[(size_t)n * M + m] -= src")])
mut("both_reshape_grad_not_shared", RS, "reshape backward", "the view gets its own grad buffer (dy never reaches dx)",
    [("y->grad = ag_grad(ctx, x); /* shared", "y->grad = NULL; /* shared")])

# ---------------- the tape (src/tensor/tape.c): both paths ----------------
mut("both_tape_seed_assign", TAPE, "ag_backward_from", "seed g += dy -> g = dy",
    [("for (size_t i = 0; i < N; i++) g[i] += dy[i];", "for (size_t i = 0; i < N; i++) g[i] = dy[i];")])
mut("both_tape_seed_one", TAPE, "ag_backward_from", "seed ignores dy (all ones)",
    [("for (size_t i = 0; i < N; i++) g[i] += dy[i];", "for (size_t i = 0; i < N; i++) g[i] += 1;")])
mut("both_tape_seed_neg", TAPE, "ag_backward_from", "seed sign",
    [("for (size_t i = 0; i < N; i++) g[i] += dy[i];", "for (size_t i = 0; i < N; i++) g[i] -= dy[i];")])
TAPE_LOOP = "for (ag_node *n = ctx->tape; n; n = n->prev) {"
mut("both_tape_none", TAPE, "ag_backward_from", "no node's backward runs",
    [(TAPE_LOOP, "for (ag_node *n = NULL; n; n = n->prev) {")])
mut("both_tape_skip2", TAPE, "ag_backward_from", "every other node skipped",
    [(TAPE_LOOP, "for (ag_node *n = ctx->tape; n; n = n->prev ? n->prev->prev : NULL) {")])
mut("both_tape_newest", TAPE, "ag_backward_from", "only the newest node runs",
    [(TAPE_LOOP, "for (ag_node *n = ctx->tape; n; n = NULL) {")])
mut("both_tape_oldest", TAPE, "ag_backward_from", "the oldest node is skipped",
    [(TAPE_LOOP, "for (ag_node *n = ctx->tape; n && n->prev; n = n->prev) {")])
mut("both_tape_nullcheck", TAPE, "ag_backward_from", "no skip of nodes no gradient reached (NULL grad)",
    [("if (!n->out->grad) continue;                                /* nothing flowed back here */", "")])
mut("both_tape_nullbreak", TAPE, "ag_backward_from", "stop (break) at the first node no gradient reached",
    [("if (!n->out->grad) continue;", "if (!n->out->grad) break;")])
mut("both_tape_backward_one2", TAPE, "ag_backward", "scalar seed 1 -> 2", [("const ag_real one = 1;", "const ag_real one = 2;")])
mut("both_tape_backward_oneneg", TAPE, "ag_backward", "scalar seed 1 -> -1",
    [("const ag_real one = 1;", "const ag_real one = -1;")])
mut("both_tape_grad_nozero", "src/tensor/grad.c", "ag_grad", "a fresh grad buffer not zeroed",
    [("if (t->grad) memset(t->grad, 0, bytes);", "")])
mut("both_tape_record_in0", TAPE, "ag_record", "only in[0] decides whether a node is recorded",
    [("for (int i = 0; i < n_in; i++) any = any || (in[i] && in[i]->requires_grad);", "any = in[0] && in[0]->requires_grad;")])
mut("both_tape_recycle_views", "src/tensor/recycle.c", "ag__grad_release", "a view's gradient (its input's) recycled too",
    [("if (n->op->flags & AG_OP_OUTPUT_IS_VIEW) return;", "")])
mut("fast_tape_grad_into_write", "src/tensor/fast/grad.c", "ag__grad_into (fast kernels only)", "accumulate always false (an earlier gradient is overwritten)",
    [("*accumulate = t->grad != NULL;", "*accumulate = false;")])
mut("fast_tape_grad_into_add", "src/tensor/fast/grad.c", "ag__grad_into (fast kernels only)", "accumulate always true (a fresh buffer is added to)",
    [("*accumulate = t->grad != NULL;", "*accumulate = true;")])

# ---------------- races: a threaded backward split over the wrong index ----------------
mut("ref_race_linear_db", LIO, LI + " (db) (ref)", "RACE: rows in parallel, all adding into db[o]",
    [("    for (int o = 0; o < Fout; o++) {\n        ag_real sum = 0;\n        for (int r = 0; r < R; r++) sum += dy[(size_t)r * Fout + o];\n        db[o] += sum;\n    }",
      "    for (int r = 0; r < R; r++)\n        for (int o = 0; o < Fout; o++) db[o] += dy[(size_t)r * Fout + o];")])
mut("ref_race_mm_shared_dB", MMO, MM + " (shared-B dB) (ref)", "RACE: batch entries in parallel, all into one dB",
    [(REF_SDB, "{\n#pragma omp parallel for schedule(static)\n        for (size_t b = 0; b < batch; b++)\n"
               "            ag__matmul_add(dB, A + b * M * K, dC + b * M * N, K, N, M, true, false);\n    }")])
mut("ref_race_add_db", ADO, AD + " (db) (ref)", "RACE: rows in parallel, all adding into db[j]",
    [("        for (size_t j = 0; j < nb; j++) {\n            ag_real sum = 0;\n            for (size_t i = j; i < n; i += nb) sum += dy[i];\n            db[j] += sum;\n        }",
      "        for (size_t i = 0; i < n; i += nb)\n            for (size_t j = 0; j < nb; j++) db[j] += dy[i + j];")])

PATHS = ("ref", "fast", "both")
LINE_RE = re.compile(r"^(\S+?):(\d+):([FE]):([^:]+):([^:]+):-?\d+: ?(.*)$")
BINARIES = ("test_f64", "test_f32")
# char_lm's own suites (examples/char_lm/tests/) run in its binaries, test_lm_f64 and test_lm_f32:
# a result stays under its build's name (test_f64: both binaries of double)
LM_TESTS = "examples/char_lm/tests"


def path_of(mid):
    return mid.split("_", 1)[0]


def sh(cmd, cwd, timeout=None, env=None):
    return subprocess.run(cmd, cwd=cwd, shell=True, capture_output=True, text=True, timeout=timeout, env=env)


def build(root, jobs, char_lm=True):
    """the test binaries, and build/char_lm when a suite may run it (the CLI suites: not --suites auto)"""
    r = sh("make -j%d build/test_f64 build/test_f32 build/test_lm_f64 build/test_lm_f32%s" % (jobs, " build/char_lm" if char_lm else ""), root, timeout=1200)
    return r.returncode == 0, r.stdout + r.stderr


def run_tests(root, binary, suite, timeout):
    """one build (test_f64: with test_lm_f64), whole (suite None: both binaries) or one suite:
    {failed, timeouts, msgs, secs}"""
    lm = "test_lm_" + binary[len("test_"):]
    if suite:
        return run_binary(root, lm if suite in suites_in(root, LM_TESTS) else binary, suite, timeout)
    rs = [run_binary(root, b, None, timeout) for b in (binary, lm)]
    return {k: (sum(r[k] for r in rs) if k == "secs" else [x for r in rs for x in r[k]]) for k in rs[0]}


def run_binary(root, binary, suite, timeout):
    """one binary, whole (suite None) or one suite of it: {failed, timeouts, msgs, secs}. A test
    that only ran out of time goes to timeouts, not failed: on a loaded machine that can be the
    load, not the mutation (check's per-test limit, CK_DEFAULT_TIMEOUT, is --timeout)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY="passive", CK_DEFAULT_TIMEOUT=str(timeout))
    env.pop("CK_RUN_SUITE", None)
    env.pop("CK_RUN_CASE", None)
    if suite:
        env["CK_RUN_SUITE"] = suite
    cap = timeout * 3 + 120 if suite else timeout * 20
    t0 = time.time()
    p = subprocess.Popen(["./build/" + binary], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the binary and check's forked test children
        p.communicate()
        return {"failed": [], "timeouts": ["<%s killed after %d s>" % (suite or binary, cap)], "msgs": [],
                "secs": time.time() - t0}
    failed, timeouts, msgs = [], [], []
    for line in out.splitlines():
        m = LINE_RE.match(line)
        if m:
            if "timeout expired" in m.group(6).lower():
                timeouts.append(m.group(5) + "(timeout)")
            else:
                failed.append(m.group(5) + ("(crash)" if m.group(3) == "E" else ""))
            msgs.append(line)
    if p.returncode != 0 and not failed and not timeouts:
        failed.append("<%s exit %d>" % (suite or binary, p.returncode))
    return {"failed": failed, "timeouts": timeouts, "msgs": msgs, "secs": time.time() - t0}


def run_selection(root, suites, timeout, first=False):
    """both binaries over `suites` (None: each binary whole) -> {binary: {failed, timeouts, msgs, secs}};
    first: stop at the first suite (or binary) that fails"""
    out = {}
    stop = False
    for b in BINARIES:
        rs = []
        for s in suites or [None]:
            if not stop:
                rs.append(run_tests(root, b, s, timeout))
                stop = first and bool(rs[-1]["failed"])
        out[b] = {k: [x for r in rs for x in r[k]] for k in ("failed", "timeouts", "msgs")}
        out[b]["secs"] = sum(r["secs"] for r in rs)
    return out


def apply(text, reps, mid):
    for old, new in reps:
        c = text.count(old)
        if c != 1:
            raise ValueError("%s: pattern found %d times (need exactly 1): %r" % (mid, c, old))
        text = text.replace(old, new)
    return text


def suites_for(m, choice):
    """the suites mutation m runs under --suites choice (None: whole binaries)"""
    if choice == "all":
        return None
    if choice == "auto":
        return SUITES[op_of(m[1])] if m else []
    return [s for s in choice.split(",") if s]


def known_suites(root):
    """the suites of root's tests (the library's and char_lm's), as the Makefile finds them"""
    return suites_in(root, "tests") | suites_in(root, LM_TESTS)


def suites_in(root, folder):
    """the `Suite *<name>_suite(void)` lines of folder's .c files"""
    names = set()
    tests = os.path.join(root, folder)
    for f in os.listdir(tests) if os.path.isdir(tests) else []:
        if f.endswith(".c"):
            names |= set(re.findall(r"^Suite \*([a-z0-9_]+)_suite\(void\)$", open(os.path.join(tests, f)).read(), re.M))
    return names


def summary(results):
    lines = []
    for p in PATHS:
        rs = [r for r in results if path_of(r["id"]) == p]
        if rs:
            lines.append("%-4s %3d mutations, %3d caught, %d not caught, %d only timed out, %d did not build" % (
                p, len(rs), sum(r["status"] == "caught" for r in rs), sum(r["status"] == "NOT CAUGHT" for r in rs),
                sum(r["status"] == "TIMEOUT" for r in rs), sum(r["status"] == "BUILD-ERROR" for r in rs)))
    return lines


def write_reports(out, results, base_secs, choice):
    with open(out + ".json", "w") as f:
        json.dump({"suites": choice, "baseline_secs": base_secs, "results": results}, f, indent=1)
    with open(out + ".md", "w") as f:
        f.write("Mutation testing of the backward passes (tools/mutate.py, --suites %s)\n\n```\n%s\n```\n\n" % (choice, "\n".join(summary(results))))
        f.write("| id | backward | mutation | result | failing tests (f64) | failing tests (f32) |\n|---|---|---|---|---|---|\n")
        for r in results:
            f.write("| %s | %s | %s | %s | %s | %s |\n" % (r["id"], r["fn"], r["desc"], r["status"],
                    ", ".join(sorted(set(r["f64"]))) or "-", ", ".join(sorted(set(r["f32"]))) or "-"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("only", nargs="*", help="id prefixes to run (default: all)")
    ap.add_argument("--root", default=".", help="tree to mutate (default: cwd; use a private copy)")
    ap.add_argument("--suites", default="all", help="all (whole binaries, default), auto (the op's suites), or a,b,c")
    ap.add_argument("--list", action="store_true", help="print ids, paths and suites; run nothing")
    ap.add_argument("--check", action="store_true", help="check that every pattern applies; run nothing")
    ap.add_argument("--show", metavar="ID", help="print the diff of one mutation; run nothing")
    ap.add_argument("--timeout", type=int, default=120, help="CK_DEFAULT_TIMEOUT per test (s)")
    ap.add_argument("--jobs", type=int, default=2, help="make -j (default 2)")
    ap.add_argument("--first", action="store_true",
                    help="a mutation's tests stop at the first suite that fails (faster; the report names that one)")
    ap.add_argument("--out", help="basename of the .md and .json reports (default: <root>/mutation_results)")
    ap.add_argument("--in-place", action="store_true", help="allow a root that is a git checkout")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    ids = [m[0] for m in MUTATIONS]
    assert len(ids) == len(set(ids)), "duplicate mutation ids"
    assert all(path_of(i) in PATHS for i in ids), "every id starts with ref_, fast_ or both_"
    muts = [m for m in MUTATIONS if not a.only or any(m[0].startswith(p) for p in a.only)]
    # a suite name check does not know makes CK_RUN_SUITE run nothing: refuse unknown names
    known = known_suites(root)
    named = set(s for m in muts for s in suites_for(m, "auto")) | set(suites_for(None, a.suites) or [])
    if named - known:
        print("no such suite in %s/tests or examples/char_lm/tests: %s" % (root, ", ".join(sorted(named - known))))
        return 2
    if a.list:
        for m in muts:
            print("%-34s %-48s %-48s %s" % (m[0], m[2], m[3], ",".join(suites_for(m, "auto"))))
        print(", ".join("%s %d" % (p, sum(path_of(m[0]) == p for m in muts)) for p in PATHS), "mutations")
        return 0
    if a.show:
        m = next(m for m in MUTATIONS if m[0] == a.show)
        orig = open(os.path.join(root, m[1])).read()
        sys.stdout.writelines(difflib.unified_diff(orig.splitlines(True), apply(orig, m[4], m[0]).splitlines(True), m[1], m[1]))
        return 0
    # every pattern first, so a stale pattern fails before anything runs: all of them named
    stale = []
    for m in muts:
        try:
            apply(open(os.path.join(root, m[1])).read(), m[4], m[0])
        except (ValueError, OSError) as e:
            stale.append(str(e))
    if stale:
        print("\n".join(stale))
        print("%d of %d mutations do not apply: update their patterns to the code" % (len(stale), len(muts)))
        return 2
    if a.check:
        print("%d mutations, every pattern applies exactly once" % len(muts))
        return 0
    if os.path.exists(os.path.join(root, ".git")) and not a.in_place:
        print("%s is a git checkout: mutate a private copy (see the docstring), or pass --in-place" % root)
        return 2
    out = a.out or os.path.join(root, "mutation_results")

    originals = {}

    def restore(*_):
        for path, txt in originals.items():
            with open(path, "w") as f:
                f.write(txt)
        originals.clear()
    signal.signal(signal.SIGINT, lambda *_: (restore(), sys.exit(130)))
    signal.signal(signal.SIGTERM, lambda *_: (restore(), sys.exit(143)))

    cli = a.suites != "auto"  # auto runs op suites only: no build/char_lm to relink per mutation
    ok, log = build(root, a.jobs, cli)
    if not ok:
        print(log)
        print("the unmutated tree does not build")
        return 2
    # the baseline: every suite some mutation will run must pass unmutated
    if a.suites == "all":
        base_suites = None
    else:
        base_suites = sorted({s for m in muts for s in suites_for(m, a.suites)})
    base = run_selection(root, base_suites, a.timeout)
    for b, r in base.items():
        bad = r["failed"] + r["timeouts"]
        print("baseline %s: %s in %.2fs" % (b, "FAIL " + str(bad) if bad else "PASS", r["secs"]), flush=True)
        if bad:
            return 2

    results = []
    t_start = time.time()
    try:
        for mid, path, fn, desc, reps in muts:
            t0 = time.time()
            full = os.path.join(root, path)
            orig = open(full).read()
            originals[full] = orig
            with open(full, "w") as f:
                f.write(apply(orig, reps, mid))
            ok, log = build(root, a.jobs, cli)
            if not ok:
                res = {"id": mid, "fn": fn, "desc": desc, "status": "BUILD-ERROR", "f64": [], "f32": [], "log": log[-2000:]}
            else:
                r = run_selection(root, suites_for((mid, path), a.suites), a.timeout, a.first)
                r64, r32 = r["test_f64"], r["test_f32"]
                status = ("caught" if r64["failed"] or r32["failed"] else
                          "TIMEOUT" if r64["timeouts"] or r32["timeouts"] else "NOT CAUGHT")
                res = {"id": mid, "fn": fn, "desc": desc, "status": status, "f64": r64["failed"] + r64["timeouts"],
                       "f32": r32["failed"] + r32["timeouts"], "msgs": r64["msgs"][:3] + r32["msgs"][:3]}
            restore()
            res["secs"] = round(time.time() - t0, 1)
            results.append(res)
            print("%-34s %-11s %5.1fs f64=%s f32=%s" % (mid, res["status"], res["secs"], ",".join(sorted(set(res["f64"]))) or "-",
                                                         ",".join(sorted(set(res["f32"]))) or "-"), flush=True)
    finally:
        restore()
        build(root, a.jobs, cli)

    write_reports(out, results, {b: r["secs"] for b, r in base.items()}, a.suites)
    print("\n".join(summary(results)))
    print("%d mutations in %.0f s; report in %s.md" % (len(results), time.time() - t_start, out))
    n_bad = sum(r["status"] != "caught" for r in results)
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
