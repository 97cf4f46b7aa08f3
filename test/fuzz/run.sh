#!/bin/sh
# run.sh FUZZ_BUILD SECONDS NAME... - runs each libFuzzer target FUZZ_BUILD/fuzz_NAME for SECONDS
# (make fuzz). New inputs go to FUZZ_BUILD/corpus/NAME (kept between runs), seeded from
# test/fuzz/corpus/NAME and test/fuzz/regressions/NAME; crashes, leaks and timeouts are written to
# FUZZ_BUILD/crashes/NAME/. Prints "fuzz NAME: E execs in S s, C crashes, corpus K inputs" per
# target, appends the same lines to FUZZ_BUILD/fuzz-summary.txt, and exits non-zero if any target
# found a crash (to keep one: copy it to test/fuzz/regressions/NAME/, fix the bug, commit both).
set -u
BUILD=$1
SECONDS_EACH=$2
shift 2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
status=0
for name in "$@"; do
    bin="$BUILD/fuzz_$name"
    work="$BUILD/corpus/$name"
    crashes="$BUILD/crashes/$name"
    log="$BUILD/fuzz_$name.log"
    mkdir -p "$work" "$crashes"
    seeds=""
    for d in "$ROOT/test/fuzz/corpus/$name" "$ROOT/test/fuzz/regressions/$name"; do
        [ -d "$d" ] && seeds="$seeds $d"
    done
    extra=""
    dict=$name
    [ "$name" = run ] || [ "$name" = cpu ] && dict=ir_text # these load text models too
    [ -f "$ROOT/test/fuzz/$dict.dict" ] && extra="$extra -dict=$ROOT/test/fuzz/$dict.dict"
    # The raw-input target drives the CLI's reader, which reports every refused file on stderr.
    [ "$name" = raw_input ] && extra="$extra -close_fd_mask=2"
    before=$(ls "$crashes" | wc -l)
    # shellcheck disable=SC2086
    # A fixed seed (FUZZ_SEED, default 1) makes a CI run repeatable from its log.
    "$bin" -seed="${FUZZ_SEED:-1}" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
        -artifact_prefix="$crashes/" $extra "$work" $seeds >"$log" 2>&1 &
    pid=$!
    wait $pid
    rc=$?
    # libFuzzer leaves with _Exit, so the OpenMP runtime (LLVM's libomp in this clang build) never
    # removes its per-process registration file.
    rm -f /dev/shm/__KMP_REGISTERED_LIB_"$pid"_*
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    secs=$(sed -n 's/^stat::.*//; s/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -n 1)
    after=$(ls "$crashes" | wc -l)
    found=$((after - before))
    corpus=$(ls "$work" | wc -l)
    line="fuzz $name: ${execs:-?} execs in ${secs:-$SECONDS_EACH} s, $found crashes, corpus $corpus inputs"
    echo "$line"
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $line" >>"$BUILD/fuzz-summary.txt"
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
        echo "fuzz $name: FAILED (exit $rc); inputs in $crashes/, log $log:"
        grep -E "ERROR|SUMMARY|property broken|==[0-9]+==" "$log" | head -n 20
        status=1
    fi
done
exit $status
