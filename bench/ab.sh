#!/usr/bin/env bash
# bench/ab.sh -- two builds of the bench side by side, alternating A B A B, so that a noisy
# machine hurts both alike: for a refactor that must not cost speed, or a change that should
# gain some.
#
#   bench/ab.sh A_BENCH B_BENCH [CONFIG] [ROUNDS]      default: baby 4
#   e.g. (the tree before a change checked out and built in OLD=$(mktemp -d)):
#   bench/ab.sh "$OLD/build/bench" build/bench baby 4
#
# Prints each round's tokens/s and, per side, the median, then B / A.
set -euo pipefail
A=$1 B=$2 CONFIG=${3:-baby} ROUNDS=${4:-4}
steps() { case $1 in small) echo 15 ;; *) echo 105 ;; esac; }
tps() { "$1" --config "$CONFIG" --steps "$(steps "$CONFIG")" --threads 2 --json | sed -n 's/.*"tokens_per_s": \([0-9.]*\).*/\1/p' | tail -1; }
a=() b=()
for r in $(seq "$ROUNDS"); do
    a+=("$(tps "$A")")
    b+=("$(tps "$B")")
    echo "round $r: A ${a[-1]}  B ${b[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ma=$(median "${a[@]}") mb=$(median "${b[@]}")
echo "$CONFIG: A median $ma tokens/s, B median $mb tokens/s, B/A $(awk "BEGIN{printf \"%.3f\", $mb/$ma}")"
