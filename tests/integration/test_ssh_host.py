"""The ssh-forward adapter touches nothing of the host (issue 9, item 15): sshd's privilege-separation
directory /run/sshd lives in a mount namespace of sshd's own, so a trial never creates it on the host."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import run_json

PRIVSEP = Path("/run/sshd")


@contextlib.contextmanager
def host_without_privsep_dir() -> Iterator[None]:
    """The host as it is without /run/sshd: an existing empty one is removed for the test, then put back
    as it was (mode and owner), and one the trial created is removed again; a non-empty one is never
    touched."""
    if not PRIVSEP.exists():
        try:
            yield
        finally:
            with contextlib.suppress(OSError):  # one a failing trial made: the host gets its state back
                PRIVSEP.rmdir()
        return
    if not PRIVSEP.is_dir() or any(PRIVSEP.iterdir()):
        pytest.skip("/run/sshd exists and is not an empty directory: not removing the host's files")
    st = PRIVSEP.stat()
    PRIVSEP.rmdir()
    try:
        yield
    finally:
        if PRIVSEP.is_dir():
            os.chmod(PRIVSEP, st.st_mode & 0o7777)
        else:
            PRIVSEP.mkdir(mode=st.st_mode & 0o7777)
        os.chown(PRIVSEP, st.st_uid, st.st_gid)
        os.chmod(PRIVSEP, st.st_mode & 0o7777)


def test_ssh_forward_leaves_no_run_sshd(tmp_path: Path) -> None:
    with host_without_privsep_dir():
        res, doc = run_json(
            tmp_path,
            "-t",
            "ssh-forward",
            "--no-direct",
            "--duration",
            "1",
            "--omit",
            "0",
            "--repeat",
            "1",
            "--direction",
            "up",
        )
        created = PRIVSEP.exists()
    assert res.returncode == 0, res.stdout + res.stderr
    trials = [t for t in doc["trials"] if t["label"] == "ssh-forward"]
    assert trials and all(t["status"] == "ok" for t in trials), [t["error"] for t in trials]
    assert all(t["throughput_bps"] > 1e6 for t in trials)
    assert not created, "the ssh-forward trial created /run/sshd on the host"
