"""A Go binary's function names from its pclntab (perf/gosyms.py): a table built here in Go's layout, and the
installed wireguard-go where there is one."""

from __future__ import annotations

import shutil
import struct

import pytest

from tunbench.monitor import gosyms


def pclntab(funcs: list[tuple[int, str]], *, text_start: int, magic: int = 0xFFFFFFF1) -> bytes:
    """A .gopclntab in the Go 1.18+ layout: pcHeader, funcnametab, then functab and each _func."""
    header_len = 8 + 8 * 8
    names = b"".join(n.encode() + b"\0" for _, n in funcs)
    funcnames = header_len
    pcln = funcnames + len(names)
    functab = b""
    records = b""
    name_off = 0
    func_base = 8 * len(funcs)
    for i, (entry, name) in enumerate(funcs):
        functab += struct.pack("<II", entry, func_base + 8 * i)
        records += struct.pack("<Ii", entry, name_off)
        name_off += len(name) + 1
    words = [len(funcs), 0, text_start, funcnames, 0, 0, 0, pcln]
    header = struct.pack("<IBBBB", magic, 0, 0, 1, 8) + b"".join(struct.pack("<Q", w) for w in words)
    return header + names + functab + records


def test_addresses_are_named_by_the_function_they_fall_in() -> None:
    table = pclntab([(0x100, "main.main"), (0x40, "runtime.findRunnable"), (0x200, "runtime.gcDrain")], text_start=0)
    funcs = gosyms.parse_pclntab(table, text_addr=0x401000)
    assert funcs is not None
    assert funcs.name(0x401040) == "runtime.findRunnable" and funcs.name(0x4010FF) == "runtime.findRunnable"
    assert funcs.name(0x401100) == "main.main" and funcs.name(0x401300) == "runtime.gcDrain"
    assert funcs.name(0x400000) is None
    # Go 1.18-1.19 record the text start in the header itself
    old = gosyms.parse_pclntab(pclntab([(0x10, "main.f")], text_start=0x4022E0, magic=0xFFFFFFF0), text_addr=0x1)
    assert old is not None and old.name(0x4022F0) == "main.f"


def test_other_layouts_are_not_read() -> None:
    assert gosyms.parse_pclntab(struct.pack("<I", 0xFFFFFFFB) + b"\0" * 60) is None  # Go 1.16's
    assert gosyms.read("/nonexistent") is None


@pytest.mark.skipif(shutil.which("wireguard-go") is None, reason="no wireguard-go installed")
def test_the_installed_wireguard_go_is_named_though_stripped() -> None:
    funcs = gosyms.read(str(shutil.which("wireguard-go")))
    assert funcs is not None and len(funcs.names) > 1000
    assert "runtime.findRunnable" in funcs.names and any(
        n.startswith("golang.zx2c4.com/wireguard/") for n in funcs.names
    )
