"""The exporters: one file per format behind one `Exporter` protocol, and the registry that names them
(hyperfine's `export/`: a trait, one module per format, a manager that alone writes files).

Each format's file holds the format itself and its exporter: json.py (export, and import: run_from_export),
csv.py, markdown.py, bmf.py, flent.py (Flent's .flent.gz, one rrul trial a file, and its reader); HTML,
which is many charts, is the report/html/ package (its exporter in its __init__). An exporter is pure:
runs in, text (or bytes) out. It declares the name `--format` selects it by and the file suffixes that
select it from `-o FILE`. The command layer (cli/report.py) picks one with `pick()` and is the only code
that writes the output. Adding a format is one file here plus one line in `_EXPORTERS`. The HTML exporter
imports plotly only when it renders, so listing the formats stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from tunbench.errors import ExportError
from tunbench.report.exporters.bmf import BmfExporter
from tunbench.report.exporters.csv import CsvExporter
from tunbench.report.exporters.flent import FlentExporter
from tunbench.report.exporters.json import JsonExporter
from tunbench.report.exporters.markdown import MarkdownExporter
from tunbench.report.html import HtmlExporter
from tunbench.results import RunRecord


class Exporter(Protocol):
    """One output format of `tunbench report`."""

    @property
    def name(self) -> str:
        """The `--format` value (and the word in "<name> report written to ...")."""
        ...

    @property
    def suffixes(self) -> tuple[str, ...]:
        """Lower-case file suffixes (with the dot) that select this format from `-o FILE`; may be empty."""
        ...

    def render(self, runs: Sequence[RunRecord]) -> str | bytes:
        """The whole document for these runs (pure). Raises ExportError when the format cannot hold them."""
        ...


# the order of `--format`'s choices in its error message
_EXPORTERS: tuple[Exporter, ...] = (
    HtmlExporter(),
    MarkdownExporter(),
    CsvExporter(),
    BmfExporter(),
    JsonExporter(),
    FlentExporter(),
)
REGISTRY: dict[str, Exporter] = {e.name: e for e in _EXPORTERS}
DEFAULT = "html"  # without --format, and when -o's suffix names no format


def names() -> list[str]:
    return list(REGISTRY)


def by_suffix(path: Path) -> Exporter | None:
    """The exporter a file name asks for (`.htm` -> html), or None."""
    suffix = path.suffix.lower()
    return next((e for e in _EXPORTERS if suffix in e.suffixes), None)


def get(name: str) -> Exporter:
    exporter = REGISTRY.get(name)
    if exporter is None:
        raise ExportError(f"--format {name!r}: choose one of {', '.join(REGISTRY)}")
    return exporter


def pick(fmt: str | None, output: Path | None) -> Exporter:
    """`--format` when given; else what `-o`'s suffix names; else the default (HTML)."""
    if fmt is not None:
        return get(fmt)
    by_file = by_suffix(output) if output is not None else None
    return by_file or REGISTRY[DEFAULT]
