"""`[run] cpuset` / `--cpuset`, parsed once into a typed value: off, split, or the CPUs of each side.

The scenario's field holds a `CpuSetting` (config/schema.py validates with `CpuSetting.parse` and stores it in
its TOML form: "off", "split" or a table of CPU lists); the preflight resolves it against this host's CPUs,
and calibrate writes it back as a flag with `CpuSetting.flag`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tunbench.host.cgroup import PLACED_ROLES, parse_cpu_list

_ROLE_ITEM = re.compile(r",(?=\s*[a-z]+\s*=)")


@dataclass(frozen=True)
class CpuSetting:
    """Where each side's processes run: nowhere in particular ("off"), split over CPUs of their own ("split"),
    or the CPUs given per side (`roles`: side -> its CPUs, in the order given)."""

    mode: Literal["off", "split", "roles"] = "off"
    roles: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @classmethod
    def parse(cls, value: object) -> CpuSetting:
        """ "off", "split", "client=0,server=1[,link=1]" (the flag) or a table {side: CPU list} (the file)."""
        if isinstance(value, CpuSetting):
            return value
        if isinstance(value, str):
            text = value.strip()
            if text in ("off", "split"):
                return cls(text)  # type: ignore[arg-type]
            if "=" not in text:
                raise ValueError(f"{value!r}: expected off, split or client=0,server=1[,link=1] (--cpuset)")
            table: dict[str, str] = {}
            for item in _ROLE_ITEM.split(text):
                role, _, cpus = item.partition("=")
                if not role.strip() or not cpus.strip():
                    raise ValueError(f"{value!r}: expected client=0,server=1[,link=1] (--cpuset)")
                table[role.strip()] = cpus.strip()
            return cls.of_table(table)
        if isinstance(value, Mapping):
            return cls.of_table({str(k): str(v) for k, v in value.items()})
        raise ValueError(f"{value!r}: expected off, split or a table of CPU lists")

    @classmethod
    def of_table(cls, table: Mapping[str, str]) -> CpuSetting:
        unknown = sorted(set(table) - set(PLACED_ROLES))
        if unknown or not table:
            raise ValueError(f"cpuset names the sides {', '.join(PLACED_ROLES)} (got {', '.join(unknown) or 'none'})")
        return cls("roles", tuple((role, tuple(parse_cpu_list(cpus))) for role, cpus in table.items()))

    @property
    def off(self) -> bool:
        return self.mode == "off"

    def cpu_lists(self) -> dict[str, str]:
        """side -> its CPUs in the kernel's list form ("0,2"), for the roles given ({} for off and split)."""
        return {role: ",".join(map(str, cpus)) for role, cpus in self.roles}

    def stored(self) -> str | dict[str, str]:
        """The scenario's TOML form: "off", "split", or the table of CPU lists."""
        return self.cpu_lists() if self.mode == "roles" else self.mode

    def flag(self) -> str:
        """The `--cpuset` text that gives this setting back."""
        return ",".join(f"{k}={v}" for k, v in self.cpu_lists().items()) if self.mode == "roles" else self.mode
