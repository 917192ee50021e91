"""What moved between A and B, as a differential flamegraph per matched case and role, from the folded
stacks `run --flamegraph` stored with each trial: written as files by `tunbench compare A B --flamegraph-diff
DIR`, embedded beside each case's verdicts by `tunbench compare A B --html FILE` (report/html/compare.py).

A side's stacks are its trials' folded stacks summed. `inferno-diff-folded --normalize` then scales A's
total to B's: the picture shows where the *share* of CPU time moved (red: a larger share in B, blue:
smaller), on B's frame widths; the counted work and CPU per bit say whether the total moved.

Same sampling rate. A share is only comparable between stacks sampled alike. perf's cpu-clock samples at a
fixed period (1e9 / rate ns) and inferno weighs each sample by it, so every count of a trial's folded stacks
is a whole number of periods: the greatest common divisor of a trial's counts is its sampling period (a
coincidence of only even sample counts would double it; with the hundreds of stacks of a real trial, it does
not happen). Every trial of A and B must show the same period, else the pair is refused and says which
rates it found; where the weights are not whole periods of at least perf's 10 µs floor (hand-made or
old stacks), the rate cannot be told and the diff is drawn with a warning.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

from tunbench.errors import CommandFailed, DependencyMissing, TunbenchError
from tunbench.host.proc import run_cmd
from tunbench.perf.flamegraph import find_tool
from tunbench.results import CaseKey, TrialRecord
from tunbench.store.db import Store, store_exists
from tunbench.workloads import case_title

ROLES = ("client", "server")
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_UNNAMED_ROOT = re.compile(r"^:\d+;", re.M)
MIN_PERIOD_NS = 10_000
"""perf's shortest period for its hrtimer software events (cpu-clock): 10 µs, 100 kHz."""
SUBTITLE = "red: a larger share of CPU time in B, blue: smaller (A scaled to B's total); widths are B's"
CasePair = tuple[CaseKey, list[TrialRecord], CaseKey, list[TrialRecord]]


@dataclass(frozen=True)
class Diff:
    """One case pair's differential flamegraph of one role: the SVG, or None and why not in ``note``;
    ``rate`` says the sampling rate both sides were recorded at (or that it could not be told)."""

    case_a: CaseKey
    case_b: CaseKey
    role: str
    svg: str | None
    note: str = ""
    rate: str = ""

    @property
    def where(self) -> str:
        return f"{pair_text(self.case_a, self.case_b)} {self.role}"


def merge_folded(texts: Iterable[str]) -> str:
    """Folded stacks (`frame;frame;... count` per line) summed per stack, sorted (pure)."""
    total: Counter[str] = Counter()
    for text in texts:
        for line in text.splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                total[stack] += int(count)
    return "".join(f"{stack} {n}\n" for stack, n in sorted(total.items()))


def name_unnamed(folded: str, name: str) -> str:
    """Folded stacks with each root frame perf left unnamed (`:<pid>`: a thread whose comm it did not record,
    as with socat's per-connection child) named `name`, the tunnel whose processes they are, so that the
    same code of two trials is one tower in a diff, not one per pid (pure)."""
    return _UNNAMED_ROOT.sub(lambda _: f"{name};", folded)


def sample_period_ns(folded: str) -> int | None:
    """The sampling period a trial's folded stacks were weighed by: the greatest common divisor of their
    counts (see the module docstring), or None when it is below perf's floor (the counts are not whole
    periods) or there are no stacks (pure)."""
    counts = [int(c) for line in folded.splitlines() if (c := line.rpartition(" ")[2]).isdigit()]
    period = reduce(math.gcd, counts, 0)
    return period if period >= MIN_PERIOD_NS else None


def rate_text(period_ns: int) -> str:
    return f"{1e9 / period_ns:.4g} Hz"


def same_rate(a: list[str], b: list[str]) -> tuple[bool, str]:
    """Whether the trials' folded stacks `a` (side A) and `b` (side B) were sampled at one rate: (False, why)
    when two trials show different periods, else (True, "sampled at 999 Hz on both sides") or, when the rate
    cannot be told from some trial's weights, (True, a warning saying so) (pure)."""
    periods = {side: [sample_period_ns(text) for text in texts] for side, texts in (("A", a), ("B", b))}
    known = {side: sorted({p for p in ps if p is not None}) for side, ps in periods.items()}
    if len({p for ps in known.values() for p in ps}) > 1:
        said = "; ".join(f"{side} at {', '.join(rate_text(p) for p in ps) or 'an unknown rate'}"
                         for side, ps in known.items())  # fmt: skip
        return False, (
            f"refused: the stacks were not sampled at one rate ({said}, from the samples' weights); a share "
            "of samples taken at different rates is not comparable: record A and B with the same perf rate"
        )
    if any(p is None for ps in periods.values() for p in ps):
        return (
            True,
            "warning: the sampling rate cannot be told from these stacks (their weights are not whole perf periods)",
        )
    (period,) = {p for ps in known.values() for p in ps}
    return True, f"sampled at {rate_text(period)} on both sides"


def pair_text(ka: CaseKey, kb: CaseKey) -> str:
    text = case_title(ka)
    return text.replace(ka.label, f"{ka.label} → {kb.label}", 1) if kb.label != ka.label else text


