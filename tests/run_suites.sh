#!/usr/bin/env bash
# run_suites.sh -- runs test jobs side by side and says which one failed (make test, test-op, check).
#
#   tests/run_suites.sh LOGDIR JOBS < list
#
# Each line of the list is one job: a label, a space, a shell command ("f64/softmax
# CK_RUN_SUITE=softmax ./build/test_f64"). At most JOBS run at once, in the order given (the
# Makefile puts the slow ones first, so the short ones fill the gaps). Each writes LOGDIR/<label>.log;
# when it ends, one line names it: ok or FAIL, its checks passed (and failed), its seconds and its
# CPU seconds (user + sys of all it ran: on a shared machine the wall time is the others' too),
# and for a failure the failing checks' lines (check's "file:line:F:case:test:0: message") or the
# log's tail.
# A label starting with '?' may find no test (exit 77, tests/run_tests.c): a filter by tag.
# A label starting with '~' is a job that mostly waits (MPI's: mpirun's start, its ranks' timeouts
# and signals; its line shows how little CPU it takes): it starts at once and takes none of the JOBS
# slots, so the CPU it leaves idle goes to the others. ('~' comes before '?'.)
#
# Counts: a job that runs check counts its checks (every "Checks: N, Failures: F, Errors: E" line
# of its log); any other job counts as one. A job that exits non-zero with no failed check counts
# one failure more (a crash, a timeout, a make target that failed).
# Before it, the CPU seconds of all the jobs. The last line is always "N passed, N failed" (.ci/run
# and the Makefile read it); the exit status is 0 only when nothing failed.
set -uo pipefail

logdir=${1:?usage: run_suites.sh LOGDIR JOBS < jobs}
max=${2:?usage: run_suites.sh LOGDIR JOBS < jobs}
mkdir -p "$logdir" || exit 1
rm -f "$logdir"/*.log "$logdir"/*.res "$logdir"/*.cpu

# one job, in the background: run it, then print its verdict in a single write (lines from two
# jobs never interleave) and leave "passed failed" in <label>.res for the total
run_job() {
    local label=$1 cmd=$2 optional=0
    [ "${label#\?}" != "$label" ] && { optional=1; label=${label#\?}; }
    local file=${label//\//-} t0=$SECONDS rc TIMEFORMAT='%3U %3S' cpu
    local log=$logdir/$file.log
    { time bash -c "$cmd" > "$log" 2>&1 < /dev/null; } 2> "$logdir/$file.cpu"
    rc=$?
    cpu=$(awk '{ printf "%.0f", $1 + $2 }' "$logdir/$file.cpu")
    local n f
    read -r n f < <(sed -n 's/.*Checks: \([0-9]*\), Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2 \3/p' "$log" |
                    awk '{ n += $1; f += $2 + $3 } END { print n + 0, f + 0 }')
    if [ "$rc" = 77 ] && [ "$optional" = 1 ]; then rc=0; n=0; f=0;
    elif [ "$n" = 0 ] && [ "$rc" = 0 ]; then n=1;               # not a check run: one job
    elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; n=$((n + 1)); fi
    local passed=$((n - f)) out
    if [ "$optional" = 1 ] && [ "$n" = 0 ] && [ "$rc" = 0 ]; then
        out=$(printf '  --    %-28s %-40s %4d s %4d s cpu' "$label" "no test ran (none matched)" $((SECONDS - t0)) "$cpu")
    elif [ "$rc" = 0 ] && [ "$f" = 0 ]; then
        out=$(printf '  ok    %-28s %5d passed %33s %4d s %4d s cpu' "$label" "$passed" "" $((SECONDS - t0)) "$cpu")
    else
        out=$(printf '  FAIL  %-28s %5d passed, %d failed (exit %d) %4d s %4d s cpu   log: %s' "$label" "$passed" "$f" \
              "$rc" $((SECONDS - t0)) "$cpu" "$log")
        local why
        why=$(grep -E ':[FE]:[^:]*:[^:]*:[0-9]+:' "$log" | head -n 20)
        [ -n "$why" ] || why=$(tail -n 20 "$log")
        out=$out$'\n'$(sed 's/^/        /' <<< "$why")
    fi
    printf '%s\n' "$out"
    echo "$passed $f" > "$logdir/$file.res"
}

# the jobs that hold a slot and still run (a '~' job's end also wakes wait -n: recounted)
slots=()
recount() {
    local p alive=()
    for p in "${slots[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
    slots=("${alive[@]}")
}
while read -r label cmd; do
    [ -n "$label" ] || continue
    if [ "${label#\~}" != "$label" ]; then run_job "${label#\~}" "$cmd" & continue; fi
    recount
    while [ "${#slots[@]}" -ge "$max" ]; do wait -n; recount; done
    run_job "$label" "$cmd" &
    slots+=("$!")
done
wait

passed=0 failed=0 names=""
for r in "$logdir"/*.res; do
    [ -e "$r" ] || continue
    read -r p f < "$r"
    passed=$((passed + p)) failed=$((failed + f))
    [ "$f" = 0 ] || names="$names $(basename "$r" .res)"
done
[ -z "$names" ] || echo "failed:$names (logs in $logdir)"
cat "$logdir"/*.cpu 2> /dev/null | awk '{ c += $1 + $2 } END { printf "cpu: %.0f s, user + sys of every job\n", c }'
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
