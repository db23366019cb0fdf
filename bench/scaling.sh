#!/usr/bin/env bash
# bench/scaling.sh -- data-parallel scaling on this machine, measured, then modelled: the tables
# of docs/distributed.md ("Measured here", "The model against the measurements", "Extrapolated"),
# printed exactly as the docs show them.
#
#   make build/char_lm build/char_lm_mpi build/allreduce_bench
#   bench/scaling.sh                  # ROUNDS=3 CONFIGS="tiny baby" ...; under flock on a shared lock
#
# Per config (tiny, baby, small with 4 windows a step, small's 64 being minutes), alternating
# in each of ROUNDS rounds, the median ms per step (metrics.csv, steps 3 on) of:
#   1p x 1t   build/char_lm --threads 1         c1 = that / B: compute per window, 1 thread
#   1p x 2t   build/char_lm --threads 2         c2 = that / B: 2 threads
#   2r x 1t   mpirun -np 2 char_lm_mpi          two ranks of one thread on this one host
#   2r tcp    the same over TCP (--mca btl self,tcp): the transport between hosts, on loopback
#   1r x 2t   mpirun -np 1 char_lm_mpi --threads 2 --bind-to none: the rank of the layout to use
#             across hosts (one rank per host, a thread per core), alone: one host cannot hold two
# and the best round of each is kept. Then the allreduce alone (build/allreduce_bench, shared
# memory and TCP, each config's parameter count), and the CPU seconds per step of 1p x 1t
# against 2r x 1t (user + sys of the whole job, runs of S and 2S steps subtracted).
#
# The model: t(N ranks x T threads) = c_T B / N + A(P, N), A the allreduce of P floats; on one
# host A is measured, between hosts A = 2(N-1) a + 2(N-1)/N 4P / b (a ring), b the smaller of
# the link's rate and the bus bandwidth that the polled allreduce (dist_mpi.c) reached here
# over TCP for P floats: it moves data only while it polls, so it does not reach a fast link's
# line rate (seen: 0.1-0.8 GB/s on loopback, below 10 Gb/s = 1.25 GB/s). The extrapolation
# uses the measured c2 and, for 8-thread ranks, c8 = c1 / (8 e^3) where e = c1 / (2 c2) is the
# measured efficiency of one doubling of threads (an assumption, said so in the docs).
set -euo pipefail
cd "$(dirname "$0")/.."
# A busy machine: the load average, and the share of the CPUs others used over a second, before
# and after (LOAD_MAX, default half the cores; BUSY_MAX, default 25%): above either, a warning
# on stderr and above the tables, which then measure the neighbours as much as this machine.
busy_check() {
    local cores load busy
    cores=$(getconf _NPROCESSORS_ONLN)   # not nproc: it reads OMP_NUM_THREADS
    load=$(cut -d' ' -f1 /proc/loadavg)
    busy=$( { head -1 /proc/stat; sleep 1; head -1 /proc/stat; } | awk '{ t = 0; for (i = 2; i <= NF; i++) t += $i;
        idle = $5 + $6; if (NR == 1) { t0 = t; i0 = idle } else printf "%.0f", 100 * (1 - (idle - i0) / (t - t0)) }')
    if awk -v l="$load" -v b="$busy" -v c="$cores" -v lm="${LOAD_MAX:-}" -v bm="${BUSY_MAX:-25}" \
        'BEGIN { if (lm == "") lm = c / 2; exit !(l > lm || b > bm) }'; then
        echo "WARNING ($1): this machine is busy: load average $load on $cores cores, ${busy}% of the CPUs used by others" \
             "over a second; the figures measure the neighbours too (wait for a quiet window: flock, or LOAD_MAX=)"
    fi
}
WARN_BEFORE=$(busy_check "before")
[ -n "$WARN_BEFORE" ] && echo "$WARN_BEFORE" >&2
ROUNDS=${ROUNDS:-2}
CONFIGS=${CONFIGS:-"tiny baby small"}
DATA=${DATA:-data/tinyshakespeare.txt}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe"
TMP=$(mktemp -d /tmp/ag_scaling.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
for p in build/char_lm build/char_lm_mpi build/allreduce_bench; do
    [ -x "$p" ] || { echo "scaling.sh: $p missing (make build/char_lm build/char_lm_mpi build/allreduce_bench)" >&2; exit 1; }
done

batch() { case $1 in tiny) echo 16 ;; baby) echo 12 ;; small) echo 4 ;; esac; }
steps() { case $1 in tiny) echo 150 ;; baby) echo 40 ;; small) echo 8 ;; esac; }
block() { case $1 in tiny) echo 32 ;; baby) echo 64 ;; small) echo 256 ;; esac; }
# the flags of every run: no dropout, one evaluation batch at the start and the end
flags() { echo "train --config $1 --batch-size $(batch "$1") --data $DATA --eval-iters 1 --eval-interval 100000 \
--dropout 0 --overwrite --progress lines"; }

