#!/usr/bin/env python3
"""The metric table of docs/metrics.md, from the metric registry (tunbench.report.metric_table).

    scripts/metric_table.py render   # rewrite the block between <!-- metrics --> and <!-- /metrics -->
    scripts/metric_table.py check    # exit 1 when the committed block is not what the registry gives

tests/unit/test_metric_registry.py runs the check.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tunbench.report.metric_table import markdown

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "metrics.md"
START, END = "<!-- metrics -->\n", "<!-- /metrics -->\n"


def held(text: str) -> str:
    """The block the doc holds now."""
    return text[text.index(START) + len(START) : text.index(END)]


def rendered(text: str) -> str:
    """The doc with its block made from the registry."""
    return text[: text.index(START) + len(START)] + markdown() + text[text.index(END) :]


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    if argv[1:] == ["render"]:
        DOC.write_text(rendered(text))
        return 0
    if argv[1:] == ["check"]:
        if held(text) != markdown():
            print(f"{DOC.relative_to(ROOT)}: the metric table is stale; run scripts/metric_table.py render")
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
