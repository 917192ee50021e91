"""`tunbench history`: each case's metrics across the runs of one machine, and where they changed.

A series is one case (label, profile, workload, flows, direction, clients, variant, cores) and one metric
(throughput, CPU per bit of the client and of the server, or a latency metric: ``report.compare``'s
catalogue) over the runs of one machine. A point is one run, or one commit: when every run of the series
names the commit its build came from (``tunbench run --commit`` or the tunnel's ``commit=``), the runs of one
commit are pooled into one point, placed where that commit was first measured (tunbench does not read git:
the order is the order the commits were benchmarked in). A point's figure is the median of its units (each
run's trials, or its warm bring-ups: ``unit_values`` of one run at a time, as seqs and bring-up tags are
unique only within a run) with the CI of the median that ``tunbench report`` shows (``stats.summarize``).

Only runs whose status is ``done`` count; any other status (running, interrupted, failed, killed...) is
left out and counted. Runs of other machines (``metadata.machine_of``: host name, CPU model, kernel) are
never mixed in: the history is of one machine, by default the machine of the latest finished run.

Change points are ``stats.change_points`` of the points' medians; a change is a regression when it goes the
metric's wrong way (lower throughput, higher CPU per bit or latency).

Only ``load`` reads (the store, through its public read API); the rest is pure.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tunbench.errors import TunbenchError
from tunbench.metadata import machine_of
from tunbench.metrics import core
from tunbench.report.compare import METRIC_KINDS, Metric, metrics_for
from tunbench.report.summary import LeftOut, interfered, interference_reason, leave_out_interfered, unit_values
from tunbench.results import CaseKey, RunRecord, TrialRecord
from tunbench.stats import Summary, summarize
from tunbench.stats.changepoints import (
    DEFAULT_MAX_PVALUE,
    DEFAULT_SPAN,
    ChangePoint,
    RegressionTest,
    change_points,
    is_better,
    is_worse,
    permutations_for,
    regression_test,
)
from tunbench.stats.multiple import holm
from tunbench.workloads import case_title

EXIT_REGRESSED = 1
"""Exit status of `tunbench history --fail-on-regression-since` when a regression lies after the reference."""

DEFAULT_METRICS = (core.THROUGHPUT.name, *(core.CPU_SIDE.key(role=role) for role in ("client", "server")))


class HistoryError(TunbenchError):
    """A bad option, an unknown reference or machine, or no store: exit status 2, so 1 means "regressed"."""

    exit_code = 2


@dataclass(frozen=True)
class Machine:
    id: str
    hostname: str
    cpu_model: str
    kernel: str

    @property
    def text(self) -> str:
        return f"{self.hostname or '?'} · {self.cpu_model or '?'} · Linux {self.kernel or '?'} [{self.id}]"


@dataclass(frozen=True)
class RunInfo:
    id: int
    uid: str
    name: str
    started_at: str
    status: str
    commit: str  # the run's build commit (--commit), "" if not given
    branch: str
    tunnel_commits: dict[str, str]  # label -> the commit= of that tunnel

    @property
    def text(self) -> str:
        return f"#{self.id} {self.uid}" + (f" ({self.name})" if self.name else "")

    def commit_of(self, label: str) -> str:
        return self.tunnel_commits.get(label) or self.commit


@dataclass(frozen=True)
class Point:
    """One run (or one commit's runs) of a series: the median of its units (trials, or warm bring-ups) with
    the CI of the median, the units themselves (what the change-point test reads), and the interfered trials
    it left out (``left_out``) or, with --include-interfered, kept (``interfered``)."""

    key: str
    runs: tuple[RunInfo, ...]
    commit: str
    branch: str
    summary: Summary
    values: tuple[float, ...] = ()
    left_out: LeftOut = field(default_factory=LeftOut)
    interfered: int = 0

    @property
    def mark(self) -> str:
        """ "" for a clean point, else why it is marked: "interfered: 2 of 3 trials left out (another tunbench
        run (tb1a2b3c))"."""
        if self.left_out:
            reasons = sorted({interference_reason(t) for t in self.left_out.trials})
            return f"interfered: {len(self.left_out.trials)} trial(s) left out ({'; '.join(reasons)})"
        if self.interfered:
            return f"interfered: {self.interfered} trial(s) kept (--include-interfered)"
        return ""

    @property
    def time(self) -> str:
        return self.runs[0].started_at

    @property
    def text(self) -> str:
        runs = ", ".join(r.text for r in self.runs)
        return f"{self.commit[:12]} ({runs})" if self.commit else runs


