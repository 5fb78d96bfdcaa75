#!/usr/bin/env bash
# The fastest build of `zermelo`: profile-guided optimisation (PGO) of the release build.
#
#     bash scripts/pgo-build.sh            # then: target/pgo/release/zermelo
#
# 1. Builds an instrumented `zermelo` (rustc -Cprofile-generate) in target/pgo-instrumented.
# 2. Trains it: builds a fixed set of tables in a temporary folder, on 1 thread. The set holds
#    neither benchmark material of the Performance section (KQRvKR, KRPvKR), so that the
#    figures measured with this build are not of a build trained on them: KQvKR, KRvKP, KPvKP,
#    KRPvK (4 men), and KRPvKN (5 men with a pawn; it builds the 5-man pawnless tables it
#    promotes into, KQRvKN, KRRvKN, KRBvKN and KRNvKN, and every smaller table they need).
#    About 10 minutes on the 2-core development machine.
# 3. Merges the profiles with `llvm-profdata` of rustc's own LLVM version (from rustup's
#    `llvm-tools` component, or a system `llvm-profdata-N` / /usr/lib/llvm-N: on Debian,
#    `apt-get install llvm-N`), and builds the release binary with them (-Cprofile-use) in
#    target/pgo.
#
# The tables it builds are the same bytes as a plain release build's: PGO changes how the code
# is laid out and inlined, never what it computes (the test suite runs on the plain build).
# ZERMELO_PGO_TRAIN="KQvKR KRvKP" replaces the training set (a quicker, weaker profile).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

fail() {
    printf 'pgo-build: %s\n' "$*" >&2
    exit 2
}

llvm_major="$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')"
[[ -n "$llvm_major" ]] || fail "cannot tell rustc's LLVM version from 'rustc -vV'"

# llvm-profdata of rustc's LLVM major version (an older one cannot read the profiles).
profdata=""
for candidate in \
    "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-profdata \
    "$(command -v "llvm-profdata-$llvm_major" || true)" \
    "/usr/lib/llvm-$llvm_major/bin/llvm-profdata" \
    "$(command -v llvm-profdata || true)"; do
    [[ -n "$candidate" && -x "$candidate" ]] || continue
    if "$candidate" merge --version 2>/dev/null | grep -q "LLVM version $llvm_major\."; then
        profdata="$candidate"
        break
    fi
done
[[ -n "$profdata" ]] || fail "no llvm-profdata of LLVM $llvm_major (rustc's): install it with \
'rustup component add llvm-tools' or, on Debian, 'apt-get install llvm-$llvm_major'"

work="$(mktemp -d "${TMPDIR:-/tmp}/zermelo-pgo.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# Fixed paths in the flags, so that a second run rebuilds only what changed: the raw profiles'
# folder, and the merged profile named by its digest (cargo does not look into the file: a
# profile of other content must be another path to rebuild with it).
raw="$ROOT/target/pgo-instrumented/profiles"
# RUSTFLAGS is split at whitespace: a path with a space would be cut in two.
[[ "$ROOT" != *[[:space:]]* ]] || fail "the repository's path has whitespace ($ROOT): move it"

echo "== 1/3 instrumented build (target/pgo-instrumented)"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$raw" \
    cargo build --release -p zermelo-cli --target-dir target/pgo-instrumented
rm -rf "$raw"

echo "== 2/3 training (tables in $work/tables, 1 thread)"
read -r -a train <<<"${ZERMELO_PGO_TRAIN:-KQvKR KRvKP KPvKP KRPvK KRPvKN}"
for material in "${train[@]}"; do
    start=$SECONDS
    if ! LLVM_PROFILE_FILE="$raw/%m_%p.profraw" target/pgo-instrumented/release/zermelo \
        solve "$material" --tables "$work/tables" --threads 1 >/dev/null 2>"$work/train.log"; then
        tail -n 20 "$work/train.log" >&2
        fail "the training build of $material failed (its log's end above)"
    fi
    echo "   $material: $((SECONDS - start)) s"
done
"$profdata" merge -o "$work/zermelo.profdata" "$raw"/*.profraw
mkdir -p target/pgo/profiles
merged="$ROOT/target/pgo/profiles/zermelo-$(sha256sum "$work/zermelo.profdata" | cut -c1-16).profdata"
mv "$work/zermelo.profdata" "$merged"

echo "== 3/3 optimised build (target/pgo)"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$merged" \
    cargo build --release -p zermelo-cli --target-dir target/pgo
echo "built: target/pgo/release/zermelo"
