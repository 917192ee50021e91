"""The one console every command prints through (and its stderr twin)."""

from __future__ import annotations

import shutil
import sys

from rich.console import Console

# not a terminal (CI logs, pipes): rich would assume 80 columns and squeeze the tables
console = Console(width=None if sys.stdout.isatty() else max(120, shutil.get_terminal_size((120, 40)).columns))
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
