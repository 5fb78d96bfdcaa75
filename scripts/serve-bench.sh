#!/usr/bin/env bash
# Benchmark of `zermelo serve` with a real HTTP load generator (wrk): requests per second and
# latency percentiles (p50, p99) of GET /standard for random positions of each MATERIAL, at 1,
# 16 and 64 concurrent connections, and the server's peak resident memory.
#
#     bash scripts/serve-bench.sh ZERMELO_BINARY TABLES_DIR MATERIAL... [-- SECONDS]
#
# The tables of the materials must be in TABLES_DIR (build them with `zermelo solve`). Random
# placements of each material are drawn and kept when `zermelo probe` answers them (legal, the
# side not to move not in check): 1,000 positions per material, asked at random by every
# connection. Installs Debian's wrk when it is missing (as root). Not part of CI: the figures go
# to the issue notes and the README.
set -euo pipefail

ZERMELO="$(realpath "${1:?usage: serve-bench.sh ZERMELO_BINARY TABLES_DIR MATERIAL... [-- SECONDS]}")"
TABLES="${2:?tables directory}"
shift 2
MATERIALS=()
SECONDS_EACH=10
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then SECONDS_EACH="$2"; break; fi
    MATERIALS+=("$1"); shift
done
[ ${#MATERIALS[@]} -gt 0 ] || { echo "name at least one material" >&2; exit 2; }
command -v wrk >/dev/null 2>&1 || apt-get install -y wrk >/dev/null
WORK="$(mktemp -d /tmp/zermelo-serve-bench.XXXXXX)"
SERVER=""
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

# Random legal positions of a material, one FEN per line with `_` for spaces.
positions() {
    python3 - "$1" >"$WORK/$1.candidates" <<'PY'
import random, sys
white, black = sys.argv[1].split("v")
men = [c.upper() for c in white] + [c.lower() for c in black]
rng = random.Random(20261201)
for _ in range(4000):
    board = ["."] * 64
    for m in men:
        while True:
            sq = rng.randrange(64)
            if board[sq] == "." and not (m in "Pp" and not 8 <= sq < 56):
                board[sq] = m
                break
    rows = []
    for r in range(7, -1, -1):
        row, empty = "", 0
        for f in range(8):
            c = board[r * 8 + f]
            if c == ".":
                empty += 1
            else:
                row += (str(empty) if empty else "") + c
                empty = 0
        rows.append(row + (str(empty) if empty else ""))
    print("/".join(rows) + " " + rng.choice("wb") + " - - 0 1")
PY
    # probe exits 1 when some candidates are not positions: those lines are dropped.
    "$ZERMELO" probe --tables "$TABLES" <"$WORK/$1.candidates" >"$WORK/$1.probed" 2>/dev/null || true
    python3 -c 'import json,sys
n=0
for line in sys.stdin:
    a=json.loads(line)
    if "error" not in a and n < 1000:
        print(a["fen"].replace(" ", "_")); n+=1' <"$WORK/$1.probed"
}

"$ZERMELO" serve --tables "$TABLES" --listen 127.0.0.1:0 2>"$WORK/serve.log" &
SERVER=$!
for _ in $(seq 100); do
    ADDR="$(grep -o 'listening on http://[0-9.:]*' "$WORK/serve.log" | head -1 | sed 's|listening on http://||')" || true
    [ -n "$ADDR" ] && break
    sleep 0.1
done
[ -n "${ADDR:-}" ] || { echo "the server did not start: $(cat "$WORK/serve.log")" >&2; exit 1; }

printf '%-8s %8s %12s %10s %10s %10s\n' material clients requests/s p50 p99 errors
for m in "${MATERIALS[@]}"; do
    positions "$m" >"$WORK/$m.fens"
    [ -s "$WORK/$m.fens" ] || { echo "no position of $m answered: is its table in $TABLES?" >&2; exit 1; }
    cat >"$WORK/$m.lua" <<LUA
local fens = {}
for line in io.lines("$WORK/$m.fens") do fens[#fens + 1] = line end
math.randomseed(7)
request = function()
    return wrk.format("GET", "/standard?fen=" .. fens[math.random(#fens)])
end
LUA
    for c in 1 16 64; do
        t=$(( c < 2 ? c : 2 ))
        out="$(wrk -t"$t" -c"$c" -d"${SECONDS_EACH}s" --latency -s "$WORK/$m.lua" "http://$ADDR" 2>&1)"
        rps="$(awk '/Requests\/sec/ {print $2}' <<<"$out")"
        p50="$(awk '$1 == "50%" {print $2}' <<<"$out")"
        p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
        errors="$(awk '/Non-2xx/ {print $4} /Socket errors/ {print "socket"}' <<<"$out" | tr '\n' ' ')"
        printf '%-8s %8s %12s %10s %10s %10s\n' "$m" "$c" "$rps" "$p50" "$p99" "${errors:-0}"
    done
done
echo "server peak RSS: $(awk '/VmHWM/ {print $2, $3}' /proc/$SERVER/status)"
