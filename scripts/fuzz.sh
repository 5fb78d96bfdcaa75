#!/usr/bin/env bash
# Builds the fuzz targets of fuzz/ (libFuzzer through libfuzzer-sys, on stable Rust: coverage by
# LLVM's sanitizer-coverage pass, no sanitizer) and runs each from its committed corpus
# (fuzz/corpus/TARGET) for a while. Fails if any target crashes: a panic, a failed assertion, an
# abort, a timeout or running out of memory; the input is kept in fuzz/artifacts/TARGET/ and
# printed in hex.
#
#     bash scripts/fuzz.sh                       # every target, 15 s each (what CI runs)
#     bash scripts/fuzz.sh --seconds 1800 table  # one target for 30 minutes
#     bash scripts/fuzz.sh --runs 1000000 fen    # one target for a number of inputs
#     bash scripts/fuzz.sh --build-only
#     bash scripts/fuzz.sh --keep-corpus ...     # new inputs go to fuzz/corpus/TARGET (else a temp dir)
#     bash scripts/fuzz.sh --full ...            # instrument the dependencies too (own build)
#
# By default the build shares the main build's target folder and profile (`checked`): only this
# project's crates and the targets are compiled again, with the coverage flags (a rustc wrapper,
# fuzz/rustc-wrapper.sh), and the dependencies CI's tests compiled are reused. `--full` builds
# everything instrumented in fuzz/target, as cargo-fuzz does: coverage inside prost, zstd, axum
# too, for long runs, at the price of a build of every crate (6 minutes on 2 cores).
#
# Needs only cargo, a C++ compiler (libfuzzer-sys compiles libFuzzer) and crates.io.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALL_TARGETS=(fen lichess_fen table journal wire task serve)
seconds=15
runs=""
build_only=""
keep_corpus=""
full=""
targets=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --build-only) build_only=1; shift ;;
        --keep-corpus) keep_corpus=1; shift ;;
        --full) full=1; shift ;;
        -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL_TARGETS[@]}")

# The longest input each target is given (libFuzzer's -max_len).
max_len() {
    case "$1" in
        fen|lichess_fen) echo 256 ;;
        serve) echo 512 ;;
        table) echo 16384 ;;
        *) echo 4096 ;;
    esac
}

host="$(rustc -vV | sed -n 's/^host: //p')"
# cargo-fuzz's flags without a sanitizer (those need nightly).
flags="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares"
# The fuzz workspace resolves to the main workspace's versions: its lock file is the main one's
# (cargo adds the few crates only the fuzz targets use).
cp "$ROOT/Cargo.lock" "$ROOT/fuzz/Cargo.lock"
build=(cargo build --quiet --manifest-path "$ROOT/fuzz/Cargo.toml" $(printf -- '--bin %s ' "${targets[@]}"))
start=$(date +%s)
echo "building the fuzz targets (${targets[*]})${full:+, every crate instrumented}"
if [[ -n "$full" ]]; then
    # With an explicit --target, RUSTFLAGS reach the targets and their dependencies, not build
    # scripts and proc macros.
    RUSTFLAGS="$flags" CARGO_TARGET_DIR="$ROOT/fuzz/target" "${build[@]}" --profile fuzz --target "$host"
    bin_dir="$ROOT/fuzz/target/$host/fuzz"
else
    # Every crate the wrapper instruments needs a profile override of its own (fuzz/Cargo.toml),
    # or its instrumented build would share a file with the main build's and could stand in
    # for it there.
    for name in $(cargo metadata --no-deps --format-version 1 --manifest-path "$ROOT/Cargo.toml" |
        python3 -c 'import json, sys; print(*(p["name"] for p in json.load(sys.stdin)["packages"]))'); do
        if [[ "$name" == zermelo-* ]] && ! grep -q "^\[profile.checked.package.$name\]" "$ROOT/fuzz/Cargo.toml"; then
            echo "fuzz/Cargo.toml has no [profile.checked.package.$name]: add one (see the others)" >&2
            exit 1
        fi
    done
    unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
    RUSTC_WRAPPER="$ROOT/fuzz/rustc-wrapper.sh" ZERMELO_FUZZ_RUSTFLAGS="$flags" \
        CARGO_TARGET_DIR="$ROOT/target" "${build[@]}" --profile checked
    bin_dir="$ROOT/target/checked"
fi
echo "built in $(( $(date +%s) - start )) s"
[[ -z "$build_only" ]] || exit 0

failed=()
for t in "${targets[@]}"; do
    bin="$bin_dir/$t"
    seeds="$ROOT/fuzz/corpus/$t"
    artifacts="$ROOT/fuzz/artifacts/$t"
    mkdir -p "$artifacts"
    if [[ -n "$keep_corpus" ]]; then
        corpus=("$seeds")
    else
        work="$(mktemp -d)"
        corpus=("$work" "$seeds")
    fi
    limit=(-max_total_time="$seconds")
    [[ -z "$runs" ]] || limit=(-runs="$runs")
    dict=()
    [[ ! -f "$ROOT/fuzz/dict/$t.dict" ]] || dict=(-dict="$ROOT/fuzz/dict/$t.dict")
    # The targets' files (journal, serve's tables), on tmpfs when there is one: the journal
    # syncs each write.
    ZERMELO_FUZZ_TMP="$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)"
    export ZERMELO_FUZZ_TMP
    log="$(mktemp)"
    if [[ -n "$runs" ]]; then echo "== fuzz $t ($runs inputs)"; else echo "== fuzz $t ($seconds s)"; fi
    t0=$(date +%s)
    set +e
    "$bin" "${limit[@]}" "${dict[@]}" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" "${corpus[@]}" >"$log" 2>&1
    status=$?
    set -e
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    cov="$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)"
    echo "$t: ${execs:-?} inputs in $(( $(date +%s) - t0 )) s, $cov, exit $status"
    if [[ $status -ne 0 ]]; then
        failed+=("$t")
        tail -n 60 "$log"
        for f in "$artifacts"/*; do
            [[ -f "$f" ]] || continue
            echo "input $f:"
            od -An -tx1 -v "$f" | head -n 40
        done
    fi
    rm -rf "$log" "$ZERMELO_FUZZ_TMP"
    [[ -n "$keep_corpus" ]] || rm -rf "$work"
done
echo "fuzzing took $(( $(date +%s) - start )) s in all"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz targets that crashed: ${failed[*]}" >&2
    exit 1
fi
echo "no fuzz target crashed: ${targets[*]}"
