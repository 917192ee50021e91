#!/usr/bin/env bash
# `make demo` from a fresh clone on a bare Debian (`make bare-debian12`, `make bare-debian13`; docs/install.md):
# a root file system of SUITE (bookworm or trixie) with only apt, git, make, python3 and ca-certificates
# (mmdebstrap --variant=apt), this checkout's HEAD cloned into it (committed code only), and `make demo` run
# there as root, as the README tells a user to. Passes when the demo printed its table: results/demo.json holds
# its trials, every one ok.
#
# The root file system is entered as scripts/debian13-smoke.sh does: chroot inside a mount namespace of its own
# (private propagation), with /dev, /sys, /proc, a fresh /run and /tmp that exist only there. The bare root file
# system is kept in build/bare-SUITE/rootfs (remove it to rebuild); each run works on a fresh copy of it,
# build/bare-SUITE/work (KEEP=1 reuses the copy and the clone left by the last run, to try a fix or run the demo
# again without starting over).
# The demo step holds the machine's measurement lock (/tmp/tunbench-measure.lock), the installs and builds do
# not. Needs root, mmdebstrap and network access to Debian's archive, PyPI and crates.io. Logs: build/bare-SUITE/.
set -euo pipefail
cd "$(dirname "$0")/.."
# all of it in main, read whole before it runs: an edit to this file during a run does not reach that run
main() {
SUITE=${1:-${SUITE:-}}
case "$SUITE" in
	bookworm | trixie) ;;
	*) echo "usage: $0 bookworm|trixie" >&2; exit 2 ;;
esac
OUT=build/bare-$SUITE
ROOT=$OUT/rootfs
WORK=$OUT/work
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
LOCK=/tmp/tunbench-measure.lock
mkdir -p "$OUT"
log=$OUT/steps.log
: >"$log"
t0=$(date +%s)
# step NAME SECONDS: one line of the summary
step() { printf '%-44s %5d s\n' "$1" "$2" | tee -a "$log"; }

# A Debian as its installer leaves it: the suite, its updates and its security suite (Debian 12's rustc-web
# 1.96 is in bookworm-security).
if [ ! -e "$ROOT/.tunbench-rootfs" ]; then
	rm -rf "$ROOT" "$ROOT.tmp"
	echo "== mmdebstrap $SUITE -> $ROOT"
	s=$(date +%s)
	mmdebstrap --variant=apt --include=git,make,python3,ca-certificates "$SUITE" "$ROOT.tmp" \
		"deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY $SUITE-security main" \
		>"$OUT/mmdebstrap.log" 2>&1 || { tail -20 "$OUT/mmdebstrap.log"; exit 1; }
	touch "$ROOT.tmp/.tunbench-rootfs"
	mv "$ROOT.tmp" "$ROOT"
	step "mmdebstrap $SUITE (bare root file system)" $(($(date +%s) - s))
fi

if [ "${KEEP:-0}" != 1 ] || [ ! -e "$WORK/.tunbench-rootfs" ]; then
	s=$(date +%s)
	rm -rf "$WORK"
	cp -a "$ROOT" "$WORK"
	step "copy of the bare root file system" $(($(date +%s) - s))
fi

# enter COMMAND...: the command inside the work copy, in a mount namespace of its own, as root in /root/tunbench
# (the environment a login shell would give, plus PIP_CERT when this machine adds certificate authorities)
enter() {
	unshare --mount --propagation private -- sh -c '
		r=$1; shift
		# the root a mount point of its own: `ip netns exec` makes / a slave mount, which a plain directory is not
		mount --bind "$r" "$r" && mount --rbind /dev "$r/dev" && mount -t proc proc "$r/proc" && mount --rbind /sys "$r/sys" &&
		mount -t tmpfs tmpfs "$r/run" && mount -t tmpfs tmpfs "$r/tmp" || exit 1
		exec chroot "$r" /usr/bin/env -i HOME=/root COLUMNS=200 LANG=C.UTF-8 TERM=dumb $PIP_CERT_ENV \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin sh -c "cd /root/tunbench 2>/dev/null; exec \"\$@\"" sh "$@"' \
		sh "$WORK" "$@"
}
PIP_CERT_ENV=
export PIP_CERT_ENV