@dataclass(frozen=True)
class Change:
    """A change point and its direction, from its interval: a regression, an improvement, or neither (the
    interval spans 0: the level moved, but which way it matters is not sure)."""

    point: ChangePoint
    regression: bool
    improvement: bool = True

    @property
    def kind(self) -> str:
        return "REGRESSION" if self.regression else "improvement" if self.improvement else "change"


@dataclass(frozen=True)
class Series:
    case: CaseKey
    metric: Metric
    points: tuple[Point, ...]
    changes: tuple[Change, ...]
    by_commit: bool
    dropped: tuple[str, ...] = ()  # the points left out whole: every trial interfered ("c0ffee1: reason")

    @property
    def title(self) -> str:
        return f"{case_title(self.case)} — {self.metric.title}"

    def size_text(self, c: Change) -> str:
        """The change and its CI: relative (+5.0% [...]) or, for absolute changes, in the metric's unit."""
        cp, fmt = c.point, self.metric.fmt
        if cp.absolute:
            return f"{_signed(cp.change, fmt)} [{_signed(cp.ci_low, fmt)}, {_signed(cp.ci_high, fmt)}]"
        return f"{cp.change:+.1%} [{cp.ci_low:+.1%}, {cp.ci_high:+.1%}]"

    def change_text(self, c: Change) -> str:
        """One line: when, which commits, the size with its CI, and whether it is a regression."""
        cp = c.point
        at, prev = self.points[cp.index], self.points[cp.index - 1]
        fmt = self.metric.fmt
        size = self.size_text(c)
        commits = f"commits {prev.commit[:12]}..{at.commit[:12]}" if at.commit and prev.commit else ""
        when = f"at point {cp.index + 1}/{len(self.points)}: {', '.join(r.text for r in at.runs)} ({at.time})"
        cov = "no CI"
        if math.isfinite(cp.ci_coverage):
            over = f", simultaneous over {cp.splits} possible splits" if cp.splits > 1 else ""
            cov = f"{cp.ci_coverage:.0%} CI{over}"
        aside = ""
        if cp.disturbed:
            aside = "; set aside as disturbed: " + ", ".join(f"point {i + 1}" for i in cp.disturbed)
        unsure = "" if c.regression or c.improvement else " (its interval spans 0: direction not sure)"
        return (
            f"{c.kind}{unsure} {when}" + (f", {commits}" if commits else "") + f": {fmt(cp.median_before)} → "
            f"{fmt(cp.median_after)}, {size} ({cov}), t-test p={cp.pvalue:.2g}{aside}"
        )


@dataclass
class History:
    machine: Machine
    series: list[Series]
    runs: list[RunInfo]  # the machine's runs that count (status done), in time order
    excluded: dict[str, int] = field(default_factory=dict)  # status -> runs of this machine left out
    other_machines: dict[str, int] = field(default_factory=dict)  # machine id -> runs not shown
    span: int = DEFAULT_SPAN
    max_pvalue: float = DEFAULT_MAX_PVALUE
    left_out: LeftOut = field(default_factory=LeftOut)  # the interfered trials left out of every series

    @property
    def n_excluded(self) -> int:
        return sum(self.excluded.values())

    def header(self) -> str:
        parts = [f"machine {self.machine.text}: {len(self.runs)} run(s) with status done"]
        if self.excluded:
            why = ", ".join(f"{n} {status}" for status, n in sorted(self.excluded.items()))
            parts.append(f"{self.n_excluded} left out (status not done: {why})")
        if self.other_machines:
            n = sum(self.other_machines.values())
            parts.append(f"{n} run(s) of {len(self.other_machines)} other machine(s) not shown (see --machine)")
        if self.left_out:
            parts.append(self.left_out.text)
        return "; ".join(parts)


