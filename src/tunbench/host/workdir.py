"""Temporary directories: created under the run prefix, recorded in the ledger, removed on exit."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tunbench.host.ledger import Ledger


@contextmanager
def workdir(ledger: Ledger, tag: str) -> Iterator[Path]:
    """`with workdir(ledger, "t7") as path:` a private directory (mode 0700) that exists for the block;
    recorded in the ledger first, so `tunbench clean` removes it if the run is killed."""
    path = Path(tempfile.mkdtemp(prefix=f"{ledger.prefix}-{tag}-"))
    ledger.add_path(str(path))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        ledger.drop_path(str(path))
