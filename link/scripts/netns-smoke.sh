#!/bin/bash
# Manual end-to-end check of tunbench-link (needs root; touches nothing outside
# its own namespaces). Creates tblk-<pid>-a/b, runs the emulator between them
# with the given specs, pings across (and runs iperf3 TCP if installed), stops
# the emulator with SIGTERM and removes everything.
#
#   scripts/netns-smoke.sh [A2B_SPEC] [B2A_SPEC]
#   scripts/netns-smoke.sh "delay=10ms" "delay=10ms"
set -u
BIN=${TUNBENCH_LINK:-$(dirname "$0")/../target/release/tunbench-link}
A2B=${1:-}
B2A=${2:-}
NA=tblk-$$-a
NB=tblk-$$-b
OUT=$(mktemp -d)
PID=
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID"
    ip netns del "$NA" 2>/dev/null
    ip netns del "$NB" 2>/dev/null
    rm -rf "$OUT"
}
trap cleanup EXIT
ip netns add "$NA" && ip netns add "$NB" || exit 1
"$BIN" run --netns-a "/run/netns/$NA" --dev-a tba --netns-b "/run/netns/$NB" --dev-b tbb \
    --stats-file "$OUT/stats.json" --a2b "$A2B" --b2a "$B2A" >"$OUT/out" 2>"$OUT/err" &
PID=$!
for _ in $(seq 100); do grep -q '"ready"' "$OUT/out" && break; sleep 0.05; done
grep -q '"ready"' "$OUT/out" || { echo "not ready:"; cat "$OUT/err"; exit 1; }
head -1 "$OUT/out"
ip -n "$NA" addr add 198.18.0.1/24 dev tba
ip -n "$NB" addr add 198.18.0.2/24 dev tbb
ip netns exec "$NA" ping -c 20 -i 0.05 198.18.0.2 | tail -2
if command -v iperf3 >/dev/null; then
    ip netns exec "$NB" iperf3 -s -1 -B 198.18.0.2 >/dev/null 2>&1 &
    SP=$!
    sleep 0.3
    ip netns exec "$NA" iperf3 -c 198.18.0.2 -t 5 -f m | grep -E "sender|receiver"
    wait $SP
fi
kill -TERM "$PID"
wait "$PID"
echo "exit code: $?"
PID=
tail -1 "$OUT/out"