def file_name(ka: CaseKey, kb: CaseKey, role: str) -> str:
    return f"{_SAFE.sub('_', pair_text(ka, kb)).strip('_')}-{role}.svg"


def _folded(store: Store, trials: list[TrialRecord], role: str) -> list[str]:
    """Each trial's stored folded stacks of `role` (trials without any are left out)."""
    texts = []
    for t in trials:
        data = store.artifact(t.id, f"flamegraph.{role}.folded") if t.id is not None else None
        if data:
            texts.append(name_unnamed(data.decode(), t.tunnel))
    return texts


def case_pairs(rows: Iterable[tuple[CaseKey, CaseKey]], a: list[TrialRecord], b: list[TrialRecord]) -> list[CasePair]:
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


def diff_tools(flag: str) -> dict[str, str]:
    """inferno's two programs, or DependencyMissing naming `flag` (the option that needs them)."""
    tools = {n: find_tool(n) for n in ("inferno-diff-folded", "inferno-flamegraph")}
    if missing := [n for n, p in tools.items() if p is None]:
        raise DependencyMissing(f"{flag} needs {', '.join(missing)} (`cargo install inferno`)")
    return {n: p for n, p in tools.items() if p is not None}


def has_stacks(pairs: list[CasePair], db: str | Path) -> bool:
    """Whether any trial of the pairs has stored stacks (so that a page can skip inferno when none has)."""
    with Store(db) as store:
        return any(_folded(store, ta + tb, role) for _, ta, _, tb in pairs for role in ROLES)


def diffs(pairs: list[CasePair], db: str | Path, tools: dict[str, str], tmp: Path) -> list[Diff]:
    """One Diff per (case pair, role) with stacks on at least one side, in the pairs' order: the SVG when
    both sides have stacks sampled at one rate, else the reason there is none. `tmp`: a directory for
    inferno's two input files."""
    out: list[Diff] = []
    with Store(db) as store:
        for ka, ta, kb, tb in pairs:
            for role in ROLES:
                a, b = _folded(store, ta, role), _folded(store, tb, role)
                if not a or not b:
                    if a or b:
                        note = f"no flamegraph on {'A' if not a else 'B'} (run --flamegraph)"
                        out.append(Diff(ka, kb, role, None, note))
                    continue
                ok, rate = same_rate(a, b)
                if not ok:
                    out.append(Diff(ka, kb, role, None, rate))
                    continue
                title = f"{pair_text(ka, kb)} {role}: B against A"
                out.append(Diff(ka, kb, role, _render(merge_folded(a), merge_folded(b), title, tools, tmp), rate=rate))
    return out


def asked_diffs(
    cases: Iterable[tuple[CaseKey, CaseKey]],
    a: list[TrialRecord],
    b: list[TrialRecord],
    db: str | Path,
    *,
    files: bool,
    page: bool,
) -> list[Diff] | None:
    """The diffs of the matched `cases` that `compare` was asked for: `files` (--flamegraph-diff) or `page`
    (--html, which embeds them). None when neither asks, or when only the page asks and no trial has stacks
    (a page of a run without --flamegraph needs no inferno). Both sides from the store: stacks are not in
    JSON exports."""
    if not files and not page:
        return None
    pairs = case_pairs(cases, a, b)
    if not files and not (store_exists(db) and has_stacks(pairs, db)):
        return None
    tools = diff_tools("--flamegraph-diff" if files else "--html's differential flamegraphs")
    with tempfile.TemporaryDirectory(prefix="tunbench-flamediff-") as tmp:
        return diffs(pairs, db, tools, Path(tmp))


def write_diffs(found: list[Diff], out_dir: Path) -> list[str]:
    """Write each SVG of `found` to `out_dir`; returns a line per case and role saying what was written, or
    why not."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    for d in found:
        if d.svg is None:
            lines.append(f"{d.where}: {d.note}")
            continue
        path = out_dir / file_name(d.case_a, d.case_b, d.role)
        path.write_text(d.svg)
        warn = f" ({d.rate})" if d.rate.startswith("warning") else ""
        lines.append(f"{d.where}: {path}{warn}")
    if not lines:
        lines.append("no trial of A or B has flamegraphs: record both with `tunbench run --flamegraph`")
    return lines


def _render(a: str, b: str, title: str, tools: dict[str, str], tmp: Path) -> str:
    fa, fb = tmp / ".a.folded", tmp / ".b.folded"
    fa.write_text(a)
    fb.write_text(b)
    try:
        diff = run_cmd(
            [tools["inferno-diff-folded"], "--normalize", str(fa), str(fb)], timeout_s=120, what="diff-folded"
        ).stdout
        return run_cmd(
            [tools["inferno-flamegraph"], "--title", title, "--subtitle", SUBTITLE, "--countname", "ns"],
            stdin=diff,
            timeout_s=120,
            what="inferno-flamegraph",
        ).stdout
    except CommandFailed as e:
        raise TunbenchError(f"differential flamegraph: {e}") from e
    finally:
        fa.unlink(missing_ok=True)
        fb.unlink(missing_ok=True)
