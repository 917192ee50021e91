"""The faults that fired in a run's trials, briefly: one line per trial (`tunbench show`, `run`'s end and
the HTML report's "Faults" table), e.g. `wireguard-go · wg-init-loss-2 · iperf3 rep 1: up drop wg.initiation
#1 at -10.4 s, #2 at -5.3 s; handshake 10.31 s after the first, first data 10.31 s, 2 retransmits`."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from tunbench.link.fault_record import FAULT_MS, RETRANSMITS, START_TO_DATA
from tunbench.results import TrialRecord


def _when(f: dict[str, Any]) -> str:
    """' at -10.41 s' on the trial's axis, else ' at 0.52 s of the link (u1)' from the emulator's start (a
    connect bring-up's, named)."""
    t, since, bringup = f.get("t_s"), f.get("since_start_s"), f.get("bringup")
    of = f" ({bringup})" if bringup else ""
    if isinstance(t, int | float):
        return f" at {t:+.2f} s{of}"
    return f" at {since:.2f} s of the link{of}" if isinstance(since, int | float) else of


def hits_text(fired: list[dict[str, Any]]) -> str:
    """'up drop wg.initiation #1 at -10.41 s, #2 at -5.30 s': consecutive hits of one kind share a head, and
    a run of more than RUN of them is one item ('#1-#200 (200) from +2.00 s to +3.99 s')."""
    parts: list[str] = []
    for kind, run in itertools.groupby(fired, key=_kind):
        hits = list(run)
        head = f"{kind[0]} {kind[1]} {kind[2]} "
        if len(hits) > RUN:
            first, last = hits[0], hits[-1]
            span = (
                f" from{_when(first).removeprefix(' at')} to{_when(last).removeprefix(' at')}" if _when(first) else ""
            )
            parts.append(f"{head}#{first.get('ordinal')}-#{last.get('ordinal')} ({len(hits)}){span}")
        else:
            parts.append(head + ", ".join(f"#{f.get('ordinal')}{_when(f)}" for f in hits))
    return ", ".join(parts)


RUN = 4


def _kind(f: dict[str, Any]) -> tuple[Any, ...]:
    return f.get("direction"), f.get("action"), f.get("class"), f.get("bringup")


def recovery_text(m: dict[str, float | None]) -> str:
    """'handshake 10.31 s after the first, first data 10.31 s, 2 retransmits' (what the trial has of it)."""
    bits = []
    if (hs := m.get(FAULT_MS.key(span="handshake"))) is not None:
        bits.append(f"handshake {hs / 1e3:.2f} s after the first")
    if (data := m.get(FAULT_MS.key(span="first_data"))) is not None:
        bits.append(f"first data {data / 1e3:.2f} s after it")
    if (n := m.get(RETRANSMITS.name)) is not None:
        bits.append(f"{n:.0f} retransmit{'s' if n != 1 else ''}")
    if (start := m.get(START_TO_DATA.name)) is not None:
        bits.append(f"first message to data {start / 1e3:.2f} s")
    return ", ".join(bits)


def fault_rows(trials: Iterable[TrialRecord]) -> list[tuple[str, str, str]]:
    """(trial, the faults it fired, its recovery) for each trial that fired some."""
    rows = []
    for t in sorted(trials, key=lambda t: t.seq):
        fired = t.params.get("faults_fired") or []
        if fired:
            rows.append(
                (
                    f"{t.label} · {t.profile} · {t.workload} rep {t.repetition}",
                    hits_text(fired),
                    recovery_text(t.metrics),
                )
            )
    return rows


def fault_lines(trials: Iterable[TrialRecord]) -> list[str]:
    """The terminal's lines: a heading and one line per trial that fired faults ([] when none did)."""
    rows = fault_rows(trials)
    if not rows:
        return []
    return [
        "faults fired (times on the trial's axis: 0 = the measurement's start; before it, the bring-up):",
        *(f"  {who}: {hits}" + (f"; {rec}" if rec else "") for who, hits, rec in rows),
    ]
