"""The store on both backends (SQLite, and a real PostgreSQL server from tests/pg.py): a run's owner and the
`killed` status, `tunbench db import/export/migrate`, two writers at once, and the server going away."""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.pg import SUPERUSER, PgServer, raw_sql
from tunbench.cli import app
from tunbench.report.exporters import json as json_format
from tunbench.results import TrialRecord
from tunbench.store.backend import PG_DDL, redact
from tunbench.store.db import Store, StoreLost
from tunbench.store.migrations import SCHEMA_VERSION


def new_run(store: Store, uid: str = "tb000001") -> int:
    """A run; one uid is one run (its start time and scenario), in whichever store it is created, as a spool
    holds the run it continues."""
    return store.create_run(
        uid=uid, name="n", tunbench_version="0", provenance={"k": 1}, scenario_text="[run]", scenario_hash="h",
        scenario={"run": {}}, started_at="2026-01-01T00:00:00+00:00",
    )  # fmt: skip


def trial(seq: int, value: float = 1e9) -> TrialRecord:
    return TrialRecord(
        seq=seq, tunnel="socat", label="socat", profile="lan", workload="iperf3", flows=2, direction="up",
        repetition=seq, params={"a": 1}, started_at="t", window_s=3.0,
        metrics={"throughput_bps": value, "cpu.client.user_s": 0.5},
        series={"throughput_bps.up": [(1.0, value), (2.0, value * 1.1)], "cpu_pct.client": [(0.1, 80.0)]},
        streams=[(5, "up", value / 2, 3), (7, "up", value / 2, None)],
        artifacts={"iperf3.json": b'{"x": 1}'},
    )  # fmt: skip


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def status(db: str | Path, uid: str = "tb000001") -> str:
    return str(raw_sql(db, "SELECT status FROM runs WHERE uid = ?", (uid,))[0][0])


# ---- owner and `killed` ----------------------------------------------------------------------------------


def test_a_run_whose_process_is_gone_is_killed(store_db: str | Path) -> None:
    with Store(store_db) as s:
        rid = new_run(s)
        s.add_trial(rid, trial(1))
        host, pid, started = raw_sql(store_db, "SELECT owner_host, owner_pid, owner_started FROM runs")[0]
        assert pid == os.getpid() and host and isinstance(started, float)
    with Store(store_db) as s:
        assert s.killed_on_open == [] and s.find_run(None).status == "running"  # its owner (we) is alive
    raw_sql(store_db, "UPDATE runs SET owner_pid = ?", (dead_pid(),))
    with Store(store_db) as s:
        assert s.killed_on_open == ["tb000001"]
        run = s.find_run(None)
    assert run.status == "killed" and len(run.trials) == 1


def test_a_reused_pid_is_not_the_owner(store_db: str | Path) -> None:
    with Store(store_db) as s:
        new_run(s)
    raw_sql(store_db, "UPDATE runs SET owner_started = 1.0")  # our pid, but a process started in 1970
    with Store(store_db) as s:
        assert s.find_run(None).status == "killed"


def test_runs_of_other_hosts_are_left_alone(store_db: str | Path) -> None:
    with Store(store_db) as s:
        new_run(s)
    raw_sql(store_db, "UPDATE runs SET owner_host = 'elsewhere', owner_pid = ?", (dead_pid(),))
    Store(store_db).close()
    assert status(store_db) == "running"


