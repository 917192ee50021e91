"""BENCHMARKS.md is one page of headline numbers that links to docs/benchmarks/<subsystem>.md: every page
there is reachable from it, and every relative link of the README, the docs and the benchmark pages points to
a file that exists (and, with an #anchor, to one of its headings)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))
NOTES = sorted((ROOT / "docs" / "notes").glob("*.md"))
DOCS = [
    ROOT / "README.md",
    ROOT / "BENCHMARKS.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *NOTES,
    *PAGES,
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The headings' anchors and the explicit ones (`<a id="round"></a>`)."""
    text = path.read_text()
    headings = {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}
    return headings | set(re.findall(r'<a id="([^"]+)"', text))


def test_slug_is_githubs() -> None:
    assert slug(" The levers side by side, one sitting (the precision issue's table)") == (
        "the-levers-side-by-side-one-sitting-the-precision-issues-table"
    )


def test_every_benchmark_page_is_linked_from_the_headline_page() -> None:
    headline = (ROOT / "BENCHMARKS.md").read_text()
    assert PAGES
    for page in PAGES:
        assert f"(docs/benchmarks/{page.name})" in headline, page.name


def test_the_headline_page_stays_short() -> None:
    assert len((ROOT / "BENCHMARKS.md").read_text().splitlines()) <= 130


@pytest.mark.parametrize("doc", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_relative_links_resolve(doc: Path) -> None:
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve()
        assert dest.exists(), f"{doc.name}: {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{doc.name}: {target}: no such heading"
