"""Schema history. Each entry upgrades version N-1 to N; the store refuses versions it does not know.

1  (tunbench 0.1.0) runs, trials, metrics, series, streams, artifacts.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

# version -> SQL that upgrades from version-1 (version 1 is created from schema.sql)
MIGRATIONS: dict[int, str] = {}
