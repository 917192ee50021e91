"""The terminal table (rich)."""

from __future__ import annotations

import math
import re
from collections import defaultdict

from rich import box
from rich.markup import escape
from rich.table import Table

from tunbench.report.summary import CaseSummary
from tunbench.results import CaseKey, TrialRecord
from tunbench.stats import StabilityWarning

# workloads whose headline is not bulk throughput: they get their own tables (workload_tables)
Column = tuple[str, str, str]  # header, metric key, unit (ms, s, pct, frac, mbit)
HEADLINES: dict[str, list[Column]] = {
    "latency": [
        ("RTT p50 ms", "latency.p50_ms", "ms"),
        ("p90", "latency.p90_ms", "ms"),
        ("p99", "latency.p99_ms", "ms"),
        ("max", "latency.max_ms", "ms"),
        ("loss", "latency.loss", "frac"),
        ("one-way p50 ms (up / down)", "latency.send_p50_ms|latency.receive_p50_ms", "ms"),
    ],
    "rrul": [
        ("idle p50 ms", "latency.idle_p50_ms", "ms"),
        ("loaded p50", "latency.loaded_p50_ms", "ms"),
        ("loaded p99", "latency.loaded_p99_ms", "ms"),
        ("+p50", "latency.increase_p50_ms", "ms"),
        ("+p99", "latency.increase_p99_ms", "ms"),
        ("after p50", "latency.after_p50_ms", "ms"),
        ("Mbit/s up / down", "throughput_bps.up|throughput_bps.down", "mbit"),
        ("TCP retrans c / s", "counters.client.tcp_retrans_segs|counters.server.tcp_retrans_segs", "n"),
    ],
    "udp": [
        ("offered Mbit/s", "udp.offered_bps", "mbit"),
        ("delivered", "udp.delivered_bps", "mbit"),
        ("loss", "udp.loss", "frac"),
        ("jitter ms", "udp.jitter_ms", "ms"),
        ("rcvbuf errs c / s", "counters.client.udp_rcvbuf_errors|counters.server.udp_rcvbuf_errors", "n"),
    ],
    "udp-search": [],  # one column per datagram size, found in the trials
    "clients": [
        ("UDP Mb/s", "clients.udp.aggregate_bps", "mbit"),
        ("per client", "clients.udp.per_client_bps_p50", "mbit"),
        ("loss", "clients.udp.loss_pct", "pct"),
        ("TCP Mb/s", "clients.tcp.aggregate_bps", "mbit"),
        ("Jain", "clients.tcp.jain", "ratio"),
        ("CPU-s/cl", "clients.udp.server_cpu_s_per_client", "sec"),
        ("RSS/cl", "clients.server_rss_bytes_per_client", "kb"),
        ("failed", "clients.udp.failed_clients|clients.tcp.failed_clients", "n"),
    ],
    "storm": [
        ("ready", "clients.ready_count", "n"),
        ("p50 s", "clients.ready_p50_s", "sec"),
        ("p90", "clients.ready_p90_s", "sec"),
        ("p99", "clients.ready_p99_s", "sec"),
        ("max", "clients.ready_max_s", "sec"),
        ("hs/s", "clients.handshakes_per_s", "n"),
        ("srv CPU-s", "clients.server_cpu_s", "sec"),
    ],
    "connect": [
        ("setup p50 ms", "connect.p50_s", "s"),
        ("p90", "connect.p90_s", "s"),
        ("max", "connect.max_s", "s"),
        ("bring-ups", "connect.count", "n"),
        ("failed", "connect.failures", "n"),
    ],
}


def mbit(bps: float | None) -> str:
    if bps is None or math.isnan(bps):
        return "–"
    return f"{bps / 1e6:,.0f}" if bps >= 1e7 else f"{bps / 1e6:,.2f}"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0f}%"


def pair(a: str, b: str) -> str:
    return "–" if a == b == "–" else f"{a} / {b}"


