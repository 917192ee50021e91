"""The cores surface (report/scaling.py): efficiency, the knee, the gain's interval and the stage each point
names, in the terminal table and the HTML report."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console

from tests.unit.report_data import run, trial
from tunbench.report.html.page import render
from tunbench.report.scaling import curves, gain_text, knee, knee_text
from tunbench.report.scaling_table import scaling_tables
from tunbench.results import TrialRecord


def at(seq: int, label: str, gbps: float, cores: int, flows: int = 1, client: str = "none") -> TrialRecord:
    t = trial(seq, label, gbps * 1e9, flows=flows, repetition=seq)
    return replace(t, cores=cores, params={**t.params, "stage": {"client": client, "server": "none"}})


def surface() -> list[TrialRecord]:
    out = []
    for i, (a, b) in enumerate([(3.0, 3.05), (3.1, 3.0), (2.9, 3.1)]):  # socat: no gain
        out += [
            at(10 * i + 1, "socat", a, 1, client="all cores busy"),
            at(10 * i + 2, "socat", b, 2, client="thread socat"),
        ]
    for i, (a, b) in enumerate([(10.0, 19.0), (10.5, 19.5), (9.5, 18.5)]):  # direct, 4 flows: near linear
        out += [at(10 * i + 3, "direct", a, 1, flows=4), at(10 * i + 4, "direct", b, 2, flows=4)]
    return out


def test_the_knee_is_where_an_added_core_gains_less_than_half_of_linear() -> None:
    assert knee([(1, 3.0), (2, 3.05)]) == 1
    assert knee([(1, 10.0), (2, 19.0), (4, 24.0)]) == 2  # 2->4 gains 2.5 per core, a quarter of linear
    assert knee([(1, 10.0), (2, 19.0)]) is None
    assert knee([(1, 10.0)]) is None


def test_each_curve_has_its_efficiency_gain_and_stages() -> None:
    socat, direct = curves(surface())
    assert (socat.label, direct.label, direct.flows) == ("socat", "direct", 4)
    assert [p.cores for p in socat.points] == [1, 2]
    assert socat.points[1].efficiency == pytest.approx(3.05 / (2 * 3.0))
    assert socat.points[1].per_core_bps == pytest.approx(3.05e9 / 2)
    assert knee_text(socat) == "1" and knee_text(direct) == "none up to 2"
    assert socat.points[0].stage_text("client") == "all cores busy"
    assert socat.points[1].stage_text("client") == "thread socat"
    assert socat.gain is not None and socat.gain.ci_low < 1.0 < socat.gain.ci_high  # within noise
    assert direct.gain is not None and direct.gain.ci_low > 1.5
    assert gain_text(socat).endswith("90%")  # 3 vs 3 repetitions claim no more


def test_a_run_without_the_axis_has_no_surface() -> None:
    assert curves([trial(1, "socat", 1e9)]) == []
    assert scaling_tables([trial(1, "socat", 1e9)]) == []


def test_the_terminal_table_and_the_html_report_show_it() -> None:
    out = io.StringIO()
    for table in scaling_tables(surface()):
        Console(file=out, width=200).print(table)
    text = out.getvalue()
    assert "cores surface · socat" in text and "cores surface · direct" in text
    assert "thread socat" in text and "all cores busy" in text
    assert "1→2" in text
    page = render([run(surface())])
    assert "Scaling with cores" in page and "socat: throughput against cores per side" in page
    assert "client: thread socat" in page  # a point's label: what saturated each side


def test_a_thread_judged_with_its_cpus_uncharged_time_shows_both_parts() -> None:
    from tunbench.monitor.stage import BUSIEST_THREAD, THREAD_AND_CPU, UNCLAIMED

    trials = []
    for i, (thread, unclaimed) in enumerate([(93.0, 5.0), (94.0, 4.0), (92.0, 6.0)]):
        pinned = at(10 * i + 1, "socat", 3.0, 1, client="thread socat")
        pinned.params["threads"] = {"client": [["socat", 7, thread]]}
        pinned.metrics.update(
            {
                BUSIEST_THREAD.key(role="client"): thread,
                UNCLAIMED.key(role="client"): unclaimed,
                THREAD_AND_CPU.key(role="client"): thread + unclaimed,
            }
        )
        spread = at(10 * i + 2, "socat", 3.1, 2, client="none")
        spread.params["threads"] = {"client": [["socat", 7, thread]]}
        spread.metrics[BUSIEST_THREAD.key(role="client")] = thread  # two CPUs: the thread judged alone
        trials += [pinned, spread]
    (socat,) = curves(trials)
    assert socat.points[0].side_text("client") == "thread socat 93% + 5% uncharged"
    assert socat.points[1].side_text("client") == "none, socat 93%"
