"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl in a temp dir, run as `nobody` (root cannot
run postgres), listening only on a Unix socket in that dir (listen_addresses=''), stopped and removed
afterwards. No mock: the store's PostgreSQL tests talk to this real server.

If it cannot start, it raises (the test errors): a PostgreSQL test never skips."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

PG_BIN = Path(os.environ.get("TUNBENCH_PG_BIN", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "tunbench"
_names = itertools.count(1)


class PgServer:
    def __init__(self, *, fast: bool = True) -> None:
        self.fast = fast  # fsync off: for tests, not for measuring
        self.dir = Path(tempfile.mkdtemp(prefix="tb-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.running = False

    def _as_nobody(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", *args]
        if os.geteuid() != 0:
            cmd = list(args)  # not root: run as ourselves
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)

    def start(self) -> PgServer:
        if not (PG_BIN / "initdb").exists():
            raise RuntimeError(f"PostgreSQL is not installed ({PG_BIN}/initdb missing): make deps")
        if os.geteuid() == 0:
            shutil.chown(self.dir, "nobody", "nogroup")
        try:
            if not self.data.exists():
                self._as_nobody(
                    str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", SUPERUSER, "-E", "UTF8",
                    "--no-sync", "--no-instructions",
                )  # fmt: skip
            opts = f"-k {self.dir} -c listen_addresses='' -c max_connections=40"
            if self.fast:
                opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            self._as_nobody(
                str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-o", opts, "start"
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            log = self.log.read_text() if self.log.exists() else ""
            out = getattr(e, "stdout", "") or ""
            err = getattr(e, "stderr", "") or ""
            self.remove()
            raise RuntimeError(f"the test PostgreSQL server did not start: {e}\n{out}\n{err}\n{log}") from e
        self.running = True
        return self

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@/{dbname}?host={self.dir}"

    def sql(self, statement: str, dbname: str = "postgres") -> list[tuple[object, ...]]:
        import psycopg

        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            cur = conn.execute(statement)
            return list(cur.fetchall()) if cur.description else []

    def new_database(self) -> str:
        name = f"t{os.getpid()}_{next(_names)}"
        self.sql(f"CREATE DATABASE {name}")
        return name

    def stop(self, mode: str = "fast") -> None:
        if self.running:
            self._as_nobody(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)
            self.running = False

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


def raw_sql(db: str | Path, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Run one statement on a store behind tunbench's back (either backend; `?` parameters)."""
    if isinstance(db, str) and db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            cur = conn.execute(statement.replace("?", "%s"), params)
            return list(cur.fetchall()) if cur.description else []
    import sqlite3

    con = sqlite3.connect(db)
    try:
        with con:
            return list(con.execute(statement, params).fetchall())
    finally:
        con.close()