# median ms per step of the run in $1 (metrics.csv's tokens_per_s, found by name), steps 3 on
ms_per_step() {
    awk -F, -v BT="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "tokens_per_s") c = i; next }
        $3 != "" && $1 >= 3 && $c > 0 { print 1000 * BT / $c }' "$1/metrics.csv" | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run KIND CONFIG STEPS: the job; prints "ms_per_step cpu_seconds compute_ms" (compute_ms: the
# forward+backward per step of rank 0, from char_lm_mpi's summary line; 0 without one)
run() {
    local kind=$1 c=$2 n=$3 out="$TMP/run" cmd
    case $kind in
    1p1t) cmd="build/char_lm $(flags "$c") --threads 1" ;;
    1p2t) cmd="build/char_lm $(flags "$c") --threads 2" ;;
    2r1t) cmd="$MPIRUN -np 2 build/char_lm_mpi $(flags "$c") --threads 1" ;;
    2rtcp) cmd="$MPIRUN --mca btl self,tcp -np 2 build/char_lm_mpi $(flags "$c") --threads 1" ;;
    1r2t) cmd="$MPIRUN --bind-to none -np 1 build/char_lm_mpi $(flags "$c") --threads 2" ;;
    esac
    /usr/bin/time -f "%U %S" -o "$TMP/time" $cmd --max-iters "$n" --out "$out" > "$TMP/log" 2>&1 ||
        { echo "scaling.sh: failed: $cmd" >&2; cat "$TMP/log" >&2; exit 1; }
    local ms cpu comp
    ms=$(ms_per_step "$out" $(($(batch "$c") * $(block "$c"))))
    cpu=$(awk '{ print $1 + $2 }' "$TMP/time")
    comp=$(sed -n 's/.*per step \([0-9.]*\) ms forward+backward.*/\1/p' "$TMP/log" | tail -1)
    echo "$ms $cpu ${comp:-0}"
}

min() { printf '%s\n' "$@" | sort -g | head -1; }
kinds="1p1t 1p2t 2r1t 2rtcp 1r2t"
declare -A T CPU COMP P
for c in $CONFIGS; do   # the parameter count of each config on this text
    build/char_lm $(flags "$c") --max-iters 0 --out "$TMP/p" --trace-only > "$TMP/log" 2>&1 || true
    P[$c]=$(sed -n 's/.*: \([0-9]*\) parameters.*/\1/p' "$TMP/log" | head -1)
    [ -n "${P[$c]}" ] || { echo "scaling.sh: no parameter count for $c" >&2; cat "$TMP/log" >&2; exit 1; }
done
for r in $(seq "$ROUNDS"); do
    for c in $CONFIGS; do
        for k in $kinds; do
            read -r ms cpu comp < <(run "$k" "$c" "$(steps "$c")")
            T[$c.$k]="${T[$c.$k]:-} $ms"
            [ "$k" = 2r1t ] && COMP[$c]="${COMP[$c]:-} $comp"
        done
    done
