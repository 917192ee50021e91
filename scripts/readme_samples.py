#!/usr/bin/env python3
"""The output samples of README.md and docs/ci.md, from real runs.

    sudo scripts/readme_samples.py measure [RUN...]  # the runs (as root, under the shared measurement lock),
                                                     # their JSON exports to docs/samples/*.json
    scripts/readme_samples.py render [NAME...]  # rewrite the marked blocks from those exports with today's code
    scripts/readme_samples.py check [NAME...]   # exit 1 when a block is not what today's code prints

A block is marked in the Markdown as ``<!-- sample:NAME -->`` ... ``<!-- /sample -->``; what it holds is
``SAMPLES[NAME]`` rendered from its export: the run's table as `tunbench run` prints it at its end (the same
as `tunbench show`), `tunbench compare`'s output, or the PR comment of the CI recipe. Rendering reads only
the committed exports, so tests/unit/test_readme_samples.py re-renders every block and catches a change of
the output's format without running a tunnel; `measure` is what refreshes the numbers.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunbench.results import RunRecord

ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = ROOT / "docs" / "samples"
LOCK = "/tmp/tunbench-measure.lock"
WIDTH = 120  # what tunbench prints when stdout is not a terminal (cli/console.py), and a README can show
DOCS = [ROOT / "README.md", ROOT / "docs" / "ci.md", ROOT / "docs" / "precision.md"]

# the runs: each a list of tunbench command lines; {json} is the export the samples render from
QUICKSTART = (
    "tunbench run -t wireguard-go,boringtun,openvpn-udp,socat --direction up --duration 3 --omit 1 --repeat 3"
    " --name quickstart"
)
AB = (
    "tunbench run -t 'wireguard-go[label=base]' -t 'wireguard-go[label=pr]' --no-direct --direction up"
    " --duration 2 --omit 1 --target-mde 3% --budget 2m --redo-interfered --name pr-1"
)
AB_WORK = (
    "tunbench run -t 'wireguard-go[label=base]' -t 'wireguard-go[label=pr]' --no-direct -w udp --direction up"
    " --duration 2 --omit 0 --count-instructions --target-mde 1% --budget 75s --name pr-1"
)
CI = (
    "tunbench run --no-direct --direction up --repeat 60 --duration 2 --omit 1 --target-mde 3% --budget 2m"
    " --redo-interfered --name pr-7"
    " -t 'socat[label=base]' -t 'socat[label=head,buffer=4096]'"
)
RUNS = {"quickstart": QUICKSTART, "ab": AB, "ab-work": AB_WORK, "ci": CI}
AB_COMPARE = ["--label-a", "base", "--label-b", "pr", "--threshold", "3%", "--target", "3%"]
AB_WORK_COMPARE = ["--label-a", "base", "--label-b", "pr", "--threshold", "1%", "--target", "1%"]
CI_COMPARE = ["--label-a", "base", "--label-b", "head", "--threshold", "3%", "--target", "3%"]


@contextlib.contextmanager
def captured(width: int = WIDTH) -> Iterator[io.StringIO]:
    """Every tunbench.cli module's console swapped for one that writes plain text of `width` columns."""
    from rich.console import Console

    import tunbench.cli.console as shared

    out = io.StringIO()
    fake = Console(file=out, width=width, color_system=None, force_terminal=False, highlight=False)
    swapped = [(m, m.console) for name, m in list(sys.modules.items()) if name.startswith("tunbench.cli")
               and getattr(m, "console", None) is shared.console]  # fmt: skip
    for m, _ in swapped:
        m.console = fake  # type: ignore[attr-defined]
    try:
        yield out
    finally:
        for m, orig in swapped:
            m.console = orig  # type: ignore[attr-defined]


def _export(name: str) -> Path:
    return SAMPLES_DIR / f"{name}.json"


def _load(name: str) -> RunRecord:
    import json

    from tunbench.report.exporters.json import run_from_export

    return run_from_export(json.loads(_export(name).read_text()), source=str(_export(name)))


def _tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def run_table(name: str) -> str:
    """The table `tunbench run` prints at its end (and `tunbench show`)."""
    import tunbench.cli.show  # noqa: F401 -- loaded before the swap
    from tunbench.cli.show import print_run

    run = _load(name)
    with captured() as out:
        print_run(run, title=f"tunbench run {run.uid} (#{run.id})")
    return _tidy(out.getvalue())


