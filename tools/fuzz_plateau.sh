#!/usr/bin/env bash
# fuzz_plateau.sh — run libFuzzer targets to a plateau, one at a time:
#
#   tools/fuzz_plateau.sh [--quiet-minutes M] [--max-execs N] [--max-minutes T] NAME...
#
# Each build/fuzz/fuzz_NAME (make fuzz-build) runs from its committed corpus
# tests/fuzz/corpus/NAME/ into a scratch corpus, under nice -n 19, until
# whichever comes first: M minutes (default 10) without a new coverage edge
# ("cov:" of libFuzzer's status lines), N executions (default 2 000 000),
# or T minutes (default 120). Then the scratch corpus is minimized into the
# committed one (-merge=1 into a fresh folder that replaces it) and one line
# is printed per target:
#   NAME executions cov ft seconds stopped-by crashes
# A crash stops that target (its input is left in build/fuzz/) and the
# script exits 1 at the end. Run from the repository root (some targets
# read tests/golden/model).
set -u
cd "$(dirname "$0")/.."

quiet=10 max_execs=2000000 max_minutes=120
while [ $# -gt 0 ]; do
    case $1 in
    --quiet-minutes) quiet=$2; shift 2 ;;
    --max-execs) max_execs=$2; shift 2 ;;
    --max-minutes) max_minutes=$2; shift 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: tools/fuzz_plateau.sh [--quiet-minutes M] [--max-execs N] [--max-minutes T] NAME..." >&2; exit 2; }

failed=0
for name in "$@"; do
    bin=build/fuzz/fuzz_$name
    [ -x "$bin" ] || { echo "fuzz_plateau: $bin missing (make fuzz-build)" >&2; failed=1; continue; }
    seeds=tests/fuzz/corpus/$name
    work=$(mktemp -d) && log=$work/log && mkdir -p "$work/corpus" "$seeds"
    dict=tests/fuzz/$name.dict
    start=$SECONDS
    nice -n 19 "$bin" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 -runs="$max_execs" \
        -max_total_time=$((max_minutes * 60)) $([ -f "$dict" ] && echo "-dict=$dict") \
        -artifact_prefix=build/fuzz/ "$work/corpus" "$seeds" >"$log" 2>&1 &
    pid=$!
    cov=-1 since=$SECONDS stopped="$max_execs executions"
    while kill -0 "$pid" 2>/dev/null; do
        sleep 5
        now=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
        if [ -n "$now" ] && [ "$now" -gt "$cov" ]; then cov=$now since=$SECONDS; fi
        if [ $((SECONDS - since)) -ge $((quiet * 60)) ]; then
            stopped="$quiet minutes without new coverage"
            kill -INT "$pid" 2>/dev/null
        fi
    done
    wait "$pid"
    rc=$?
    secs=$((SECONDS - start))
    [ $secs -ge $((max_minutes * 60)) ] && stopped="$max_minutes minutes"
    execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | tail -1 | awk '{print $2}')
    ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    crashes=0
    if grep -qE 'ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error|SUMMARY: ' "$log"; then
        crashes=1 stopped="a crash (build/fuzz/)" failed=1
        tail -40 "$log" >&2
    elif [ $rc -ne 0 ] && [ $rc -ne 130 ] && [ $rc -ne 72 ]; then
        echo "fuzz_plateau: $name exited $rc" >&2
        tail -20 "$log" >&2
        failed=1
    fi
    # the committed corpus becomes the minimized union of seeds and finds
    mkdir -p "$work/merged"
    if "$bin" -merge=1 -timeout=60 -rss_limit_mb=2048 "$work/merged" "$seeds" "$work/corpus" >"$work/merge.log" 2>&1; then
        rm -rf "$seeds" && mv "$work/merged" "$seeds"
    else
        echo "fuzz_plateau: $name: merge failed, corpus unchanged" >&2
    fi
    echo "$name ${execs:-?} ${cov} ${ft:-?} $secs '$stopped' $crashes"
    rm -rf "$work"
done
exit $failed
