#!/usr/bin/env bash
# bench/compare.sh -- attograd against the PyTorch reference on the same machine, same recipe,
# run alternately A B A B so that a noisy machine hurts both sides alike.
#
#   bench/compare.sh [CONFIGS...]        default: tiny baby small
#   ROUNDS=2 THREADS=2 TORCH=/usr/bin/python3 bench/compare.sh baby
#
# For each configuration it prints attograd's tokens/s (build/bench), PyTorch's for each of
# its thread settings (intra-op threads x OpenBLAS threads), and the ratio to the best
# PyTorch setting. Needs build/bench (make build/bench) and python3-torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-2}
TORCH=${TORCH:-/usr/bin/python3}
REF=${REF:-../shared/bench/torch_ref.py}
configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(tiny baby small)
[ -x build/bench ] || make --no-print-directory build/bench >/dev/null
[ -f "$REF" ] || { echo "compare.sh: $REF not found (set REF=path/to/torch_ref.py)" >&2; exit 1; }
"$TORCH" -c 'import torch' 2>/dev/null || { echo "compare.sh: no torch for $TORCH (apt-get install python3-torch)" >&2; exit 1; }

args_for() { # torch_ref.py flags for a MODEL.md configuration
    case $1 in
    tiny)  echo "--n-layer 2 --n-head 2 --n-embd 64 --block-size 32 --batch-size 16 --max-iters 150" ;;
    baby)  echo "--n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 --max-iters 150" ;;
    small) echo "--n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 64 --max-iters 15" ;;
    esac
}
steps_for() { case $1 in small) echo 15 ;; *) echo 150 ;; esac; }
# PyTorch thread settings: intra-op threads x OpenBLAS threads (2x2 is the known slow one)
settings=("1 1" "1 $THREADS" "$THREADS 1" "$THREADS $THREADS")

json_field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" | tail -1; }

for c in "${configs[@]}"; do
    declare -A best=()
    ours=()
    samp_ours=0; samp_torch=0
    for r in $(seq "$ROUNDS"); do
        j=$(./build/bench --config "$c" --steps "$(steps_for "$c")" --threads "$THREADS" --json)
        a=$(echo "$j" | json_field tokens_per_s)
        ours+=("$a")
        sa=$(echo "$j" | json_field sample_cached_chars_per_s)
        awk "BEGIN{exit !($sa > $samp_ours)}" && samp_ours=$sa
        for th in 1 "$THREADS"; do
            st=$("$TORCH" bench/torch_sample.py --config "$c" --threads "$th" --ref "$REF" | json_field chars_per_s)
            awk "BEGIN{exit !($st > $samp_torch)}" && samp_torch=$st
        done
        for s in "${settings[@]}"; do
            set -- $s
            t=$("$TORCH" "$REF" $(args_for "$c") --threads "$1" --blas-threads "$2" --eval-interval 100000 \
                --eval-iters 1 --data data/tinyshakespeare.txt 2>/dev/null | json_field tokens_per_s)
            k="$1x$2"
            if [ -z "${best[$k]:-}" ] || awk "BEGIN{exit !($t > ${best[$k]})}"; then best[$k]=$t; fi
        done
    done
    our_best=$(printf '%s\n' "${ours[@]}" | sort -g | tail -1)
    torch_best=0; torch_best_k=""
    for k in "${!best[@]}"; do
        if awk "BEGIN{exit !(${best[$k]} > $torch_best)}"; then torch_best=${best[$k]}; torch_best_k=$k; fi
    done
    echo "== $c ($THREADS threads, best of $ROUNDS alternating rounds)"
    echo "   attograd: $our_best tokens/s   (rounds: ${ours[*]})"
    for k in $(printf '%s\n' "${!best[@]}" | sort); do echo "   pytorch intra x blas $k: ${best[$k]} tokens/s"; done
    awk -v a="$our_best" -v t="$torch_best" -v k="$torch_best_k" \
        'BEGIN{printf "   ratio attograd / best pytorch (%s): %.2fx\n", k, a / t}'
    awk -v a="$samp_ours" -v t="$samp_torch" 'BEGIN{printf "   sampling: attograd with KV cache %.0f chars/s, pytorch recomputing %.0f chars/s: %.1fx\n", a, t, a / t}'
    unset best
done