def compare_output(name: str, args: list[str]) -> str:
    """`tunbench compare EXPORT ARGS` as it prints, and its exit status."""
    from typer.testing import CliRunner

    import tunbench.cli.report  # noqa: F401 -- loaded before the swap
    from tunbench.cli import app

    with captured() as out:
        res = CliRunner().invoke(app, ["compare", str(_export(name).relative_to(ROOT)), *args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return _tidy(out.getvalue() + res.output) + f"\n$ echo $?\n{res.exit_code}"


def ci_comment(name: str) -> str:
    """The CI recipe's PR comment: compare's output in a code block, then the run's Markdown section."""
    from tunbench.report import exporters

    compared = compare_output(name, CI_COMPARE).rsplit("\n$ echo $?", 1)[0]
    md = exporters.get("md").render([_load(name)])
    head = ["````markdown", "### tunbench: head vs base (threshold 3%)", "", "```", compared, "```", ""]
    return "\n".join([*head, md.strip(), "````"])


def verdict_lines(name: str) -> str:
    """compare's last two lines: the gate it applied, and the verdict."""
    lines = compare_output(name, CI_COMPARE).rsplit("\n$ echo $?", 1)[0].splitlines()
    gate = max(i for i, line in enumerate(lines) if line.startswith("gate:"))
    return "\n".join(lines[gate:])


@dataclass(frozen=True)
class Sample:
    doc: str
    render: Callable[[], str]
    fence: str = "```"  # the code fence the block is shown in ("" when the rendering brings its own)


SAMPLES: dict[str, Sample] = {
    "quickstart": Sample("README.md", lambda: run_table("quickstart")),
    "ab-work": Sample("README.md", lambda: compare_output("ab-work", AB_WORK_COMPARE)),
    "ab-compare": Sample("docs/precision.md", lambda: compare_output("ab", AB_COMPARE)),
    "ci-comment": Sample("docs/ci.md", lambda: ci_comment("ci"), fence=""),
    "verdict-lines": Sample("docs/precision.md", lambda: verdict_lines("ci")),
}
BLOCK = re.compile(r"(<!-- sample:([\w-]+) -->\n)(.*?)(<!-- /sample -->)", re.S)


def block_text(sample: Sample) -> str:
    body = sample.render()
    return f"{sample.fence}\n{body}\n{sample.fence}\n" if sample.fence else body + "\n"


def blocks(path: Path) -> dict[str, str]:
    """NAME -> what the marked block holds now."""
    return {m.group(2): m.group(3) for m in BLOCK.finditer(path.read_text())}


def render(check: bool = False, only: list[str] | None = None) -> list[str]:
    """Rewrite every marked block, or those named in `only` (with `check`, only list the stale ones)."""
    stale: list[str] = []
    for doc in DOCS:
        text = doc.read_text()

        def fill(m: re.Match[str], doc: Path = doc) -> str:
            if only and m.group(2) not in only:
                return m.group(0)
            new = block_text(SAMPLES[m.group(2)])
            if new != m.group(3):
                stale.append(f"{doc.relative_to(ROOT)}: {m.group(2)}")
            return m.group(1) + new + m.group(4)

        new_text = BLOCK.sub(fill, text)
        if not check and new_text != text:
            doc.write_text(new_text)
    return stale


def measure(names: list[str]) -> None:
    """The runs, one after another, each under the shared lock; stores in /tmp, exports in docs/samples/."""
    tunbench = str(Path(sys.executable).parent / "tunbench")
    for name in names or list(RUNS):
        argv = shlex.split(RUNS[name])
        argv[0] = tunbench
        db = Path(f"/tmp/tunbench-samples-{name}.db")
        db.unlink(missing_ok=True)  # a fresh store: the sample's run is #1
        argv += ["--db", str(db), "--json", str(_export(name))]
        print("+", shlex.join(argv), flush=True)
        done = subprocess.run(["flock", LOCK, *argv], check=False, env={**os.environ, "COLUMNS": str(WIDTH)})
        print(f"exit {done.returncode}", flush=True)  # 4: some trials failed, the export is still written
        slim(_export(name))


def slim(path: Path) -> None:
    """The export without the trials' per-second series (no sample prints them), on one line: a third of
    its size in the repository."""
    import json

    data = json.loads(path.read_text())
    for trial in data.get("trials", []):
        trial.pop("series", None)
    path.write_text(json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n")


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else "check"
    if what == "measure":
        measure(sys.argv[2:])
        return 0
    if what in ("render", "check"):
        stale = render(check=what == "check", only=sys.argv[2:])
        for s in stale:
            print(("stale: " if what == "check" else "rewritten: ") + s)
        return 1 if stale and what == "check" else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
