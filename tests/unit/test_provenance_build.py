"""What a run records for `tunbench history`: the machine identity, the build's commit and branch (--commit,
--branch), and a tunnel's own commit= (recorded, never passed to the adapter)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunbench import metadata
from tunbench.cli import app
from tunbench.errors import ConfigError
from tunbench.tunnels.registry import parse_ref


def test_machine_identity_is_stable_and_derived_for_old_runs() -> None:
    a = metadata.machine_identity("bench-1", "Test CPU", "6.1.0")
    assert a == metadata.machine_identity("bench-1", "Test CPU", "6.1.0") and len(a["id"]) == 12
    assert a["id"] != metadata.machine_identity("bench-1", "Test CPU", "6.2.0")["id"]
    old = {"host": {"hostname": "bench-1", "kernel": "6.1.0"}, "cpu": {"model": "Test CPU"}}
    assert metadata.machine_of(old) == a
    assert metadata.machine_of({**old, "machine": {**a, "hostname": "renamed"}})["hostname"] == "renamed"
    collected = metadata.collect()
    assert collected["machine"] == metadata.machine_of({k: v for k, v in collected.items() if k != "machine"})


def test_a_tunnel_commit_is_the_references_own_not_an_adapter_parameter() -> None:
    ref = parse_ref("socat[label=new,commit=abc123]")
    assert ref.commit == "abc123" and ref.label == "new"
    assert "commit" not in ref.params and "commit" not in ref.merged_params()
    assert parse_ref("socat[commit=abc123]").label == "socat"  # a label's history runs across commits
    with pytest.raises(ConfigError, match="empty"):
        parse_ref("socat[commit=]")
    with pytest.raises(ConfigError, match="known: .*commit"):
        parse_ref("socat[nope=1]")


def test_run_records_commit_branch_and_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TUNBENCH_DB", raising=False)
    runner = CliRunner()
    args = ["run", "-t", "socat[label=new,commit=abc123]", "--commit", "def456", "--branch", "main", "--dry-run"]
    res = runner.invoke(app, args, terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "build: commit def456, branch main, new at commit abc123" in res.output
    bad = runner.invoke(app, ["run", "-t", "socat", "--commit", "a b", "--dry-run"])
    assert bad.exit_code == 2 and "no spaces" in bad.output
    assert list(tmp_path.iterdir()) == []

    from tunbench import session
    from tunbench.config.load import load_scenario, with_overrides

    monkeypatch.setattr("tunbench.session.execution.tunnel_version", lambda ref: "9.9")
    sc, _, source = load_scenario(None)
    sc = with_overrides(sc, {"run": {"tunnels": ["socat[label=new,commit=abc123]"], "direct": False}})
    plan = session.prepare(sc, source, dry_run=True, build=("def456", "main"))
    prov = session.provenance(plan)
    assert prov["build"] == {"commit": "def456", "branch": "main"}
    assert prov["tunnels"]["new"]["commit"] == "abc123" and prov["tunnels"]["new"]["version"] == "9.9"
    assert "commit" not in prov["tunnels"]["new"]["params"]
    assert prov["machine"]["id"] == metadata.machine_of({"host": prov["host"], "cpu": prov["cpu"]})["id"]
    assert session.provenance(dataclasses.replace(plan, commit="", branch=""))["build"] == {}
