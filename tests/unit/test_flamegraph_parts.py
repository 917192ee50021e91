"""Naming the frames of a stripped Go binary from its .gopclntab, and the flamegraph's file names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tunbench.monitor import gosyms
from tunbench.perf import gosym
from tunbench.perf.flamegraph import artifact_name, name_go_frames, record_argv

WG = shutil.which("wireguard-go")


def test_record_argv_uses_the_software_clock() -> None:
    argv = record_argv("perf", [10, 11], Path("/tmp/x.data"))
    assert argv[argv.index("-e") + 1] == "cpu-clock"
    assert argv[argv.index("-p") + 1] == "10,11" and "-g" in argv


def test_artifact_name() -> None:
    assert artifact_name("tb123456", 7, "openvpn-udp[x]", "server") == "tb123456-t007-openvpn-udp_x_-server.svg"


def test_not_go_or_missing() -> None:
    assert gosym.load(Path("/nonexistent")) is None
    assert gosym.load(Path("/bin/sh")) is None  # C binary: no .gopclntab
    assert gosyms.parse_pclntab(b"\0" * 64) is None  # the reader both perf's frames and callgrind's use


@pytest.mark.skipif(WG is None, reason="wireguard-go is not installed")
def test_stripped_go_binary_gets_its_function_names() -> None:
    assert WG is not None
    syms = gosym.load(Path(WG))
    if syms is None:
        pytest.skip("this wireguard-go has its own symbol table (perf resolves it)")
    names = set(syms.names)
    assert any("RoutineEncryption" in n for n in names)
    assert any("chacha20poly1305" in n for n in names)
    i = next(i for i, n in enumerate(syms.names) if n.endswith("RoutineEncryption"))
    start = syms.starts[i]
    assert syms.lookup(start) == syms.names[i]
    assert syms.lookup(start + 1) == syms.names[i]
    assert syms.lookup(syms.starts[0] - 1) is None
    # perf prints an unresolved frame as its offset in the file
    off, vaddr, _ = next(seg for seg in syms.loads if seg[1] <= start < seg[1] + seg[2])
    file_off = start + 4 - vaddr + off
    assert syms.lookup_perf(file_off) == syms.names[i]
    script = (
        "wireguard-go  123 [000]  1.0:    1001001 cpu-clock:\n"
        f"\t          {file_off:x} [unknown] ({WG})\n"
        "\tffffffff81000000 do_syscall_64+0x3d ([kernel.kallsyms])\n"
    )
    named = name_go_frames(script)
    assert f"{file_off:x} {syms.names[i]} ({WG})" in named
    assert "do_syscall_64+0x3d" in named
