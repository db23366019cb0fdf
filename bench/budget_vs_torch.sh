#!/usr/bin/env bash
# bench/budget_vs_torch.sh -- the budget presets against PyTorch at equal wall time, on the same
# machine, run alternately (docs/performance.md, "Recipes per budget").
#
#   bench/budget_vs_torch.sh [BUDGETS...]        default: 1min 5min 10min
#   LOCK=/work/quiet.lock ROUNDS=1 OUT=/tmp/budget_vs_torch bench/budget_vs_torch.sh 5min 10min
#
# For each budget and round, one after the other:
#   attograd  `char_lm train --config BUDGET` (the preset, its own --time-budget, 2 threads);
#   nanoGPT   bench/torch_budget.py with nanoGPT's shakespeare_char recipe (6 layers, 6 heads,
#             384 channels, block 256, batch 64, dropout 0.2, lr 1e-3 -> 1e-4, warmup 100,
#             beta2 0.99), the schedule laid over the same budget as ours is;
#   same      (with SAME=1) bench/torch_budget.py with the preset's own recipe, read from the checkpoint
#             attograd just wrote, for the same budget.
# Every run's result is the loss of the whole validation split (the last 10% of the text; every
# target of windows of block_size+1 characters at 0, T, 2T, ... once), computed after its
# budget: `char_lm eval` for attograd, the same loop in torch_budget.py. attograd evaluates and
# checkpoints inside its budget; PyTorch does neither (it trains for the whole budget), so the
# comparison is, if anything, generous to PyTorch. With LOCK set, each run holds that lock
# (flock) while it runs, and only then: no run of another helper's timings overlaps it.
# PyTorch's threads (intra-op x OpenBLAS): TORCH_BIG for nanoGPT's model, TORCH_SMALL for ours;
# the defaults are the fastest settings of docs/performance.md's table for small and baby.
# It prints the table that docs/performance.md shows, and keeps each run's output in OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/budget_vs_torch}
ROUNDS=${ROUNDS:-1}
TORCH=${TORCH:-/usr/bin/python3}
TORCH_BIG=${TORCH_BIG:-"2 2"}
TORCH_SMALL=${TORCH_SMALL:-"1 2"}
LOCK=${LOCK:-}
DATA=data/tinyshakespeare.txt
budgets=("$@")
[ ${#budgets[@]} -eq 0 ] && budgets=(1min 5min 10min)
make --no-print-directory build/char_lm >/dev/null
"$TORCH" -c 'import torch' 2>/dev/null || { echo "budget_vs_torch.sh: no torch for $TORCH (apt-get install python3-torch)" >&2; exit 1; }
mkdir -p "$OUT"
[ -f "$OUT/val.txt" ] || "$TORCH" -c "import sys; t = open(sys.argv[1], encoding='utf-8').read(); sys.stdout.write(t[int(0.9 * len(t)):])" \
    "$DATA" >"$OUT/val.txt"

locked() { if [ -n "$LOCK" ]; then flock "$LOCK" "$@"; else "$@"; fi; }
seconds() { case $1 in 1min) echo 60 ;; 5min) echo 300 ;; 10min) echo 600 ;; esac; }
json() { sed -n "s/.*\"$1\": \([-0-9.a-z]*\).*/\1/p" "$2" | tail -1; }

# the preset's recipe as torch_budget.py flags, from the config in the checkpoint's header
recipe_of() {
    "$TORCH" - "$(ls -d "$1"/ckpt-*/ | head -1)model.safetensors" <<'EOF'
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
c = json.loads(json.loads(f.read(n))["__metadata__"]["config"])
print(" ".join("--%s %s" % (k.replace("_", "-"), c[k]) for k in
               ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "dropout", "lr", "min_lr", "warmup_iters",
                "weight_decay", "beta2")))
EOF
}

ours() { # budget round
    local d="$OUT/$1-attograd-$2"
    locked build/char_lm train --data "$DATA" --out "$d" --overwrite --config "$1" >"$d.log" 2>&1
    build/char_lm eval --ckpt "$d" --data "$OUT/val.txt" | tail -1 >"$d.eval"
}

torch_run() { # budget round name threads flags...
    local b=$1 r=$2 name=$3 th=$4
    shift 4
    set -- $th "$@"
    local intra=$1 blas=$2
    shift 2
    locked "$TORCH" bench/torch_budget.py --time-budget "$(seconds "$b")" --threads "$intra" --blas-threads "$blas" \
        --data "$DATA" "$@" >"$OUT/$b-$name-$r.log" 2>&1
}

NANOGPT="--n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 64 --dropout 0.2 --lr 1e-3 --min-lr 1e-4
         --warmup-iters 100 --weight-decay 0.1 --beta2 0.99"

for b in "${budgets[@]}"; do
    for r in $(seq "$ROUNDS"); do
        ours "$b" "$r"
        # shellcheck disable=SC2086
        torch_run "$b" "$r" nanogpt "$TORCH_BIG" $NANOGPT
        # shellcheck disable=SC2046
        if [ "${SAME:-0}" = 1 ]; then torch_run "$b" "$r" same "$TORCH_SMALL" $(recipe_of "$OUT/$b-attograd-$r"); fi
    done
done

echo "| budget | round | attograd preset: steps, ended at | val (run) | **val, whole split** | PyTorch, nanoGPT's recipe: steps | **val, whole split** | PyTorch, the preset's recipe: steps | **val, whole split** |"
echo "|---|---|---|---|---|---|---|---|---|"
for b in "${budgets[@]}"; do
    for r in $(seq "$ROUNDS"); do
        a="$OUT/$b-attograd-$r"
        steps=$(sed -n 's/^done: \([0-9]*\) iterations.*/\1/p' "$a.log")
        [ -n "$steps" ] || steps="$(sed -n 's/.*out of time at iteration \([0-9]*\).*/\1 (out of time)/p' "$a.log")"
        wall=$(sed -n 's/^time budget: \([0-9.]*\) s of .*/\1/p' "$a.log")   # lm_train's start to its end
        vrun=$(grep "^iter [0-9]*: train" "$a.log" | tail -1 | sed 's/.*val //')
        printf '| %s | %s | %s, %.1f s | %s | **%s** | %s | **%s** | %s | **%s** |\n' "$b" "$r" "$steps" "$wall" "$vrun" \
            "$(json loss "$a.eval")" "$(json iters "$OUT/$b-nanogpt-$r.log")" "$(json val_loss_whole "$OUT/$b-nanogpt-$r.log")" \
            "$(json iters "$OUT/$b-same-$r.log")" "$(json val_loss_whole "$OUT/$b-same-$r.log")"
    done
done
