#!/usr/bin/env bash
# bench/budget_sweep.sh -- the sweep behind the budget presets 1min, 5min and 10min
# (docs/performance.md, "Recipes per budget").
#
#   bench/budget_sweep.sh STAGE [NAME...]     STAGE: 1min, 5min or 10min; NAMEs: some candidates
#   JOBS=2 THREADS=1 NICE=19 OUT=/tmp/budget_sweep bench/budget_sweep.sh 1min
#   bench/budget_sweep.sh table               every result so far, as docs/performance.md shows it
#
# The sweep runs in ITERATION terms, so that its results do not depend on how busy the machine
# is while it runs (it ran beside other builds, under nice, on one thread per run): each
# candidate trains the number of steps that its budget holds on 2 idle cores, with warmup and a
# cosine decay to min_lr at its last step, exactly as `--time-budget` would lay it out. That
# number comes from the candidate's training FLOPs per token,
#     F = 6 (12 L C^2 + 2 C V) + 24 L T C      (the attention products counted twice: our
#                                               attention kernels run at about half the rate
#                                               of the matrix products, measured with probe below)
#       + 740 (L H T + 2 L C + C)  with dropout (each element dropped costs about 740 FLOPs'
#                                   time: a hash per element, and attention runs unfused, op
#                                   by op; probe measured baby 1.31x slower with --dropout 0.1)
# anchored to baby's 32,000 tokens/s on 2 idle cores (docs/performance.md): tokens/s = 32000
# F_baby / F. From the budget go 1 s of setup and EVALS evaluations of 2 x eval_iters forward
# passes (a third of a step each) and a checkpoint; the rest is steps.
# The result of each run is the loss of the whole validation split, evaluated deterministically
# (`char_lm eval` on the last 10% of the text: every target once), and the run's own last
# evaluation (20 random batches of each split). Results go to $OUT/results.tsv, one line per
# run; a run already there is not run again.
#
# `bench/budget_sweep.sh probe L H C T B` prints a candidate's CPU milliseconds per step on one
# thread (perf stat's task-clock of 3+K steps minus that of 3), the check of the FLOP model.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/budget_sweep}
JOBS=${JOBS:-2}
THREADS=${THREADS:-1}
NICE=${NICE:-19}
DATA=data/tinyshakespeare.txt
LM=${LM:-build/char_lm}
V=65
BABY_TOKPS=32000

# name L H C T B lr warmup dropout [extra char_lm flags...]; min_lr is lr/10 (nanoGPT's rule)
candidates() {
    case $1 in
    1min) cat <<'EOF'
baby     4 4 128  64 12 1e-3 100 0
baby_lr2 4 4 128  64 12 2e-3  50 0
t128b16  4 4 128 128 16 2e-3  50 0
t256b8   4 4 128 256  8 2e-3  50 0
t128lr1  4 4 128 128 16 1e-3  50 0
t128lr3  4 4 128 128 16 3e-3  50 0
c192t128 4 4 192 128 16 2e-3  50 0
baby_lr3 4 4 128  64 12 3e-3  50 0
b8t64    4 4 128  64  8 2e-3  50 0
l3t64    3 4 128  64 12 3e-3  50 0
c96t64   4 4  96  64 12 3e-3  50 0
t128b8   4 4 128 128  8 3e-3  50 0
c96l3    3 4  96  64 12 3e-3  50 0
c64      4 4  64  64 12 3e-3  50 0
c96lr4   4 4  96  64 12 4e-3  50 0
c96b8    4 4  96  64  8 3e-3  50 0
EOF
    ;;
    5min) cat <<'EOF'
baby_lr2 4 4 128  64 12 2e-3 100 0
baby_d1  4 4 128  64 12 2e-3 100 0.1
t128_d1  4 4 128 128 12 2e-3 100 0.1
c192_d1  4 4 192  64 12 2e-3 100 0.1
c96      4 4  96  64 12 3e-3 100 0
c96_d1   4 4  96  64 12 3e-3 100 0.1
c96t128  4 4  96 128 12 3e-3 100 0
c96_wd5  4 4  96  64 12 3e-3 100 0   --weight-decay 0.5
c128t128 4 4 128 128 12 3e-3 100 0
c96t256  4 4  96 256  8 3e-3 100 0
c96t128lr4 4 4 96 128 12 4e-3 100 0
c96t128b8 4 4 96 128  8 3e-3 100 0
c96t128lr5 4 4 96 128 12 5e-3 100 0
EOF
    ;;
    10min) cat <<'EOF'
c96t128  4 4  96 128 12 3e-3 100 0
c128t128 4 4 128 128 12 3e-3 100 0
c128t128_d1 4 4 128 128 12 3e-3 100 0.1
c128t128_d2 4 4 128 128 12 3e-3 100 0.2
EOF
    ;;
    esac
}
budget_s() { case $1 in 1min) echo 60 ;; 5min) echo 300 ;; 10min) echo 600 ;; esac; }
evals_for() { case $1 in 1min) echo 3 ;; 5min) echo 6 ;; 10min) echo 11 ;; esac; }
EVAL_ITERS=20

flops() { # L C T [H dropout]: training FLOPs per token, or their time's equivalent
    echo "$1 $2 $3 ${4:-1} ${5:-0}" | awk -v V=$V '{L=$1; C=$2; T=$3; H=$4;
        printf "%.0f", 6*(12*L*C*C + 2*C*V) + 24*L*T*C + ($5 > 0 ? 740*(L*H*T + 2*L*C + C) : 0)}'
}