# ---- reading --------------------------------------------------------------------------------------------


def run_info(run: RunRecord) -> RunInfo:
    p = run.provenance
    build = p.get("build") or {}
    tunnels = p.get("tunnels") or {}
    return RunInfo(
        id=run.id,
        uid=run.uid,
        name=run.name,
        started_at=run.started_at,
        status=run.status,
        commit=str(build.get("commit") or ""),
        branch=str(build.get("branch") or ""),
        tunnel_commits={
            str(label): str(info["commit"])
            for label, info in tunnels.items()
            if isinstance(info, dict) and info.get("commit")
        },
    )


def load(db: str | Path, machine: str | None = None) -> list[RunRecord]:
    """Every run of the store (an SQLite file or a PostgreSQL URL); the finished runs of the machine
    ``build`` will draw (``machine``, as pick_machine reads it) with their trials, without per-second
    series (history needs none). Any store error is a HistoryError: exit status 2, never "regressed"."""
    from tunbench.store.db import NoStore, Store, require_store

    try:
        require_store(db)
    except NoStore as e:  # the same message as `tunbench show`'s, and the same exit status (2)
        raise HistoryError(str(e)) from None
    try:
        with Store(db) as store:
            runs = store.runs()
            if runs:
                wanted = pick_machine(runs, machine).id
                for r in runs:
                    if r.status == "done" and _machine(r).id == wanted:
                        r.trials = store.trials(r.id, with_series=False)
    except HistoryError:
        raise
    except TunbenchError as e:
        raise HistoryError(str(e)) from e
    return runs


# ---- building (pure) ------------------------------------------------------------------------------------


def _machine(run: RunRecord) -> Machine:
    m = machine_of(run.provenance)
    return Machine(m["id"], m["hostname"], m["cpu_model"], m["kernel"])


def pick_machine(runs: Sequence[RunRecord], wanted: str | None) -> Machine:
    """The machine ``wanted`` names (an id, a unique id prefix or a host name), or that of the latest done run."""
    machines: dict[str, Machine] = {}
    for r in runs:
        m = _machine(r)
        machines.setdefault(m.id, m)
    if not machines:
        raise HistoryError("no runs in the store yet: `tunbench run` first")
    if wanted is None:
        done = [r for r in runs if r.status == "done"] or list(runs)
        return _machine(max(done, key=lambda r: run_key(r.started_at, r.id)))
    hits = [m for m in machines.values() if m.id.startswith(wanted) or m.hostname == wanted]
    if len(hits) == 1:
        return hits[0]
    known = "; ".join(m.text for m in machines.values())
    if not hits:
        raise HistoryError(f"--machine {wanted!r}: no such machine in the store (machines: {known})")
    raise HistoryError(f"--machine {wanted!r} names {len(hits)} machines; give more of the id (machines: {known})")


def _time(text: str) -> datetime:
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ][\d:]+([.]\d+)?)?([+-]\d{2}:\d{2}|Z)?$")


RunKey = tuple[datetime, int]
"""Where a run stands in a history: its start time, then its id (runs started in the same second)."""


def run_key(started_at: str, run_id: int) -> RunKey:
    return (_time(started_at), run_id)


