#!/bin/sh
# Make Debian's netperf installable (make deps): netperf is in the non-free component, which a default Debian
# 12 or 13 does not enable. When `apt-cache policy netperf` has no candidate, write the non-free component of
# the system's own Debian mirror (the first deb822 stanza of debian.sources whose URIs do not end in
# -security: the same URIs, Suites and Signed-By) to its own file, and `apt-get update`. Idempotent: nothing
# is written when netperf has a candidate or the file exists; nothing else under /etc/apt is changed.
set -eu
SOURCES=${SOURCES:-/etc/apt/sources.list.d/debian.sources}
OUT=${OUT:-/etc/apt/sources.list.d/tunbench-non-free.sources}

candidate=$(apt-cache policy netperf 2>/dev/null | sed -n 's/^ *Candidate: *//p')
if [ -n "$candidate" ] && [ "$candidate" != "(none)" ]; then
	exit 0
fi
if [ -e "$OUT" ]; then
	exit 0
fi
if [ ! -r "$SOURCES" ]; then
	echo "apt-non-free: no $SOURCES (a Debian 12 or 13 deb822 list); enable non-free yourself to install netperf" >&2
	exit 1
fi
# the first stanza (blank-line separated) whose URIs is not a -security archive
stanza=$(awk 'BEGIN { RS = ""; FS = "\n" } $0 ~ /URIs:/ && $0 !~ /URIs:[^\n]*-security/ { print; exit }' "$SOURCES")
uris=$(printf '%s\n' "$stanza" | sed -n 's/^URIs: *//p')
suites=$(printf '%s\n' "$stanza" | sed -n 's/^Suites: *//p')
signed=$(printf '%s\n' "$stanza" | sed -n 's/^Signed-By: *//p')
if [ -z "$uris" ] || [ -z "$suites" ]; then
	echo "apt-non-free: found no Debian mirror stanza in $SOURCES; enable non-free yourself to install netperf" >&2
	exit 1
fi
echo "enabling Debian's non-free component (for netperf) in $OUT"
{
	echo "# written by tunbench's make deps: Debian's non-free component, for netperf (docs/install.md)"
	echo "Types: deb"
	echo "URIs: $uris"
	echo "Suites: $suites"
	echo "Components: non-free"
	if [ -n "$signed" ]; then echo "Signed-By: $signed"; fi
} >"$OUT"
DEBIAN_FRONTEND=noninteractive apt-get update -q
