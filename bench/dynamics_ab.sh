#!/usr/bin/env bash
# bench/dynamics_ab.sh -- what --log-dynamics costs a training step, in wall-clock time: three
# char_lm runs per round, alternating, so that a noisy machine hurts all of them alike:
#   A  OLD_CHAR_LM                  (a build without the flag: the speed before it existed)
#   B  NEW_CHAR_LM                  (the flag off: must be A's speed)
#   C  NEW_CHAR_LM --log-dynamics   (the flag on: at most 3% slower than B)
#
#   bench/dynamics_ab.sh OLD_CHAR_LM NEW_CHAR_LM [CONFIG] [ROUNDS]       default: baby 4
#   e.g. flock "${TMPDIR:-/tmp}/attograd-quiet.lock" bench/dynamics_ab.sh "$OLD/build/char_lm" build/char_lm baby 4
#   (OLD: the tree before the change, checked out and built in a mktemp -d)
#
# A run is 105 steps on the first 200 KB of data/tinyshakespeare.txt, 2 threads, evaluations
# only at the first and the last iteration; its step time is the mean over steps 5..104 of
# B*T / tokens_per_s (metrics.csv), so the log steps (every 10th, where --log-dynamics works)
# count as often as they happen. Prints each round's three step times, then the medians and
# the ratios B/A and C/B.
set -euo pipefail
OLD=$1 NEW=$2 CONFIG=${3:-baby} ROUNDS=${4:-4}
DIR=$(mktemp -d /tmp/dynamics_ab.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
head -c 200000 data/tinyshakespeare.txt > "$DIR/text.txt"
# mean step time in ms of one run: $1 the binary, the rest its extra flags
step_ms() {
    local bin=$1
    shift
    rm -rf "$DIR/run"
    "$bin" train --data "$DIR/text.txt" --out "$DIR/run" --config "$CONFIG" --max-iters 105 --eval-interval 1000 \
        --eval-iters 1 --threads 2 "$@" > /dev/null
    local bt
    bt=$(case $CONFIG in tiny) echo 512 ;; baby) echo 768 ;; small) echo 16384 ;; esac)
    awk -F, -v bt="$bt" 'NR > 6 && $6 != "" { s += bt / $6; n++ } END { printf "%.3f", 1000 * s / n }' "$DIR/run/metrics.csv"
}
a=() b=() c=()
for r in $(seq "$ROUNDS"); do
    a+=("$(step_ms "$OLD")")
    b+=("$(step_ms "$NEW")")
    c+=("$(step_ms "$NEW" --log-dynamics)")
    echo "round $r: A ${a[-1]} ms  B ${b[-1]} ms  C ${c[-1]} ms"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ma=$(median "${a[@]}") mb=$(median "${b[@]}") mc=$(median "${c[@]}")
echo "$CONFIG: median step A $ma ms, B $mb ms, C $mc ms; B/A $(awk "BEGIN{printf \"%.3f\", $mb/$ma}"), C/B $(awk "BEGIN{printf \"%.3f\", $mc/$mb}")"
