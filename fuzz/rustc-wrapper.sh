#!/usr/bin/env bash
# RUSTC_WRAPPER of scripts/fuzz.sh (its default, shared build): compiles this project's crates
# and the fuzz targets with the coverage flags in ZERMELO_FUZZ_RUSTFLAGS, and every other crate
# (the dependencies, the build scripts) as the main build does, so that the main build's
# compiled dependencies are reused. Called as `rustc-wrapper.sh RUSTC ARGS...`.
rustc="$1"
shift
crate=""
prev=""
for arg in "$@"; do
    [[ "$prev" == "--crate-name" ]] && crate="$arg"
    prev="$arg"
done
case "$crate" in
    zermelo_* | fen | lichess_fen | table | journal | wire | serve)
        # shellcheck disable=SC2086 # the flags are words
        exec "$rustc" "$@" $ZERMELO_FUZZ_RUSTFLAGS ;;
    *)
        exec "$rustc" "$@" ;;
esac
