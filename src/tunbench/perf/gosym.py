"""Function names of a stripped Go binary for perf's frames. perf resolves only ELF symbol tables, so without
this a Debian-built Go tunnel (wireguard-go) shows as `[unknown]` frames in a flamegraph. The names come from the
binary's .gopclntab, which Go keeps even when stripped, read by monitor/gosyms.py (the same reader counted
instructions use); this module adds what perf's frames need: the file offsets of the loadable segments, since
perf prints an unresolved frame as its offset in the file.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from tunbench.monitor import gosyms


@dataclass(frozen=True)
class GoSymbols:
    starts: list[int]  # sorted function entry addresses
    names: list[str]
    end: int  # address past the last function (the end of .text)
    loads: tuple[tuple[int, int, int], ...] = ()  # PT_LOAD segments: (file offset, vaddr, file size)

    def lookup_perf(self, addr: int) -> str | None:
        """perf prints an unresolved frame as its offset in the file (ip - map start + map offset):
        translate it through the loadable segments, else take it as a virtual address."""
        for off, vaddr, size in self.loads:
            if off <= addr < off + size:
                name = self.lookup(addr - off + vaddr)
                if name is not None:
                    return name
        return self.lookup(addr)

    def lookup(self, addr: int) -> str | None:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0 or addr >= self.end:
            return None
        return self.names[i]


def load(path: Path) -> GoSymbols | None:
    """The Go function table of `path`, or None (not ELF, not a fixed-address Go executable, or it has its own
    symbol table, which perf resolves itself)."""
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            text = elf.get_section_by_name(".text")
            if elf.get_section_by_name(".symtab") is not None or text is None:
                return None
            end = int(text["sh_addr"]) + int(text["sh_size"])
            loads = tuple(
                (int(s["p_offset"]), int(s["p_vaddr"]), int(s["p_filesz"]))
                for s in elf.iter_segments()
                if s["p_type"] == "PT_LOAD"
            )
    except (OSError, ELFError):
        return None
    funcs = gosyms.read(path)
    if funcs is None:
        return None
    return GoSymbols(list(funcs.entries), list(funcs.names), end, loads)