def resolve_ref(ref: str, runs: Sequence[RunRecord], flag: str) -> tuple[RunKey, str]:
    """Where ``ref`` stands: a run (id, uid or name), a commit (the whole commit as recorded, of any
    length, or a prefix of 4+ characters: the first run that measured it) or an ISO date (before any run
    started at that time); and a description of it."""
    by_id = [r for r in runs if ref.isdigit() and r.id == int(ref)]
    named = by_id or [r for r in runs if ref in (r.uid, r.name)]
    if named:
        r = max(named, key=lambda r: r.id)
        return run_key(r.started_at, r.id), f"run #{r.id} {r.uid} ({r.started_at})"
    exact = [r for r in runs if ref in _commits(run_info(r))]
    prefixed = [r for r in runs if any(c.startswith(ref) for c in _commits(run_info(r)))] if len(ref) >= 4 else []
    if with_commit := exact or prefixed:
        first = min(with_commit, key=lambda r: run_key(r.started_at, r.id))
        key = run_key(first.started_at, first.id)
        return key, f"commit {ref} (first measured in run #{first.id} {first.uid}, {first.started_at})"
    if _DATE.match(ref):
        return (_time(ref.replace("Z", "+00:00")), 0), ref
    raise HistoryError(f"{flag} {ref!r}: no run (id, uid or name), commit or ISO date (YYYY-MM-DD) by that name")


def _commits(info: RunInfo) -> list[str]:
    return [c for c in (info.commit, *info.tunnel_commits.values()) if c]


def pick_metrics(names: Sequence[str] | None, trials: Sequence[TrialRecord]) -> list[Metric]:
    """``--metric``: metric names of ``tunbench compare``'s catalogue, or kinds (throughput, cpu, latency, work)."""
    catalogue = {m.name: m for m in metrics_for(list(trials), METRIC_KINDS)}
    if not names:
        return [catalogue[n] for n in DEFAULT_METRICS if n in catalogue]
    out: list[Metric] = []
    for name in names:
        if name in METRIC_KINDS:
            out += [m for m in catalogue.values() if m.kind == name and m not in out]
        elif name in catalogue:
            if catalogue[name] not in out:
                out.append(catalogue[name])
        else:
            known = ", ".join([*METRIC_KINDS, *catalogue])
            raise HistoryError(f"--metric {name!r}: choose from {known}")
    return out


def build(
    runs: Sequence[RunRecord],
    *,
    machine: str | None = None,
    tunnels: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    since: str | None = None,
    per_run: bool = False,
    span: int | None = None,
    max_pvalue: float | None = None,
    include_interfered: bool = False,
) -> History:
    """The history of one machine (see the module docstring); ``runs`` with their trials (``load``).
    ``span`` and ``max_pvalue``: the change-point detection's (None: ``stats.changepoints``' defaults).
    Interfered trials are left out (a point of nothing but interfered trials drops out of its series) and
    their points marked; ``include_interfered`` keeps them, still marked."""
    span = DEFAULT_SPAN if span is None else span
    max_pvalue = DEFAULT_MAX_PVALUE if max_pvalue is None else max_pvalue
    if span < 6:
        raise HistoryError(f"--span {span}: at least 6 points (3 on each side of a change)")
    if not 0.0 < max_pvalue < 1.0:
        raise HistoryError(f"--max-pvalue {max_pvalue}: must be between 0 and 1")
    m = pick_machine(runs, machine)
    machine_id = {r.id: _machine(r).id for r in runs}
    mine = [r for r in runs if machine_id[r.id] == m.id]
    others: dict[str, int] = defaultdict(int)
    for r in runs:
        if machine_id[r.id] != m.id:
            others[machine_id[r.id]] += 1
    excluded: dict[str, int] = defaultdict(int)
    for r in mine:
        if r.status != "done":
            excluded[r.status or "?"] += 1
    done = sorted((r for r in mine if r.status == "done"), key=lambda r: run_key(r.started_at, r.id))
    if since is not None:
        start, _ = resolve_ref(since, runs, "--since")
        done = [r for r in done if run_key(r.started_at, r.id) >= start]
    trials = [t for r in done for t in r.trials]
    chosen = pick_metrics(metrics, trials)
    infos = {r.id: run_info(r) for r in done}
    per_case: dict[CaseKey, list[tuple[RunInfo, list[TrialRecord]]]] = defaultdict(list)
    for r in done:
        by_case: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
        for t in r.trials:
            if tunnels and t.label not in tunnels:
                continue
            by_case[t.case].append(t)
        for case, ts in by_case.items():
            per_case[case].append((infos[r.id], ts))
    series: list[Series] = []
    for case in sorted(per_case, key=_case_order):
        for metric in chosen:
            s = _series(
                case, metric, per_case[case], per_run=per_run, span=span, max_pvalue=max_pvalue,
                include_interfered=include_interfered,
            )  # fmt: skip
            if s is not None:
                series.append(s)
    shown = [t for ts in per_case.values() for _, trials in ts for t in trials]
    _, left = leave_out_interfered(shown, include=include_interfered)
    history = History(m, series, [infos[r.id] for r in done], dict(excluded), dict(others), span, max_pvalue)
    history.left_out = left
    return history


