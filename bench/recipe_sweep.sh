#!/usr/bin/env bash
# bench/recipe_sweep.sh -- the recipes of `train --time-budget` compared by STEPS (issue 36;
# docs/performance.md, "The recipe follows the compute").
#
#   bench/recipe_sweep.sh RECIPE:STEPS...      e.g. M:3000 S:8500 M:5000 S:14000
#   OUT=$(mktemp -d) NICE=10 bench/recipe_sweep.sh M:3000 S:8500
#
# A recipe is S, M or L (the presets 1min, 5min, 10min: recipe.c's table). Each run trains the
# recipe for exactly STEPS steps, warmup and cosine over them as --time-budget would lay them
# out, on one thread under nice, one run at a time, with no evaluation but iteration 0's and the
# last; then `char_lm eval` of the whole validation split (the last 10% of the text, every target
# once). The loss at a step count does not depend on the machine's speed, so the sweep is valid
# beside other work. Two recipes compare at equal TIME when their steps are in the ratio of
# their step times (nn.h's ag_gpt_step_flops: S 0.32x of M, L 2.86x; measured on the developers'
# 2 cores about 0.37x and 2.75x). Prints one line per run: recipe, steps, wall seconds, the
# run's own last evaluation (train, val; 5 batches), the whole split's val.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
NICE=${NICE:-10}
DATA=data/tinyshakespeare.txt
make --no-print-directory build/char_lm >/dev/null
[ -f "$OUT/val.txt" ] || python3 -c "import sys; t = open(sys.argv[1], encoding='utf-8').read(); sys.stdout.write(t[int(0.9 * len(t)):])" \
    "$DATA" >"$OUT/val.txt"
preset() { case $1 in S) echo 1min ;; M) echo 5min ;; L) echo 10min ;; *) echo "recipe_sweep.sh: no recipe '$1' (S, M or L)" >&2; exit 2 ;; esac; }
for run in "$@"; do
    r=${run%%:*} n=${run#*:} d="$OUT/$r-$n"
    cfg=$(preset "$r")
    t0=$(date +%s)
    OPENBLAS_NUM_THREADS=1 nice -n "$NICE" build/char_lm train --data "$DATA" --out "$d" --overwrite --config "$cfg" \
        --time-budget none --max-iters "$n" --eval-interval 100000 --eval-iters 5 --threads 1 --progress lines >"$d.log" 2>&1
    val=$(OPENBLAS_NUM_THREADS=1 nice -n "$NICE" build/char_lm eval --ckpt "$d" --data "$OUT/val.txt" | tail -1)
    last=$(tail -1 "$d/metrics.csv" | cut -d, -f4,5)
    echo "$r $n $(( $(date +%s) - t0 ))s last-eval(train,val)=$last whole-split=$val"
done