iters_for() { # stage L C T B [H dropout]: the steps the budget holds on 2 idle cores
    local fb f
    fb=$(flops 4 128 64)
    f=$(flops "$2" "$3" "$4" "${6:-1}" "${7:-0}")
    awk -v S="$(budget_s "$1")" -v E="$(evals_for "$1")" -v EI=$EVAL_ITERS -v fb="$fb" -v f="$f" -v BT=$(($4 * $5)) \
        -v base=$BABY_TOKPS 'BEGIN{tps = base * fb / f; step = BT / tps; ev = 2 * EI * step / 3 + 0.2;
                                   printf "%d %.0f", (S - 1 - E * ev) / step, tps}'
}

val_split() { # the last 10% of the text, as the run's split has it (int(0.9 n) characters train)
    local n
    [ -f "$OUT/val.txt" ] && return
    n=$(python3 -c "import sys; print(int(0.9 * len(open(sys.argv[1], encoding='utf-8').read())))" "$DATA")
    python3 -c "import sys; t = open(sys.argv[1], encoding='utf-8').read(); sys.stdout.write(t[int(sys.argv[2]):])" \
        "$DATA" "$n" >"$OUT/val.txt"
}

one() { # stage name: train the candidate, evaluate it, append its line to results.tsv
    local stage=$1 name=$2 line L H C T B lr wu drop extra n tps dir t0 t1 ev tl vl
    line=$(candidates "$stage" | awk -v n="$name" '$1 == n')
    [ -n "$line" ] || { echo "budget_sweep: no candidate $name in $stage" >&2; return 1; }
    read -r _ L H C T B lr wu drop extra <<<"$line"
    if grep -q "^$stage	$name	" "$OUT/results.tsv" 2>/dev/null; then return 0; fi
    read -r n tps <<<"$(iters_for "$stage" "$L" "$C" "$T" "$B" "$H" "$drop")"
    dir="$OUT/$stage/$name"
    mkdir -p "$OUT/$stage"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    OPENBLAS_NUM_THREADS=1 nice -n "$NICE" "$LM" train --data "$DATA" --out "$dir" --overwrite \
        --n-layer "$L" --n-head "$H" --n-embd "$C" --block-size "$T" --batch-size "$B" --lr "$lr" \
        --min-lr "$(awk -v l="$lr" 'BEGIN{print l / 10}')" --warmup-iters "$wu" --dropout "$drop" \
        --max-iters "$n" --lr-decay-iters "$n" --eval-interval "$n" --eval-iters $EVAL_ITERS --threads "$THREADS" \
        $extra >"$dir.log" 2>&1
    t1=$(date +%s)
    ev=$(OPENBLAS_NUM_THREADS=1 nice -n "$NICE" "$LM" eval --ckpt "$dir" --data "$OUT/val.txt" | tail -1 |
         sed -n 's/.*"loss": \([0-9.]*\).*/\1/p')
    read -r tl vl <<<"$(grep "^iter $n:" "$dir.log" | sed -n 's/.*train \([0-9.]*\) val \([0-9.]*\).*/\1 \2/p')"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$stage" "$name" "$L" "$H" "$C" "$T" \
        "$B" "$lr" "$wu" "$drop" "${extra:--}" "$n" "$tps" "$tl" "$vl" "$ev" "$((t1 - t0))" >>"$OUT/results.tsv"
    echo "$stage $name: $n steps, val $vl (whole split $ev), train $tl, $((t1 - t0)) s"
}

table() {
    echo "| budget | name | layers/heads/embd | block | batch | lr | warmup | dropout | other | steps | est. tokens/s | train | val | val, whole split |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    awk -F'\t' '{printf "| %s | %s | %s/%s/%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | **%s** |\n",
                 $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16}' "$OUT/results.tsv"
}

probe() { # L H C T B [K]: CPU ms per step on one thread
    local K=${6:-6} a b
    cpu() {
        local d
        d=$(mktemp -d)
        OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive perf stat -e task-clock -x, -o "$d/perf" -- "$LM" train \
            --data "$DATA" --out "$d/o" --n-layer "$1" --n-head "$2" --n-embd "$3" --block-size "$4" --batch-size "$5" \
            --max-iters "$6" --eval-interval 100000 --eval-iters 1 --threads 1 >/dev/null 2>&1
        awk -F, '/task-clock/{print $1}' "$d/perf"
        rm -rf "$d"
    }
    a=$(cpu "$1" "$2" "$3" "$4" "$5" 3)
    b=$(cpu "$1" "$2" "$3" "$4" "$5" $((3 + K)))
    awk -v a="$a" -v b="$b" -v K="$K" -v f="$(flops "$1" "$3" "$4")" -v BT=$(($4 * $5)) \
        'BEGIN{ms = (b - a) / K; printf "%.1f ms per step, %.1f us per token, %.1f GFLOP/s (model F)\n", ms, 1000 * ms / BT, f * BT / ms / 1e6}'
}

case ${1:-} in
1min | 5min | 10min) ;;
table) table; exit 0 ;;
probe) shift; probe "$@"; exit 0 ;;
--one) one "$2" "$3"; exit 0 ;;
*) echo "usage: bench/budget_sweep.sh 1min|5min|10min [NAME...] | table | probe L H C T B" >&2; exit 2 ;;
esac
stage=$1
shift
[ -x "$LM" ] || make --no-print-directory "$LM" >/dev/null
mkdir -p "$OUT"
val_split
names=("$@")
[ ${#names[@]} -eq 0 ] && mapfile -t names < <(candidates "$stage" | awk 'NF {print $1}')
printf '%s\n' "${names[@]}" | xargs -P "$JOBS" -I{} "$0" --one "$stage" {}
