#!/usr/bin/env bash
# The Debian 13 smoke suite (`make debian13`, docs/install.md): a Debian 13 (trixie) root file system built
# with mmdebstrap from Debian's archive, tunbench installed into it from the wheel (dist/, `make wheel`), and a
# smoke suite run inside it on this kernel: doctor, `link selftest --quick`, one run of wireguard-go,
# openvpn-udp, strongSwan (libipsec) and socat, two runs compared, a report, and a 50-client storm.
#
# The root file system is entered with chroot inside a mount namespace of its own (private propagation): its
# /dev, /sys, /proc, a fresh /run and /tmp exist only there, and vanish with it. Whatever tunbench creates
# (namespaces, cgroups) follows its own rules; `tunbench clean` runs last. Needs root, mmdebstrap and network
# access to Debian's archive and PyPI. The root file system is kept in build/debian13/rootfs for the next
# run (remove it to rebuild); logs and results land in build/debian13/.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/debian13
ROOT=$OUT/rootfs
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Debian 13's names for what the suite runs (Makefile APT_PACKAGES, less what it does not use)
PACKAGES=python3,python3-venv,ca-certificates,iperf3,iputils-ping,iproute2,procps,openssl,wireguard-go
PACKAGES+=,wireguard-tools,openvpn,socat,irtt,strongswan-charon,strongswan-swanctl,libstrongswan-standard-plugins
PACKAGES+=,libstrongswan-extra-plugins,libcharon-extra-plugins,util-linux,mount

wheel=$(ls -t dist/tunbench-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "no wheel in dist/: make wheel" >&2; exit 1; }
mkdir -p "$OUT"

if [ ! -e "$ROOT/.tunbench-rootfs" ]; then
	rm -rf "$ROOT" "$ROOT.tmp"
	echo "== mmdebstrap trixie -> $ROOT"
	mmdebstrap --variant=apt --include="$PACKAGES" trixie "$ROOT.tmp" "$MIRROR" >"$OUT/mmdebstrap.log" 2>&1 \
		|| { tail -20 "$OUT/mmdebstrap.log"; exit 1; }
	touch "$ROOT.tmp/.tunbench-rootfs"
	mv "$ROOT.tmp" "$ROOT"
fi

# enter ROOT COMMAND...: the command inside the root file system, in a mount namespace of its own
enter() {
	unshare --mount --propagation private -- sh -c '
		r=$1; shift
		# the root a mount point of its own: `ip netns exec` makes / a slave mount, which a plain directory is not
		mount --bind "$r" "$r" && mount --rbind /dev "$r/dev" && mount -t proc proc "$r/proc" && mount --rbind /sys "$r/sys" &&
		mount -t tmpfs tmpfs "$r/run" && mount -t tmpfs tmpfs "$r/tmp" || exit 1
		exec chroot "$r" /usr/bin/env -i HOME=/root COLUMNS=200 LANG=C.UTF-8 \
			PATH=/opt/tunbench/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"' \
		sh "$ROOT" "$@"
}

echo "== install $(basename "$wheel") into /opt/tunbench"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# the certificate authorities this machine adds to Debian's (a proxy's, a company's) are trusted inside too
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
	cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
	enter update-ca-certificates >/dev/null
fi
rm -rf "$ROOT/opt/tunbench" "$ROOT/root/smoke"
mkdir -p "$ROOT/root/smoke"
cp "$wheel" "$ROOT/root/"
enter python3 -m venv /opt/tunbench
enter /opt/tunbench/bin/pip install -q --disable-pip-version-check --cert /etc/ssl/certs/ca-certificates.crt \
	"/root/$(basename "$wheel")"

cat >"$ROOT/root/smoke/storm.toml" <<'TOML'
[run]
tunnels = ["wireguard-go"]
repeat = 1
direct = false
[workload]
kind = ["storm"]
[workload.storm]
clients = [50]
timeout_s = 60
TOML

cat >"$ROOT/root/smoke/suite.sh" <<'SUITE'
set -eu
cd /root/smoke
step() { echo; echo "== $*"; }
step versions
cat /etc/debian_version; python3 --version; iperf3 --version | head -1; openvpn --version | head -1
/usr/lib/ipsec/charon --version; wireguard-go --version | head -1; socat -V | grep 'socat version'
step tunbench doctor
tunbench doctor | tee doctor.txt || true   # exit 1: kernel modules this kernel lacks (gre, ipip, wireguard)
grep -q '✓ tunbench-link (WAN emulator): /opt/tunbench/bin/tunbench-link' doctor.txt
step tunbench link selftest --quick
rc=0; tunbench link selftest --quick --json selftest.json || rc=$?   # bounds are a benchmark of the host
if [ "$rc" -gt 1 ] || grep -q 'could not measure' selftest.json; then echo "selftest could not measure"; exit 1; fi
step tunnels: wireguard-go, openvpn-udp, strongswan libipsec, socat
tunbench run -t wireguard-go -t openvpn-udp -t 'strongswan[datapath=libipsec]' -t socat --profile lan,wan-50ms \
	--duration 2 --omit 1 --repeat 1 --direction up --db smoke.db --json tunnels.json --name tunnels
step compare: two runs of socat
for name in a b; do
	tunbench run -t socat --no-direct --duration 2 --omit 1 --repeat 3 --direction up --db smoke.db --name "$name" >/dev/null
done
rc=0; tunbench compare --db smoke.db a b || rc=$?   # 1: a regression found by chance; 2: could not compare
if [ "$rc" -gt 1 ]; then echo "compare failed (exit $rc)"; exit 1; fi
step report
tunbench report --db smoke.db tunnels -o report.html && test -s report.html
step a 50-client storm
tunbench run storm.toml --db smoke.db --json storm.json --name storm
step check
python3 - <<'PY'
import json
for name in ("tunnels.json", "storm.json"):
    for t in json.load(open(name))["trials"]:
        assert t["status"] == "ok", (name, t["label"], t["profile"], t["error"])
        rate = f"{t['throughput_bps'] / 1e6:8.1f} Mbit/s" if t["throughput_bps"] else ""
        print(f"{name}: {t['label']:<34} {t['profile']:<9} ok  {rate}")
tunnels = json.load(open("tunnels.json"))
labels = {t["label"] for t in tunnels["trials"]}
assert {"direct", "wireguard-go", "openvpn-udp", "socat"} <= labels and any("strongswan" in x for x in labels), labels
assert all(t["metrics"]["link.up.delivered_packets"] > 0 for t in tunnels["trials"] if t["profile"] == "wan-50ms")
(storm,) = json.load(open("storm.json"))["trials"]
m = storm["metrics"]
assert m["clients.success_ratio"] == 1.0, m.get("clients.failed_count")
print(f"storm: 50 clients, ready p50 {m['clients.ready_p50_s']:.2f} s, p99 {m['clients.ready_p99_s']:.2f} s")
PY
step tunbench clean
tunbench clean
echo; echo "debian 13 smoke suite: passed"
SUITE

echo "== smoke suite (log: $OUT/suite.log)"
start=$(date +%s)
set +e
enter sh /root/smoke/suite.sh 2>&1 | tee "$OUT/suite.log"
rc=$?   # pipefail: the suite's status
set -e
cp "$ROOT"/root/smoke/*.json "$ROOT/root/smoke/report.html" "$OUT/" 2>/dev/null || true
echo "== smoke suite: exit $rc in $(( $(date +%s) - start )) s"
exit "$rc"
