"""The HTML report of a real run, opened in headless Chromium: every chart drew an SVG, no console errors.

One run (direct + socat, 1 and 2 flows, upload, 2 x 1 s), then `tunbench report -o report.html`, then Chromium
twice: --dump-dom (the DOM after the scripts ran, console messages on stderr) and --screenshot. About 30 s.
Set TUNBENCH_SCREENSHOT=/path.png to keep the screenshot. The history page (`tunbench report --history`) of a
synthetic store is opened the same way: every series drew its CI band and its change point.
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


def test_screenshot(report: Path, tmp_path: Path) -> None:
    shot = Path(os.environ.get("TUNBENCH_SCREENSHOT") or tmp_path / "report.png")
    proc = chromium("--window-size=1400,4000", f"--screenshot={shot}", report.as_uri())
    assert shot.exists(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 100_000  # a blank page compresses to a few kB


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