def summary_table(summaries: list[CaseSummary], title: str = "") -> Table:
    """Per case: median throughput [min–max], n, ratio to direct, CPU (client / server, % of one core)
    and efficiency (Mbit per CPU-second, client / server). Cases of the HEADLINES workloads are left to
    workload_tables()."""
    summaries = [s for s in summaries if s.case.workload not in HEADLINES]
    profiles = sorted({s.case.profile for s in summaries})
    show_profile = len(profiles) > 1
    if not show_profile and profiles:
        title = f"{title} · profile {profiles[0]}" if title else f"profile {profiles[0]}"
    table = Table(
        title=title or None,
        header_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        caption_justify="left",
        caption="CPU: % of one core, client / server · Mbit/CPU-s: throughput per CPU-second used"
        + (" · link CPU: the WAN emulator's own" if any("link" in s.roles for s in summaries) else ""),
    )
    per_flow = any(s.case.flows > 1 for s in summaries)
    link_cpu = any("link" in s.roles for s in summaries)
    for col, justify in [
        ("tunnel", "left"),
        ("profile", "left"),
        ("dir", "left"),
        ("flows", "right"),
        ("Mbit/s", "right"),
        ("min–max", "right"),
        ("per flow", "right"),
        ("n", "right"),
        ("×direct", "right"),
        ("CPU %", "right"),
        ("Mbit/CPU-s", "right"),
        ("link CPU %", "right"),
    ]:
        if (
            (col == "profile" and not show_profile)
            or (col == "per flow" and not per_flow)
            or (col == "link CPU %" and not link_cpu)
        ):
            continue
        table.add_column(
            col,
            justify=justify,  # type: ignore[arg-type]
            overflow="fold",
            min_width=14 if col == "tunnel" else None,
            no_wrap=col not in ("tunnel", "profile", "min–max"),
        )
    for s in summaries:
        t = s.throughput
        med = f"[bold]{mbit(t.median)}[/]" if s.n else "[red]failed[/]"
        rng = f"{mbit(t.min)}–{mbit(t.max)}" if s.n else ""
        n = f"{s.n}" + (f" [red]({s.n_failed}✗)[/]" if s.n_failed else "")
        ratio = "–"
        if s.ratio_to_direct is not None and not math.isnan(s.ratio_to_direct.value):
            ratio = f"{s.ratio_to_direct.value:.2f}"
        c, v = s.roles["client"], s.roles["server"]
        table.add_row(
            escape(s.case.label),
            *([escape(s.case.profile)] if show_profile else []),
            s.case.direction,
            str(s.case.flows),
            med,
            rng,
            *([mbit(t.median / s.case.flows) if s.n else "–"] if per_flow else []),
            n,
            ratio,
            pair(pct(c.cpu_pct).rstrip("%"), pct(v.cpu_pct).rstrip("%")),
            pair(mbit(c.bits_per_cpu_s), mbit(v.bits_per_cpu_s)),
            *([pct(s.roles["link"].cpu_pct) if "link" in s.roles else "–"] if link_cpu else []),
        )
    return table


def _case_name(s: CaseSummary, show_profile: bool) -> str:
    flows = f" ×{s.case.flows}" if s.case.flows > 1 else ""
    prof = f" @{s.case.profile}" if show_profile else ""
    return f"{s.case.label} {s.case.direction}{flows}{prof}"


def _late_ms(w: StabilityWarning) -> str:
    m = re.search(r"up to ([0-9.]+ ms)", w.message)
    return m.group(1) if m else "late"


