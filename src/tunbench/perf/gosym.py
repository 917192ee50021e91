"""Function names of a stripped Go binary, from its .gopclntab (which Go keeps even when stripped, for
its own tracebacks). perf resolves only ELF symbol tables, so without this a Debian-built Go tunnel
(wireguard-go) shows as `[unknown]` frames in a flamegraph. Go 1.18+ pclntab layout; pure parsing.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from pathlib import Path

MAGICS = (0xFFFFFFF0, 0xFFFFFFF1)  # Go 1.18-1.19, Go 1.20+


@dataclass(frozen=True)
class GoSymbols:
    starts: list[int]  # sorted function entry addresses
    names: list[str]
    end: int  # address past the last function
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


def elf_sections(data: bytes) -> dict[str, tuple[int, int, int]]:
    """ELF64 little-endian section headers: name -> (address, file offset, size)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    if not heads or shstrndx >= len(heads):
        return {}
    str_off = heads[shstrndx][4]
    out = {}
    for name_off, _typ, _flags, addr, off, size in heads:
        end = data.index(b"\0", str_off + name_off)
        out[data[str_off + name_off : end].decode(errors="replace")] = (addr, off, size)
    return out


def elf_loads(data: bytes) -> tuple[tuple[int, int, int], ...]:
    """ELF64 PT_LOAD program headers: (file offset, virtual address, file size)."""
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    out = []
    for i in range(phnum):
        p_type, _flags, off, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            out.append((off, vaddr, filesz))
    return tuple(out)


def parse_pclntab(tab: bytes) -> GoSymbols | None:
    if len(tab) < 8:
        return None
    magic, _p1, _p2, _min_lc, ptr = struct.unpack_from("<IBBBB", tab, 0)
    if magic not in MAGICS or ptr not in (4, 8):
        return None
    fmt = "<Q" if ptr == 8 else "<I"

    def word(i: int) -> int:
        return int(struct.unpack_from(fmt, tab, 8 + i * ptr)[0])

    nfunc, text_start, funcname_off, pcln_off = word(0), word(2), word(3), word(7)
    starts: list[int] = []
    names: list[str] = []
    for i in range(nfunc):
        entry_off, func_off = struct.unpack_from("<II", tab, pcln_off + i * 8)
        name_off = struct.unpack_from("<i", tab, pcln_off + func_off + 4)[0]
        s = funcname_off + name_off
        names.append(tab[s : tab.index(b"\0", s)].decode(errors="replace"))
        starts.append(text_start + entry_off)
    end_off = struct.unpack_from("<I", tab, pcln_off + nfunc * 8)[0]
    order = sorted(range(nfunc), key=starts.__getitem__)
    return GoSymbols([starts[i] for i in order], [names[i] for i in order], text_start + end_off)


def load(path: Path) -> GoSymbols | None:
    """The Go function table of `path`, or None (not ELF, not Go, or it has its own symbol table)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) < 0x40 or struct.unpack_from("<H", data, 0x10)[0] != 2:
        return None  # not a fixed-address executable (PIE addresses would need the mapping's base)
    secs = elf_sections(data)
    if ".gopclntab" not in secs or ".symtab" in secs:
        return None
    _addr, off, size = secs[".gopclntab"]
    try:
        syms = parse_pclntab(data[off : off + size])
        return GoSymbols(syms.starts, syms.names, syms.end, elf_loads(data)) if syms else None
    except (struct.error, ValueError):
        return None
