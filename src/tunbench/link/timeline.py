"""A profile's `timeline`: a CSV of link changes over time -> the profile's events (pure).

The first row names the columns: `at` (required: the time after the start of the traffic, `12s`), an
optional `direction` (up, down or both; both when absent or empty) and impairment keys (`delay`, `rate`,
`loss`, ...). Each later row is one event; an empty cell leaves that key as it was. Lines starting with `#`
are comments. tunbench-link judges the values, as for any event.
"""

from __future__ import annotations

import csv

from tunbench.errors import ConfigError


def parse_timeline(text: str, path: str) -> list[dict[str, str]]:
    """The rows of the CSV `text` (read from `path`) as event tables ({"at": ..., "direction": ..., key:
    value, "origin": "path:line"}), in file order; errors name `path` and the line."""
    rows = [
        (no, line)
        for no, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not rows:
        raise ConfigError(
            "the timeline is empty (a header row `at,delay,rate,...` and one row per change)", source=path
        )
    header_no, header = rows[0]
    columns = [c.strip() for c in next(csv.reader([header]))]
    if "at" not in columns:
        raise ConfigError(f"the header row has no `at` column: {columns}", source=path, line=header_no)
    if len(set(columns)) != len(columns) or "" in columns:
        raise ConfigError("the header row names a column twice, or an empty one", source=path, line=header_no)
    events: list[dict[str, str]] = []
    for no, line in rows[1:]:
        cells = [c.strip() for c in next(csv.reader([line]))]
        if len(cells) != len(columns):
            raise ConfigError(f"{len(cells)} cells where the header has {len(columns)} columns", source=path, line=no)
        row = {col: cell for col, cell in zip(columns, cells, strict=True) if cell}
        if "at" not in row:
            raise ConfigError("every row needs its time", source=path, line=no, key="at")
        if len(row) == 1 + ("direction" in row):
            raise ConfigError("the row changes nothing (all its cells but `at` are empty)", source=path, line=no)
        events.append({**row, "origin": f"{path}:{no}"})
    return events