def warning_lines(summaries: list[CaseSummary]) -> list[str]:
    """Failed trials (one line per distinct error), then the stability warnings grouped by kind, so a
    noisy run gives two lines, not two per case."""
    show_profile = len({s.case.profile for s in summaries}) > 1
    lines = []
    for s in summaries:
        for e in s.errors:
            lines.append(f"[red]✗ {escape(_case_name(s, show_profile))}: {escape(e)}[/]")
    grouped: dict[str, list[tuple[CaseSummary, StabilityWarning]]] = defaultdict(list)
    for s in summaries:
        for w in s.warnings:
            grouped[w.code].append((s, w))
    if noisy := grouped.get("high-cv"):
        cases = ", ".join(f"{_case_name(s, show_profile)} {s.throughput.cv:.0%}" for s, _ in noisy)
        lines.append(f"[yellow]noisy (CV >= 5%): {escape(cases)}[/] — {escape(noisy[0][1].fix)}")
    if odd := grouped.get("outlier"):
        cases = ", ".join(_case_name(s, show_profile) for s, _ in odd)
        lines.append(
            f"[yellow]min or max > 30% from the median: {escape(cases)}[/] — re-run, or look for "
            "interference (other load, CPU frequency)"
        )
    if late := grouped.get("link-late"):
        cases = ", ".join(f"{_case_name(s, show_profile)} ({_late_ms(w)})" for s, w in late)
        lines.append(
            f"[yellow]the WAN emulator fell behind its schedule (p99 lateness) in {escape(cases)}[/], so the link "
            f"was slower than the profile says — {escape(late[0][1].fix)}"
        )
    for code in ("generator-bound", "cross-check"):
        for _, w in grouped.get(code, []):
            lines.append(f"[yellow]{escape(w.message)}[/] — {escape(w.fix)}")
    if few := grouped.get("too-few-repetitions"):
        lines.append(f"[yellow]{len(few)} case(s) with fewer than 3 good repetitions[/] — {escape(few[0][1].fix)}")
    return lines


# ---- non-throughput workloads ------------------------------------------------------------------------


def _fmt(value: float | None, unit: str) -> str:
    if value is None or math.isnan(value):
        return "–"
    if unit == "mbit":
        return mbit(value)
    if unit == "frac":
        return f"{100 * value:.2f}%"
    if unit == "s":
        return f"{1000 * value:,.0f}" if value >= 1 else f"{1000 * value:.1f}"
    if unit == "n":
        return f"{value:.0f}"
    if unit == "sec":
        return f"{value:.2f}"
    if unit == "pct":
        return f"{value:.1f}%"
    if unit == "ratio":
        return f"{value:.2f}"
    if unit == "kb":
        return f"{value / 1024:,.0f} KiB"
    return f"{value:.2f}" if value < 100 else f"{value:,.1f}"


def _median(trials: list[TrialRecord], key: str) -> float | None:
    vals = sorted(v for t in trials if (v := t.metrics.get(key)) is not None and not math.isnan(v))
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def _cell(trials: list[TrialRecord], keys: str, unit: str) -> str:
    return " / ".join(_fmt(_median(trials, k), unit) for k in keys.split("|"))


def _columns(kind: str, trials: list[TrialRecord]) -> list[Column]:
    if kind != "udp-search":
        return HEADLINES[kind]
    sizes = sorted({int(k.rsplit(".", 1)[1]) for t in trials for k in t.metrics if k.startswith("zero_loss_bps.")})
    return [(f"{size} B Mbit/s", f"zero_loss_bps.{size}", "mbit") for size in sizes] + [
        ("steps", "|".join(f"search_steps.{size}" for size in sizes), "n")
    ]


def has_throughput_cases(summaries: list[CaseSummary]) -> bool:
    return any(s.case.workload not in HEADLINES for s in summaries)


