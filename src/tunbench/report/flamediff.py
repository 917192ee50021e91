"""`tunbench compare A B --flamegraph-diff DIR`: what moved between A and B, as a differential flamegraph
per matched case and role, from the folded stacks `run --flamegraph` stored with each trial.

A side's stacks are its trials' folded stacks summed (each trial sampled with the same perf rate, cpu-clock
at profiling.perf.FREQ_HZ, so the two sides were recorded alike). `inferno-diff-folded --normalize` then
scales A's total to B's: the picture shows where the *share* of CPU time moved (red: a larger share in B,
blue: smaller), on B's frame widths; the counted work and CPU per bit say whether the total moved.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tunbench.errors import CommandFailed, DependencyMissing, TunbenchError
from tunbench.host.proc import run_cmd
from tunbench.profiling.perf import find_tool
from tunbench.report.common import case_text
from tunbench.results import CaseKey, TrialRecord
from tunbench.store.db import Store

ROLES = ("client", "server")
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def merge_folded(texts: Iterable[str]) -> str:
    """Folded stacks (`frame;frame;... count` per line) summed per stack, sorted (pure)."""
    total: Counter[str] = Counter()
    for text in texts:
        for line in text.splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                total[stack] += int(count)
    return "".join(f"{stack} {n}\n" for stack, n in sorted(total.items()))


def pair_text(ka: CaseKey, kb: CaseKey) -> str:
    text = case_text(ka)
    return text.replace(ka.label, f"{ka.label} → {kb.label}", 1) if kb.label != ka.label else text


def file_name(ka: CaseKey, kb: CaseKey, role: str) -> str:
    return f"{_SAFE.sub('_', pair_text(ka, kb)).strip('_')}-{role}.svg"


def _folded(store: Store, trials: list[TrialRecord], role: str) -> str:
    texts = []
    for t in trials:
        data = store.artifact(t.id, f"flamegraph.{role}.folded") if t.id is not None else None
        if data:
            texts.append(data.decode())
    return merge_folded(texts)


def case_pairs(
    rows: Iterable[tuple[CaseKey, CaseKey]], a: list[TrialRecord], b: list[TrialRecord]
) -> list[tuple[CaseKey, list[TrialRecord], CaseKey, list[TrialRecord]]]:
    """Each compared (A case, B case) once, with its ok trials on each side."""
    seen = dict.fromkeys(rows)
    return [
        (
            ka,
            [t for t in a if t.case == ka and t.status == "ok"],
            kb,
            [t for t in b if t.case == kb and t.status == "ok"],
        )
        for ka, kb in seen
    ]


def write_diffs(
    pairs: list[tuple[CaseKey, list[TrialRecord], CaseKey, list[TrialRecord]]], db: str | Path, out_dir: Path
) -> list[str]:
    """One differential flamegraph per (case pair, role) with stacks on both sides, written to `out_dir`;
    returns a line per case and role saying what was written, or why not."""
    tools = {n: find_tool(n) for n in ("inferno-diff-folded", "inferno-flamegraph")}
    if missing := [n for n, p in tools.items() if p is None]:
        raise DependencyMissing(f"--flamegraph-diff needs {', '.join(missing)} (`cargo install inferno`)")
    out_dir.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    with Store(db) as store:
        for ka, ta, kb, tb in pairs:
            for role in ROLES:
                a, b = _folded(store, ta, role), _folded(store, tb, role)
                where = f"{pair_text(ka, kb)} {role}"
                if not a or not b:
                    if a or b:
                        lines.append(f"{where}: no flamegraph on {'A' if not a else 'B'} (run --flamegraph)")
                    continue
                path = out_dir / file_name(ka, kb, role)
                lines.append(f"{where}: {_render(a, b, f'{where}: B against A', path, tools, out_dir)}")
    if not lines:
        lines.append("no trial of A or B has flamegraphs: record both with `tunbench run --flamegraph`")
    return lines


def _render(a: str, b: str, title: str, path: Path, tools: dict[str, str | None], tmp: Path) -> str:
    fa, fb = tmp / ".a.folded", tmp / ".b.folded"
    fa.write_text(a)
    fb.write_text(b)
    try:
        diff = run_cmd(
            [str(tools["inferno-diff-folded"]), "--normalize", str(fa), str(fb)], timeout_s=120, what="diff-folded"
        ).stdout
        svg = run_cmd(
            [
                str(tools["inferno-flamegraph"]),
                "--title",
                title,
                "--subtitle",
                "red: a larger share of CPU time in B, blue: smaller (A scaled to B's total); widths are B's",
                "--countname",
                "ns",
            ],
            stdin=diff,
            timeout_s=120,
            what="inferno-flamegraph",
        ).stdout
    except CommandFailed as e:
        raise TunbenchError(f"--flamegraph-diff: {e}") from e
    finally:
        fa.unlink(missing_ok=True)
        fb.unlink(missing_ok=True)
    path.write_text(svg)
    return str(path)
