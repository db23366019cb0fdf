#!/usr/bin/env bash
# bench/busy.sh -- the threads on a busy machine (issue 21): tokens/s of a configuration on the
# default threads (2, tuned: one while that is faster; ag_thread_tuner in src/tensor/speed.h),
# on --threads 1 and on --threads 2 fixed, beside 0, 1 and 2 CPU-bound neighbours
# (`sh -c 'while :; do :; done'`, nice 0), the three settings alternating round by round.
#
#   bench/busy.sh [BENCH] [CONFIG] [ROUNDS]       default: build/bench baby 3
#   NEIGHBOURS=1 bench/busy.sh ...                 only those neighbour counts (default: 0 1 2)
#
# It needs the machine to itself (other work is more neighbours): here, run it as
#   flock "${TMPDIR:-/tmp}/attograd-quiet.lock" bench/busy.sh   (the lock every timing takes)
# Prints one Markdown table row per neighbour count: the medians of the rounds (min-max), in the
# tuned column how many of the timed steps ran on one thread, and default / --threads 1: the
# median of the rounds' ratios (each round's two runs side by side); then those three ratios on
# one line, and the load average before and after (other work counts as neighbours).
set -euo pipefail
BENCH=${1:-build/bench} CONFIG=${2:-baby} ROUNDS=${3:-3} NEIGHBOURS=${NEIGHBOURS:-0 1 2}
pids=()
stop_neighbours() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; pids=(); }
trap stop_neighbours EXIT

# one run: "tokens/s single-thread-steps timed-steps"
run() {
    "$BENCH" --config "$CONFIG" "$@" --json | tail -1 |
        sed -n 's/.*"single_thread_steps": \([0-9]*\), "steps_timed": \([0-9]*\), "tokens_per_s": \([0-9.]*\).*/\3 \1 \2/p'
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
# "median (min-max)" of the numbers given
stats() { printf '%.0f (%.0f-%.0f)' "$(median "$@")" "$(printf '%s\n' "$@" | sort -g | head -1)" "$(printf '%s\n' "$@" | sort -g | tail -1)"; }

echo "$CONFIG, $ROUNDS rounds, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg); tokens/s, median (min-max)"
echo
echo "| CPU-bound neighbours | default (2, tuned) | steps on 1 thread | --threads 1 | --threads 2 | default / --threads 1 |"
echo "|---|---|---|---|---|---|"
summary=""   # "1.850 at 0, 0.970 at 1, ..."
for n in $NEIGHBOURS; do
    stop_neighbours
    for _ in $(seq "$n"); do nice -n 0 sh -c 'while :; do :; done' & pids+=($!); done
    sleep 1
    tuned=() single=() one=() two=() ratio=()
    for _ in $(seq "$ROUNDS"); do
        read -r t s timed < <(run)
        tuned+=("$t") single+=("$s/$timed")
        read -r o _ _ < <(run --threads 1); one+=("$o")
        read -r w _ _ < <(run --threads 2); two+=("$w")
        ratio+=("$(awk "BEGIN {print $t / $o}")")
    done
    r=$(printf '%.3f' "$(median "${ratio[@]}")")
    summary+="${summary:+, }$r at $n"
    echo "| $n | $(stats "${tuned[@]}") | ${single[*]} | $(stats "${one[@]}") | $(stats "${two[@]}") | $r |"
done
stop_neighbours
echo
echo "default / --threads 1 by CPU-bound neighbours: $summary" \
     "(load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