cp /etc/resolv.conf "$WORK/etc/resolv.conf"
# the certificate authorities this machine adds to Debian's (a proxy's, a company's) are trusted inside too:
# apt, git and cargo read Debian's bundle; pip reads its own unless told (PIP_CERT), as a user behind such a
# proxy would tell it
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
	cp /usr/local/share/ca-certificates/*.crt "$WORK/usr/local/share/ca-certificates/"
	enter update-ca-certificates >/dev/null
	PIP_CERT_ENV=PIP_CERT=/etc/ssl/certs/ca-certificates.crt
fi

# the clone: this checkout's HEAD (what is committed), as `git clone` of the project would give it
rev=$(git rev-parse --short HEAD)
if [ "${KEEP:-0}" = 1 ] && [ -d "$WORK/root/tunbench/.git" ]; then
	# KEEP=1: the last run's clone, its venv and builds kept, moved to HEAD
	git -C "$WORK/root/tunbench" fetch --quiet "$PWD" HEAD
	git -C "$WORK/root/tunbench" checkout --quiet --detach FETCH_HEAD
else
	rm -rf "$WORK/root/tunbench"
	git clone --quiet --no-hardlinks "$PWD" "$WORK/root/tunbench"
fi
echo "== $SUITE: clone of $rev in $WORK/root/tunbench"

# stamp LOG: each line prefixed with the seconds since the step started (the make lines mark where each part
# begins) into LOG, and shown here but for apt's and dpkg's lines about each package
stamp() {
	local s=$SECONDS line
	while IFS= read -r line; do printf '[%4d s] %s\n' $((SECONDS - s)) "$line"; done | tee "$1" |
		{ grep --line-buffered -v -E '^\[ *[0-9]+ s\] (Get:|Selecting|Preparing|Unpacking|Setting up|Processing triggers|\(Reading database|  )' || true; }
}

# The installs and builds `make demo` does first (deps, venv, build), as one make run, without the lock: the
# toolchain `make deps` installs must be found by the build in that same run
echo "== make deps venv build (log: $OUT/build.log)"
s=$(date +%s)
set +e
enter make deps venv build 2>&1 | stamp "$OUT/build.log"
rc=$?
set -e
step "make deps venv build" $(($(date +%s) - s))
[ "$rc" = 0 ] || { echo "== $SUITE: make deps venv build failed (exit $rc)"; exit "$rc"; }

# `make demo` itself, under the lock: deps, venv and build are up to date now, so this is the demo's run
echo "== make demo, holding $LOCK (log: $OUT/demo.log)"
s=$(date +%s)
set +e
rm -f "$OUT/locked-at"
flock "$LOCK" bash -c "date +%s >'$OUT/locked-at'; echo '== lock taken'; $(declare -f enter); WORK='$WORK'; enter make demo" 2>&1 |
	stamp "$OUT/demo.log"
rc=$?
set -e
locked=$(cat "$OUT/locked-at" 2>/dev/null || echo "$s")
step "waiting for the measurement lock" $((locked - s))
step "make demo (the run, its table and report)" $(($(date +%s) - locked))

# the check, also after a failed demo: which trials failed, if it got that far
echo "== check: results/demo.json"
set +e
enter python3 - <<'PY' 2>&1 | tee -a "$log"
import json, sys
try:
    trials = json.load(open("results/demo.json"))["trials"]
except OSError as e:
    sys.exit(f"demo.json: {e}")
bad = [f"{t['label']} {t['profile']} {t['direction']}: {t['error']}" for t in trials if t["status"] != "ok"]
print(f"demo.json: {len(trials)} trials, {len(trials) - len(bad)} ok", *bad, sep="\n  ")
sys.exit(1 if bad or not trials else 0)
PY
checked=$?
set -e
[ "$rc" = 0 ] || { echo "== $SUITE: make demo failed (exit $rc)"; exit "$rc"; }
[ "$checked" = 0 ] || { echo "== $SUITE: results/demo.json: not every trial ok"; exit 1; }
enter sh -c 'echo "versions: Debian $(cat /etc/debian_version), $(python3 --version), $(cargo --version)"' | tee -a "$log"
cp "$WORK/root/tunbench/results/demo.json" "$OUT/" 2>/dev/null || true
step "all" $(($(date +%s) - t0))
echo "== $SUITE: make demo from a fresh clone on a bare Debian: passed (summary: $log)"
}
# exit on the same line: bash reads no further, so an edit that moves this line cannot break a run's end
main "$@"; exit
