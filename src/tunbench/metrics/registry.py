"""The metric registry: one declaration per metric a trial stores or compare shows.

A declaration (`MetricSpec`) names a key of `TrialRecord.metrics` (or of a compare row) and says what the
value is: its unit, which way is better, its family (``gate``, ``wide``, ``work``, ``info``), how it is
written, how a chart or a compare row titles and scales it, and one description. Many keys come in
families, one per role, direction, host or packet size: such a declaration's name is a pattern with
placeholders (``trial_cpu.{role}.user_s``), and the code builds a key from it (``TRIAL_CPU_USER.key(role=r)``)
rather than writing the literal again. `tests/unit/test_metric_registry.py` scans the source for metric
keys written anywhere but here and in the declarations.

Declarations live next to the code that makes the figure (a workload's in its own file, monitor/'s in
monitor/); `declare` adds each to `REGISTRY` when its module is imported. The whole list, for the docs
and the scan, is `tunbench.report.metric_table.declared()`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, TypeAlias

from tunbench.units import fmt_bps

Better: TypeAlias = Literal["higher", "lower", "none"]
"""Which way is better: ``none`` for figures that describe rather than judge (a count, a flag, a time
stamp) and for signed differences read both ways."""

Metrics: TypeAlias = dict[str, float | None]
"""A trial's figures by metric key (`TrialRecord.metrics`), or some of them: the type of a function that builds
metrics, which tests/unit/test_metric_registry.py reads as such."""

Family: TypeAlias = Literal["gate", "wide", "work", "info"]
"""Where compare puts the metric (report/compare/gate.py): ``gate``, the main Holm family at the threshold
(the main cost figure of a case, latency); ``wide``, its own family at the wide threshold (throughput, each
side's CPU per bit, the wire overhead); ``work``, counted work shown with its verdicts and never gating;
``info``, stored and reported, never compared."""

FAMILIES: tuple[Family, ...] = ("gate", "wide", "work", "info")

PLACEHOLDERS: dict[str, str] = {
    "role": r"client|server",
    "direction": r"up|down",
    "proto": r"tcp|udp",
    "size": r"[0-9]+",
    "q": r"[0-9]+",
    "host": r".+",  # a host's name may hold dots
    "device": r".+",  # so may an interface's (a VLAN: eth0.100)
    "monitored": r"(?:cpu|trial_cpu|cgroup_cpu|sampled_cpu|rss_peak_bytes|processes|check|counters)\..+",
    "on": r"(?:host\..+?\.)?",  # "" (all of a fleet's clients) or host.<name>. (one client host's)
    "storm": r"(?:connect\.)?",  # "" (the measured storm) or connect. (a reconnect's first storm)
}
"""What a placeholder of a declared name stands for, as a regular expression; any other placeholder (a device,
a counter's own name) stands for one dotted segment. ``{on}`` and ``{storm}`` may stand for nothing: they
place a many-client figure (``clients.{on}ready_s``) on one client host, or in a storm's first phase."""

OPTIONAL = ("on", "storm")
"""The placeholders that may stand for nothing: a key built without them has them empty."""

_ANY_SEGMENT = r"[^.]+"
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Format:
    """How a value is written: ``rate`` for a bit rate with an adaptive unit (230 Mbit/s), else ``digits``
    significant digits of ``value * scale`` followed by ``suffix`` (``Format(3, 1e9, " s/Gbit")``)."""

    digits: int = 4
    scale: float = 1.0
    suffix: str = ""
    rate: bool = False

    def __call__(self, value: float) -> str:
        if self.rate:
            return fmt_bps(value)
        return f"{value * self.scale:.{self.digits}g}{self.suffix}"


@dataclass(frozen=True)
class Chart:
    """How a chart's axis or a compare row shows the metric: values times ``scale``, in ``unit``."""

    unit: str = ""
    scale: float = 1.0


@dataclass(frozen=True)
class MetricSpec:
    """One metric, or a family of keys when ``name`` holds placeholders (``link.{direction}.delivered_bytes``).

    ``unit``: the stored value's unit (``bit/s``, ``s``, ``ms``, ``bytes``, ``%``, ``count``, ``ratio``,
    ``flag`` for 1/0, "" for a plain number); ``title``: the short name a compare row, a table or a chart
    uses; ``words``: what compare calls a change for the better and for the worse; ``choices``: the values a
    placeholder of this family takes, where they are a known few (``(("outcome", ("count", "failures")),)``),
    else the placeholder's own (PLACEHOLDERS)."""

    name: str
    unit: str
    better: Better
    family: Family
    description: str
    title: str = ""
    fmt: Format = field(default_factory=Format)
    chart: Chart | None = None
    words: tuple[str, str] = ("better", "worse")
    choices: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @cached_property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(_PLACEHOLDER.findall(self.name))

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """A regular expression that matches every key of the family (the name itself when it has no
        placeholder)."""
        parts, at = [], 0
        for m in _PLACEHOLDER.finditer(self.name):
            parts.append(re.escape(self.name[at : m.start()]))
            parts.append(f"((?:{self._alternatives(m.group(1))}))")
            at = m.end()
        parts.append(re.escape(self.name[at:]))
        return re.compile("".join(parts))

    def _alternatives(self, placeholder: str) -> str:
        own = dict(self.choices).get(placeholder)
        if own is not None:
            return "|".join(re.escape(v) for v in own)
        return PLACEHOLDERS.get(placeholder, _ANY_SEGMENT)

    def key(self, **values: object) -> str:
        """The key for these placeholder values: ``TRIAL_CPU_USER.key(role="client")``. A placeholder that may
        stand for nothing (OPTIONAL: ``{on}``, ``{storm}``) is "" when not given."""
        values = {p: "" for p in self.placeholders if p in OPTIONAL} | values
        if set(values) != set(self.placeholders):
            raise KeyError(f"{self.name}: expected {sorted(self.placeholders)}, got {sorted(values)}")
        return self.name.format(**values)

    def prefix(self, **values: object) -> str:
        """What the keys of a family whose last placeholder ends its name and stands for a whole key of another
        family (``clients.{proto}.{monitored}``: monitor/'s figures of one phase) start with, for the values of
        the others: ``PHASE_MONITORED.prefix(proto="udp")`` is ``clients.udp.``."""
        last = self.placeholders[-1] if self.placeholders else ""
        if not self.name.endswith(f"{{{last}}}"):
            raise KeyError(f"{self.name}: no placeholder ends the name")
        return self.key(**values, **{last: ""})

    def titled(self, **values: object) -> str:
        """The title for these placeholder values ("CPU/bit client"); the title holds a subset of the name's."""
        return self.title.format(**values)

    def matches(self, key: str) -> bool:
        return self.pattern.fullmatch(key) is not None

    def values(self, key: str) -> dict[str, str]:
        """The placeholder values of one of the family's keys (``latency.p99_ms`` -> ``{"q": "99"}``); {} for a
        key that is not one."""
        m = self.pattern.fullmatch(key)
        return dict(zip(self.placeholders, m.groups(), strict=True)) if m else {}


class Registry:
    """The declared metrics by name; `find` maps a stored key to its declaration."""

    def __init__(self) -> None:
        self._specs: dict[str, MetricSpec] = {}

    def add(self, spec: MetricSpec) -> MetricSpec:
        if spec.family not in FAMILIES:
            raise ValueError(f"{spec.name}: unknown family {spec.family!r}")
        if (held := self._specs.get(spec.name)) is not None and held != spec:
            raise ValueError(f"metric {spec.name!r} is declared twice")
        self._specs[spec.name] = spec
        return spec

    def find(self, key: str) -> MetricSpec | None:
        """The declaration of a key: its own, else the narrowest family that matches it (fewest
        placeholders), None for an undeclared key."""
        if (spec := self._specs.get(key)) is not None:
            return spec
        fits = [s for s in self._specs.values() if s.placeholders and s.matches(key)]
        return min(fits, key=lambda s: (len(s.placeholders), -len(s.name)), default=None)

    def __iter__(self) -> Iterator[MetricSpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.name))

    def __len__(self) -> int:
        return len(self._specs)


REGISTRY = Registry()


def declare(
    name: str,
    unit: str,
    better: Better,
    family: Family,
    description: str,
    *,
    title: str = "",
    fmt: Format | None = None,
    chart: Chart | None = None,
    words: tuple[str, str] = ("better", "worse"),
    choices: dict[str, tuple[str, ...]] | None = None,
) -> MetricSpec:
    """Declare one metric (or a family of keys) in `REGISTRY` and give back its declaration."""
    known = tuple((choices or {}).items())
    spec = MetricSpec(name, unit, better, family, description, title, fmt or Format(), chart, words, known)
    if unknown := set(dict(known)) - set(spec.placeholders):
        raise ValueError(f"{name}: choices for placeholders it does not have: {sorted(unknown)}")
    return REGISTRY.add(spec)
