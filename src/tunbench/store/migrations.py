"""Schema history. Each entry upgrades version N-1 to N; the store refuses versions it does not know.

1  (tunbench 0.1.0) runs, trials, metrics, series, streams, artifacts.
2  trials.clients and trials.variant: the multi-client workloads' own axes. Version 1 stored the client
   count in `flows` and the storm variant in `direction`; their rows move (flows 1, direction '-' for a
   storm, whose only axes are clients and variant; a `clients` trial keeps its real direction).
"""

from __future__ import annotations

SCHEMA_VERSION = 2

# version -> SQL that upgrades from version-1 (version SCHEMA_VERSION is created from schema.sql)
MIGRATIONS: dict[int, str] = {
    2: """
ALTER TABLE trials ADD COLUMN clients INTEGER NOT NULL DEFAULT 1;
ALTER TABLE trials ADD COLUMN variant TEXT NOT NULL DEFAULT '';
UPDATE trials SET clients = flows, flows = 1 WHERE workload IN ('clients', 'storm');
UPDATE trials SET variant = direction, direction = '-' WHERE workload = 'storm';
""",
}
