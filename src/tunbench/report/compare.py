"""`tunbench compare`: A/B verdicts per matching case and metric, usable as a CI gate.

A and B are runs (store id, uid or name, or a JSON export file), or two labels within one run
(``--label-a old --label-b new``, e.g. ``socat[label=old]`` vs ``socat[bin=/opt/new/socat,label=new]``).
A is the baseline, B the candidate: a change of -8 % means B's median is 8 % below A's.

Cases match on (label, profile, workload, flows, direction, clients, variant); with ``--label-a``/``--label-b``
the label of A's cases is mapped to B's label and the rest must match. For each matching case and metric the
verdict comes from ``tunbench.stats.compare`` (rank test, distribution-free CI of the change with its
exact coverage, threshold, MDE).

Relative and absolute metrics. The catalogue (``metrics_for``) marks signed metrics ``absolute``
(``ABSOLUTE_PREFIXES``: the latency increase under load, loaded minus idle, which is often negative);
they are compared as median(B) - median(A) in their unit ("+7.0 ms [+5.1, +8.8]"). Any other metric
falls back to absolute for a case whenever a value on either side is <= 0: a change is never taken
relative to a median <= 0 (from -2 ms to +5 ms is not "-350 %", and 0 +- noise is not "+200 %").

Thresholds. ``--threshold`` is relative (3 % = 0.03) and applies to relative comparisons only; it cannot
apply to a difference of signed values. Absolute comparisons take a threshold in their unit,
``threshold_abs`` per unit; the CLI offers ``--threshold-ms`` (the unit of every absolute metric in the
catalogue); an absolute comparison in another unit (throughput with a 0 value, say) has threshold 0.

Multiple comparisons. Every comparison that can fail the gate (all but the direct baseline's) is one
family, Holm-adjusted (``tunbench.stats.multiple``: family-wise error <= alpha, the property a pass/fail
gate needs); the direct rows are a family of their own. Verdicts use the adjusted p-value.

Paired or unpaired. When A and B are two labels of ONE run, the trials of a case under the two labels with
the same repetition number ran in the same repetition round (seconds apart): they are pairs, and the
comparison is paired (``tunbench.stats.compare_paired``: the paired t on the within-pair log ratios, or on
the differences for absolute metrics: their mean, its t interval and the t-test; MDE from their SD). Pairs are
the ok trials of both labels with the same repetition; a repetition whose partner failed (or is missing) is
dropped, and a note says how many. A case (or metric) with fewer than ``MIN_PAIRS`` (3) pairs falls back to
the unpaired analysis, and a note says so. Two different runs are always compared unpaired (Mann-Whitney,
``tunbench.stats.compare``): their trials are not pairs. ``CompareResult.analysis`` says which was used and
why, and the table's caption prints it.

Interfered trials (the monitor's ``interfered`` metric: another tunbench run, foreign CPU or steal in the
window) are left out by default, in a paired design with their pairs' partners, and a note says how many
and why (``report.summary.leave_out_interfered``; ``include_interfered`` keeps them).

How many repetitions can give a verdict at all is one rule, ``stats.min_repetitions``: compare's notes, the
power warnings, ``repetition_note`` (`run --dry-run` and the run's header) and ``min_repetitions_text`` (the
sentence the help and the docs carry) all come from it.

Cases of the ``direct`` baseline are compared and shown but never gate: a change there measures the
host, not the tunnel (it is a reason to distrust the other verdicts, and a warning says so).

Only ``load_run`` does I/O; everything else is pure.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeAlias

from rich.markup import escape
from rich.table import Table

from tunbench.errors import TunbenchError
from tunbench.report.common import case_text, fmt_bps
from tunbench.report.json_export import JSON_SCHEMA
from tunbench.report.summary import (
    BASELINE,
    ROLES,
    LeftOut,
    leave_out_interfered,
    per_trial_role,
    unit_mean,
    unit_values,
)
from tunbench.report.terminal import Flagged, grouped_lines
from tunbench.results import CaseKey, RunRecord, TrialRecord
from tunbench.stats import (
    MIN_PAIRS,
    Comparison,
    adjust,
    compare,
    compare_paired,
    min_repetitions,
)

EXIT_REGRESSED = 1
"""Exit status of `tunbench compare` when a gated case regressed beyond the threshold (errors exit 2)."""

METRIC_KINDS = ("throughput", "cpu", "latency", "work")
"""Metric kinds compare knows. `work` (counted work, `run --count-work`) explains the others: shown with
its verdicts, its own Holm family, never gating."""

Outcome: TypeAlias = Literal["regressed", "improved", "unchanged", "undecided"]
"""What a gated comparison says, for the verdict line. regressed / improved: significantly worse / better
(Holm-adjusted, beyond the threshold). unchanged: no significant change, and the comparison could have seen
one of the size that matters: its MDE is finite and, when a threshold is set, at most the threshold.
undecided: no significant change, but one that matters could have gone unseen (the MDE is infinite, e.g.
too few repetitions for the rank test to reach alpha at all, undefined, or above the threshold)."""

OUTCOMES: tuple[Outcome, ...] = ("regressed", "improved", "unchanged", "undecided")


class CompareError(TunbenchError):
    """A or B cannot be loaded or matched; exit status 2 so that 1 always means "regressed"."""

    exit_code = 2


@dataclass(frozen=True)
class Metric:
    """One row kind of the comparison: how to read it from a trial, which way is better, how to show it.

    ``absolute``: compare as candidate median - baseline median in ``unit`` (signed data such as the
    latency increase under load, where a ratio means nothing); other metrics are compared as relative
    changes unless some value is <= 0 (then absolute too). ``scale`` converts a raw value to ``unit``.
    """

    name: str
    title: str
    kind: str
    higher_is_better: bool
    value: Callable[[TrialRecord], float | None]
    fmt: Callable[[float], str]
    better: str
    worse: str
    absolute: bool = False
    unit: str = ""
    scale: float = 1.0
    gates: bool = True  # False: shown but never gates (counted work: it explains a verdict, it is not one)


def _throughput(t: TrialRecord) -> float | None:
    return t.metrics.get("throughput_bps")


def _cpu_per_bit(role: str) -> Callable[[TrialRecord], float | None]:
    def value(t: TrialRecord) -> float | None:
        # (user + sys CPU seconds) / (throughput_bps * window_s), the inverse of summary's bits per CPU-second.
        bits_per_cpu_s = per_trial_role(t, role)["bits_per_cpu_s"]
        return 1.0 / bits_per_cpu_s if bits_per_cpu_s else None

    return value


def _metric_value(name: str) -> Callable[[TrialRecord], float | None]:
    return lambda t: t.metrics.get(name)


def _fmt_cpu_per_bit(s_per_bit: float) -> str:
    return f"{s_per_bit * 1e9:.3g} s/Gbit"


THROUGHPUT = Metric(
    "throughput_bps", "throughput", "throughput", True, _throughput, fmt_bps, "faster", "slower", unit="Mbit/s",
    scale=1e-6,
)  # fmt: skip

ABSOLUTE_PREFIXES = ("latency.increase_",)
"""Metrics compared as absolute differences: signed values (loaded minus idle latency can be < 0)."""


def metrics_for(trials: list[TrialRecord], kinds: tuple[str, ...] = METRIC_KINDS) -> list[Metric]:
    """The metrics to compare: throughput, CPU per bit per role, and any ``latency.*_ms`` metric present."""
    out: list[Metric] = []
    if "throughput" in kinds:
        out.append(THROUGHPUT)
    if "cpu" in kinds:
        for role in ROLES:
            out.append(
                Metric(
                    f"cpu_s_per_bit.{role}",
                    f"CPU/bit {role}",
                    "cpu",
                    False,
                    _cpu_per_bit(role),
                    _fmt_cpu_per_bit,
                    "cheaper",
                    "costlier",
                    unit="s/Gbit",
                    scale=1e9,
                )
            )
    if "latency" in kinds:
        names = sorted({k for t in trials for k in t.metrics if k.startswith("latency.") and k.endswith("_ms")})
        for name in names:
            title = name.removeprefix("latency.").removesuffix("_ms")
            out.append(
                Metric(
                    name,
                    f"latency {title}",
                    "latency",
                    False,
                    _metric_value(name),
                    lambda v: f"{v:.3g} ms",
                    "faster",
                    "slower",
                    absolute=name.startswith(ABSOLUTE_PREFIXES),
                    unit="ms",
                )
            )
    if "work" in kinds:
        out.extend(work_metrics(trials))
    return out


WORK_RATIOS: dict[str, tuple[str, bool, str]] = {  # suffix of work.<role>.* -> (title, higher is better, unit)
    "syscalls_per_mb": ("syscalls/MB", False, "/MB"),
    "ctx_switches_per_mb": ("ctx switches/MB", False, "/MB"),
    "read_per_mb": ("reads/MB", False, "/MB"),
    "write_per_mb": ("writes/MB", False, "/MB"),
    "packets_per_send": ("packets/send", True, ""),
    "packets_per_recv": ("packets/recv", True, ""),
    "bytes_per_wakeup": ("bytes/wake-up", True, "B"),
    "instructions_per_byte": ("instructions/byte", False, ""),
    "cycles_per_byte": ("cycles/byte", False, ""),
}


def work_metrics(trials: list[TrialRecord]) -> list[Metric]:
    """The counted-work ratios present in `trials` (monitor/work.py), per role: the per-MB counts lower is
    better, packets per syscall and bytes per wake-up higher is better. They never gate."""
    present = {k for t in trials for k in t.metrics if k.startswith("work.")}
    out: list[Metric] = []
    for role in ROLES:
        for suffix, (title, higher, unit) in WORK_RATIOS.items():
            name = f"work.{role}.{suffix}"
            if name in present:
                better, worse = ("more batched", "less batched") if higher else ("less work", "more work")
                out.append(
                    Metric(name, f"{title} {role}", "work", higher, _metric_value(name), _fmt_in(unit), better, worse,
                           gates=False)
                )  # fmt: skip
    return out


def _fmt_in(unit: str) -> Callable[[float], str]:
    return lambda v: f"{v:.4g}{unit}"


@dataclass(frozen=True)
class CaseComparison:
    case_a: CaseKey
    case_b: CaseKey
    tunnel: str
    metric: Metric
    result: Comparison
    gated: bool

    @property
    def verdict_text(self) -> str:
        v = self.result.verdict
        return self.metric.better if v == "better" else self.metric.worse if v == "worse" else v

    @property
    def case_label(self) -> str:
        text = case_text(self.case_a)
        if self.case_b.label != self.case_a.label:
            text = text.replace(self.case_a.label, f"{self.case_a.label} → {self.case_b.label}", 1)
        return text


@dataclass(frozen=True)
class CompareResult:
    """``threshold``: relative, for relative comparisons; ``threshold_abs``: per unit ("ms"), for absolute
    ones (0 for a unit not given). ``settings``: one line per network setting that differs between A and B
    (or one line saying they were not recorded)."""

    a_name: str
    b_name: str
    threshold: float
    rows: tuple[CaseComparison, ...]
    unmatched_a: tuple[CaseKey, ...] = ()
    unmatched_b: tuple[CaseKey, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    threshold_abs: dict[str, float] = field(default_factory=dict)
    settings: tuple[str, ...] = field(default_factory=tuple)
    analysis: str = "unpaired"
    """"paired" (every row), "unpaired" (every row) or "mixed"; ``analysis_reason`` says why, in one line."""
    analysis_reason: str = "A and B are different runs"
    dropped_pairs: int = 0

    @property
    def regressions(self) -> list[CaseComparison]:
        return [r for r in self.rows if r.gated and r.result.regressed]

    @property
    def exit_code(self) -> int:
        return EXIT_REGRESSED if self.regressions else 0

    def warnings(self) -> list[Flagged]:
        """Each comparison's warnings, one per (cause, comparison), in row order, for ``grouped_lines``: every
        power/count warning, spread warnings of throughput only (CPU and latency spread is usually larger and
        would bury the rest; their verdicts account for it). The subject is the comparison; the detail, for a
        spread warning, the CV of A and B."""
        seen: dict[tuple[str, str], Flagged] = {}
        for r in self.rows:
            subject = f"{r.case_label} {r.metric.title}"
            for w in r.result.warnings:
                if w.code in _SPREAD_CODES and r.metric.kind != "throughput":
                    continue
                detail = ""
                if w.code == "high-cv":
                    detail = f"{_cv(r.result.baseline.cv)}/{_cv(r.result.candidate.cv)}"
                seen.setdefault((w.code, subject), Flagged(subject, w, detail))
        return list(seen.values())

    def outcome(self, row: CaseComparison) -> Outcome:
        """What one comparison says (see ``Outcome``)."""
        c = row.result
        if c.verdict == "worse":
            return "regressed"
        if c.verdict == "better":
            return "improved"
        mde = c.min_detectable_effect
        if math.isfinite(mde) and (c.threshold <= 0.0 or mde <= c.threshold):
            return "unchanged"
        return "undecided"

    def tally(self) -> dict[Outcome, int]:
        """How many gated comparisons (the direct baseline's are not) ended in each outcome."""
        out: dict[Outcome, int] = dict.fromkeys(OUTCOMES, 0)
        for r in self.rows:
            if r.gated:
                out[self.outcome(r)] += 1
        return out


def _cv(x: float) -> str:
    return f"{x:.0%}" if math.isfinite(x) else "–"


_SPREAD_CODES = ("high-cv", "outlier")


# ---- inputs ----------------------------------------------------------------------------------------


def parse_threshold(text: str) -> float:
    """'3%' or '0.03' -> 0.03. A bare number >= 1 is refused (ambiguous: 3 means 300 %?)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise CompareError(f"--threshold {text!r}: expected a percentage like 3% or a fraction like 0.03") from None
    if not raw.endswith("%") and value >= 1.0:
        raise CompareError(f"--threshold {text!r}: write {raw}% for percent (a bare number is a fraction, 0.03 = 3%)")
    if not math.isfinite(value) or value < 0.0 or value >= 1.0:
        raise CompareError(f"--threshold {text!r}: must be between 0% and 100%")
    return value


def run_from_export(data: dict[str, Any], source: str = "JSON") -> RunRecord:
    """Rebuild a RunRecord (with its trials and their per-second series) from ``json_export.export``."""
    if not isinstance(data, dict) or data.get("schema") != JSON_SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise CompareError(f"{source}: not a tunbench JSON export of schema {JSON_SCHEMA} (schema: {got!r})")
    try:
        r = data["run"]
        run = RunRecord(
            id=int(r["id"]),
            uid=str(r["uid"]),
            name=str(r.get("name") or ""),
            started_at=str(r.get("started_at") or ""),
            finished_at=r.get("finished_at"),
            status=str(r.get("status") or ""),
            tunbench_version=str(r.get("tunbench_version") or ""),
            provenance=dict(r.get("provenance") or {}),
            scenario_text=str(r.get("scenario_text") or ""),
            scenario_hash=str(r.get("scenario_hash") or ""),
            scenario=dict(r.get("scenario") or {}),
        )
        run.trials = [_trial_from_export(t) for t in data["trials"]]
    except (KeyError, TypeError, ValueError) as e:
        raise CompareError(f"{source}: malformed tunbench JSON export ({type(e).__name__}: {e})") from e
    return run


def _axes_from_export(t: dict[str, Any]) -> tuple[int, str, int, str]:
    """(flows, direction, clients, variant). An export from before the `clients`/`variant` fields held a
    multi-client trial's client count in `flows` and a storm's variant in `direction` (as the store's
    schema 1 did: store/migrations.py moves them the same way)."""
    flows, direction = int(t["flows"]), str(t["direction"])
    if "clients" in t:
        return flows, direction, int(t["clients"]), str(t.get("variant") or "")
    if t["workload"] == "storm":
        return 1, "-", flows, direction
    if t["workload"] == "clients":
        return 1, direction, flows, ""
    return flows, direction, 1, ""


def _trial_from_export(t: dict[str, Any]) -> TrialRecord:
    flows, direction, clients, variant = _axes_from_export(t)
    return TrialRecord(
        seq=int(t["seq"]),
        tunnel=str(t["tunnel"]),
        label=str(t["label"]),
        profile=str(t["profile"]),
        workload=str(t["workload"]),
        flows=flows,
        direction=direction,
        clients=clients,
        variant=variant,
        repetition=int(t["repetition"]),
        params=dict(t.get("params") or {}),
        status=str(t.get("status") or "ok"),
        error=str(t.get("error") or ""),
        started_at=str(t.get("started_at") or ""),
        duration_s=t.get("duration_s"),
        metrics=dict(t.get("metrics") or {}),
        series={str(k): [(float(a), float(b)) for a, b in pts] for k, pts in (t.get("series") or {}).items()},
        streams=[
            (int(s["stream"]), str(s["direction"]), float(s["received_bps"]), s.get("retransmits"))
            for s in t.get("streams") or []
        ],
    )


def load_run(ref: str, db: str | Path) -> RunRecord:
    """A run from a JSON export file (if ``ref`` is an existing file) or from the store at ``db``."""
    from tunbench.store.db import Store, store_exists

    path = Path(ref)
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CompareError(f"cannot read {path} as a tunbench JSON export: {e}") from e
        return run_from_export(data, source=str(path))
    if not store_exists(db):
        raise CompareError(f"{ref!r} is not a file and there is no result store at {db} (pass --db PATH)")
    try:
        with Store(db) as store:
            return store.find_run(ref)
    except TunbenchError as e:
        raise CompareError(str(e)) from e


def run_name(run: RunRecord) -> str:
    name = f" {run.name}" if run.name else ""
    return f"run #{run.id} ({run.uid}{name})"


# ---- comparison (pure) -----------------------------------------------------------------------------


def _groups(trials: list[TrialRecord]) -> dict[CaseKey, list[TrialRecord]]:
    out: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        out[t.case].append(t)
    return out


def _rest(case: CaseKey) -> tuple[str, str, int, str, int, str]:
    return (case.profile, case.workload, case.flows, case.direction, case.clients, case.variant)


def _values(trials: list[TrialRecord], metric: Metric) -> list[float]:
    """The metric's ok values, one per independent unit (``report.summary.unit_values``: a cold trial, or a
    warm bring-up's windows' mean, as pair_values takes them)."""
    return unit_values(trials, metric.value)


def _by_repetition(trials: list[TrialRecord]) -> dict[int, TrialRecord]:
    """The ok trial of each repetition (the last one by seq if a repetition has several)."""
    out: dict[int, TrialRecord] = {}
    for t in sorted(trials, key=lambda t: t.seq):
        if t.status == "ok":
            out[t.repetition] = t
    return out


def pair_trials(ta: list[TrialRecord], tb: list[TrialRecord]) -> tuple[list[tuple[TrialRecord, TrialRecord]], int]:
    """A's and B's ok trials of one case matched by repetition, and how many repetitions were dropped
    because only one side has an ok trial (the partner failed or is missing)."""
    ra, rb = _by_repetition(ta), _by_repetition(tb)
    pairs = [(ra[k], rb[k]) for k in sorted(ra.keys() & rb.keys())]
    return pairs, len(ra.keys() ^ rb.keys())


def pair_values(pairs: list[tuple[TrialRecord, TrialRecord]], metric: Metric) -> tuple[list[float], list[float]]:
    """The metric's values of both partners (A's, B's), for the pairs where both have a finite one. Warm
    windows (`--warm`) are not independent pairs: the windows of one bring-up share that bring-up's luck (how
    the tunnel's threads were placed, its state), so the pairs of one pair of bring-ups are one unit, each
    side its windows' mean (geometric, so the unit's log ratio is the mean of the windows' log ratios;
    arithmetic where a value is <= 0). Cold trials are each their own unit."""
    units: dict[object, tuple[list[float], list[float]]] = {}
    for x, y in pairs:
        a, b = metric.value(x), metric.value(y)
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
            continue
        key = bringup_unit(x, y)
        va, vb = units.setdefault(key if key is not None else ("pair", x.seq), ([], []))
        va.append(float(a))
        vb.append(float(b))
    return [unit_mean(va) for va, _ in units.values()], [unit_mean(vb) for _, vb in units.values()]


def bringup_unit(x: TrialRecord, y: TrialRecord) -> tuple[str, str] | None:
    """The pair of warm bring-ups two partners were measured on, or None for cold trials."""
    wx, wy = x.params.get("warm"), y.params.get("warm")
    if not (isinstance(wx, dict) and isinstance(wy, dict)):
        return None
    return str(wx.get("bringup")), str(wy.get("bringup"))


def _match(
    a: dict[CaseKey, list[TrialRecord]],
    b: dict[CaseKey, list[TrialRecord]],
    label_a: str | None,
    label_b: str | None,
) -> list[tuple[CaseKey, CaseKey]]:
    if label_a is None and label_b is None:
        return [(k, k) for k in a if k in b]
    la = label_a if label_a is not None else label_b
    lb = label_b if label_b is not None else label_a
    for side, label, cases in (("A", la, a), ("B", lb, b)):
        if not any(k.label == label for k in cases):
            have = ", ".join(sorted({k.label for k in cases})) or "none"
            raise CompareError(f"no trials labelled {label!r} in {side} (labels there: {have})")
    b_by_rest = {_rest(k): k for k in b if k.label == lb}
    return [(k, b_by_rest[_rest(k)]) for k in a if k.label == la and _rest(k) in b_by_rest]


def _compare(
    va: list[float],
    vb: list[float],
    metric: Metric,
    *,
    threshold: float,
    threshold_abs: dict[str, float],
    confidence: float,
    seed: int,
    label: str,
    paired: bool = False,
) -> Comparison:
    # Absolute when the catalogue says so, and whenever a value is <= 0: never a change relative to a
    # median <= 0. Values are compared in the metric's unit, so an absolute change reads "+7.0 ms".
    # paired: va[k] and vb[k] are partners (same repetition of one run).
    absolute = metric.absolute or any(v <= 0.0 for v in va + vb)
    limit = threshold_abs.get(metric.unit, 0.0) if absolute else threshold
    return (compare_paired if paired else compare)(
        [v * metric.scale for v in va],
        [v * metric.scale for v in vb],
        higher_is_better=metric.higher_is_better,
        threshold=limit,
        confidence=confidence,
        seed=seed,
        label=label,
        absolute=absolute,
        unit=metric.unit,
    )


def _holm(rows: list[CaseComparison]) -> tuple[list[CaseComparison], list[str]]:
    """Holm-adjust the gate's family (every gated row) and, separately, the direct rows (which only feed
    a note) and the counted-work rows (which explain); see ``tunbench.stats.multiple`` for why Holm. Returns
    the rows and notes on the family."""
    notes: list[str] = []
    out = list(rows)
    for family in ("gate", "direct", "work"):
        idx = [i for i, r in enumerate(rows) if _family(r) == family]
        adjusted = adjust([rows[i].result for i in idx])
        for i, res in zip(idx, adjusted, strict=True):
            out[i] = replace(rows[i], result=res)
        if family != "gate" or not adjusted:
            continue
        m = adjusted[0].family_size
        alpha = adjusted[0].alpha
        floors = [r.p_floor for r in adjusted if r.baseline.n and r.candidate.n]
        if m > 1 and floors and min(floors) >= alpha / m:
            need = _repetitions_for(alpha / m, paired=any(r.analysis == "paired" for r in adjusted))
            notes.append(
                f"{m} gated comparisons, Holm-adjusted: the first significant one needs p < {alpha / m:.2g}, "
                f"below the rank test's floor at these repetitions ({min(floors):.2g}), so nothing can be "
                f"called significant; use --repeat {need} or more, or fewer metrics (--metrics)"
            )
    return out, notes


def _family(row: CaseComparison) -> str:
    """A row's Holm family: the gate's, the direct baseline's (feeds a note), or counted work's (explains)."""
    return "gate" if row.gated else "direct" if row.metric.gates else "work"


def _repetitions_for(level: float, *, paired: bool) -> int:
    """The fewest repetitions (pairs, or per side) with which the analysis can reach p < level
    (``stats.min_repetitions``, the one rule)."""
    return min_repetitions(paired=paired, alpha=level)


GATED_PER_CASE = 3
"""Gated comparisons per case of a throughput workload: throughput, CPU/bit client, CPU/bit server (latency
metrics add more where a workload measures them, so the family a plan is judged by is a lower bound)."""


def min_repetitions_text(alpha: float = 0.05) -> str:
    """The rule in one sentence, from ``stats.min_repetitions`` (compare's help, README, docs/precision.md and
    docs/ci.md state exactly this; a unit test checks that they do)."""
    spans: list[tuple[int, int, int]] = []
    for family in range(1, 24):
        n = min_repetitions(family, paired=False, alpha=alpha)
        if spans and spans[-1][2] == n:
            spans[-1] = (spans[-1][0], family, n)
        else:
            spans.append((family, family, n))
    parts = [
        f"{n} per side for {lo} gated comparison" if lo == hi == 1 else f"{n} for {lo}-{hi}" for lo, hi, n in spans
    ]
    return (
        f"fewest repetitions for any verdict: {min_repetitions(paired=True, alpha=alpha)} pairs (paired); unpaired, "
        + ", ".join(parts)
    )


def repetition_note(*, labels: int, cases_per_label: int, units: int, warm: int = 1) -> str:
    """Before a run (`run --dry-run` and the run's header): "" when `units` independent units per case (cold
    trials, or warm bring-ups) can give a verdict for the gated family `compare` will judge, else a warning
    with the fewest that can (``stats.min_repetitions``, the one rule). Two labels or more besides direct are
    compared paired within the run (family: each label's cases x the gated metrics); one label is compared
    with another run, unpaired. `warm`: windows per bring-up (a unit), for the --repeat to suggest."""
    if labels < 1 or cases_per_label < 1:
        return ""
    paired = labels >= 2
    family = GATED_PER_CASE * cases_per_label
    need = min_repetitions(family, paired=paired)
    if units >= need:
        return ""
    how = (
        f"compared paired by repetition (--label-a/--label-b), {need} pairs"
        if paired
        else f"compared with another run (unpaired, Holm over {family} gated comparisons), {need} per side"
    )
    unit = "bring-up(s)" if warm > 1 else "repetition(s)"
    return (
        f"warning: {units} {unit} per case cannot give any verdict: {how} is the fewest that can "
        f"(docs/precision.md); use --repeat {need * warm} or more"
    )


def compare_runs(
    a: RunRecord,
    b: RunRecord,
    *,
    label_a: str | None = None,
    label_b: str | None = None,
    threshold: float = 0.0,
    threshold_abs: dict[str, float] | None = None,
    kinds: tuple[str, ...] = METRIC_KINDS,
    confidence: float = 0.95,
    seed: int = 0,
    use_pairs: bool = True,
    include_interfered: bool = False,
) -> CompareResult:
    """Compare B (candidate) to A (baseline) per matching case and metric; Holm across the gate.

    Two labels of one run are compared paired (by repetition) where a case has >= ``MIN_PAIRS`` pairs,
    two runs unpaired (see the module docstring). use_pairs=False compares one run's labels unpaired too.
    Interfered trials are left out, with their pairs' partners in a paired design, and a note says how many
    and why (``report.summary.leave_out_interfered``); include_interfered=True keeps them."""
    same_run = a.uid == b.uid and a.id == b.id
    paired_design = same_run and use_pairs
    if same_run and (label_a is None or label_b is None or label_a == label_b):
        raise CompareError(
            f"A and B are the same {run_name(a)}: give two runs, or two labels with --label-a X --label-b Y"
        )
    abs_limits = dict(threshold_abs or {})
    trials_a, left_a = leave_out_interfered(a.trials, paired=paired_design, include=include_interfered)
    trials_b, left_b = (trials_a, LeftOut()) if same_run else leave_out_interfered(b.trials, include=include_interfered)
    ga, gb = _groups(trials_a), _groups(trials_b)
    try:
        pairs = _match(ga, gb, label_a, label_b)
    except CompareError as e:
        if left := "; ".join(x.text for x in (left_a, left_b) if x):
            raise CompareError(f"{e}: {left}") from None
        raise
    if not pairs:
        la = ", ".join(sorted({k.label for k in ga})) or "none"
        lb = ", ".join(sorted({k.label for k in gb})) or "none"
        raise CompareError(
            f"no matching cases between A (labels: {la}) and B (labels: {lb}); "
            "to compare differently labelled builds use --label-a X --label-b Y"
        )
    rows: list[CaseComparison] = []
    notes: list[str] = [
        f"{side}{left.text}" for side, left in (("" if same_run else "A: ", left_a), ("B: ", left_b)) if left
    ]
    metrics = metrics_for(trials_a + trials_b, kinds)
    dropped = 0
    too_few: list[str] = []
    warm = paired_design and any("warm" in t.params for t in trials_a)
    for ka, kb in pairs:
        ta, tb = ga[ka], gb[kb]
        tunnel = ta[0].tunnel
        case_gated = not (tunnel == BASELINE and tb[0].tunnel == BASELINE)
        trial_pairs: list[tuple[TrialRecord, TrialRecord]] = []
        if paired_design:
            trial_pairs, lost = pair_trials(ta, tb)
            dropped += lost
            if lost:
                notes.append(
                    f"{case_text(ka)}: {lost} repetition(s) dropped from the pairs (partner failed or missing), "
                    f"{len(trial_pairs)} pairs left"
                )
        for metric in metrics:
            va, vb = _values(ta, metric), _values(tb, metric)
            if not va or not vb:
                if metric.kind == "throughput":
                    notes.append(f"{case_text(ka)}: no successful trials on {'A' if not va else 'B'}; not compared")
                continue
            paired = False
            if paired_design:
                pa, pb = pair_values(trial_pairs, metric)
                if len(pa) >= MIN_PAIRS:
                    va, vb, paired = pa, pb, True
                else:
                    if warm and pa:  # windows of one bring-up are not independent samples either
                        va, vb = pa, pb
                    too_few.append(f"{case_text(ka)} {metric.title}")
                    if metric.kind == "throughput" or len(too_few) == 1:
                        notes.append(
                            f"{case_text(ka)} {metric.title}: {len(pa)} pair(s) by repetition, fewer than "
                            f"{MIN_PAIRS}: compared unpaired"
                        )
            label = f"{case_text(ka)} {metric.title}"
            res = _compare(
                va, vb, metric, threshold=threshold, threshold_abs=abs_limits, confidence=confidence, seed=seed,
                label=label, paired=paired,
            )  # fmt: skip
            rows.append(CaseComparison(ka, kb, tunnel, metric, res, case_gated and metric.gates))
    rows, family_notes = _holm(rows)
    notes.extend(family_notes)
    for r in rows:
        if not r.gated and r.metric.gates and r.result.significant:
            notes.append(
                f"the direct baseline changed ({r.case_label}, {r.metric.title}: {fmt_change(r.result)}): "
                "the host itself measured differently between A and B, so distrust the other verdicts"
            )
    if not a.provenance.get("hosts") and (note := unplaced_note(rows, [t for ka, _ in pairs for t in ga[ka]])):
        notes.append(note)
    settings = settings_differences([t for ka, _ in pairs for t in ga[ka]], [t for _, kb in pairs for t in gb[kb]])
    matched_a = {ka for ka, _ in pairs}
    matched_b = {kb for _, kb in pairs}
    scope_a = [k for k in ga if label_a is None or k.label == (label_a or label_b)]
    scope_b = [k for k in gb if label_b is None or k.label == (label_b or label_a)]
    analysis, reason = _analysis(rows, same_run, use_pairs, dropped, warm)
    return CompareResult(
        a_name=run_name(a) + (f" [{label_a}]" if label_a else ""),
        b_name=run_name(b) + (f" [{label_b}]" if label_b else ""),
        threshold=threshold,
        rows=tuple(rows),
        unmatched_a=tuple(k for k in scope_a if k not in matched_a),
        unmatched_b=tuple(k for k in scope_b if k not in matched_b),
        notes=tuple(dict.fromkeys(notes)),
        threshold_abs=abs_limits,
        settings=tuple(settings),
        analysis=analysis,
        analysis_reason=reason,
        dropped_pairs=dropped,
    )


def unplaced_note(rows: list[CaseComparison], trials: list[TrialRecord]) -> str:
    """A caution when a paired verdict rests on pairs measured without CPU placement: there, a scheduler
    state can outlast a trial, pairs are then not independent and the paired test calls changes more
    often than its level (A/A runs on a 2-CPU VM: BENCHMARKS §9, docs/precision.md). "" otherwise (and for a
    run on hosts, which the caller leaves out: placement there is the hosts' own)."""
    decided = [r for r in rows if r.gated and r.result.analysis == "paired" and r.result.significant]
    if not decided or any(t.params.get("cpuset") for t in trials):
        return ""
    return (
        "the pairs were measured without CPU placement, where A/A comparisons on a small host called changes "
        "more often than the test's level (docs/precision.md): confirm this verdict with a second run, or "
        "measure with --cpuset split"
    )


def _analysis(
    rows: list[CaseComparison], same_run: bool, use_pairs: bool, dropped: int, warm: bool = False
) -> tuple[str, str]:
    """("paired" | "unpaired" | "mixed", why) for the caption."""
    if not same_run:
        return "unpaired", "A and B are different runs, so their trials are not pairs"
    if not use_pairs:
        return "unpaired", "one run's labels compared as independent samples (--unpaired)"
    n = sorted({r.result.n_pairs for r in rows if r.result.analysis == "paired"})
    unpaired = sum(1 for r in rows if r.result.analysis != "paired")
    lost = f", {dropped} dropped (partner failed or missing)" if dropped else ""
    if not n:
        return "unpaired", f"one run, but fewer than {MIN_PAIRS} pairs by repetition{lost}"
    count = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
    why = f"{count} pairs of the same run, by repetition{lost}"
    if warm:
        why = f"{count} pairs of the same run, by repetition; warm windows as one pair per pair of bring-ups{lost}"
    if unpaired:
        return "mixed", f"{why}; {unpaired} comparison(s) with fewer than {MIN_PAIRS} pairs unpaired"
    return "paired", why


# ---- network settings ------------------------------------------------------------------------------

_NOT_SET = "–"
_RUN_PREFIX = re.compile(r"\btb[0-9a-f]{6}(?=-)")
"""Interface names carry the run's prefix (tb + 6 hex digits): one key per interface across runs."""


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """{"client": {"tcp_rmem": "4096 ..."}} -> {"client.tcp_rmem": "4096 ..."}; leaves as text."""
    out: dict[str, str] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list | tuple):
            out[name] = " ".join(str(v) for v in value)
        else:
            out[name] = str(value)
    return out


def _side_settings(trials: list[TrialRecord]) -> tuple[dict[str, list[str]], bool]:
    """Values seen per flattened ``params["net"]`` key (in trial order, unique), and whether any trial lacks it."""
    seen: dict[str, dict[str, None]] = defaultdict(dict)
    missing = False
    for t in trials:
        net = t.params.get("net") if isinstance(t.params, dict) else None
        if not isinstance(net, dict) or not net:
            missing = True
            continue
        for key, value in flatten(net).items():
            seen[_RUN_PREFIX.sub("<run>", key)][value] = None
    return {k: list(v) for k, v in seen.items()}, missing


def settings_differences(trials_a: list[TrialRecord], trials_b: list[TrialRecord]) -> list[str]:
    """One line per network setting (trial ``params["net"]``, flattened) whose values differ between A and B.

    A key present on one side only counts as differing (shown as "–" on the other). If either side has
    trials without ``params["net"]`` (runs from before it was recorded), one line says so instead of
    guessing; settings recorded on both sides are still compared.
    """
    sa, missing_a = _side_settings(trials_a)
    sb, missing_b = _side_settings(trials_b)
    lines: list[str] = []
    if missing_a or missing_b:
        which = " and ".join(side for side, gone in (("A", missing_a), ("B", missing_b)) if gone)
        lines.append(f"network settings were not recorded for (some) trials of {which}: they cannot be compared")
    if not sa or not sb:
        return lines
    for key in sorted(set(sa) | set(sb)):
        va, vb = sa.get(key, [_NOT_SET]), sb.get(key, [_NOT_SET])
        if set(va) != set(vb):
            lines.append(f"settings differ: {key}: {', '.join(va)} (A) vs {', '.join(vb)} (B)")
    return lines


# ---- rendering (pure) ------------------------------------------------------------------------------

_VERDICT_STYLE = {"better": "green", "worse": "red", "no significant change": "dim"}


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%" if math.isfinite(x) else "–"


def _decimals(*xs: float) -> int:
    """Decimals for signed amounts shown together: about 2 significant digits on the largest."""
    big = max((abs(x) for x in xs if math.isfinite(x)), default=0.0)
    if big == 0.0:
        return 1
    return max(0, min(4, 1 - math.floor(math.log10(big))))


def fmt_change(c: Comparison) -> str:
    """The change alone: "-7.9%" (relative) or "+7.0 ms" (absolute, in the metric's unit)."""
    if not math.isfinite(c.change):
        return "–"
    if not c.absolute:
        return _pct(c.change)
    d = _decimals(c.change, c.ci_low, c.ci_high)
    return f"{c.change:+.{d}f} {c.unit}".rstrip()


def fmt_ci(c: Comparison) -> str:
    """The interval "[+5.1, +8.8] 96.8%": the interval of the change (same unit as the change) and its real coverage."""
    if not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
        return ""
    if c.absolute:
        d = _decimals(c.change, c.ci_low, c.ci_high)
        ci = f"[{c.ci_low:+.{d}f}, {c.ci_high:+.{d}f}]"
    else:
        ci = f"[{c.ci_low * 100:+.1f}, {c.ci_high * 100:+.1f}]"
    return f"{ci} {fmt_coverage(c.ci_coverage)}"


def fmt_coverage(coverage: float) -> str:
    """The real coverage of an interval: 90%, 96.8%, 95% (never a nominal figure)."""
    if not math.isfinite(coverage):
        return ""
    text = f"{coverage * 100:.1f}".removesuffix(".0")
    return f"{text}%"


def _change(c: Comparison) -> str:
    ci = fmt_ci(c)
    return fmt_change(c) + (f"\n{ci}" if ci else "")


def fmt_p(p: float) -> str:
    if not math.isfinite(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def fmt_mde(c: Comparison) -> str:
    x = c.min_detectable_effect
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "∞"
    if c.absolute:
        return f"±{x:.3g} {c.unit}".rstrip()
    return f"±{x * 100:.1f}%"


def threshold_text(result: CompareResult) -> str:
    parts = [f"threshold {result.threshold:.1%}"] if result.threshold else []
    parts += [f"{v:g} {unit} for absolute {unit} changes" for unit, v in result.threshold_abs.items() if v]
    return ", " + ", ".join(parts) if parts else ""


_UNPAIRED_TEXT = (
    "change = the Hodges-Lehmann estimate of median(B) / median(A) - 1 (of logs), or of median(B) - median(A) in "
    "the metric's unit for signed metrics (and whenever a value is <= 0); [CI] its distribution-free interval, "
    "then its exact coverage (nominal from 50 per side); p: Mann-Whitney U"
)
_PAIRED_TEXT = (
    "paired t on the within-pair log ratios: change = exp(mean of ln(B/A) per pair) - 1, or the mean of B - A in "
    "the metric's unit for signed metrics (and whenever a value is <= 0); [CI] its t interval, then its nominal "
    "coverage; p: paired t-test"
)


def caption(result: CompareResult, family: int) -> str:
    if result.analysis == "paired":
        method = f"paired: {result.analysis_reason}; {_PAIRED_TEXT}"
    elif result.analysis == "mixed":
        method = f"paired where possible: {result.analysis_reason}; paired rows (n shown as pairs): {_PAIRED_TEXT}; "
        method += f"unpaired rows: {_UNPAIRED_TEXT}"
    else:
        method = f"unpaired: {result.analysis_reason}; {_UNPAIRED_TEXT}"
    return (
        f"{method}. A, B: medians (CPU/bit in CPU-seconds per Gbit); p Holm: adjusted over the {family} gated "
        "comparisons (verdicts use it); MDE: change detectable with 80% power at Holm's level"
    )


def n_text(c: Comparison) -> str:
    return f"{c.n_pairs} pairs" if c.analysis == "paired" else f"{c.baseline.n}/{c.candidate.n}"


def compare_table(result: CompareResult) -> Table:
    family = max((r.result.family_size for r in result.rows if r.gated), default=1)
    table = Table(
        title=escape(f"B {result.b_name} vs A {result.a_name}{threshold_text(result)}"),
        caption=escape(caption(result, family)),
        header_style="bold",
    )
    for col, justify in [
        ("case", "left"),
        ("metric", "left"),
        ("A", "right"),
        ("B", "right"),
        ("n A/B", "right"),
        ("change [CI] coverage", "right"),
        ("p", "right"),
        ("p Holm", "right"),
        ("verdict", "left"),
        ("MDE", "right"),
    ]:
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for i, r in enumerate(result.rows):
        c = r.result
        style = _VERDICT_STYLE[c.verdict]
        verdict = f"[{style}]{r.verdict_text}[/]" + ("" if r.gated else " [dim](not gated)[/]")
        first = i == 0 or result.rows[i - 1].case_a != r.case_a
        if first and i:
            table.add_section()
        table.add_row(
            escape(r.case_label) if first else "",
            r.metric.title,
            r.metric.fmt(c.baseline.median / r.metric.scale),
            r.metric.fmt(c.candidate.median / r.metric.scale),
            n_text(c),
            _change(c),
            fmt_p(c.p_value),
            fmt_p(c.p_adjusted),
            verdict,
            fmt_mde(c),
        )
    return table


def compare_lines(result: CompareResult) -> list[str]:
    """Notes, settings, unmatched cases, the warnings grouped by cause (one line each, with a count), the
    regressions by name, and last the verdict line (rich markup; data is escaped), in that order."""
    lines = [f"[yellow]note: {escape(n)}[/]" for n in result.notes]
    lines += [f"[yellow]warning: {escape(s)}[/]" for s in result.settings]
    for k in result.unmatched_a:
        lines.append(f"[dim]only in A: {escape(case_text(k))}[/]")
    for k in result.unmatched_b:
        lines.append(f"[dim]only in B: {escape(case_text(k))}[/]")
    lines += [
        f"[yellow]warning:[/] {line}"
        for line in grouped_lines(result.warnings(), unit="comparison(s)", most=4, of=len(result.rows))
    ]
    regs = result.regressions
    if regs:
        worst = ", ".join(f"{r.case_label} {r.metric.title} {fmt_change(r.result)}" for r in regs)
        lines.append(f"[bold red]{len(regs)} regression(s) beyond the threshold: {escape(worst)}[/]")
    lines.append(verdict_line(result))
    return lines


_METHOD = {
    "paired": "paired t on log ratios",
    "unpaired": "unpaired Mann-Whitney U",
    "mixed": "paired t on log ratios where there are pairs, else unpaired Mann-Whitney U",
}


def verdict_line(result: CompareResult) -> str:
    """The last line of `tunbench compare`, for a human and a CI log: how many gated comparisons regressed,
    improved, stayed unchanged or could not decide (``Outcome``), the analysis, its level, and the smallest
    change these data could detect (the range of the gated comparisons' MDEs), then the exit status::

        verdict: 2 regressed, 1 improved, 33 unchanged, 0 undecided (paired t on log ratios, Holm over
        36 at alpha 0.05; smallest detectable change ±4.1% to ±9.0%) -> exit 1, regression
    """
    tally = result.tally()
    gated = [r for r in result.rows if r.gated]
    code = result.exit_code
    end = f"→ exit {code}, " + ("regression" if code else "no regression")
    if not gated:
        return f"[bold]verdict:[/] nothing gated (only the direct baseline was compared) {end}"
    counts = ", ".join(f"{tally[o]} {o}" for o in OUTCOMES)
    first = gated[0].result
    family = first.family_size
    level = f"Holm over {family} at alpha {first.alpha:.2g}" if family > 1 else f"alpha {first.alpha:.2g}"
    limits = threshold_text(result).removeprefix(", ")
    how = f"{_METHOD[result.analysis]}, {level}" + (f", {limits}" if limits else "")
    style = "bold red" if code else "bold yellow" if tally["undecided"] else "bold green"
    return f"[{style}]verdict: {counts}[/] ({escape(how)}; {escape(_detectable(result, gated))}) {end}"


def _detectable(result: CompareResult, gated: list[CaseComparison]) -> str:
    """The range of the gated comparisons' MDEs (relative ones; absolute ones when there are only those, in
    their unit), or, when none is finite, how many repetitions would let the test decide anything."""
    relative = [r.result.min_detectable_effect for r in gated if not r.result.absolute]
    finite = sorted(x for x in relative if math.isfinite(x))
    if finite:
        lo, hi = finite[0], finite[-1]
        span = f"±{lo:.1%}" if f"{lo:.1%}" == f"{hi:.1%}" else f"±{lo:.1%} to ±{hi:.1%}"
        return f"smallest detectable change {span}"
    absolute = [r.result for r in gated if r.result.absolute and math.isfinite(r.result.min_detectable_effect)]
    units = {c.unit for c in absolute}
    if absolute and len(units) == 1:
        xs = sorted(c.min_detectable_effect for c in absolute)
        unit = units.pop()
        span = f"±{xs[0]:.3g} {unit}" if len(xs) == 1 else f"±{xs[0]:.3g} to ±{xs[-1]:.3g} {unit}"
        return f"smallest detectable change {span.replace(' ' + unit + ' to', ' to')}".rstrip()
    first = gated[0].result
    if any(math.isinf(r.result.min_detectable_effect) for r in gated):
        paired = any(r.result.analysis == "paired" for r in gated)
        need = _repetitions_for(first.alpha / first.family_size, paired=paired)
        return f"no change is detectable at these repetitions: use --repeat {need} or more"
    return "no detectable change could be computed (spread undefined)"
