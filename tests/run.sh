#!/usr/bin/env bash
# run.sh — run every test suite and print one closing line:
#   N passed, N failed, N skipped
# Suites: the native test binary (all TEST()s: kernels on every ISA this CPU
# runs, loaders, parsers, model goldens, CLI), the NEON kernel tests
# cross-built for aarch64 and run under qemu, and the x86 kernel tests on
# emulated AVX-512 and AMX (both required under CI=true), and flux-server
# end to end with real HTTP clients (tests/run_server.sh; needs
# libmicrohttpd, required under CI=true).
# Arguments are passed to the native test binary as name filters.
set -u
cd "$(dirname "$0")/.."

passed=0 failed=0 skipped=0

add_counts() {  # parse "N passed, N failed[, N skipped]" from the last line
    local line=$1
    if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)? ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
        skipped=$((skipped + ${BASH_REMATCH[4]:-0}))
        return 0
    fi
    return 1
}

run_suite() {  # name, command...
    local name=$1; shift
    echo "== $name"
    local log
    log=$(mktemp)
    "$@" 2>&1 | tee "$log"
    local last
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    if ! add_counts "$last"; then
        echo "FAIL $name: the suite did not report its results"
        failed=$((failed + 1))
    fi
    rm -f "$log"
}

run_suite "native tests" "${FLUX_TEST_BIN:?FLUX_TEST_BIN not set (use make test)}" "$@"
if [ $# -eq 0 ]; then
    run_suite "NEON kernel tests (aarch64 under qemu)" tests/run_neon.sh
    run_suite "x86 kernel tests on emulated AVX-512 and AMX" tests/run_x86emu.sh
    run_suite "flux-server end to end (HTTP clients)" tests/run_server.sh
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
