#!/bin/bash
# What classification and targeted faults cost the emulator: its throughput
# with `--a2b-faults` (one fault that never fires; classification on in both
# directions) against the same emulator without, side by side, alternated
# (OFF, ON, OFF, ON...) in each of N rounds, as ratios ON/OFF per round.
# Needs root, iperf3 and python3; touches nothing outside its own two
# namespaces (tblk-fb-<pid>-a/b, 198.18.0.1-2), which it removes on exit.
# Run it under the measurement lock:
#
#   flock /tmp/tunbench-measure.lock link/scripts/faults-bench.sh [ROUNDS] [SECONDS]
#
# Workloads (iperf3 a -> b, one flow, SECONDS each, the first second omitted):
#   udp       1400-byte UDP datagrams at full speed (what a tunnel sends):
#             OFF is the default passthrough path; ON the segmented path with
#             the fault stage (the whole price of asking for faults)
#   udp-seg   the same with `jitter=1ns` both ways in both runs (a no-op that
#             puts OFF on the segmented path too): the fault stage's own cost
#   tcp-seg   TCP, `jitter=1ns` in both runs: the stage's cost on TCP segments
#   tcp       TCP, OFF passthrough (super-packets) vs ON: what a TCP tunnel
#             (OpenVPN over TCP) pays, splitting and re-merging included
# Prints one line per run and a summary (median, min, max of the ratios).
set -u
BIN=${TUNBENCH_LINK:-$(dirname "$0")/../target/release/tunbench-link}
ROUNDS=${1:-5}
SECS=${2:-5}
FAULT='match=wg.initiation,nth=1000000000,action=drop'
NA=tblk-fb-$$-a
NB=tblk-fb-$$-b
OUT=$(mktemp -d)
PID=
SP=
cleanup() {
    [ -n "$SP" ] && kill "$SP" 2>/dev/null && wait "$SP" 2>/dev/null
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    ip netns del "$NA" 2>/dev/null
    ip netns del "$NB" 2>/dev/null
    rm -rf "$OUT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$NA" && ip netns add "$NB" || exit 1
ip -n "$NA" link set lo up
ip -n "$NB" link set lo up

# one measurement: $1 = label, $2 = iperf3 client flags, rest = emulator flags
measure() {
    local label=$1 flags=$2
    shift 2
    rm -f "$OUT/emu.out" "$OUT/iperf.json"
    "$BIN" run --netns-a "/run/netns/$NA" --dev-a tba --netns-b "/run/netns/$NB" --dev-b tbb \
        --stats-file "$OUT/stats.json" "$@" >"$OUT/emu.out" 2>"$OUT/emu.err" &
    PID=$!
    for _ in $(seq 200); do grep -q '"ready"' "$OUT/emu.out" && break; sleep 0.025; done
    grep -q '"ready"' "$OUT/emu.out" || { echo "emulator not ready:"; cat "$OUT/emu.err"; exit 1; }
    ip -n "$NA" addr add 198.18.0.1/24 dev tba
    ip -n "$NB" addr add 198.18.0.2/24 dev tbb
    ip netns exec "$NB" iperf3 -s -1 -B 198.18.0.2 >/dev/null 2>&1 &
    SP=$!
    for _ in $(seq 100); do
        ip netns exec "$NB" ss -ltn | grep -q ':5201 ' && break
        sleep 0.02
    done
    # shellcheck disable=SC2086
    timeout $((SECS + 30)) ip netns exec "$NA" iperf3 -c 198.18.0.2 -t "$SECS" -O 1 -J $flags \
        >"$OUT/iperf.json" 2>&1
    wait "$SP"
    SP=
    kill -TERM "$PID"
    wait "$PID"
    PID=
    python3 - "$OUT/iperf.json" "$label" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
end = d["end"]
s = end.get("sum_received") or end.get("sum")
print(f"{sys.argv[2]} {s['bits_per_second'] / 1e9:.4f}")
PY
}

# run measure in this shell (not a pipeline's subshell: its cleanup must see PID)
record() {
    measure "$@" >"$OUT/line" || exit 1
    cat "$OUT/line"
    cat "$OUT/line" >>"$OUT/results"
}

UDP="-u -b 0 -l 1400"
for r in $(seq "$ROUNDS"); do
    for w in udp udp-seg tcp-seg tcp; do
        case $w in
        udp) flags=$UDP; base=() ;;
        udp-seg) flags=$UDP; base=(--a2b jitter=1ns --b2a jitter=1ns) ;;
        tcp-seg) flags=""; base=(--a2b jitter=1ns --b2a jitter=1ns) ;;
        tcp) flags=""; base=() ;;
        esac
        record "$r $w off" "$flags" "${base[@]}"
        record "$r $w on" "$flags" "${base[@]}" --a2b-faults "$FAULT"
    done
done

python3 - "$OUT/results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r, w, mode, gbps = line.split()
    runs.setdefault(w, {}).setdefault(r, {})[mode] = float(gbps)
print()
print("| workload | OFF Gbit/s (median) | ON Gbit/s (median) | ON/OFF per round | median | min | max |")
print("|---|---:|---:|---|---:|---:|---:|")
for w, rounds in runs.items():
    ratios = [v["on"] / v["off"] for v in rounds.values() if v.get("off") and "on" in v]
    off = statistics.median(v["off"] for v in rounds.values())
    on = statistics.median(v["on"] for v in rounds.values())
    per = ", ".join(f"{x:.3f}" for x in ratios)
    print(f"| {w} | {off:.3f} | {on:.3f} | {per} | {statistics.median(ratios):.3f} | {min(ratios):.3f} | {max(ratios):.3f} |")
PY