def workload_tables(trials: list[TrialRecord]) -> list[Table]:
    """One table per non-throughput workload in `trials`: each case's headline metrics, the median over
    its good repetitions, and n."""
    groups: dict[CaseKey, list[TrialRecord]] = defaultdict(list)
    for t in trials:
        if t.workload in HEADLINES:
            groups[t.case].append(t)
    show_profile = len({k.profile for k in groups}) > 1
    tables = []
    for kind in HEADLINES:
        keys = sorted(
            (k for k in groups if k.workload == kind),
            key=lambda k: (k.profile, k.direction, k.flows, k.label != "direct", k.label),
        )
        if not keys:
            continue
        ok_all = [t for k in keys for t in groups[k] if t.status == "ok"]
        cols = _columns(kind, ok_all)
        caption = {
            "udp-search": "zero-loss throughput (RFC 2544): delivered rate at the highest offered rate with loss <= "
            "the threshold",
            "rrul": "RTT idle vs under load (N up + N down TCP flows); +pNN = loaded - idle",
            "connect": "tunnel bring-up: start of its processes to a packet through it",
            "clients": "N clients, each through its own tunnel, over the window where all are active; per client: "
            "UDP median; Jain: TCP fairness; CPU-s/cl, RSS/cl: the tunnel server's cost per client; failed: UDP / TCP",
            "storm": "N clients started at once: time to a working tunnel (an echo through it answered); hs/s: "
            "handshakes per second at the server",
        }.get(kind)
        table = Table(
            title=f"{kind} (median of repetitions)",
            header_style="bold",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            caption=caption,
            caption_justify="left",
        )
        table.add_column("tunnel", min_width=14, overflow="fold")
        if show_profile:
            table.add_column("profile")
        axes = [a for a in ("direction", "flows") if any(getattr(k, a) not in ("-", 1) for k in keys)]
        for a in axes:
            multi = kind in ("clients", "storm")
            header = {"direction": "variant" if kind == "storm" else "dir", "flows": "clients" if multi else "flows"}[a]
            table.add_column(header, justify="right" if a == "flows" else "left")
        for header, _, _ in cols:
            table.add_column(header, justify="right", no_wrap=True)
        table.add_column("n", justify="right")
        for k in keys:
            ts = groups[k]
            ok = [t for t in ts if t.status == "ok"]
            failed = len(ts) - len(ok)
            n = f"{len(ok)}" + (f" [red]({failed}✗)[/]" if failed else "")
            cells = (
                [_cell(ok, key, unit) for _, key, unit in cols] if ok else ["[red]failed[/]"] + ["" for _ in cols[1:]]
            )
            table.add_row(
                escape(k.label),
                *([escape(k.profile)] if show_profile else []),
                *[str(getattr(k, a)) for a in axes],
                *cells,
                n,
            )
        tables.append(table)
    return tables


def trial_headline(rec: TrialRecord) -> str:
    """One trial's result in a few words, for the progress lines."""
    m = rec.metrics
    if rec.workload == "latency":
        return f"RTT p50 {_fmt(m.get('latency.p50_ms'), 'ms')} ms, p99 {_fmt(m.get('latency.p99_ms'), 'ms')} ms"
    if rec.workload == "rrul":
        return (
            f"RTT p50 idle {_fmt(m.get('latency.idle_p50_ms'), 'ms')} → loaded "
            f"{_fmt(m.get('latency.loaded_p50_ms'), 'ms')} ms, {mbit(m.get('throughput_bps'))} Mbit/s"
        )
    if rec.workload == "udp":
        return f"{mbit(m.get('udp.delivered_bps'))} Mbit/s delivered, loss {_fmt(m.get('udp.loss'), 'frac')}"
    if rec.workload == "udp-search":
        sizes = sorted(int(k.rsplit(".", 1)[1]) for k in m if k.startswith("zero_loss_bps."))
        return "zero-loss " + ", ".join(f"{s} B {mbit(m.get(f'zero_loss_bps.{s}'))}" for s in sizes) + " Mbit/s"
    if rec.workload == "storm":
        return (
            f"{_fmt(m.get('clients.ready_count'), 'n')}/{rec.flows} ready"
            f" · p50 {_fmt(m.get('clients.ready_p50_s'), 'sec')} s · max {_fmt(m.get('clients.ready_max_s'), 'sec')} s"
        )
    if rec.workload == "clients":
        return (
            f"{rec.flows} clients · UDP {mbit(m.get('clients.udp.aggregate_bps'))} Mbit/s"
            f" (loss {_fmt(m.get('clients.udp.loss_pct'), 'pct')})"
            f" · TCP {mbit(m.get('clients.tcp.aggregate_bps'))} Mbit/s"
        )
    if rec.workload == "connect":
        return f"setup p50 {_fmt(m.get('connect.p50_s'), 's')} ms, max {_fmt(m.get('connect.max_s'), 's')} ms"
    return f"{mbit(m.get('throughput_bps') or 0.0)} Mbit/s"
