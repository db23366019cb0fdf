#!/usr/bin/env bash
# bench/budget_vs_torch.sh -- where this machine stands: its speed, the recipe each budget picks,
# and attograd's validation loss against PyTorch's with the same recipe at equal wall time
# (issue 36; docs/performance.md, "Recipes per budget").
#
#   bench/budget_vs_torch.sh [BUDGETS...]        default: 1m 5m 10m; any --time-budget duration
#   THREADS=1 ROUNDS=2 OUT=$(mktemp -d) bench/budget_vs_torch.sh 1m 2m 5m 10m 20m
#
# For each budget and round, one after the other:
#   attograd  `char_lm train --time-budget BUDGET` with no --config: it times recipe M's steps,
#             picks the recipe (its line says which and why: the first line of the output),
#             and ends within the budget, evaluations and checkpoints inside it;
#   PyTorch   bench/torch_budget.py with the recipe attograd picked (read from its checkpoint),
#             the schedule laid over the same budget, no evaluation inside it (so the comparison
#             is, if anything, generous to PyTorch);
#   nanoGPT   (with NANOGPT=1) bench/torch_budget.py with nanoGPT's shakespeare_char recipe (6 x
#             384, 6 heads, context 256, batch 64, dropout 0.2, lr 1e-3 -> 1e-4, warmup 100).
# Every result is the loss of the whole validation split (the last 10% of the text, every target
# of windows of block_size+1 characters at 0, T, 2T, ... once), computed after the budget:
# `char_lm eval` for attograd, the same loop in torch_budget.py.
# THREADS: char_lm's --threads (default: its own, 2 tuned) and PyTorch's intra-op threads x
# OpenBLAS threads (default TORCH_THREADS="1 2", its fastest for these shapes; with THREADS=1:
# "1 1"), so THREADS=1 is the machine at half speed. Without torch (apt-get install
# python3-torch) only attograd's columns are filled. With LOCK=FILE each run holds that lock
# (flock) while it runs, so that runs of other benchmarks do not overlap it.
# Each run's output stays in OUT (default: a new mktemp -d, printed).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
ROUNDS=${ROUNDS:-1}
TORCH=${TORCH:-python3}
THREADS=${THREADS:-}
TORCH_THREADS=${TORCH_THREADS:-$([ "$THREADS" = 1 ] && echo "1 1" || echo "1 2")}
LOCK=${LOCK:-}
DATA=data/tinyshakespeare.txt
budgets=("$@")
[ ${#budgets[@]} -eq 0 ] && budgets=(1m 5m 10m)
make --no-print-directory build/char_lm >/dev/null
have_torch=1
"$TORCH" -c 'import torch' 2>/dev/null || { have_torch=0; echo "budget_vs_torch.sh: no torch for $TORCH: attograd only" >&2; }
mkdir -p "$OUT"
echo "runs in $OUT" >&2
[ -f "$OUT/val.txt" ] || python3 -c "import sys; t = open(sys.argv[1], encoding='utf-8').read(); sys.stdout.write(t[int(0.9 * len(t)):])" \
    "$DATA" >"$OUT/val.txt"

locked() { if [ -n "$LOCK" ]; then flock "$LOCK" "$@"; else "$@"; fi; }
seconds() { python3 -c "import re, sys; print(sum(float(n) * {'h': 3600, 'm': 60, 's': 1}[u] for n, u in re.findall(r'([0-9.]+)([hms])', sys.argv[1])))" "$1"; }
json() { if [ -f "$2" ]; then sed -n "s/.*\"$1\": \([-0-9.a-z]*\).*/\1/p" "$2" | tail -1; fi; }

# the recipe of a run as torch_budget.py flags, from the config in its checkpoint's header
recipe_of() {
    python3 - "$(ls -d "$1"/ckpt-*/ | head -1)model.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
c = json.loads(json.loads(f.read(n))["__metadata__"]["config"])
print(" ".join("--%s %s" % (k.replace("_", "-"), c[k]) for k in
               ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "dropout", "lr", "min_lr", "warmup_iters",
                "weight_decay", "beta2", "optimizer")) + (" --no-embedding-decay" if c.get("no_embedding_decay") else "")
      + (" --adamw-lr-scale %s" % c["adamw_lr_scale"] if c.get("adamw_lr_scale") else "")
      + (" --rope" if c.get("rope") else ""))
PY
}

ours() { # budget round
    local d="$OUT/$1-attograd-$2"
    locked build/char_lm train --data "$DATA" --out "$d" --overwrite --time-budget "$1" --progress lines \
        ${THREADS:+--threads "$THREADS"} >"$d.log" 2>&1
    build/char_lm eval --ckpt "$d" --data "$OUT/val.txt" | tail -1 >"$d.eval"
}

torch_run() { # budget round name flags...
    local b=$1 r=$2 name=$3
    shift 3
    # shellcheck disable=SC2086
    set -- $TORCH_THREADS "$@"
    local intra=$1 blas=$2
    shift 2
    locked "$TORCH" bench/torch_budget.py --time-budget "$(seconds "$b")" --threads "$intra" --blas-threads "$blas" \
        --data "$DATA" "$@" >"$OUT/$b-$name-$r.log" 2>&1 || true
}

NANOGPT_FLAGS="--n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 64 --dropout 0.2 --lr 1e-3
               --min-lr 1e-4 --warmup-iters 100 --weight-decay 0.1 --beta2 0.99"

for b in "${budgets[@]}"; do
    for r in $(seq "$ROUNDS"); do
        ours "$b" "$r"
        [ "$have_torch" = 1 ] || continue
        # shellcheck disable=SC2046
        torch_run "$b" "$r" same $(recipe_of "$OUT/$b-attograd-$r")
        # shellcheck disable=SC2086
        if [ "${NANOGPT:-0}" = 1 ]; then torch_run "$b" "$r" nanogpt $NANOGPT_FLAGS; fi
    done
done

first="$OUT/${budgets[0]}-attograd-1.log"
# the recipe line gives the step of the recipe it picked (recipe.c: lm_recipe_line)
echo "this machine: $(sed -n 's/^time budget \([^ ]*\) at \([0-9.e-]*\) s a step.*-> recipe \([A-Z]*\).*/recipe \3 at \2 s a step (the \1 budget'"'"'s pick)/p' "$first")" \
     "(threads: ${THREADS:-the default})"
