#!/usr/bin/env bash
# bench/recipe_sweep_torch.sh -- recipes compared by STEPS in PyTorch on a GPU (issue 36), many
# at once: bench/recipe_sweep.sh's question (which recipe is best for the steps a budget gives)
# asked of bench/torch_budget.py (MODEL.md's model, fp32, attograd's schedule and AdamW groups),
# where one run of L's 10,700 steps takes about a minute instead of ten.
#
#   bench/recipe_sweep_torch.sh RUNS_FILE [PARALLEL]      PARALLEL: runs at once, default 6
#
# RUNS_FILE: one run a line, "NAME STEPS torch_budget.py flags"; '#' lines are skipped. E.g.
#   L-base 10700 --n-layer 4 --n-head 4 --n-embd 96 --block-size 256 --lr 8e-3 --min-lr 8e-5 --dropout 0.05 --weight-decay 0.3
# Prints one JSON line a run (torch_budget.py's, with "name" and "steps" added), in the order
# they end. The loss at a step count does not depend on the machine, so a finding here is a
# candidate for char_lm; confirm it there (bench/recipe_sweep.sh) before a preset changes.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=$1 PAR=${2:-6} PY=${PYTHON:-python3}
one() {
    local name=$1 steps=$2; shift 2
    local out
    out=$("$PY" bench/torch_budget.py --device cuda --time-budget 100000 --max-iters "$steps" "$@" | tail -1)
    echo "{\"name\": \"$name\", \"steps\": $steps, ${out#\{}"
}
export -f one
export PY
grep -v '^\s*#' "$RUNS" | grep -v '^\s*$' | xargs -P "$PAR" -L 1 bash -c 'one "$@"' _
