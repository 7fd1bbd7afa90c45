#!/usr/bin/env bash
# fuzz.sh [BUILD_DIR] - runs every libFuzzer target of BUILD_DIR (default
# build/fuzz, made by `make fuzz`) for FUZZ_SECONDS (default 30) each, from
# the committed corpus (tests/fuzz/corpus/NAME; new inputs go to
# BUILD_DIR/work/NAME), FUZZ_JOBS of them at a time (default 1), and goes
# on after a target fails: a finding in one parser must not hide the
# next. Crashes, leaks, timeouts and slow units are written to
# BUILD_DIR/findings/NAME/, each target's output to BUILD_DIR/logs/NAME.log;
# the summary at the end lists them per target, and the exit status is 1
# when any target failed.
#
# A finding becomes a corpus entry (tests/fuzz/corpus/NAME/, so the
# replay of `make test` runs it forever) and a unit test of the fix.
set -u
build=${1:-build/fuzz}
secs=${FUZZ_SECONDS:-30}
jobs=${FUZZ_JOBS:-1}
status=$build/status
rm -rf "$status"
mkdir -p "$status" "$build/logs"

# One target: its exit status goes to $status/NAME.
run_one() {
    local f=$1 n=${1##*/fuzz_}
    local work=$build/work/$n found=$build/findings/$n/
    mkdir -p "$work" "$found"
    echo "== $f ($secs s)"
    "$f" -max_total_time="$secs" -report_slow_units=1 -artifact_prefix="$found" \
        "$work" "tests/fuzz/corpus/$n" >"$build/logs/$n.log" 2>&1
    local rc=$?
    echo "$rc" >"$status/$n"
    [ "$rc" -eq 0 ] || echo "!! $n failed (exit $rc): $build/logs/$n.log"
}

ran=0
for f in "$build"/fuzz_*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    ran=$((ran + 1))
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n
    done
    run_one "$f" &
done
wait

failed=()
for s in "$status"/*; do
    [ -f "$s" ] || continue
    [ "$(cat "$s")" = 0 ] || failed+=("${s##*/}")
done
echo
echo "== fuzz: $ran targets, $secs s each, $jobs at a time; ${#failed[@]} failed"
for d in "$build"/findings/*/; do
    [ -d "$d" ] || continue
    files=$(ls -A "$d")
    [ -n "$files" ] || continue
    echo "-- ${d%/} (base64 of each: base64 -w0 FILE):"
    ls -l "$d" | sed 1d | awk '{print "   " $NF " (" $5 " bytes)"}'
done
if [ ${#failed[@]} -ne 0 ]; then
    echo "failed: ${failed[*]}"
    exit 1
fi
exit 0
