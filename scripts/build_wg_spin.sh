#!/usr/bin/env bash
# Build a wireguard-go whose per-packet CPU work can be raised by a small, controlled amount, for A/B
# comparisons against a change of known size (docs/benchmarks/wg-spin.md).
#
#   scripts/build_wg_spin.sh [OUT_DIR]        (default /var/tmp/wg-spin)
#   GO=/path/to/go SPIN_DEFAULT=500 scripts/build_wg_spin.sh [OUT_DIR]
#
# Downloads golang.zx2c4.com/wireguard at the tag 0.0.20220316 (the version Debian's /usr/bin/wireguard-go
# reports) through the Go module proxy, applies scripts/wg-spin.patch (a spin of TB_SPIN_ITERS xorshift
# steps after each packet is encrypted and after each is decrypted; unset or 0 = off) and writes:
#   OUT_DIR/wireguard-go        the patched build (spin off unless TB_SPIN_ITERS is set)
#   OUT_DIR/wireguard-go-spin   a wrapper that runs it with TB_SPIN_ITERS (default below) unless already set
#   OUT_DIR/wireguard-go-nospin a wrapper that runs it with TB_SPIN_ITERS=0, the A side of an A/B
#   OUT_DIR/wireguard-go-plain  the same source unpatched, for reference
# Non-interactive and idempotent: the build directories under OUT_DIR are made afresh on every run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-/var/tmp/wg-spin}
MODULE=golang.zx2c4.com/wireguard
# the commit the tag 0.0.20220316 names (ee1c8e0 "version: bump snapshot"); the proxy serves it under its
# pseudo-version only, the tag not being a semantic version
VERSION=v0.0.0-20220317033214-ee1c8e0e8789
# spin steps per packet the wrapper sets unless TB_SPIN_ITERS is given (docs/benchmarks/wg-spin.md)
SPIN_DEFAULT=${SPIN_DEFAULT:-500}
case $SPIN_DEFAULT in '' | *[!0-9]*) echo "build_wg_spin.sh: SPIN_DEFAULT=$SPIN_DEFAULT is not a count" >&2; exit 1 ;; esac

# the Go toolchain: $GO if set, else /usr/local/go/bin/go, else go on PATH
if [ -z "${GO:-}" ]; then
	if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else GO=$(command -v go || true); fi
fi
if [ -z "$GO" ] || ! "$GO" version >/dev/null 2>&1; then
	echo "build_wg_spin.sh: no Go toolchain (set GO=, or install Go as /usr/local/go/bin/go or on PATH)" >&2
	exit 1
fi
# the local toolchain only: never fetch another
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
src=$("$GO" mod download -json "$MODULE@$VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] && [ -f "$src/version.go" ] || { echo "build_wg_spin.sh: $MODULE@$VERSION not downloaded" >&2; exit 1; }

build() { # build <name> <patch or empty>: a fresh copy of the source in OUT/build-<name>, built to OUT/<name>
	local dir=$OUT/build-$1
	rm -rf "$dir"
	cp -r "$src" "$dir"
	chmod -R u+w "$dir" # the module cache is read-only
	if [ -n "$2" ]; then
		patch -s -p1 -d "$dir" <"$2"
	fi
	# -checklinkname=0: the golang.org/x/net of 2022 this version requires links to syscall.recvmsg, which
	# linkers since Go 1.23 refuse unless told not to check; the dependencies stay the ones its go.sum names
	(cd "$dir" && "$GO" build -trimpath -ldflags=-checklinkname=0 -o "$OUT/$1.tmp" .)
	mv -f "$OUT/$1.tmp" "$OUT/$1"
}

build wireguard-go-plain ""
build wireguard-go "$here/wg-spin.patch"

wrapper() { # wrapper <name> <TB_SPIN_ITERS line> <what>: a /bin/sh wrapper OUT/<name> that runs the patched build
	cat >"$OUT/$1.tmp" <<WRAP
#!/bin/sh
# The patched wireguard-go (scripts/build_wg_spin.sh), $3.
# exec keeps the pid, process group and cgroup: tunbench accounts the daemon's CPU as for the binary itself.
$2
export TB_SPIN_ITERS
exec "\$(dirname "\$0")/wireguard-go" "\$@"
WRAP
	chmod 755 "$OUT/$1.tmp"
	mv -f "$OUT/$1.tmp" "$OUT/$1"
}
wrapper wireguard-go-spin "TB_SPIN_ITERS=\${TB_SPIN_ITERS:-$SPIN_DEFAULT}" \
	"spin on: TB_SPIN_ITERS xorshift steps per packet encrypted or decrypted, $SPIN_DEFAULT unless set"
wrapper wireguard-go-nospin "TB_SPIN_ITERS=0" "spin off, whatever the environment says"

echo "built $MODULE@$VERSION ($("$OUT/wireguard-go" --version | head -1)) with $("$GO" version | cut -d' ' -f3)"
echo "  $OUT/wireguard-go        patched, spin off unless TB_SPIN_ITERS is set"
echo "  $OUT/wireguard-go-spin   patched, TB_SPIN_ITERS=\${TB_SPIN_ITERS:-$SPIN_DEFAULT}"
echo "  $OUT/wireguard-go-nospin patched, spin off (TB_SPIN_ITERS=0 whatever the environment says)"
echo "  $OUT/wireguard-go-plain  unpatched"
