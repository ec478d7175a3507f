#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs every fuzz target (fuzz/) for MINUTES minutes each with libFuzzer, in a clang
# build directory of its own (build-fuzz, or $FUZZ_BUILDDIR), so the default gcc build is
# left alone. New interesting inputs go to <builddir>/fuzz/corpus-<target>/ (the
# checked-in corpus under fuzz/corpus/ is only read); a crash leaves its input in
# <builddir>/fuzz/<target>-crash-* and makes the script exit 1 after all targets ran.
# Save a reproducer under fuzz/corpus/<target>/ so that every CI build replays it.
#
# Usage: bench/fuzz-long.sh [MINUTES] [TARGET...]     (default 10 minutes, all targets)
# Needs clang and libFuzzer (Debian: clang and libclang-rt-14-dev).
set -eu

minutes=${1:-10}
case $minutes in
''|*[!0-9]*) echo "usage: $0 [MINUTES] [TARGET...]" >&2; exit 2 ;;
esac
[ $# -gt 0 ] && shift
targets=${*:-"fuzz_spec fuzz_wire fuzz_agent_answer"}

src=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILDDIR:-$src/build-fuzz}
# FUZZ_JOBS=N runs N fuzzing processes per target (each logs to fuzz-<n>.log in the
# current directory, as libFuzzer does); 1 keeps the output on the terminal.
jobs=${FUZZ_JOBS:-1}
parallel=
[ "$jobs" -gt 1 ] && parallel="-jobs=$jobs -workers=$jobs"

if ! command -v clang >/dev/null; then
        echo "$0: clang is needed (apt-get install clang libclang-rt-14-dev)" >&2
        exit 2
fi
if [ ! -d "$build" ]; then
        # -Werror stays off: clang warns about things gcc does not, which is no reason
        # to stop fuzzing the parsers.
        CC=clang meson setup "$build" "$src" -Dbuildtype=debugoptimized -Dwerror=false
fi
if ! grep -q "libFuzzer (-fsanitize=fuzzer).*YES" "$build/meson-logs/meson-log.txt"; then
        echo "$0: libFuzzer does not link with this clang (install libclang-rt-14-dev)" >&2
        exit 2
fi
for t in $targets; do
        ninja -C "$build" "fuzz/$t"
done

failed=0
for t in $targets; do
        echo "== $t: $minutes min"
        mkdir -p "$build/fuzz/corpus-$t"
        if ! UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
                "$build/fuzz/$t" -max_total_time=$((minutes * 60)) -timeout=10 \
                -rss_limit_mb=2048 -max_len=65536 -error_exitcode=1 -timeout_exitcode=1 \
                $parallel -print_final_stats=1 \
                -artifact_prefix="$build/fuzz/$t-" \
                "$build/fuzz/corpus-$t" "$src/fuzz/corpus/$t"; then
                echo "== $t: FAILED; reproducers: $(ls "$build/fuzz/$t"-* 2>/dev/null | tr '\n' ' ')"
                failed=1
        fi
done
exit $failed