done
# the allreduce alone: ms for each config's P, shared memory and TCP
sizes=""; for c in $CONFIGS; do sizes="$sizes ${P[$c]}"; done
declare -A AR BW
for tr in shm tcp; do
    mca=""; [ $tr = tcp ] && mca="--mca btl self,tcp"
    $MPIRUN $mca -np 2 build/allreduce_bench $sizes > "$TMP/ar" 2>&1
    for c in $CONFIGS; do
        AR[$c.$tr]=$(awk -v n="${P[$c]}" '$1 == n { for (i = 1; i <= NF; i++) if ($i == "allreduce") print $(i + 1) }' "$TMP/ar")
        BW[$c.$tr]=$(awk -v n="${P[$c]}" '$1 == n { for (i = 1; i <= NF; i++) if ($i ~ /^GB\/s\)/) { v = $(i - 1); sub(/^\(/, "", v); print v; exit } }' "$TMP/ar")
    done
done
# CPU seconds per step: runs of S and 2S steps, subtracted
declare -A CPS
for c in tiny baby; do
    [[ " $CONFIGS " == *" $c "* ]] || continue
    for k in 1p1t 2r1t; do
        s=$(steps "$c")
        read -r _ a _ < <(run "$k" "$c" "$s")
        read -r _ b _ < <(run "$k" "$c" $((2 * s)))
        CPS[$c.$k]=$(awk -v a="$a" -v b="$b" -v s="$s" 'BEGIN { printf "%.1f", 1000 * (b - a) / s }')
    done
done

# --- the tables ---
WARN_AFTER=$(busy_check "after")
[ -n "$WARN_AFTER" ] && echo "$WARN_AFTER" >&2
for w in "$WARN_BEFORE" "$WARN_AFTER"; do [ -n "$w" ] && printf '%s\n\n' "$w"; done
pct() { awk -v p="$1" -v m="$2" 'BEGIN { printf "%+.0f%%", 100 * (p - m) / m }'; }
echo "Measured: median ms per step, best of $ROUNDS rounds; c = compute per window"
echo
echo "| config (B, T) | c, 1 thread | c, 2 threads | 1p x 1t | 1p x 2t | 2r x 1t | 2r x 1t, TCP | 1r x 2t (mpirun) | allreduce, shm / TCP | its bus bandwidth, shm / TCP |"
echo "|---|---|---|---|---|---|---|---|---|---|"
declare -A BEST
for c in $CONFIGS; do
    for k in $kinds; do BEST[$c.$k]=$(min ${T[$c.$k]}); done
    B=$(batch "$c")
    awk -v c="$c" -v B="$B" -v T="$(block "$c")" -v a="${BEST[$c.1p1t]}" -v b="${BEST[$c.1p2t]}" \
        -v d="${BEST[$c.2r1t]}" -v e="${BEST[$c.2rtcp]}" -v f="${BEST[$c.1r2t]}" -v s="${AR[$c.shm]}" \
        -v t="${AR[$c.tcp]}" -v u="${BW[$c.shm]}" -v v="${BW[$c.tcp]}" \
        'BEGIN { printf "| %s (%d, %d) | %.2f ms | %.2f ms | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f / %.2f ms | %.2f / %.2f GB/s |\n",
        c, B, T, a / B, b / B, a, b, d, e, f, s, t, u, v }'
