#!/usr/bin/env python3
"""mutate.py -- mutation testing of the backward passes: does the test suite catch a broken backward?

Each mutation is a list of exact (old -> new) text replacements in one source file; `old` must
occur exactly once in the file (the script refuses otherwise, so a mutation never silently
applies to the wrong spot when the code changes). For every mutation, one at a time:
    save the file, apply the replacements, `make build/test_f64 build/test_f32 LM_LIB_SRC=`,
    run both test binaries, record which tests failed, restore the file.
A mutation is CAUGHT when at least one test of either binary fails (F) or errors (E: crash,
timeout) -- or when the binary exits non-zero. After the loop the tree is rebuilt unmodified.

It edits the tree it runs in, so run it in a private copy, never in a shared checkout:
    rm -rf /tmp/mut && mkdir /tmp/mut && cp -r Makefile src tests /tmp/mut && cd /tmp/mut
    python3 mutate.py                 # all mutations, writes mutation_results.md / .json
    python3 mutate.py --list          # ids and descriptions only
    python3 mutate.py mm_ lin_1       # only ids starting with these prefixes
    python3 mutate.py --show ln_dx_no_gmean   # print the diff of one mutation, run nothing
Files are restored on exit, also on Ctrl-C.
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


class ALT(list):
    """Alternative replacement lists for code that exists in several versions: the first variant
    whose every `old` occurs exactly once is applied; none applicable is an error."""
    def __init__(self, *variants):
        super().__init__(variants)


class OPT(ALT):
    """Like ALT, but the mutation only exists in some versions of the code (e.g. a race that needs
    an OpenMP loop): when no variant applies, the mutation is skipped ("n/a"), not an error."""

# (id, file, backward under test, description, [(old, new), ...])
MUTATIONS = [
    # ---------------- matmul ----------------
    ("mm_bat_dA_transB", OPS + "matmul.c", "matmul_backward (batched dA)", "dA = dC @ B (transpose flag dropped)",
     [("B->data + b * K * N, M, K, N, false, true, 1)", "B->data + b * K * N, M, K, N, false, false, 1)")]),
    ("mm_bat_dA_beta0", OPS + "matmul.c", "matmul_backward (batched dA)", "gemm beta 1 -> 0 (= instead of +=)",
     [("B->data + b * K * N, M, K, N, false, true, 1)", "B->data + b * K * N, M, K, N, false, true, 0)")]),
    ("mm_bat_dA_Bstride", OPS + "matmul.c", "matmul_backward (batched dA)", "always B of batch 0 (wrong stride)",
     [("B->data + b * K * N, M, K, N, false, true, 1)", "B->data, M, K, N, false, true, 1)")]),
    ("mm_bat_dA_x2", OPS + "matmul.c", "matmul_backward (batched dA)", "dA accumulated twice (x2)",
     [("gemm(dA + b * M * K, dC + b * M * N, B->data + b * K * N, M, K, N, false, true, 1);",
       "{ gemm(dA + b * M * K, dC + b * M * N, B->data + b * K * N, M, K, N, false, true, 1);"
       " gemm(dA + b * M * K, dC + b * M * N, B->data + b * K * N, M, K, N, false, true, 1); }")]),
    ("mm_bat_dA_lastbatch", OPS + "matmul.c", "matmul_backward (batched dA)", "last batch entry skipped",
     [("for (size_t b = 0; b < batch; b++) /* dA_b", "for (size_t b = 0; b < batch - 1; b++) /* dA_b")]),
    ("mm_bat_dB_transA", OPS + "matmul.c", "matmul_backward (batched dB)", "dB = A @ dC (transpose flag dropped)",
     [("dC + b * M * N, K, N, M, true, false, 1)", "dC + b * M * N, K, N, M, false, false, 1)")]),
    ("mm_bat_dB_beta0", OPS + "matmul.c", "matmul_backward (batched dB)", "gemm beta 1 -> 0",
     [("dC + b * M * N, K, N, M, true, false, 1)", "dC + b * M * N, K, N, M, true, false, 0)")]),
    ("mm_bat_dB_Astride", OPS + "matmul.c", "matmul_backward (batched dB)", "always A of batch 0",
     [("A->data + b * M * K, dC + b * M * N, K, N, M", "A->data, dC + b * M * N, K, N, M")]),
    ("mm_bat_dB_dCstride", OPS + "matmul.c", "matmul_backward (batched dB)", "always dC of batch 0",
     [("A->data + b * M * K, dC + b * M * N, K, N, M", "A->data + b * M * K, dC, K, N, M")]),
    ("mm_bat_dB_lastbatch", OPS + "matmul.c", "matmul_backward (batched dB)", "last batch entry skipped",
     [("for (size_t b = 0; b < batch; b++) /* dB_b", "for (size_t b = 0; b < batch - 1; b++) /* dB_b")]),
    ("mm_shr_dA_transB", OPS + "matmul.c", "matmul_backward (shared-B dA)", "dA = dC @ B (flag dropped)",
     [("(int)(batch * M), K, N, false, true, 1)", "(int)(batch * M), K, N, false, false, 1)")]),
    ("mm_shr_dA_beta0", OPS + "matmul.c", "matmul_backward (shared-B dA)", "gemm beta 1 -> 0",
     [("(int)(batch * M), K, N, false, true, 1)", "(int)(batch * M), K, N, false, true, 0)")]),
    ("mm_shr_dA_firstbatch", OPS + "matmul.c", "matmul_backward (shared-B dA)", "rows M instead of batch*M",
     [("(int)(batch * M), K, N, false, true, 1)", "M, K, N, false, true, 1)")]),
    ("mm_shr_dB_transA", OPS + "matmul.c", "matmul_backward (shared-B dB)", "dB = A @ dC (flag dropped)",
     [("K, N, (int)(batch * M), true, false, 1)", "K, N, (int)(batch * M), false, false, 1)")]),
    ("mm_shr_dB_beta0", OPS + "matmul.c", "matmul_backward (shared-B dB)", "gemm beta 1 -> 0",
     [("K, N, (int)(batch * M), true, false, 1)", "K, N, (int)(batch * M), true, false, 0)")]),
    ("mm_shr_dB_firstbatch", OPS + "matmul.c", "matmul_backward (shared-B dB)", "sum over batch dropped (K = M)",
     [("K, N, (int)(batch * M), true, false, 1)", "K, N, M, true, false, 1)")]),
    ("mm_skip_dA", OPS + "matmul.c", "matmul_backward", "no dA at all",
     [("if (A->requires_grad) {", "if (0) {")]),
    ("mm_skip_dB", OPS + "matmul.c", "matmul_backward", "no dB at all",
     [("if (B->requires_grad) {", "if (0) {")]),
    ("mm_shared_detect", OPS + "matmul.c", "matmul_backward", "batched B taken for shared (B->ndim test dropped)",
     [("bool shared_b = B->ndim == 2 && A->ndim > 2;", "bool shared_b = A->ndim > 2;")]),
    # ---------------- linear ----------------
    ("lin_dx_beta0", OPS + "linear.c", "linear_backward (dx)", "gemm beta 1 -> 0",
     [("W->data, Fin, 1, dx, Fin", "W->data, Fin, 0, dx, Fin")]),
    ("lin_dx_transW", OPS + "linear.c", "linear_backward (dx)", "dx = dy @ W^T (W read transposed)",
     ALT([("CblasNoTrans, CblasNoTrans, R, Fin, Fout, 1, dy, Fout, W->data, Fin,",
           "CblasNoTrans, CblasTrans, R, Fin, Fout, 1, dy, Fout, W->data, Fout,")],
         [("ag_gemm(false, false, R, Fin, Fout, 1, dy, Fout, W->data, Fin,",
           "ag_gemm(false, true, R, Fin, Fout, 1, dy, Fout, W->data, Fout,")])),
    ("lin_dx_x2", OPS + "linear.c", "linear_backward (dx)", "alpha 1 -> 2",
     [("R, Fin, Fout, 1, dy", "R, Fin, Fout, 2, dy")]),
    ("lin_dx_neg", OPS + "linear.c", "linear_backward (dx)", "alpha 1 -> -1 (sign)",
     [("R, Fin, Fout, 1, dy", "R, Fin, Fout, -1, dy")]),
    ("lin_dx_skip", OPS + "linear.c", "linear_backward (dx)", "no dx",
     [("if (x->requires_grad) { /* dx += dy @ W */", "if (0) {")]),
    ("lin_dW_beta0", OPS + "linear.c", "linear_backward (dW)", "gemm beta 1 -> 0",
     [("x->data, Fin, 1, dW, Fin", "x->data, Fin, 0, dW, Fin")]),
    ("lin_dW_transdy", OPS + "linear.c", "linear_backward (dW)", "dy not transposed (read [out,R])",
     ALT([("CblasTrans, CblasNoTrans, Fout, Fin, R, 1, dy, Fout,", "CblasNoTrans, CblasNoTrans, Fout, Fin, R, 1, dy, R,")],
         [("ag_gemm(true, false, Fout, Fin, R, 1, dy, Fout,", "ag_gemm(false, false, Fout, Fin, R, 1, dy, R,")])),
    ("lin_dW_lastrow", OPS + "linear.c", "linear_backward (dW)", "last row of the batch dropped (R-1)",
     [("Fout, Fin, R, 1, dy", "Fout, Fin, R - 1, 1, dy")]),
    ("lin_dW_half", OPS + "linear.c", "linear_backward (dW)", "alpha 1 -> 0.5",
     [("Fout, Fin, R, 1, dy", "Fout, Fin, R, 0.5, dy")]),
    ("lin_db_skip", OPS + "linear.c", "linear_backward (db)", "bias grad dropped",
     [("sum_rows(db, dy, (size_t)R, Fout);", "(void)db;")]),
    ("lin_db_firstrow", OPS + "linear.c", "linear_backward (db)", "bias grad from first row only",
     [("sum_rows(db, dy, (size_t)R, Fout);", "sum_rows(db, dy, 1, Fout);")]),
    ("lin_db_neg", OPS + "linear.c", "linear_backward (db)", "bias grad sign flipped",
     [("db[o] += dy[r * Fout + o]", "db[o] -= dy[r * Fout + o]")]),
    ("lin_db_assign", OPS + "linear.c", "linear_backward (db)", "+= -> = (last row wins)",
     [("db[o] += dy[r * Fout + o]", "db[o] = dy[r * Fout + o]")]),
    # ---------------- add ----------------
    ("add_da_assign", OPS + "add.c", "add_backward (da)", "+= -> =", [("i++) da[i] += dy[i]", "i++) da[i] = dy[i]")]),
    ("add_da_neg", OPS + "add.c", "add_backward (da)", "sign", [("i++) da[i] += dy[i]", "i++) da[i] -= dy[i]")]),
    ("add_da_x2", OPS + "add.c", "add_backward (da)", "x2", [("i++) da[i] += dy[i]", "i++) da[i] += 2 * dy[i]")]),
    ("add_da_skip", OPS + "add.c", "add_backward (da)", "da dropped", [("i++) da[i] += dy[i];", "i++) ;")]),
    ("add_db_assign", OPS + "add.c", "add_backward (db broadcast)", "+= -> = (last broadcast block wins)",
     [("db[j] += dy[i + j]", "db[j] = dy[i + j]")]),
    ("add_db_firstblock", OPS + "add.c", "add_backward (db broadcast)", "dy[j]: no sum over the broadcast dims",
     [("db[j] += dy[i + j]", "db[j] += dy[j]")]),
    ("add_db_half", OPS + "add.c", "add_backward (db broadcast)", "x0.5", [("db[j] += dy[i + j]", "db[j] += 0.5 * dy[i + j]")]),
    ("add_db_shift", OPS + "add.c", "add_backward (db broadcast)", "off-by-one index",
     [("db[j] += dy[i + j]", "db[j] += dy[(i + j + 1) % N]")]),
    ("add_db_skip", OPS + "add.c", "add_backward (db broadcast)", "db dropped", [("db[j] += dy[i + j];", ";")]),
    # ---------------- scale ----------------
    ("scale_nos", OPS + "scale.c", "scale_backward", "s dropped", [("dx[i] += s * dy[i]", "dx[i] += dy[i]")]),
    ("scale_neg", OPS + "scale.c", "scale_backward", "sign", [("dx[i] += s * dy[i]", "dx[i] -= s * dy[i]")]),
    ("scale_s2", OPS + "scale.c", "scale_backward", "s^2", [("dx[i] += s * dy[i]", "dx[i] += s * s * dy[i]")]),
    ("scale_inv", OPS + "scale.c", "scale_backward", "1/s", [("dx[i] += s * dy[i]", "dx[i] += dy[i] / s")]),
    ("scale_assign", OPS + "scale.c", "scale_backward", "+= -> =", [("dx[i] += s * dy[i]", "dx[i] = s * dy[i]")]),
    # ---------------- softmax ----------------
    ("sm_nodot", OPS + "softmax.c", "softmax_backward_rows", "the - dot term dropped",
     [("yr[j] * (dyr[j] - dot)", "yr[j] * dyr[j]")]),
    ("sm_plusdot", OPS + "softmax.c", "softmax_backward_rows", "- dot -> + dot",
     [("yr[j] * (dyr[j] - dot)", "yr[j] * (dyr[j] + dot)")]),
    ("sm_2dot", OPS + "softmax.c", "softmax_backward_rows", "dot x2",
     [("yr[j] * (dyr[j] - dot)", "yr[j] * (dyr[j] - 2 * dot)")]),
    ("sm_dot_noy", OPS + "softmax.c", "softmax_backward_rows", "dot = sum dy (y dropped)",
     [("dot += dyr[j] * yr[j]", "dot += dyr[j]")]),
    ("sm_noy", OPS + "softmax.c", "softmax_backward_rows", "outer y factor dropped",
     [("dxr[j] += yr[j] * (dyr[j] - dot)", "dxr[j] += (dyr[j] - dot)")]),
    ("sm_assign", OPS + "softmax.c", "softmax_backward_rows", "+= -> =",
     [("dxr[j] += yr[j]", "dxr[j] = yr[j]")]),
    ("sm_neg", OPS + "softmax.c", "softmax_backward_rows", "sign", [("dxr[j] += yr[j]", "dxr[j] -= yr[j]")]),
    ("sm_dyrow0", OPS + "softmax.c", "softmax_backward_rows", "dy of row 0 for every row (wrong stride)",
     [("*dyr = dy + r * N;", "*dyr = dy;")]),
    ("sm_dot_noreset", OPS + "softmax.c", "softmax_backward_rows", "dot not reset per row",
     ALT([("#pragma omp parallel for schedule(static)\n    for (size_t r = 0; r < R; r++) {\n        const ag_real *yr = y + r * N, *dyr",
           "    ag_real dot = 0;\n#pragma omp parallel for schedule(static)\n    for (size_t r = 0; r < R; r++) {\n        const ag_real *yr = y + r * N, *dyr"),
          ("        ag_real dot = 0;\n        for (int j = 0; j < N; j++) dot +=",
           "        for (int j = 0; j < N; j++) dot +=")],
         [("    for (size_t r = 0; r < R; r++) {\n        const ag_real *yr = y + r * N, *dyr",
           "    ag_real dot = 0;\n    for (size_t r = 0; r < R; r++) {\n        const ag_real *yr = y + r * N, *dyr"),
          ("        ag_real dot = 0;\n        for (int j = 0; j < N; j++) dot +=",
           "        for (int j = 0; j < N; j++) dot +=")])),
    # ---------------- masked_fill ----------------
    ("mf_inverted", OPS + "masked_fill.c", "masked_fill_backward", "mask inverted",
     [("if (mask->data[j] != 0) dx", "if (mask->data[j] == 0) dx")]),
    ("mf_nomask", OPS + "masked_fill.c", "masked_fill_backward", "mask ignored",
     [("if (mask->data[j] != 0) dx", "dx")]),
    ("mf_assign", OPS + "masked_fill.c", "masked_fill_backward", "+= -> =",
     [("dx[i + j] += dy[i + j]", "dx[i + j] = dy[i + j]")]),
    ("mf_neg", OPS + "masked_fill.c", "masked_fill_backward", "sign",
     [("dx[i + j] += dy[i + j]", "dx[i + j] -= dy[i + j]")]),
    ("mf_maskshift", OPS + "masked_fill.c", "masked_fill_backward", "off-by-one mask index",
     [("if (mask->data[j] != 0) dx", "if (mask->data[(j + 1) % nm] != 0) dx")]),
    ("mf_dyshift", OPS + "masked_fill.c", "masked_fill_backward", "dy of broadcast block 0 only",
     [("dx[i + j] += dy[i + j]", "dx[i + j] += dy[j]")]),
    # ---------------- layernorm ----------------
    ("ln_dx_no_gmean", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "- g_mean dropped",
     [("- g_mean - xhat * gx_mean", "- xhat * gx_mean")]),
    ("ln_dx_no_gxmean", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "- xhat*gx_mean dropped",
     [("- g_mean - xhat * gx_mean", "- g_mean")]),
    ("ln_dx_plus_gmean", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "- g_mean -> + g_mean",
     [("- g_mean - xhat * gx_mean", "+ g_mean - xhat * gx_mean")]),
    ("ln_dx_gx_noxhat", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "xhat*gx_mean -> gx_mean",
     [("- g_mean - xhat * gx_mean", "- g_mean - gx_mean")]),
    ("ln_dx_gx_x2", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "xhat*gx_mean x2",
     [("- g_mean - xhat * gx_mean", "- g_mean - 2 * xhat * gx_mean")]),
    ("ln_dx_norstd", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "rstd factor dropped",
     [("dx[r * C + c] += rstd * (", "dx[r * C + c] += (")]),
    ("ln_dx_rstd2", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "rstd -> rstd^2",
     [("dx[r * C + c] += rstd * (", "dx[r * C + c] += rstd * rstd * (")]),
    ("ln_dx_now", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "w dropped from the main term",
     [("(dyr[c] * w[c] - g_mean", "(dyr[c] - g_mean")]),
    ("ln_g_now", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "g = dy (w dropped in both means)",
     [("ag_real g = dyr[c] * w[c];", "ag_real g = dyr[c];")]),
    ("ln_gx_noxhat", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "gx_mean = mean(g) (xhat dropped)",
     [("gx_mean += g * xhat;", "gx_mean += g;")]),
    ("ln_gmean_Cm1", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "g_mean /= C-1",
     [("g_mean /= C;", "g_mean /= C - 1;")]),
    ("ln_gxmean_noC", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "gx_mean not divided by C",
     [("gx_mean /= C;", ";")]),
    ("ln_dx_nomean", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "xhat without - mean in 2nd loop",
     ALT([("ag_real xhat = (xr[c] - mean) * rstd;\n            if (dx)", "ag_real xhat = xr[c] * rstd;\n            if (dx)")],
         [("ag_real xhat = (xr[c] - mean) * rstd;\n                dx[", "ag_real xhat = xr[c] * rstd;\n                dx[")])),
    ("ln_dx_assign", OPS + "layernorm.c", "layernorm_backward_rows (dx)", "+= -> =",
     [("dx[r * C + c] += rstd", "dx[r * C + c] = rstd")]),
    ("ln_dw_noxhat", OPS + "layernorm.c", "layernorm_backward_rows (dw)", "dw += dy (xhat dropped)",
     ALT([("dw[c] += dyr[c] * xhat;", "dw[c] += dyr[c];")],
         [("sw += dy[r * C + c] * xhat;", "sw += dy[r * C + c];")])),
    ("ln_dw_timesw", OPS + "layernorm.c", "layernorm_backward_rows (dw)", "dw += dy*xhat*w",
     ALT([("dw[c] += dyr[c] * xhat;", "dw[c] += dyr[c] * xhat * w[c];")],
         [("sw += dy[r * C + c] * xhat;", "sw += dy[r * C + c] * xhat * w[c];")])),
    ("ln_dw_assign", OPS + "layernorm.c", "layernorm_backward_rows (dw)", "+= -> =",
     ALT([("dw[c] += dyr[c] * xhat;", "dw[c] = dyr[c] * xhat;")],
         [("if (dw) dw[c] += sw;", "if (dw) dw[c] = sw;")])),
    ("ln_dw_neg", OPS + "layernorm.c", "layernorm_backward_rows (dw)", "sign",
     ALT([("dw[c] += dyr[c] * xhat;", "dw[c] -= dyr[c] * xhat;")],
         [("if (dw) dw[c] += sw;", "if (dw) dw[c] -= sw;")])),
    ("ln_dw_skip", OPS + "layernorm.c", "layernorm_backward_rows (dw)", "dw dropped",
     ALT([("if (dw) dw[c] += dyr[c] * xhat;", ";")],
         [("if (dw) dw[c] += sw;", ";")])),
    ("ln_db_skip", OPS + "layernorm.c", "layernorm_backward_rows (db)", "db dropped",
     ALT([("if (db) db[c] += dyr[c];", ";")],
         [("if (db) db[c] += sb;", ";")])),
    ("ln_db_assign", OPS + "layernorm.c", "layernorm_backward_rows (db)", "+= -> =",
     ALT([("if (db) db[c] += dyr[c];", "if (db) db[c] = dyr[c];")],
         [("if (db) db[c] += sb;", "if (db) db[c] = sb;")])),
    ("ln_db_x2", OPS + "layernorm.c", "layernorm_backward_rows (db)", "x2",
     ALT([("if (db) db[c] += dyr[c];", "if (db) db[c] += 2 * dyr[c];")],
         [("if (db) db[c] += sb;", "if (db) db[c] += 2 * sb;")])),
    ("ln_db_timesw", OPS + "layernorm.c", "layernorm_backward_rows (db)", "db += dy*w",
     ALT([("if (db) db[c] += dyr[c];", "if (db) db[c] += dyr[c] * w[c];")],
         [("sb += dy[r * C + c];", "sb += dy[r * C + c] * w[c];")])),
    # ---------------- gelu ----------------
    ("gelu_no2nd", OPS + "gelu.c", "gelu_backward", "second (tanh') term dropped",
     [("ag_real local = half * (1 + th) + half * v * (1 - th * th) * GELU_K * (1 + 3 * GELU_A * v * v);",
       "ag_real local = half * (1 + th);")]),
    ("gelu_no1st", OPS + "gelu.c", "gelu_backward", "first term dropped",
     [("ag_real local = half * (1 + th) + ", "ag_real local = ")]),
    ("gelu_3a", OPS + "gelu.c", "gelu_backward", "3*A -> A", [("(1 + 3 * GELU_A * v * v)", "(1 + GELU_A * v * v)")]),
    ("gelu_sech", OPS + "gelu.c", "gelu_backward", "1 - th^2 -> 1 - th", [("(1 - th * th)", "(1 - th)")]),
    ("gelu_2nd_x2", OPS + "gelu.c", "gelu_backward", "second term x2", [("+ half * v * (1 - th * th)", "+ v * (1 - th * th)")]),
    ("gelu_noK", OPS + "gelu.c", "gelu_backward", "GELU_K dropped in the second term",
     [("* GELU_K * (1 + 3", "* (1 + 3")]),
    ("gelu_2nd_neg", OPS + "gelu.c", "gelu_backward", "second term sign", [("+ half * v * (1 - th * th)", "- half * v * (1 - th * th)")]),
    ("gelu_1st_neg", OPS + "gelu.c", "gelu_backward", "1 + th -> 1 - th", [("half * (1 + th) +", "half * (1 - th) +")]),
    ("gelu_u_nocubic", OPS + "gelu.c", "gelu_backward", "u without the cubic term (backward only)",
     [("ag_real th = AG_TANH(GELU_K * (v + GELU_A * v * v * v));", "ag_real th = AG_TANH(GELU_K * v);")]),
    ("gelu_assign", OPS + "gelu.c", "gelu_backward", "+= -> =", [("dx[i] += dy[i] * local", "dx[i] = dy[i] * local")]),
    # ---------------- embedding ----------------
    ("emb_assign", OPS + "embedding.c", "embedding_backward", "+= -> = (repeated ids lose contributions)",
     [("+ c] += dy[r * C + c]", "+ c] = dy[r * C + c]")]),
    ("emb_idplus1", OPS + "embedding.c", "embedding_backward", "row ids[r]+1 (mod V)",
     [("dW[(size_t)ids[r] * C + c]", "dW[(size_t)((ids[r] + 1) % W->shape[0]) * C + c]")]),
    ("emb_dyrow0", OPS + "embedding.c", "embedding_backward", "dy of row 0 for every token",
     [("+= dy[r * C + c]", "+= dy[c]")]),
    ("emb_stride", OPS + "embedding.c", "embedding_backward", "row stride 1 instead of C",
     [("dW[(size_t)ids[r] * C + c]", "dW[(size_t)ids[r] + c]")]),
    ("emb_lastrow", OPS + "embedding.c", "embedding_backward", "last token skipped",
     [("for (size_t r = 0; r < R; r++)\n        for (int c = 0; c < C; c++) dW", "for (size_t r = 0; r + 1 < R; r++)\n        for (int c = 0; c < C; c++) dW")]),
    ("emb_reversed", OPS + "embedding.c", "embedding_backward", "ids[R-1-r] (wrong token)",
     [("dW[(size_t)ids[r] * C + c]", "dW[(size_t)ids[R - 1 - r] * C + c]")]),
    ("emb_neg", OPS + "embedding.c", "embedding_backward", "sign", [("+ c] += dy[r * C + c]", "+ c] -= dy[r * C + c]")]),
    # ---------------- cross entropy ----------------
    ("ce_timesR", OPS + "cross_entropy.c", "cross_entropy_backward", "scale by R instead of 1/R",
     [("n->out->grad[0] / (ag_real)R", "n->out->grad[0] * (ag_real)R")]),
    ("ce_noR", OPS + "cross_entropy.c", "cross_entropy_backward", "1/R dropped (sum, not mean)",
     [("n->out->grad[0] / (ag_real)R", "n->out->grad[0]")]),
    ("ce_divV", OPS + "cross_entropy.c", "cross_entropy_backward", "divide by V instead of R",
     [("n->out->grad[0] / (ag_real)R", "n->out->grad[0] / (ag_real)V")]),
    ("ce_noupstream", OPS + "cross_entropy.c", "cross_entropy_backward", "upstream dL ignored (assumes 1)",
     [("n->out->grad[0] / (ag_real)R", "1 / (ag_real)R")]),
    ("ce_noonehot", OPS + "cross_entropy.c", "cross_entropy_backward", "one-hot term dropped",
     [("(p[j] - (j == s->targets[r]))", "p[j]")]),
    ("ce_neg", OPS + "cross_entropy.c", "cross_entropy_backward", "sign",
     [("(p[j] - (j == s->targets[r]))", "((j == s->targets[r]) - p[j])")]),
    ("ce_target0", OPS + "cross_entropy.c", "cross_entropy_backward", "target of row 0 for every row",
     [("(j == s->targets[r])", "(j == s->targets[0])")]),
    ("ce_probsrow0", OPS + "cross_entropy.c", "cross_entropy_backward", "probs of row 0 for every row",
     [("const ag_real *p = s->probs + r * V;", "const ag_real *p = s->probs;")]),
    ("ce_assign", OPS + "cross_entropy.c", "cross_entropy_backward", "+= -> =",
     [("dz[r * V + j] += scale", "dz[r * V + j] = scale")]),
    # ---------------- dropout ----------------
    ("do_nomask", OPS + "dropout.c", "dropout_backward", "mask ignored", [("dx[i] += dy[i] * m[i];", "dx[i] += dy[i];")]),
    ("do_noscale", OPS + "dropout.c", "dropout_backward", "1/(1-p) dropped",
     [("dx[i] += dy[i] * m[i];", "dx[i] += dy[i] * (m[i] != 0);")]),
    ("do_scale2", OPS + "dropout.c", "dropout_backward", "scale applied twice",
     [("dx[i] += dy[i] * m[i];", "dx[i] += dy[i] * m[i] * m[i];")]),
    ("do_assign", OPS + "dropout.c", "dropout_backward", "+= -> =", [("dx[i] += dy[i] * m[i];", "dx[i] = dy[i] * m[i];")]),
    ("do_shift", OPS + "dropout.c", "dropout_backward", "off-by-one mask index",
     [("dx[i] += dy[i] * m[i];", "dx[i] += dy[i] * m[(i + 1) % N];")]),
    # ---------------- heads ----------------
    ("split_assign", OPS + "heads.c", "split_heads_backward", "accumulate -> copy (=)",
     [("y->shape[3], false, true);", "y->shape[3], false, false);")]),
    ("split_dir", OPS + "heads.c", "split_heads_backward", "wrong direction (to_heads)",
     [("y->shape[3], false, true);", "y->shape[3], true, true);")]),
    ("split_swapBH", OPS + "heads.c", "split_heads_backward", "B and H swapped",
     [("permute_heads(dx, y->grad, y->shape[0], y->shape[2], y->shape[1], y->shape[3]",
       "permute_heads(dx, y->grad, y->shape[1], y->shape[2], y->shape[0], y->shape[3]")]),
    ("split_swapTH", OPS + "heads.c", "split_heads_backward", "T and H swapped",
     [("permute_heads(dx, y->grad, y->shape[0], y->shape[2], y->shape[1], y->shape[3]",
       "permute_heads(dx, y->grad, y->shape[0], y->shape[1], y->shape[2], y->shape[3]")]),
    ("merge_assign", OPS + "heads.c", "merge_heads_backward", "accumulate -> copy (=)",
     [("x->shape[3], true, true);", "x->shape[3], true, false);")]),
    ("merge_dir", OPS + "heads.c", "merge_heads_backward", "wrong direction",
     [("x->shape[3], true, true);", "x->shape[3], false, true);")]),
    ("merge_swapBH", OPS + "heads.c", "merge_heads_backward", "B and H swapped",
     [("permute_heads(y->grad, dx, x->shape[0], x->shape[2], x->shape[1], x->shape[3]",
       "permute_heads(y->grad, dx, x->shape[1], x->shape[2], x->shape[0], x->shape[3]")]),
    ("merge_swapTH", OPS + "heads.c", "merge_heads_backward", "T and H swapped",
     [("permute_heads(y->grad, dx, x->shape[0], x->shape[2], x->shape[1], x->shape[3]",
       "permute_heads(y->grad, dx, x->shape[0], x->shape[1], x->shape[2], x->shape[3]")]),
    # ---------------- transpose ----------------
    ("tr_MN", OPS + "reshape.c", "transpose_backward", "M, N swapped in the back-transpose",
     [("ag_numel(x) / ((size_t)M * N), N, M, true);", "ag_numel(x) / ((size_t)M * N), M, N, true);")]),
    ("tr_assign", OPS + "reshape.c", "transpose_backward", "accumulate -> copy (=)",
     [("ag_numel(x) / ((size_t)M * N), N, M, true);", "ag_numel(x) / ((size_t)M * N), N, M, false);")]),
    ("tr_batch1", OPS + "reshape.c", "transpose_backward", "only the first batch entry",
     [("ag_numel(x) / ((size_t)M * N), N, M, true);", "1, N, M, true);")]),
    ("tr_kernel_neg", OPS + "reshape.c", "transpose_backward", "sign (accumulate branch of the kernel)",
     [("if (accumulate) dst[(size_t)n * M + m] += src", "if (accumulate) dst[(size_t)n * M + m] -= src")]),
    # ---------------- ctx.c: the tape ----------------
    ("ctx_seed_assign", "src/tensor/ctx.c", "ag_backward_from", "seed g += dy -> g = dy",
     [("for (size_t i = 0; i < n; i++) g[i] += dy[i];", "for (size_t i = 0; i < n; i++) g[i] = dy[i];")]),
    ("ctx_seed_one", "src/tensor/ctx.c", "ag_backward_from", "seed ignores dy (all ones)",
     [("for (size_t i = 0; i < n; i++) g[i] += dy[i];", "for (size_t i = 0; i < n; i++) g[i] += 1;")]),
    ("ctx_seed_neg", "src/tensor/ctx.c", "ag_backward_from", "seed sign",
     [("for (size_t i = 0; i < n; i++) g[i] += dy[i];", "for (size_t i = 0; i < n; i++) g[i] -= dy[i];")]),
    ("ctx_no_tape", "src/tensor/ctx.c", "ag_backward_from", "run_tape never called",
     [("return run_tape(ctx);", "return AG_OK;")]),
    ("ctx_backward_one2", "src/tensor/ctx.c", "ag_backward", "scalar seed 1 -> 2",
     [("const ag_real one = 1;", "const ag_real one = 2;")]),
    ("ctx_backward_oneneg", "src/tensor/ctx.c", "ag_backward", "scalar seed 1 -> -1",
     [("const ag_real one = 1;", "const ag_real one = -1;")]),
    ("ctx_tape_skip2", "src/tensor/ctx.c", "run_tape", "every other node skipped",
     [("for (ag_node *n = ctx->tape; n; n = n->prev) {", "for (ag_node *n = ctx->tape; n; n = n->prev ? n->prev->prev : NULL) {")]),
    ("ctx_tape_newest", "src/tensor/ctx.c", "run_tape", "only the newest node runs",
     [("for (ag_node *n = ctx->tape; n; n = n->prev) {", "for (ag_node *n = ctx->tape; n; n = NULL) {")]),
    ("ctx_tape_oldest", "src/tensor/ctx.c", "run_tape", "the oldest node is skipped",
     [("for (ag_node *n = ctx->tape; n; n = n->prev) {", "for (ag_node *n = ctx->tape; n && n->prev; n = n->prev) {")]),
    ("ctx_tape_nullcheck", "src/tensor/ctx.c", "run_tape", "no skip of nodes no gradient reached (NULL grad)",
     [("if (!n->out->grad) continue; /* nothing flowed back into this output */", "")]),
    ("ctx_tape_nullbreak", "src/tensor/ctx.c", "run_tape", "stop (break) at the first node no gradient reached",
     [("if (!n->out->grad) continue; /* nothing flowed back into this output */", "if (!n->out->grad) break;")]),
    ("ctx_grad_nozero", "src/tensor/ctx.c", "ag_grad (extra)", "fresh grad buffer not zeroed",
     [("if (t->grad) memset(t->grad, 0, n * sizeof(ag_real));", "")]),
    ("ctx_record_in0", "src/tensor/ctx.c", "ag_record (extra)", "only in[0] decides whether a node is recorded",
     [("for (int i = 0; i < n_in; i++) any = any || (in[i] && in[i]->requires_grad);", "any = in[0] && in[0]->requires_grad;")]),
    # ---------------- OpenMP versions only (OPT: n/a on serial code) ----------------
    ("ln_dwdb_row0rstd", OPS + "layernorm.c", "layernorm_backward_rows (dw, column loop)", "rstd of row 0 for every row",
     OPT([("ag_real xhat = (x[r * C + c] - stats[2 * r]) * stats[2 * r + 1];", "ag_real xhat = (x[r * C + c] - stats[2 * r]) * stats[1];")])),
    ("race_add_db", OPS + "add.c", "add_backward (db broadcast)", "RACE: rows in parallel, all adding into db[j]",
     OPT([("#pragma omp parallel for schedule(static)\n        for (size_t j = 0; j < nb; j++)\n            for (size_t i = 0; i < N; i += nb) db[j] += dy[i + j];",
           "#pragma omp parallel for schedule(static)\n        for (size_t i = 0; i < N; i += nb)\n            for (size_t j = 0; j < nb; j++) db[j] += dy[i + j];")])),
    ("race_linear_db", OPS + "linear.c", "linear_backward (db)", "RACE: rows in parallel, all adding into db[o]",
     OPT([("#pragma omp parallel for schedule(static)\n    for (int o = 0; o < Fout; o++)\n        for (size_t r = 0; r < R; r++) db[o] += dy[r * Fout + o];",
           "#pragma omp parallel for schedule(static)\n    for (size_t r = 0; r < R; r++)\n        for (int o = 0; o < Fout; o++) db[o] += dy[r * Fout + o];")])),
    ("race_embedding", OPS + "embedding.c", "embedding_backward", "RACE: tokens in parallel (a repeated id is a race)",
     OPT([("#pragma omp parallel for", "#pragma omp parallel for"),
          ("    for (size_t r = 0; r < R; r++)\n        for (int c = 0; c < C; c++) dW",
           "#pragma omp parallel for schedule(static)\n    for (size_t r = 0; r < R; r++)\n        for (int c = 0; c < C; c++) dW")])),
    ("race_mm_shared_dB", OPS + "matmul.c", "matmul_backward (shared-B dB)", "RACE: batch entries in parallel, all into one dB",
     OPT([("#pragma omp parallel for schedule(static)\n            for (size_t b = 0; b < batch; b++) /* dA_b", "#pragma omp parallel for schedule(static)\n            for (size_t b = 0; b < batch; b++) /* dA_b"),
          ("gemm(dB, A->data, dC, K, N, (int)(batch * M), true, false, 1);",
           "{\n#pragma omp parallel for schedule(static)\n            for (size_t b = 0; b < batch; b++)\n                gemm(dB, A->data + b * M * K, dC + b * M * N, K, N, M, true, false, 1);\n        }")])),
]

LINE_RE = re.compile(r"^(\S+?):(\d+):([FE]):([^:]+):([^:]+):-?\d+: ?(.*)$")


def sh(cmd, cwd, timeout=None, env=None):
    return subprocess.run(cmd, cwd=cwd, shell=True, capture_output=True, text=True, timeout=timeout, env=env)


def build(root):
    r = sh("make -j%d build/test_f64 build/test_f32 LM_LIB_SRC=" % (os.cpu_count() or 2), root, timeout=600)
    return r.returncode == 0, r.stdout + r.stderr


def run_tests(root, binary, timeout):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", CK_DEFAULT_TIMEOUT=str(timeout))
    t0 = time.time()
    try:
        r = sh("./build/" + binary, root, timeout=timeout + 60, env=env)
    except subprocess.TimeoutExpired:
        return {"rc": "timeout", "failed": ["<whole binary timed out>"], "msgs": [], "secs": time.time() - t0}
    failed, msgs = [], []
    for line in (r.stdout + r.stderr).splitlines():
        m = LINE_RE.match(line)
        if m:
            failed.append(m.group(5) + ("(crash)" if m.group(3) == "E" else ""))
            msgs.append(line)
    if r.returncode != 0 and not failed:
        failed.append("<exit %d>" % r.returncode)
    return {"rc": r.returncode, "failed": failed, "msgs": msgs, "secs": time.time() - t0}


class NotApplicable(Exception):
    pass


def apply(text, reps, mid):
    """text with the mutation applied; NotApplicable for an OPT that fits no variant"""
    if isinstance(reps, ALT):
        for variant in reps:
            if all(text.count(old) == 1 for old, _ in variant):
                return apply(text, variant, mid)
        if isinstance(reps, OPT):
            raise NotApplicable(mid)
        raise ValueError("%s: no variant applies (each `old` must occur exactly once): %r" % (mid, [v[0][0] for v in reps]))
    for old, new in reps:
        c = text.count(old)
        if c != 1:
            raise ValueError("%s: pattern found %d times (need exactly 1): %r" % (mid, c, old))
        text = text.replace(old, new)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("only", nargs="*", help="id prefixes to run (default: all)")
    ap.add_argument("--root", default=".", help="tree to mutate (default: cwd; use a private copy)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--show", metavar="ID")
    ap.add_argument("--timeout", type=int, default=120, help="CK_DEFAULT_TIMEOUT per test (s)")
    ap.add_argument("--out", default="mutation_results", help="basename of the .md and .json reports")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    muts = [m for m in MUTATIONS if not a.only or any(m[0].startswith(p) for p in a.only)]
    ids = [m[0] for m in MUTATIONS]
    assert len(ids) == len(set(ids)), "duplicate mutation ids"
    if a.list:
        for m in muts:
            print("%-22s %-40s %s" % (m[0], m[2], m[3]))
        return 0
    if a.show:
        m = next(m for m in MUTATIONS if m[0] == a.show)
        orig = open(os.path.join(root, m[1])).read()
        sys.stdout.writelines(difflib.unified_diff(orig.splitlines(True), apply(orig, m[4], m[0]).splitlines(True), m[1], m[1]))
        return 0
    # check every pattern first, so a stale pattern fails before anything runs
    applicable = []
    for m in muts:
        try:
            apply(open(os.path.join(root, m[1])).read(), m[4], m[0])
            applicable.append(m)
        except NotApplicable:
            print("%-22s n/a (not in this version of %s)" % (m[0], m[1]))
    muts = applicable

    originals = {}
    def restore(*_):
        for path, txt in originals.items():
            with open(path, "w") as f:
                f.write(txt)
        originals.clear()
    signal.signal(signal.SIGINT, lambda *_: (restore(), sys.exit(130)))
    signal.signal(signal.SIGTERM, lambda *_: (restore(), sys.exit(143)))

    ok, log = build(root)
    if not ok:
        print(log)
        print("the unmutated tree does not build")
        return 2
    base = {b: run_tests(root, b, a.timeout) for b in ("test_f64", "test_f32")}
    for b, r in base.items():
        print("baseline %s: %s in %.2fs" % (b, "PASS" if r["rc"] == 0 else "FAIL " + str(r["failed"]), r["secs"]))
        if r["rc"] != 0:
            return 2

    results = []
    try:
        for mid, path, fn, desc, reps in muts:
            full = os.path.join(root, path)
            orig = open(full).read()
            originals[full] = orig
            with open(full, "w") as f:
                f.write(apply(orig, reps, mid))
            ok, log = build(root)
            if not ok:
                res = {"id": mid, "fn": fn, "desc": desc, "status": "BUILD-ERROR", "f64": [], "f32": [], "log": log[-2000:]}
            else:
                r64, r32 = run_tests(root, "test_f64", a.timeout), run_tests(root, "test_f32", a.timeout)
                caught = bool(r64["failed"] or r32["failed"])
                res = {"id": mid, "fn": fn, "desc": desc, "status": "caught" if caught else "NOT CAUGHT",
                       "f64": r64["failed"], "f32": r32["failed"], "msgs": r64["msgs"][:3] + r32["msgs"][:3]}
            restore()
            results.append(res)
            print("%-22s %-11s f64=%s f32=%s" % (mid, res["status"], ",".join(res["f64"]) or "-", ",".join(res["f32"]) or "-"), flush=True)
    finally:
        restore()
        build(root)

    with open(a.out + ".json", "w") as f:
        json.dump({"baseline_secs": {b: r["secs"] for b, r in base.items()}, "results": results}, f, indent=1)
    with open(a.out + ".md", "w") as f:
        f.write("| id | backward | mutation | result | failing tests (f64) | failing tests (f32) |\n|---|---|---|---|---|---|\n")
        for r in results:
            f.write("| %s | %s | %s | %s | %s | %s |\n" % (r["id"], r["fn"], r["desc"], r["status"],
                    ", ".join(sorted(set(r["f64"]))) or "-", ", ".join(sorted(set(r["f32"]))) or "-"))
    n_not = sum(r["status"] == "NOT CAUGHT" for r in results)
    n_err = sum(r["status"] == "BUILD-ERROR" for r in results)
    print("%d mutations, %d not caught, %d did not build; report in %s.md" % (len(results), n_not, n_err, a.out))
    return 1 if n_not or n_err else 0


if __name__ == "__main__":
    sys.exit(main())
