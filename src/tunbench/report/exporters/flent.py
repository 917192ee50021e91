"""Flent's data format (a `.flent.gz`), both ways: an rrul trial written as the data file of Flent's RRUL
test, which `flent -i FILE` reads, summarises and plots, and a data file (Flent's own, or one written
here) read back into the figures tunbench compares: the loaded latency's median and p99, and each
direction's goodput, with Flent's optional cut-off.

The format is Flent's `ResultSet.serialise()` (flent/resultset.py), gzipped JSON:

    {"version": 4,                      Flent's FILEFORMAT_VERSION; a newer file is refused
     "metadata": {"NAME": "rrul", "TIME", "T0" (ISO, UTC, "Z"), "STEP_SIZE": 0.2, "LENGTH",
                  "TOTAL_LENGTH", "HOST", "HOSTS", "TITLE", "NOTE", "IP_VERSION", "DATA_FILENAME",
                  "TEST_PARAMETERS", "SERIES_META": {series: {"UNITS", "MEAN_VALUE"}}, ...},
     "x_values": [0.0, 0.2, ...],       seconds since T0, one grid for every series
     "results": {series: [value or null per x]},
     "raw_values": {series: [{"t": unix seconds, "val": value}, ...]}}

Series use the names of Flent's rrul.conf and its units (ms, Mbits/s). tunbench's rrul measures with one
irtt probe (no DSCP mark: Flent's "Ping (ms) UDP BE") and keeps each direction's sum over its flows per
second (`throughput_bps.up/down`, iperf3's intervals), so the file has "Ping (ms) UDP BE" (with its raw
probes), "Ping (ms) avg", "TCP upload sum", "TCP download sum", "TCP upload avg", "TCP download avg" (the
sum over the flow count) and "TCP totals". It has no ICMP ping, no BK/EF UDP probes and no per-flow series
("TCP upload BE", ...): tunbench does not measure or keep them. Flent's plots draw what is there
(`-p totals`, `-p ping`, `-p ping_cdf`); the per-flow ones are empty.

The grid is Flent's own aggregation (TimeseriesAggregator): steps of 0.2 s from the earliest point, each
value linearly interpolated between the points either side within five steps, so `flent -f summary`
computes the same figures from this file as from one Flent wrote. Like Flent's, the sums' MEAN_VALUE is
the generator's own figure (here iperf3's receiver-side goodput).

Format history: Flent's version 4 (Flent 1.0 to 2.3, this module's reference) is the only one written;
reading takes 4 and refuses newer versions, as Flent does. Older files (1-3) are converted by Flent's
`unserialise_compat`, not here: open them with Flent and save them again.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tunbench.errors import ExportError
from tunbench.metrics import core
from tunbench.results import RunRecord, TrialRecord
from tunbench.stats import percentile
from tunbench.workloads import rrul

FORMAT_VERSION = 4  # flent/resultset.py FILEFORMAT_VERSION (Flent 2.3.0)
SUFFIX = ".flent.gz"
STEP_S = 0.2  # Flent's default STEP_SIZE: its grid (rrul probes every 10 ms, irtt.INTERVAL)
MAX_STEPS = 5.0  # Flent interpolates across at most this many steps
EDGE_S = 0.001  # load_cutoff's bounds sit this far before the probes on the load's edges

PING = "Ping (ms) UDP BE"
PING_AVG = "Ping (ms) avg"
UP_SUM, DOWN_SUM = "TCP upload sum", "TCP download sum"
UP_AVG, DOWN_AVG = "TCP upload avg", "TCP download avg"
TOTALS = "TCP totals"
UNITS = {PING: "ms", PING_AVG: "ms", UP_SUM: "Mbits/s", DOWN_SUM: "Mbits/s", UP_AVG: "Mbits/s", DOWN_AVG: "Mbits/s"}
UNITS[TOTALS] = "Mbits/s"
# in rrul.conf's order
SERIES = (UP_AVG, UP_SUM, DOWN_AVG, DOWN_SUM, TOTALS, PING, PING_AVG)

Points = list[tuple[float, float]]


# ---- writing ------------------------------------------------------------------------------------------


def _finite(points: Sequence[tuple[float, float | None]]) -> Points:
    return [(float(t), float(v)) for t, v in points if v is not None and math.isfinite(v)]


@dataclass(frozen=True)
class Timeline:
    """An rrul trial's stored series on one time axis: seconds since the workload started (the idle phase's
    first probe, to within irtt's handshake). `load` is when the load's measured seconds start and end."""

    ping_ms: Points
    up_mbit: Points
    down_mbit: Points
    load: tuple[float, float]


def timeline(trial: TrialRecord) -> Timeline:
    """Place the three RTT phases and the two throughput series of an rrul trial end to end (pure).

    Each phase's series counts from its own first probe; the store keeps when the load's measured seconds
    began (`series_t0_s`), so the loaded phase starts there, the throughput intervals end at that plus their
    `t`, and the idle phase after the load starts when the load's last interval ends (irtt's start after
    iperf3 exits, a few ms, is not kept). A record without `series_t0_s` is placed by its nominal seconds."""
    if trial.workload != "rrul":
        raise ExportError(f"trial {trial.seq} is a {trial.workload} trial: only rrul trials have Flent's RRUL form")
    wl: Mapping[str, Any] = trial.params.get("workload") or {}
    t0 = trial.metrics.get(core.SERIES_T0_S.name)
    if t0 is None:
        t0 = float(wl.get("idle_s", rrul.IDLE_S)) + math.ceil(float(wl.get("omit_s", 0.0)))
    s = trial.series
    before = _finite(s.get(rrul.SERIES_IDLE, []))
    loaded = _finite(s.get(rrul.SERIES_LOADED, []))
    after = _finite(s.get(rrul.SERIES_AFTER, []))
    up = [(t0 + t, v / 1e6) for t, v in _finite(s.get(core.THROUGHPUT_DIR.key(direction="up"), []))]
    down = [(t0 + t, v / 1e6) for t, v in _finite(s.get(core.THROUGHPUT_DIR.key(direction="down"), []))]
    load_end = max((t for t, _ in up + down), default=t0 + float(wl.get("duration_s", 0.0)))
    ping = before + [(t0 + t, v) for t, v in loaded] + [(load_end + t, v) for t, v in after]
    return Timeline(sorted(ping), up, down, (t0, load_end))


def aggregate(
    series: Mapping[str, Points], step: float = STEP_S
) -> tuple[float, list[float], dict[str, list[float | None]]]:
    """Flent's TimeseriesAggregator (pure): (t_0, x_values, values per series). The grid starts at the
    earliest point of any series and runs past the latest in `step`s; a series' value at a step is
    interpolated between its points either side when the next is within five steps (half a step before its
    first point), the last point's value once after it, else null."""
    firsts = [pts[0][0] for pts in series.values() if pts]
    lasts = [pts[-1][0] for pts in series.values() if pts]
    if not firsts:
        raise ExportError("the trial has no series to write (a failed trial, or one stored without its series)")
    t_0, t_max = min(firsts), max(lasts)
    steps = math.ceil((t_max - t_0) / step)
    xs = [step * i for i in range(steps)]
    out: dict[str, list[float | None]] = {name: [] for name in series}
    for x in xs:
        t = t_0 + x
        for name, pts in series.items():
            out[name].append(_at(pts, t, step, out[name][-1] if out[name] else None) if pts else None)
    return t_0, [round(x, 6) for x in xs], out