def test_show_list_and_clean_say_killed(store_db: str | Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(store_db) as s:
        new_run(s)
    raw_sql(store_db, "UPDATE runs SET owner_pid = ?", (dead_pid(),))
    from tunbench.host.clean import CleanReport

    monkeypatch.setattr("tunbench.host.clean.clean", lambda force=False: CleanReport())  # the host part: not here
    res = CliRunner().invoke(app, ["clean", "--db", str(store_db)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "tb000001" in res.output and "marked killed" in res.output
    res = CliRunner().invoke(app, ["show", "--list"], env={"COLUMNS": "200", "TUNBENCH_DB": str(store_db)})
    assert res.exit_code == 0, res.output
    assert "killed" in res.output


# ---- db import / export / migrate ------------------------------------------------------------------------


def test_export_then_import_keeps_everything_and_never_duplicates(store_db: str | Path, tmp_path: Path) -> None:
    src = tmp_path / "src.db"
    with Store(src) as s:
        rid = new_run(s, "tbaaaaaa")
        for i in (1, 2):
            s.add_trial(rid, trial(i, 1e9 * i))
        s.finish_run(rid, "done")
    runner = CliRunner()
    for _ in range(2):  # twice: the second adds nothing
        res = runner.invoke(app, ["db", "import", str(src), "--db", str(store_db)])
        assert res.exit_code == 0, res.output
    assert "nothing to add" in res.output
    with Store(store_db) as s:
        (run,) = s.runs()
        full = s.full_run(run.id)
    assert (full.uid, full.status, len(full.trials)) == ("tbaaaaaa", "done", 2)
    t2 = full.trials[1]
    assert t2.metrics["throughput_bps"] == 2e9 and t2.series["throughput_bps.up"] == [(1.0, 2e9), (2.0, 2.2e9)]
    assert t2.streams == [(5, "up", 1e9, 3), (7, "up", 1e9, None)] and t2.artifacts == {"iperf3.json": b'{"x": 1}'}
    # the measured window, in the store's `duration_s` column
    assert t2.window_s == 3.0 and raw_sql(store_db, "SELECT duration_s FROM trials WHERE seq = 2") == [(3.0,)]
    out = tmp_path / "out.db"
    res = runner.invoke(app, ["db", "export", str(out), "--db", str(store_db)])
    assert res.exit_code == 0, res.output
    with Store(out) as s:
        back = s.full_run(s.runs()[0].id)
    assert [(t.seq, t.metrics, t.series, t.streams, t.artifacts) for t in back.trials] == [
        (t.seq, t.metrics, t.series, t.streams, t.artifacts) for t in full.trials
    ]


def test_import_json_export_and_a_spool_merges_by_uid(store_db: str | Path, tmp_path: Path) -> None:
    with Store(store_db) as s:  # the run as the server kept it: 2 trials, then its writer died
        rid = new_run(s, "tbbbbbbb")
        s.add_trial(rid, trial(1))
        s.add_trial(rid, trial(2))
    raw_sql(store_db, "UPDATE runs SET status = 'killed'")
    with Store(tmp_path / "spool.db") as sp:  # the rest, as the spool kept it
        rid = new_run(sp, "tbbbbbbb")
        sp.add_trial(rid, trial(3))
        sp.finish_run(rid, "done")
        doc = json_format.render(sp.find_run(None))
    (tmp_path / "run.json").write_text(doc)
    res = CliRunner().invoke(app, ["db", "import", str(tmp_path / "run.json"), "--db", str(store_db)])
    assert res.exit_code == 0, res.output
    assert "added the 1 trial(s) it lacked" in res.output
    res = CliRunner().invoke(app, ["db", "import", str(tmp_path / "spool.db"), "--db", str(store_db)])
    assert "nothing to add" in res.output
    with Store(store_db) as s:
        run = s.find_run("tbbbbbbb")
    assert run.status == "done" and [t.seq for t in run.trials] == [1, 2, 3]


def test_db_migrate(store_db: str | Path) -> None:
    res = CliRunner().invoke(app, ["db", "migrate", "--db", str(store_db)])
    assert res.exit_code == 0 and f"created a tunbench store (schema {SCHEMA_VERSION})" in res.output, res.output
    res = CliRunner().invoke(app, ["db", "migrate", "--db", str(store_db)])
    assert f"at schema {SCHEMA_VERSION} already" in res.output


# ---- PostgreSQL only -------------------------------------------------------------------------------------


def test_one_schema_two_dialects(pg_url: str) -> None:
    Store(pg_url).close()
    cols = raw_sql(
        pg_url,
        "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = 'public'",
    )
    types = {(t, c): d for t, c, d in cols}
    assert types[("runs", "owner_started")] == "double precision"  # REAL is 4 bytes in PostgreSQL
    assert types[("artifacts", "data")] == "bytea"
    assert set(PG_DDL) == {"INTEGER PRIMARY KEY", "BLOB", "REAL"}
    assert redact("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert redact("postgresql://h/db?user=u&password=secret") == "postgresql://h/db?user=u&password=***"


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tunbench.results import TrialRecord
    from tunbench.store.db import Store
    url, who, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    while not go.exists():
        time.sleep(0.01)
    with Store(url) as s:
        rid = s.create_run(uid=f"tbc0ffe{who}", name=f"w{who}", tunbench_version="0", provenance={},
                           scenario_text="", scenario_hash="", scenario={})
        def other_has(trials):  # the other writer's run exists and holds at least `trials` trials
            other = [r for r in s.runs() if r.uid != f"tbc0ffe{who}"]
            return bool(other) and len(s.trials(other[0].id)) >= trials
        for seq in range(1, 41):
            # two barriers, so the writes overlap however the scheduler runs the two processes: go on only
            # once the other writer has its run, and again halfway once it has written its first half
            if seq in (2, 21):
                deadline = time.monotonic() + 60
                while not other_has(0 if seq == 2 else 20) and time.monotonic() < deadline:
                    time.sleep(0.01)
            s.add_trial(rid, TrialRecord(seq=seq, tunnel=f"t{who}", label=f"t{who}", profile="lan",
                workload="iperf3", flows=1, direction="up", repetition=1, params={"who": who}, started_at="t",
                metrics={"who": float(who), "seq": float(seq)},
                series={"s": [(float(i), float(who * 1000 + seq)) for i in range(20)]}))
        s.finish_run(rid, "done")
    """
)


def test_two_writers_at_once_lose_and_mix_nothing(pg_url: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, pg_url, str(who), str(go)], env=env, stderr=subprocess.PIPE)
        for who in (1, 2)
    ]
    time.sleep(1.0)  # both importing and waiting, then: go (each also creates the store if it is first)
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    with Store(pg_url) as s:
        runs = s.runs()
        assert sorted(r.uid for r in runs) == ["tbc0ffe1", "tbc0ffe2"] and all(r.status == "done" for r in runs)
        for r in runs:
            who = int(r.uid[-1])
            trials = s.trials(r.id)
            assert [t.seq for t in trials] == list(range(1, 41))
            assert all(t.tunnel == f"t{who}" and t.metrics == {"who": who, "seq": t.seq} for t in trials)
            assert all(t.series["s"] == [(float(i), float(who * 1000 + t.seq)) for i in range(20)] for t in trials)
    # the writes did overlap: in id order (the database's sequence), the two runs' trials interleave
    ids = raw_sql(pg_url, "SELECT run_id FROM trials ORDER BY id")
    assert sum(a != b for (a,), (b,) in itertools.pairwise(ids)) >= 2, "the two writers did not overlap"


def test_server_gone_mid_run_spools_the_rest(tmp_path: Path) -> None:
    """The socket-URL form (no host, `?` and `&` in it): the error's recovery command, pasted into a shell,
    brings the spool back into that server (redact once turned `postgresql:///x` into the SQLite path
    `postgresql:/x`). The spool is a new file: one planted under the old, predictable name is not used."""
    server = PgServer().start()
    try:
        url = f"postgresql:///postgres?host={server.dir}&user={SUPERUSER}"
        victim = tmp_path / "victim"
        victim.write_text("precious")
        (tmp_path / "tunbench-spool-tbdddddd.db").symlink_to(victim)
        with Store(url, spool_dir=tmp_path) as s:
            rid = new_run(s, "tbdddddd")
            s.add_trial(rid, trial(1))
            s.add_trial(rid, trial(2))
            server.stop("fast")  # the server goes away between two trials
            s.add_trial(rid, trial(3))
            s.add_trial(rid, trial(4))
            s.finish_run(rid, "done")
            lost = s.lost
        assert isinstance(lost, StoreLost)
        assert victim.read_text() == "precious"
        (spool,) = tmp_path.glob("tunbench-spool-tbdddddd-*.db")
        msg = str(lost)
        assert "\n" not in msg and "lost the result store" in msg and "first 2 trial(s)" in msg
        assert f"lost the result store {url} during run tbdddddd" in msg
        command = shlex.split(msg.split("`")[-2])  # as a shell reads what the user pastes
        assert command[:3] == ["tunbench", "db", "import"] and command[3] == str(spool)
        server.start()
        assert [r[0] for r in raw_sql(url, "SELECT seq FROM trials ORDER BY seq")] == [1, 2]  # committed, kept
        with Store(spool) as sp:
            assert [t.seq for t in sp.find_run("tbdddddd").trials] == [3, 4]
        res = CliRunner().invoke(app, command[1:])
        assert res.exit_code == 0, res.output
        with Store(url) as s:
            run = s.find_run("tbdddddd")
        assert [t.seq for t in run.trials] == [1, 2, 3, 4] and run.status == "done"
        assert not (Path.cwd() / "postgresql:").exists()
    finally:
        server.remove()


def test_a_server_that_is_down_is_one_clear_error(tmp_path: Path) -> None:
    server = PgServer().start()
    url = server.url()
    server.remove()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run(
        [sys.executable, "-m", "tunbench", "show", "--list", "--db", url], capture_output=True, text=True, env=env
    )
    assert res.returncode == 6  # an error stopped it (EXIT_ERROR), never 1 ("regressed")
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"Error: cannot open result store {url}: connection"), line
