"""A run's true status in the store, on SQLite and on a real PostgreSQL server (tests/pg.py): a SIGKILLed
`tunbench run` is listed as `killed`, and a run whose PostgreSQL goes away ends with one clear line and a
spool file that `tunbench db import` brings back whole."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import RUN_UID, STARTED, tunbench
from tests.pg import PgServer, raw_sql

RUN_ARGS = ("-t", "socat", "--no-direct", "--duration", "1", "--omit", "0", "--direction", "up")


def start_run(db: str, cwd: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunbench", "run", "--db", db, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = RUN_UID.search(line)
    assert m, f"no run line: {line!r}"
    STARTED.add(m.group(1).split("-")[0])  # the prefix its objects carry
    return proc, m.group(1)  # the run's uid


def ok_trials(db: str) -> int:
    try:
        return int(str(raw_sql(db, "SELECT count(*) FROM trials WHERE status = 'ok'")[0][0]))
    except Exception:
        return 0


def wait_for(cond: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_sigkilled_run_is_listed_as_killed(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    db = str(tmp_path / "r.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    proc, uid = start_run(db, tmp_path, *RUN_ARGS, "--repeat", "20")
    try:
        wait_for(lambda: ok_trials(db) >= 1, 60, "a first stored trial")
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert raw_sql(db, "SELECT status FROM runs WHERE uid = ?", (uid,)) == [("running",)]  # as SIGKILL left it
    res = tunbench("clean", "--db", db)
    assert res.returncode == 0, res.stderr
    assert f"run {uid}: its process is gone, marked killed" in res.stdout
    res = tunbench("show", "--list", "--db", db)
    assert res.returncode == 0, res.stderr
    (row,) = [line for line in res.stdout.splitlines() if uid in line]
    assert "killed" in row, res.stdout
    assert ok_trials(db) >= 1  # what it measured stays


def test_postgresql_gone_mid_run_spools_the_rest(tmp_path: Path) -> None:
    server = PgServer().start()
    try:
        url = server.url()
        proc, uid = start_run(url, tmp_path, *RUN_ARGS, "--repeat", "4")
        try:
            wait_for(lambda: ok_trials(url) >= 1, 60, "a first stored trial")
            server.stop("fast")
            out, _ = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 6, out  # EXIT_ERROR: the store went away
        assert "Traceback" not in out
        (spool,) = tmp_path.glob(f"tunbench-spool-{uid}-*.db")  # a new file, created exclusively
        (error,) = [line for line in out.splitlines() if line.startswith("Error:")]
        assert f"lost the result store {url} during run {uid}" in error
        assert error.endswith(f"`tunbench db import {shlex.quote(str(spool))} --db {shlex.quote(url)}`"), error
        server.start()
        stored = ok_trials(url)
        assert stored >= 1
        res = tunbench("db", "import", str(spool), "--db", url)
        assert res.returncode == 0, res.stderr
        rows = raw_sql(url, "SELECT seq FROM trials ORDER BY seq")
        assert [r[0] for r in rows] == [1, 2, 3, 4]
        assert raw_sql(url, "SELECT status FROM runs") == [("done",)]
    finally:
        server.remove()


def test_two_runs_write_to_one_postgresql_at_once(tmp_path: Path, pg_url: str) -> None:
    """Two real `tunbench run`s, started together, store into one database: both runs whole, each with
    its own trials, nothing lost or mixed (each run measures its own label)."""
    uids = {}
    procs = []
    for label in ("first", "second"):
        proc, uid = start_run(pg_url, tmp_path, "-t", f"socat[label={label}]", *RUN_ARGS[2:], "--repeat", "2",
                              "--name", label)  # fmt: skip
        uids[label] = uid
        procs.append(proc)
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
    rows = raw_sql(
        pg_url, "SELECT r.name, r.uid, r.status, t.label, t.status FROM runs r JOIN trials t ON t.run_id = r.id"
    )
    by_run: dict[str, list[tuple[object, ...]]] = {}
    for row in rows:
        by_run.setdefault(str(row[0]), []).append(row)
    assert set(by_run) == {"first", "second"}
    for name, trials in by_run.items():
        assert len(trials) == 2, trials
        assert {t[1] for t in trials} == {uids[name]} and {t[2] for t in trials} == {"done"}
        assert {t[3] for t in trials} == {name} and {t[4] for t in trials} == {"ok"}