done
echo
echo "The model against the measurements: t(N x T) = c_T B / N + A (ms per step)"
echo
echo "| config | layout | predicted | measured | predicted - measured | rank 0's compute, measured (c1 B / 2 predicted) |"
echo "|---|---|---|---|---|---|"
for c in $CONFIGS; do
    B=$(batch "$c")
    c1=$(awk -v a="${BEST[$c.1p1t]}" -v B="$B" 'BEGIN { print a / B }')
    c2=$(awk -v a="${BEST[$c.1p2t]}" -v B="$B" 'BEGIN { print a / B }')
    comp=$(min ${COMP[$c]})
    for k in 2r1t 2rtcp 1r2t; do
        case $k in
        2r1t) lay="2 ranks x 1 thread, one host"; p=$(awk -v c="$c1" -v B="$B" -v A="${AR[$c.shm]}" 'BEGIN { print c * B / 2 + A }') ;;
        2rtcp) lay="2 ranks x 1 thread, TCP"; p=$(awk -v c="$c1" -v B="$B" -v A="${AR[$c.tcp]}" 'BEGIN { print c * B / 2 + A }') ;;
        1r2t) lay="1 rank x 2 threads (mpirun)"; p=$(awk -v c="$c2" -v B="$B" 'BEGIN { print c * B }') ;;
        esac
        m=${BEST[$c.$k]}
        extra="-"
        [ $k = 2r1t ] && extra=$(awk -v x="$comp" -v c="$c1" -v B="$B" 'BEGIN { printf "%.1f (%.1f)", x, c * B / 2 }')
        printf '| %s | %s | %.1f | %.1f | %s | %s |\n' "$c" "$lay" "$p" "$m" "$(pct "$p" "$m")" "$extra"
    done
done
echo
echo "Two ranks of one thread against one process of two threads, on this one 2-core host"
echo
echo "| config | 1p x 2t ms | 2r x 1t ms | speed-up of 2 ranks | CPU ms per step: 1p x 1t | 2r x 1t | ratio |"
echo "|---|---|---|---|---|---|---|"
for c in $CONFIGS; do
    a=${CPS[$c.1p1t]:-} b=${CPS[$c.2r1t]:-}
    awk -v c="$c" -v x="${BEST[$c.1p2t]}" -v y="${BEST[$c.2r1t]}" -v a="${a:-0}" -v b="${b:-0}" 'BEGIN {
        if (a > 0) r = sprintf("| %.1f | %.1f | %.2fx |", a, b, b / a); else r = "| - | - | - |";
        printf "| %s | %.1f | %.1f | %.2fx %s\n", c, x, y, x / y, r }'
done
echo
echo "Extrapolated: ranks on separate hosts, B of the recipe (small: 64), efficiency (communication share)"
echo "b = min(the link's rate, the polled allreduce's bus bandwidth over TCP here:$(for c in $CONFIGS; do printf ' %s %s GB/s' "$c" "${BW[$c.tcp]}"; done))"
echo
echo "| config | N | 2 threads, 1 Gb/s | 10 Gb/s | 100 Gb/s | 8 threads (assumed), 10 Gb/s | 100 Gb/s |"
echo "|---|---|---|---|---|---|---|"
for c in $CONFIGS; do
    B=$(batch "$c"); [ "$c" = small ] && B=64
    awk -v c="$c" -v B="$B" -v P="${P[$c]}" -v bw="${BW[$c.tcp]}" -v c1="$(awk -v a="${BEST[$c.1p1t]}" -v b="$(batch "$c")" 'BEGIN { print a / b }')" \
        -v c2="$(awk -v a="${BEST[$c.1p2t]}" -v b="$(batch "$c")" 'BEGIN { print a / b }')" 'BEGIN {
        e = c1 / (2 * c2); if (e > 1) e = 1; c8 = c1 / (8 * e * e * e);
        split("1 10 100", gbs, " "); split("50 20 5", lat, " ");
        for (N = 2; N <= 64 && N <= B; N *= 2) {
            line = sprintf("| %s | %d |", c, N);
            for (k = 1; k <= 5; k++) {
                l = k <= 3 ? k : k - 2; cc = k <= 3 ? c2 : c8;
                b = gbs[l] / 8; if (bw > 0 && bw < b) b = bw;   # GB/s: the link, or the pace of polling
                comm = 2 * (N - 1) * lat[l] * 1e-3 + 2 * (N - 1) / N * 4 * P / (b * 1e9) * 1e3;
                t = cc * B / N + comm;
                line = line sprintf(" %.0f%% (%.0f%%) |", 100 * cc * B / (N * t), 100 * comm / t);
            }
            print line
        }
    }'
done