def _case_order(c: CaseKey) -> tuple[str, str, str, str, int, int, str, int]:
    return (c.label, c.profile, c.workload, c.direction, c.flows, c.clients, c.variant, c.cores)


def _series(
    case: CaseKey,
    metric: Metric,
    runs: list[tuple[RunInfo, list[TrialRecord]]],
    *,
    per_run: bool,
    span: int,
    max_pvalue: float,
    include_interfered: bool = False,
) -> Series | None:
    by_commit = not per_run and all(info.commit_of(case.label) for info, _ in runs)
    groups: dict[str, list[tuple[RunInfo, list[TrialRecord], LeftOut]]] = {}
    for info, trials in runs:
        kept, left = leave_out_interfered(trials, include=include_interfered)
        key = info.commit_of(case.label) if by_commit else f"run {info.id}"
        groups.setdefault(key, []).append((info, kept, left))
    points = []
    dropped: list[str] = []
    for key, members in groups.items():  # insertion order: the first run of each key, in time order
        trials = [t for _, ts, _ in members for t in ts]
        # units are made run by run: a trial's seq and a warm bring-up's tag are unique only within its run,
        # so the trials of two runs of one commit must never share a unit (issue 43 item 5)
        values = [v for _, ts, _ in members for v in unit_values(ts, metric.value)]  # warm: one per bring-up
        first = members[0][0]
        gone = [t for _, _, left in members for t in left.trials]
        if not values:
            if gone:
                reasons = "; ".join(sorted({interference_reason(t) for t in gone}))
                dropped.append(
                    f"{first.commit_of(case.label)[:12] or key}: all {len(gone)} trial(s) interfered ({reasons})"
                )
            continue
        points.append(
            Point(
                key=key,
                runs=tuple(info for info, _, _ in members),
                commit=first.commit_of(case.label),
                branch=first.branch,
                summary=summarize(values, seed=0, resamples=2000),
                values=tuple(values),
                left_out=LeftOut(tuple(gone)),
                interfered=sum(1 for t in trials if t.status == "ok" and interfered(t)),
            )
        )
    if not points:
        return None
    found = change_points(
        [list(p.values) for p in points], span=span, max_pvalue=max_pvalue,
        absolute=True if metric.absolute else None,
    )  # fmt: skip
    changes = tuple(
        Change(
            cp,
            is_worse(cp, higher_is_better=metric.higher_is_better),
            is_better(cp, higher_is_better=metric.higher_is_better),
        )
        for cp in found
    )
    return Series(case, metric, tuple(points), changes, by_commit, tuple(dropped))


DEFAULT_GATE_ALPHA = 0.05
"""``--gate-alpha``: the family-wise rate at which ``--fail-on-regression-since`` may fail on series that did not
change, over all the series it checks."""


