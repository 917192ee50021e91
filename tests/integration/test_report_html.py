"""The HTML report of a real run, opened in headless Chromium: every chart drew an SVG, no console errors.

One run (direct + socat, 1 and 2 flows, upload, 2 x 1 s), then `tunbench report -o report.html`, then Chromium
twice: --dump-dom (the DOM after the scripts ran, console messages on stderr) and --screenshot. About 30 s.
Set TUNBENCH_SCREENSHOT=/path.png to keep the screenshot. The history page (`tunbench report --history`) of a
synthetic store is opened the same way: every series drew its CI band and its change point.

The comparison page (`tunbench compare A B --html`): two short runs of socat recorded with --flamegraph and
--count-work, A with its 8 KiB buffer and B with 2 KiB (about 4x the reads and writes per MB: test_counted_work),
opened the same way: the case's section holds its verdicts, its counted-work changes and, beside them, the
client side's differential flamegraph, drawn (TUNBENCH_COMPARE_SCREENSHOT=/path.png keeps its screenshot).
About 30 s more.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tunbench.monitor.work import probe
from tunbench.perf.flamegraph import find_tool
from tunbench.report.compare import load_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(not (shutil.which("socat") and shutil.which("iperf3")), reason="needs socat and iperf3"),
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian chromium"),
]

CHROMIUM = [
    "/usr/bin/chromium",
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=15000",
]
# Chromium's own startup noise on a headless VM without D-Bus/GPU; never from the page.
CONSOLE = re.compile(r':INFO:CONSOLE[^\]]*\] "(.*)", source: (\S+)')


def tunbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tunbench.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "200"},
    )


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="tb-chromium-") as profile:
        return subprocess.run(
            [*CHROMIUM, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120
        )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    db = tmp / "runs.db"
    proc = tunbench(
        "run", "-t", "socat", "--direction", "up", "--flows", "1,2", "--repeat", "2", "--duration", "1", "--omit",
        "0", "--name", "html-test", "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    uid = load_run("html-test", db).uid
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in netns.splitlines() if n.startswith(uid)], "namespaces left behind"
    assert not Path(f"/run/tunbench/{uid}.json").exists(), "run ledger left behind"
    out = tmp / "report.html"
    proc = tunbench("report", "-o", str(out), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    return out


def test_every_chart_renders_without_console_errors(report: Path) -> None:
    proc = chromium("--enable-logging=stderr", "--v=0", "--dump-dom", report.as_uri())
    dom = proc.stdout
    assert "</html>" in dom, proc.stderr[-2000:]
    charts = re.findall(r'<div id="([^"]+)" class="[^"]*plotly-graph-div[^"]*"', dom)
    assert {"r0-throughput", "r0-ratio", "r0-cpu", "r0-bits-per-cpu", "r0-series-0", "r0-fairness"} <= set(charts)
    # Each chart's markup, up to the next chart: plotly drew its <svg class="main-svg"> inside.
    starts = [m.start() for m in re.finditer(r'<div id="[^"]+" class="[^"]*plotly-graph-div', dom)] + [len(dom)]
    for chart_id, a, b in zip(charts, starts, starts[1:], strict=False):
        assert 'class="main-svg"' in dom[a:b], f"chart {chart_id} did not render"
    page_messages = [m.group(1) for m in CONSOLE.finditer(proc.stderr) if m.group(2).startswith("file:")]
    assert page_messages == [], page_messages
    assert 'id="js-errors"></div>' in dom  # the page's own error box stayed empty


def screenshot(page: Path, shot: Path, size: str) -> None:
    """Chromium's screenshot of `page` at window `size` ("W,H"), written to `shot`: a PNG with something drawn."""
    proc = chromium(f"--window-size={size}", f"--screenshot={shot}", page.as_uri())
    assert shot.exists(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 100_000  # a blank page compresses to a few kB


def test_screenshot(report: Path, tmp_path: Path) -> None:
    screenshot(report, Path(os.environ.get("TUNBENCH_SCREENSHOT") or tmp_path / "report.png"), "1400,4000")


@pytest.fixture(scope="module")
def history_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tunbench report --history` of a store with a known history (tests/unit/history_data.py: 37 runs, a -6 %
    step), built with the Store API: no run needed."""
    from tests.unit.history_data import make_store

    tmp = tmp_path_factory.mktemp("history")
    db = make_store(tmp / "history.db")
    out = tmp / "history.html"
    proc = tunbench("report", "--history", "-o", str(out), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    return out


def test_history_page_renders_bands_and_change_points(history_page: Path) -> None:
    proc = chromium("--enable-logging=stderr", "--v=0", "--dump-dom", history_page.as_uri())
    dom = proc.stdout
    assert "</html>" in dom, proc.stderr[-2000:]
    charts = re.findall(r'<div id="([^"]+)" class="[^"]*plotly-graph-div[^"]*"', dom)
    assert charts == ["h0-0", "h0-1", "h0-2"]
    starts = [m.start() for m in re.finditer(r'<div id="[^"]+" class="[^"]*plotly-graph-div', dom)] + [len(dom)]
    for chart_id, a, b in zip(charts, starts, starts[1:], strict=False):
        svg = dom[a:b]
        assert 'class="main-svg"' in svg, f"chart {chart_id} did not render"
        assert 'class="fills"' in svg, f"chart {chart_id}: no CI band drawn"
        assert 'class="shapelayer"' in svg and "rgb(214, 39, 40)" in svg, f"chart {chart_id}: no change point line"
        assert "regression" in svg, f"chart {chart_id}: the change point is not labelled"
    page_messages = [m.group(1) for m in CONSOLE.finditer(proc.stderr) if m.group(2).startswith("file:")]
    assert page_messages == [], page_messages
    assert 'id="js-errors"></div>' in dom


needs_stacks = pytest.mark.skipif(
    shutil.which("perf") is None
    or not probe(shutil.which("perf")).available
    or find_tool("inferno-flamegraph") is None
    or find_tool("inferno-diff-folded") is None,
    reason="needs perf allowed to count and sample (tunbench doctor) and inferno (make tools)",
)


@pytest.fixture(scope="module")
def comparison_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("compare")
    db = tmp / "runs.db"
    for name, tunnel in (("big", "socat[label=s]"), ("small", "socat[buffer=2048,label=s]")):
        proc = tunbench(
            "run", "-t", tunnel, "--no-direct", "--direction", "up", "--repeat", "2", "--duration", "1", "--omit", "0",
            "--flamegraph", "--count-work", "--name", name, "--db", str(db),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp / "compare.html"
    proc = tunbench("compare", "big", "small", "--include-interfered", "--html", str(out), "--db", str(db))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "comparison page written to" in proc.stdout
    return out


@needs_stacks
def test_comparison_page_shows_counted_work_and_the_diff_flamegraph_beside_the_verdicts(comparison_page: Path) -> None:
    proc = chromium("--enable-logging=stderr", "--v=0", "--dump-dom", comparison_page.as_uri())
    dom = proc.stdout
    assert "</html>" in dom, proc.stderr[-2000:]
    (section,) = re.findall(r'<section class="case" id="case-0">.*?</section>', dom, re.S)
    assert "s · lan · up · 1 flow" in section
    verdicts = re.search(r'<table id="case-0-verdicts">.*?</table>', section, re.S)
    work = re.search(r'<table id="case-0-work">.*?</table>', section, re.S)
    assert verdicts is not None and "throughput" in verdicts.group(0)
    assert work is not None and "reads/MB client" in work.group(0) and "writes/MB client" in work.group(0)
    fig = re.search(r'<figure id="case-0-fg-client">.*?</figure>', section, re.S)
    assert fig is not None, section[-3000:]
    assert "sampled at 999 Hz on both sides" in fig.group(0)
    assert 'class="flamegraph"' in fig.group(0)
    frames = re.findall(r"<title>([^<]*)</title>", fig.group(0))
    # each frame's tooltip: its time in B, its share, and the change of its share against A
    deltas = [f for f in frames if re.search(r"; [+-]?\d+\.\d+%\)$", f)]
    assert len(deltas) > 20 and len(deltas) >= len(frames) - 1, frames[:5]
    assert any("sys_write" in f or "ksys_write" in f for f in frames)  # socat's relay: read, then write
    page_messages = [m.group(1) for m in CONSOLE.finditer(proc.stderr) if m.group(2).startswith("file:")]
    assert page_messages == [], page_messages


@needs_stacks
def test_comparison_page_screenshot(comparison_page: Path, tmp_path: Path) -> None:
    shot = Path(os.environ.get("TUNBENCH_COMPARE_SCREENSHOT") or tmp_path / "compare.png")
    screenshot(comparison_page, shot, "1880,1400")