def _at(pts: Points, t: float, step: float, previous: float | None) -> float | None:
    times = [p[0] for p in pts]
    i = bisect.bisect_right(times, t)  # the first point after t
    reach = step * MAX_STEPS
    if i == len(pts):  # past the last point: its value once, if near enough and not just given
        tn, vn = pts[-1]
        if abs(t - tn) > reach or previous in (vn, None):
            return None
        return vn
    tn, vn = pts[i]
    if i == 0:  # before the first point: only within half a step
        return vn if abs(t - tn) <= step * 0.5 else None
    if abs(t - tn) > reach:
        return None
    tp, vp = pts[i - 1]
    return vp + (vn - vp) / (tn - tp) * (t - tp)


def _combine(columns: Sequence[list[float | None]], how: str) -> list[float | None]:
    out: list[float | None] = []
    for row in zip(*columns, strict=True):
        vals = [v for v in row if v is not None]
        if not vals:
            out.append(None)
        else:
            out.append(math.fsum(vals) if how == "sum" else math.fsum(vals) / len(vals))
    return out


def _stamp(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _started(trial: TrialRecord, run: RunRecord) -> datetime:
    for text in (trial.started_at, run.started_at):
        try:
            dt = datetime.fromisoformat(text)
        except (TypeError, ValueError):
            continue
        return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    return datetime(1970, 1, 1, tzinfo=UTC)


def title(run: RunRecord, trial: TrialRecord) -> str:
    flows = f"{trial.flows} flow{'s' if trial.flows != 1 else ''}"
    return f"tunbench {run.uid} #{trial.seq}: {trial.label} {trial.profile} {flows} rep {trial.repetition}"


def file_name(run: RunRecord, trial: TrialRecord) -> str:
    """rrul-<run uid>-t<seq>-<label>-<profile>-<flows>f-r<repetition>.flent.gz (letters, digits, - and _)."""
    parts = [run.uid, f"t{trial.seq}", trial.label, trial.profile, f"{trial.flows}f", f"r{trial.repetition}"]
    safe = "-".join("".join(c if c.isalnum() or c in "-_" else "_" for c in p) for p in parts)
    return f"rrul-{safe}{SUFFIX}"


def resultset(run: RunRecord, trial: TrialRecord) -> dict[str, Any]:
    """The trial as the JSON object Flent's `ResultSet.unserialise` reads (pure)."""
    line = timeline(trial)
    t_0, xs, grid = aggregate({PING: line.ping_ms, UP_SUM: line.up_mbit, DOWN_SUM: line.down_mbit})
    flows = max(trial.flows, 1)
    results: dict[str, list[float | None]] = {
        UP_AVG: [None if v is None else v / flows for v in grid[UP_SUM]],
        UP_SUM: grid[UP_SUM],
        DOWN_AVG: [None if v is None else v / flows for v in grid[DOWN_SUM]],
        DOWN_SUM: grid[DOWN_SUM],
        TOTALS: _combine([grid[UP_SUM], grid[DOWN_SUM]], "sum"),
        PING: grid[PING],
        PING_AVG: _combine([grid[PING]], "avg"),
    }
    started = _started(trial, run)
    epoch = started.timestamp()
    meta: dict[str, dict[str, Any]] = {name: {"UNITS": UNITS[name]} for name in SERIES}
    for d, s_sum, s_avg in (("up", UP_SUM, UP_AVG), ("down", DOWN_SUM, DOWN_AVG)):
        bps = trial.metrics.get(core.THROUGHPUT_DIR.key(direction=d))
        if bps is not None and math.isfinite(bps):  # the generator's own mean, as Flent keeps netperf's
            meta[s_sum]["MEAN_VALUE"] = bps / 1e6
            meta[s_avg]["MEAN_VALUE"] = bps / 1e6 / flows
    wl: Mapping[str, Any] = trial.params.get("workload") or {}
    host = str(run.provenance.get("hostname") or "") if isinstance(run.provenance, dict) else ""
    metadata: dict[str, Any] = {
        "NAME": "rrul",
        "TITLE": title(run, trial),
        "NOTE": (
            "written by tunbench from its rrul trial: iperf3 --bidir load, one irtt probe (UDP BE); no ICMP, "
            "BK/EF probes or per-flow series"
        ),
        "TIME": _stamp(started),
        "T0": _stamp(started + timedelta(seconds=t_0)),
        "STEP_SIZE": STEP_S,
        "LENGTH": float(wl.get("duration_s") or (line.load[1] - line.load[0])),
        "TOTAL_LENGTH": round(len(xs) * STEP_S, 6),
        "HOST": "server",
        "HOSTS": ["server"],
        "LOCAL_HOST": host,
        "IP_VERSION": 4,
        "DATA_FILENAME": file_name(run, trial),
        "TEST_PARAMETERS": {
            "tunbench_version": run.tunbench_version,
            "tunnel": trial.tunnel,
            "profile": trial.profile,
            "flows": str(trial.flows),
            "summary": str(wl.get("summary", "tunbench")),
            "load_start_s": f"{line.load[0] - t_0:.3f}",
            "load_end_s": f"{line.load[1] - t_0:.3f}",
        },
        "SERIES_META": meta,
    }
    raw = {PING: [{"t": epoch + t, "val": v} for t, v in line.ping_ms]}
    return {"metadata": metadata, "version": FORMAT_VERSION, "x_values": xs, "results": results, "raw_values": raw}


def render_trial(run: RunRecord, trial: TrialRecord) -> bytes:
    """The trial's .flent.gz (the same bytes for the same trial: no time stamp in the gzip header)."""
    text = json.dumps(resultset(run, trial), indent=2, sort_keys=True)
    return gzip.compress(text.encode(), mtime=0)


def rrul_trials(runs: Sequence[RunRecord]) -> list[tuple[RunRecord, TrialRecord]]:
    """Every rrul trial that measured (status ok) of these runs, in order."""
    return [(r, t) for r in runs for t in r.trials if t.workload == "rrul" and t.status == "ok"]


class FlentExporter:
    """`--format flent`: the run's one rrul trial as a .flent.gz; `files()` gives every rrul trial's."""

    name = "flent"
    suffixes = (".gz",)

    def render(self, runs: Sequence[RunRecord]) -> bytes:
        found = rrul_trials(runs)
        if len(found) != 1:
            raise ExportError(
                f"a .flent.gz holds one rrul trial and these runs have {len(found)}: "
                "write them all to a directory with `tunbench export --format flent -o DIR`"
            )
        return render_trial(*found[0])

    def files(self, runs: Sequence[RunRecord]) -> dict[str, bytes]:
        """File name -> contents, one per rrul trial; ExportError when there is none."""
        found = rrul_trials(runs)
        if not found:
            raise ExportError("no rrul trial that measured in these runs: nothing to write in Flent's format")
        return {file_name(r, t): render_trial(r, t) for r, t in found}


# ---- reading ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlentFile:
    """A Flent data file as stored: its metadata, grid, gridded series and raw values."""

    metadata: dict[str, Any]
    x_values: list[float]
    results: dict[str, list[float | None]]
    raw_values: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def t0(self) -> float:
        """T0 as unix seconds (Flent's raw `t` are on that clock)."""
        return _parse_stamp(str(self.metadata.get("T0") or self.metadata.get("TIME") or ""))

    @property
    def total_length(self) -> float:
        total = self.metadata.get("TOTAL_LENGTH")
        return float(total) if total is not None else max(self.x_values, default=0.0)


def _parse_stamp(text: str) -> float:
    """Flent writes UTC stamps with a Z; an older file's local stamp is read as UTC."""
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    raise ExportError(f"not a Flent time stamp: {text!r}")


def read(data: bytes, source: str = "the file") -> FlentFile:
    """A .flent.gz (or its JSON uncompressed) -> FlentFile; ExportError if it is not one this reads."""
    try:
        text = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        obj = json.loads(text)
    except (OSError, EOFError, ValueError) as e:
        raise ExportError(f"{source} is not a Flent data file (gzipped JSON): {e}") from None
    if not isinstance(obj, dict) or not {"metadata", "x_values", "results"} <= obj.keys():
        raise ExportError(f"{source} is not a Flent data file (no metadata, x_values and results)")
    try:
        version = int(obj.get("version", 1))
    except (TypeError, ValueError):
        version = 1
    if version != FORMAT_VERSION:
        raise ExportError(
            f"{source} is Flent's file format version {version}; this reads version {FORMAT_VERSION} "
            "(Flent 1.0 to 2.3): open it with that Flent and save it again"
        )
    return FlentFile(
        dict(obj["metadata"]), list(obj["x_values"]), dict(obj["results"]), dict(obj.get("raw_values") or {})
    )


Cutoff = tuple[float, float]


def values(f: FlentFile, series: str, cutoff: Cutoff | None = None) -> list[float]:
    """A series' values as Flent's summary takes them: its raw values when the file has them (those strictly
    inside (T0 + start, T0 + end)), else its gridded values (x in [start, end]). An `end` <= 0 counts from
    the end (TOTAL_LENGTH), as Flent's -c/--data-cutoff does."""
    raw = [r for r in f.raw_values.get(series, []) if "val" in r and r["val"] is not None]
    if raw:
        if cutoff is None:
            return [float(r["val"]) for r in raw]
        start, end = cutoff
        t0 = f.t0
        lo = t0 + start if start else t0 - 1
        hi = t0 + end + (f.total_length if end <= 0 else 0.0)
        return [float(r["val"]) for r in raw if "t" in r and lo < r["t"] < hi]
    data = f.results.get(series) or []
    if cutoff is not None and f.x_values:
        start, end = cutoff
        if end <= 0:
            end += f.total_length
        offset = min(f.x_values)
        i = bisect.bisect_left(f.x_values, start + offset)
        j = bisect.bisect_right(f.x_values, end + offset)
        data = data[i:j]
    return [float(v) for v in data if v is not None]


def mean(f: FlentFile, series: str, cutoff: Cutoff | None = None) -> float | None:
    """Flent's summary mean: the series' MEAN_VALUE when there is no cut-off (the generator's own figure),
    else the mean of `values`."""
    if cutoff is None:
        meta = (f.metadata.get("SERIES_META") or {}).get(series) or {}
        if meta.get("MEAN_VALUE"):
            return float(meta["MEAN_VALUE"])
    vals = values(f, series, cutoff)
    return math.fsum(vals) / len(vals) if vals else None


@dataclass(frozen=True)
class Latency:
    median_ms: float | None
    p99_ms: float | None
    n: int


@dataclass(frozen=True)
class Figures:
    """What tunbench compares, from one Flent data file: each ping series' median and p99, and each
    direction's goodput (the mean of its sum over the flows, Mbit/s)."""

    title: str
    ping: dict[str, Latency]
    upload_mbit: float | None
    download_mbit: float | None


def figures(f: FlentFile, cutoff: Cutoff | None = None) -> Figures:
    """The figures of a file with Flent's summary rules (pure). With `cutoff` = (start, end) only those
    seconds count: (idle, -idle) leaves out the idle seconds before and after the load."""
    ping = {}
    for name in sorted(f.results):
        if name.startswith("Ping (ms)"):
            vals = values(f, name, cutoff)
            ping[name] = Latency(percentile(vals, 50), percentile(vals, 99), len(vals))
    title = str(f.metadata.get("TITLE") or f.metadata.get("NAME") or "")
    return Figures(title, ping, mean(f, UP_SUM, cutoff), mean(f, DOWN_SUM, cutoff))


def load_cutoff(f: FlentFile) -> Cutoff:
    """The cut-off that keeps the load's seconds only: a tunbench file's own (TEST_PARAMETERS load_start_s,
    load_end_s), else Flent's idle DELAY at each end, (TOTAL_LENGTH - LENGTH) / 2 as Flent's rrul runs it."""
    params = f.metadata.get("TEST_PARAMETERS") or {}
    if "load_start_s" in params and "load_end_s" in params:
        # the loaded phase's first probe lies on its start and the idle phase after it starts on its end;
        # Flent's raw cut-off is strict on both sides, so both bounds move 1 ms earlier (probes are 10 ms apart)
        start, end = float(params["load_start_s"]) - EDGE_S, float(params["load_end_s"]) - EDGE_S
        return start, end - f.total_length
    length = f.metadata.get("LENGTH")
    delay = max(0.0, (f.total_length - float(length)) / 2) if length is not None else 0.0
    return delay, -delay