echo
echo "| budget | round | recipe picked | attograd: steps, time | val (its last evaluation) | **val, whole split** | PyTorch, the same recipe: steps | **val, whole split** | PyTorch - attograd | nanoGPT's recipe: steps | **val, whole split** |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for b in "${budgets[@]}"; do
    for r in $(seq "$ROUNDS"); do
        a="$OUT/$b-attograd-$r"
        pick=$(sed -n 's/^time budget .* -> recipe \([A-Z]*\) (\([^)]*\)).*/\1 (\2)/p' "$a.log")
        steps=$(sed -n 's/^done: \([0-9]*\) iterations.*/\1/p' "$a.log")
        [ -n "$steps" ] || steps="$(sed -n 's/.*out of time at iteration \([0-9]*\).*/\1 (out of time)/p' "$a.log")"
        wall=$(sed -n 's/^time budget: \([0-9.]*\) s of .*/\1/p' "$a.log")
        vrun=$(grep "^iter [0-9]*: train" "$a.log" | tail -1 | sed 's/.*val //')
        ours_v=$(json loss "$a.eval") theirs=$(json val_loss_whole "$OUT/$b-same-$r.log")
        diff=
        if [ -n "$ours_v" ] && [ -n "$theirs" ]; then diff=$(python3 -c "print('%+.4f' % ($theirs - $ours_v))"); fi
        nano=$(json val_loss_whole "$OUT/$b-nanogpt-$r.log")
        printf '| %s | %s | %s | %s, %s s | %s | **%s** | %s | %s | %s | %s | %s |\n' "$b" "$r" "$pick" "$steps" \
            "$wall" "$vrun" "${ours_v:--}" "$(json iters "$OUT/$b-same-$r.log")" "${theirs:+**$theirs**}" "$diff" \
            "$(json iters "$OUT/$b-nanogpt-$r.log")" "${nano:+**$nano**}"
    done
done
