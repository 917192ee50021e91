-- tunbench result store, schema version 7 (see migrations.py for the history).
-- Written for SQLite; the same text creates the PostgreSQL store (backend.PG_DDL rewrites INTEGER PRIMARY
-- KEY, BLOB and REAL, the type words PostgreSQL spells differently).
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS runs (
    id             INTEGER PRIMARY KEY,
    uid            TEXT NOT NULL UNIQUE,      -- the run's identity: tb3fa91c-0123456789abcdef0123 (before
                                              -- schema 4 just the prefix, tb3fa91c)
    name           TEXT NOT NULL DEFAULT '',
    started_at     TEXT NOT NULL,             -- ISO 8601 UTC
    finished_at    TEXT,
    status         TEXT NOT NULL,             -- running | done | interrupted | failed | killed
    tunbench_version TEXT NOT NULL,
    provenance     TEXT NOT NULL,             -- JSON: host, kernel, CPU, tool and tunnel versions
    scenario_text  TEXT NOT NULL,
    scenario_hash  TEXT NOT NULL,             -- sha256 of scenario_text
    scenario_json  TEXT NOT NULL,             -- the effective scenario (file + flags)
    owner_host     TEXT NOT NULL DEFAULT '',  -- who writes the run: host name,
    owner_pid      INTEGER,                   -- pid
    owner_started  REAL,                      -- and process start time (epoch s: a reused pid is not it)
    prefix         TEXT NOT NULL DEFAULT ''   -- the name prefix of its namespaces, links...: tb3fa91c
);
CREATE INDEX IF NOT EXISTS runs_prefix ON runs(prefix);

CREATE TABLE IF NOT EXISTS trials (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,             -- order in which trials ran
    tunnel      TEXT NOT NULL,                -- adapter name
    label       TEXT NOT NULL,                -- unique per run (adapter + parameters, or the user's label)
    profile     TEXT NOT NULL,
    workload    TEXT NOT NULL,
    flows       INTEGER NOT NULL,
    direction   TEXT NOT NULL,                -- up | down | bidir, or '-' where the workload has none
    repetition  INTEGER NOT NULL,
    params      TEXT NOT NULL,                -- JSON: tunnel params, workload params, profile, sysctls
    status      TEXT NOT NULL,                -- ok | failed
    error       TEXT NOT NULL DEFAULT '',
    started_at  TEXT NOT NULL,
    duration_s  REAL,                         -- wall time of the measurement window (TrialRecord.window_s)
    clients     INTEGER NOT NULL DEFAULT 1,   -- multi-client workloads (clients, storm): the client count
    variant     TEXT NOT NULL DEFAULT '',     -- storm: connect | reconnect | overload
    cores       INTEGER NOT NULL DEFAULT 0    -- the cores axis (--cores): CPUs each side was placed on; 0: none
);
CREATE INDEX IF NOT EXISTS trials_run ON trials(run_id);

-- Scalar results of a trial, e.g. throughput_bps, cpu.client.user_s, rss_peak_bytes.server, setup_s.
CREATE TABLE IF NOT EXISTS metrics (
    trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    value    REAL,
    PRIMARY KEY (trial_id, name)
);

-- Time series of a trial, e.g. throughput_bps.up per second, cpu_pct.client at 10 Hz.
CREATE TABLE IF NOT EXISTS series (
    trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    t_s      REAL NOT NULL,
    value    REAL                             -- NULL: a gap (the value measured was NaN or infinite)
);
CREATE INDEX IF NOT EXISTS series_trial ON series(trial_id);

-- Per-stream results (one row per parallel flow).
CREATE TABLE IF NOT EXISTS streams (
    trial_id     INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    stream       INTEGER NOT NULL,
    direction    TEXT NOT NULL,
    received_bps REAL,                        -- NULL: not a number (iperf3 gave NaN or an infinity)
    retransmits  INTEGER
);

-- Raw outputs kept for provenance (tool JSON, logs of a failed tunnel), zlib-compressed.
CREATE TABLE IF NOT EXISTS artifacts (
    trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (trial_id, name)
);