@dataclass(frozen=True)
class GateEntry:
    """A series with a regression change point after the reference: its regressions there, their permutation
    test (``stats.changepoints.regression_test``) and its Holm-adjusted p-value over the gate's family."""

    series: Series
    changes: tuple[Change, ...]
    test: RegressionTest
    adjusted: float

    def text(self, alpha: float) -> str:
        rel = "<=" if self.adjusted <= alpha else ">"
        return (
            f"{self.series.title}: shift test p={self.test.pvalue:.2g} ({self.test.permutations} permutations, "
            f"{self.test.splits} splits), Holm-adjusted {self.adjusted:.2g} {rel} {alpha:g}"
        )


@dataclass(frozen=True)
class Gate:
    """``--fail-on-regression-since``: ``what`` the reference is, the ``tested`` series (the family: every series
    of the history) and those with a regression change point after it (``entries``); it fails on the ``failed``
    ones, whose shift test's Holm-adjusted p-value is at most ``alpha``."""

    what: str
    alpha: float
    tested: int
    entries: tuple[GateEntry, ...]

    @property
    def failed(self) -> list[GateEntry]:
        return [e for e in self.entries if e.adjusted <= self.alpha]

    @property
    def passed(self) -> list[GateEntry]:
        """Regression change points after the reference that the family-wise test does not confirm."""
        return [e for e in self.entries if e.adjusted > self.alpha]


def gate(
    history: History, ref: str, runs: Sequence[RunRecord], *, alpha: float = DEFAULT_GATE_ALPHA, seed: int = 0
) -> Gate:
    """The CI gate (issue 43 item 6). A series fails when the detection finds a regression change point whose
    first point of the new level was measured after ``ref`` **and** the series' shift test after ``ref``
    (``stats.changepoints.regression_test``: Pettitt's rank statistic, one-sided, over the splits after
    ``ref``, from the last change point before it, calibrated by permutation), Holm-adjusted over every series
    the gate checks, is at most ``alpha``. A change point's own t-test p-value was chosen by the search and is
    no p-value; the shift test's is, so the family-wise rate of failing on series that did not change is at
    most ``alpha`` however many series there are."""
    if not 0.0 < alpha < 1.0:
        raise HistoryError(f"--gate-alpha {alpha}: must be between 0 and 1")
    when, what = resolve_ref(ref, runs, "--fail-on-regression-since")
    m = len(history.series)
    permutations = permutations_for(alpha / max(1, m))
    candidates: list[tuple[Series, tuple[Change, ...], RegressionTest]] = []
    for s in history.series:
        after = [i for i, p in enumerate(s.points) if run_key(p.runs[0].started_at, p.runs[0].id) > when]
        if not after:
            continue
        first = after[0]
        worse = tuple(c for c in s.changes if c.regression and c.point.index >= first)
        if not worse:
            continue
        start = max((c.point.index for c in s.changes if c.point.index < first), default=0)
        test = regression_test(
            [list(p.values) for p in s.points], first=first, start=start,
            higher_is_better=s.metric.higher_is_better, permutations=permutations, seed=seed,
        )  # fmt: skip
        candidates.append((s, worse, test))
    # the family is every series checked: those without a regression after REF enter with p = 1 (valid, and
    # what they are: the gate cannot fail on them)
    pvalues = [t.pvalue for _, _, t in candidates] + [1.0] * (m - len(candidates))
    adjusted: list[float] = [float(x) for x in holm(pvalues)] if pvalues else []
    entries = tuple(GateEntry(s, c, t, float(adjusted[i])) for i, (s, c, t) in enumerate(candidates))
    return Gate(what, alpha, m, entries)


def regressions_after(
    history: History, ref: str, runs: Sequence[RunRecord], *, alpha: float = DEFAULT_GATE_ALPHA
) -> tuple[str, list[tuple[Series, Change]]]:
    """The regression change points after ``ref`` that fail the gate (``gate``): those of the series whose
    shift test is significant family-wise."""
    g = gate(history, ref, runs, alpha=alpha)
    return g.what, [(e.series, c) for e in g.failed for c in e.changes]


def _signed(x: float, fmt: Callable[[float], str]) -> str:
    return ("+" if x >= 0 else "-") + fmt(abs(x))
