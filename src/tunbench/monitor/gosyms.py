"""The function names of a Go binary from its pclntab, which stripping keeps.

callgrind names a function by its symbol; a stripped build (Debian's wireguard-go) has none, so callgrind
names each by an address (``0x0000000000475f20``), and Go's runtime cannot be told from the tunnel's code.
Go keeps a table of every function's entry address and name in the binary's ``.gopclntab`` section for its
own stack traces, and `strip` leaves it. This module reads it (the Go 1.18+ layout: `runtime/symtab.go`'s
``pcHeader``, ``functab`` and ``_func``) so an address can be named. pyelftools finds the section; the
table's layout is Go's own and no library reads it from Python.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

MAGICS = (0xFFFFFFF0, 0xFFFFFFF1)
"""The pcHeader magics of Go 1.18-1.19 and of Go 1.20 on; both have the layout read here."""


@dataclass(frozen=True)
class GoFunctions:
    """A Go binary's functions: their entry addresses (sorted) and names."""

    entries: tuple[int, ...]
    names: tuple[str, ...]

    def name(self, pc: int) -> str | None:
        """The function `pc` is in (the last entry at or below it); None below the first."""
        i = bisect.bisect_right(self.entries, pc) - 1
        return self.names[i] if i >= 0 else None


def parse_pclntab(data: bytes, text_addr: int = 0) -> GoFunctions | None:
    """The functions of a ``.gopclntab`` section's bytes; None for another layout (before Go 1.18). Entry
    offsets count from the header's textStart, which newer toolchains leave 0 (Go 1.26 here): from the
    ``.text`` section's address (`text_addr`) then."""
    if len(data) < 8 or struct.unpack_from("<I", data, 0)[0] not in MAGICS:
        return None
    ptr = data[7]
    word = "<Q" if ptr == 8 else "<I"

    def field(i: int) -> int:  # the header's words after magic, pads, minLC and ptrSize
        return int(struct.unpack_from(word, data, 8 + i * ptr)[0])

    nfunc, text_start, funcnames, pcln = field(0), field(2) or text_addr, field(3), field(7)
    entries, names = [], []
    for i in range(nfunc):
        entry_off, func_off = struct.unpack_from("<II", data, pcln + 8 * i)
        name_off = struct.unpack_from("<i", data, pcln + func_off + 4)[0]  # _func: entryOff, nameOff, ...
        start = funcnames + name_off
        end = data.index(b"\0", start)
        entries.append(text_start + entry_off)
        names.append(data[start:end].decode(errors="replace"))
    order = sorted(range(len(entries)), key=entries.__getitem__)
    return GoFunctions(tuple(entries[i] for i in order), tuple(names[i] for i in order))


def read(program: str | Path) -> GoFunctions | None:
    """The functions of a Go executable at its link addresses; None when it is not one, not readable, of a
    layout before Go 1.18, or position-independent (callgrind's addresses would then carry the load base)."""
    try:
        with open(program, "rb") as f:
            elf = ELFFile(f)
            section = elf.get_section_by_name(".gopclntab")
            text = elf.get_section_by_name(".text")
            if section is None or text is None or elf.header["e_type"] != "ET_EXEC":
                return None
            data, text_addr = section.data(), int(text["sh_addr"])
    except (OSError, ELFError):
        return None
    try:
        return parse_pclntab(data, text_addr)
    except (struct.error, ValueError):
        return None
