"""Schema history. Each entry upgrades version N-1 to N; the store refuses versions it does not know.

1  (tunbench 0.1.0) runs, trials, metrics, series, streams, artifacts.
2  trials.clients and trials.variant: the multi-client workloads' own axes. Version 1 stored the client
   count in `flows` and the storm variant in `direction`; their rows move (flows 1, direction '-' for a
   storm, whose only axes are clients and variant; a `clients` trial keeps its real direction).
3  runs.owner_host, owner_pid, owner_started: the process that writes the run (host name, pid, process
   start time), so a `running` run whose owner is gone can be marked `killed`. Runs of older versions
   have no owner and keep their status.
4  runs.prefix: the short name prefix (`tb` + 6 hex) the run's namespaces, links and cgroups carry. Until
   version 3 it was the run's uid too, and 24 random bits collide (50% at about 5000 runs in one shared
   store): a run's uid is now the prefix and 80 more random bits (`tb3fa91c-0123456789abcdef0123`). Older
   runs keep their uid, which becomes their prefix as well.
5  series.value may be NULL: a gap, where the value measured was NaN or infinite (issue 43 item 8: one NaN
   failed the NOT NULL constraint and the whole trial was lost). PostgreSQL drops the constraint; SQLite
   cannot, so its table is rebuilt, every row keeping its rowid (the order series are read back in).
6  trials.cores: the cores axis (`tunbench run --cores`), the CPUs each side was placed on; 0 for every
   trial of an older version (not on that axis).
7  streams.received_bps may be NULL: a stream whose rate was NaN or infinite, which failed the NOT NULL
   constraint and lost the whole trial, as a NaN in a series did before version 5. The same rebuild as
   version 5's on SQLite (every row keeping its rowid), the constraint dropped on PostgreSQL.

Each migration runs in one transaction with its version's update (backend.SqliteBackend explains why not
executescript): a failure halfway leaves the store at the version before, never half-migrated.

The SQL is SQLite's and runs on PostgreSQL too (backend.PG_DDL rewrites the type words that differ), except
where a version gives each dialect its own (a dict: dialect -> SQL).
"""

from __future__ import annotations

SCHEMA_VERSION = 7

# version -> SQL that upgrades from version-1, or {dialect: SQL} (version SCHEMA_VERSION is created from schema.sql)
MIGRATIONS: dict[int, str | dict[str, str]] = {
    2: """
ALTER TABLE trials ADD COLUMN clients INTEGER NOT NULL DEFAULT 1;
ALTER TABLE trials ADD COLUMN variant TEXT NOT NULL DEFAULT '';
UPDATE trials SET clients = flows, flows = 1 WHERE workload IN ('clients', 'storm');
UPDATE trials SET variant = direction, direction = '-' WHERE workload = 'storm';
""",
    3: """
ALTER TABLE runs ADD COLUMN owner_host TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
ALTER TABLE runs ADD COLUMN owner_started REAL;
""",
    4: """
ALTER TABLE runs ADD COLUMN prefix TEXT NOT NULL DEFAULT '';
UPDATE runs SET prefix = uid;
CREATE INDEX IF NOT EXISTS runs_prefix ON runs(prefix);
""",
    5: {
        "sqlite": """
CREATE TABLE series_v5 (
    trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    t_s      REAL NOT NULL,
    value    REAL
);
INSERT INTO series_v5 (rowid, trial_id, name, t_s, value) SELECT rowid, trial_id, name, t_s, value FROM series;
DROP TABLE series;
ALTER TABLE series_v5 RENAME TO series;
CREATE INDEX IF NOT EXISTS series_trial ON series(trial_id);
""",
        "postgresql": """
ALTER TABLE series ALTER COLUMN value DROP NOT NULL;
""",
    },
    6: """
ALTER TABLE trials ADD COLUMN cores INTEGER NOT NULL DEFAULT 0;
""",
    7: {
        "sqlite": """
CREATE TABLE streams_v7 (
    trial_id     INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    stream       INTEGER NOT NULL,
    direction    TEXT NOT NULL,
    received_bps REAL,
    retransmits  INTEGER
);
INSERT INTO streams_v7 (rowid, trial_id, stream, direction, received_bps, retransmits)
    SELECT rowid, trial_id, stream, direction, received_bps, retransmits FROM streams;
DROP TABLE streams;
ALTER TABLE streams_v7 RENAME TO streams;
""",
        "postgresql": """
ALTER TABLE streams ALTER COLUMN received_bps DROP NOT NULL;
""",
    },
}
