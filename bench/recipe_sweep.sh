#!/usr/bin/env bash
# bench/recipe_sweep.sh -- the recipes of `train --time-budget` compared by STEPS (issue 36;
# docs/performance.md, "The recipe follows the compute").
#
#   bench/recipe_sweep.sh RECIPE:STEPS[:KEY=V,...]...   e.g. M:3000 S:8500 M:20000:dropout=0.1,seed=2
#   bench/recipe_sweep.sh M:11400:no_embedding_decay=false,seed=2   (M as it was before the switch)
#   OUT=$(mktemp -d) NICE=10 bench/recipe_sweep.sh M:3000 S:8500
#   JOBS=2 bench/recipe_sweep.sh ...           two runs at a time, one thread each (2 cores)
#
# A recipe is S, M, L or XL (the presets 1min, 5min, 10min, 20min: recipe.c's table). Each run trains the
# recipe for exactly STEPS steps (KEY=V: a config field over the recipe's, weight_decay=0.5 ->
# --weight-decay=0.5, no_embedding_decay=false undoes the preset's switch; KEY alone: a switch
# on), warmup and cosine over them as --time-budget would lay them out, on one thread under
# nice, JOBS runs at a time (1), with no evaluation but iteration 0's and the last;
# then `char_lm eval` of the whole validation split (the last 10% of the text, every target once).
# The loss at a step count does not depend on the machine's speed, so the sweep is valid beside
# other work. Two recipes compare at equal TIME when their steps are in the ratio of
# their step times (examples/char_lm/recipe.c's cost, nn.h's ag_gpt_step_flops with Muon's
# ag_gpt_muon_flops for M and L: S 0.27x of M, L 2.58x; measured 0.31x and 2.0-2.6x).
# Prints one line per run: recipe, steps, wall seconds, the run's own last evaluation (train,
# val; 5 batches), the whole split's val.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
NICE=${NICE:-10}
mkdir -p "$OUT"
DATA=data/tinyshakespeare.txt
make --no-print-directory build/char_lm >/dev/null
[ -f "$OUT/val.txt" ] || python3 -c "import sys; t = open(sys.argv[1], encoding='utf-8').read(); sys.stdout.write(t[int(0.9 * len(t)):])" \
    "$DATA" >"$OUT/val.txt"
preset() { case $1 in S) echo 1min ;; M) echo 5min ;; L) echo 10min ;; XL) echo 20min ;; *) echo "recipe_sweep.sh: no recipe '$1' (S, M, L or XL)" >&2; exit 2 ;; esac; }
# KEY=V -> --key=V (a switch too: no_embedding_decay=false); a KEY alone: --key
flags() {
    local kv; local IFS=,
    for kv in $1; do
        case $kv in
        *=*) printf -- '--%s=%s ' "$(echo "${kv%%=*}" | tr _ -)" "${kv#*=}" ;;
        *) printf -- '--%s ' "$(echo "$kv" | tr _ -)" ;;
        esac
    done
}
one() {
    local run=$1 r n x d cfg t0 val last
    r=${run%%:*} n=${run#*:} x=
    case $n in *:*) x=${n#*:} n=${n%%:*} ;; esac
    d="$OUT/$r-$n${x:+-$(echo "$x" | tr ',=' '-_')}"
    cfg=$(preset "$r")
    t0=$(date +%s)
    # shellcheck disable=SC2046  # the flags split into words on purpose
    OPENBLAS_NUM_THREADS=1 nice -n "$NICE" build/char_lm train --data "$DATA" --out "$d" --overwrite --config "$cfg" \
        --time-budget none --max-iters "$n" --eval-interval 100000 --eval-iters 5 --threads 1 --progress lines \
        $(flags "$x") >"$d.log" 2>&1 || { echo "$run: training failed, see $d.log"; return; }
    val=$(OPENBLAS_NUM_THREADS=1 nice -n "$NICE" build/char_lm eval --ckpt "$d" --data "$OUT/val.txt" | tail -1)
    last=$(tail -1 "$d/metrics.csv" | cut -d, -f4,5)
    echo "$r $n ${x:--} $(( $(date +%s) - t0 ))s last-eval(train,val)=$last whole-split=$val"
}
JOBS=${JOBS:-1}
for run in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    one "$run" &
done
wait
