"""A run's links in a namespace that is not its own (a host's, where an agent placed a role): the ledger
records them (a prefix and a namespace) before any exists, the agent drops the record only once they are
removed, and `tunbench clean` removes them from a dead ledger, and never a live remote run's sockets. The
agent's file requests stay in the trial's directory."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tunbench.errors import TunbenchError
from tunbench.host import clean as clean_mod
from tunbench.host import ledger as state
from tunbench.host import netns as netns_mod
from tunbench.host.clean import CleanReport, clean_ledger
from tunbench.host.ledger import LinkRecord, load_ledger
from tunbench.host.place import LocalPlace
from tunbench.remote import agent as agent_mod


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    return tmp_path / "state"


# ---- the ledger's link records -----------------------------------------------------------------------


def test_links_are_recorded_before_they_exist_and_survive_a_reload(state_dir: Path) -> None:
    ledger = state.Ledger.open("tbabc123")
    rec = ledger.add_links("tbdef456", None)  # another run's prefix: the controller's
    second = ledger.add_links("tbdef456", None)  # a second place at the same namespace records it again
    named = ledger.add_links("tbdef456", "tbdef456-t1c")
    on_disk = json.loads(ledger.path.read_text())
    assert on_disk["links"] == [
        {"prefix": "tbdef456", "netns": None},
        {"prefix": "tbdef456", "netns": None},
        {"prefix": "tbdef456", "netns": "tbdef456-t1c"},
    ]
    assert load_ledger(ledger.path).links == [rec, second, named]
    ledger.drop_links(rec)
    ledger.drop_links(named)
    ledger.close()  # one record is left: the ledger stays for `tunbench clean`
    assert load_ledger(ledger.path).links == [LinkRecord("tbdef456", None)]
    ledger.drop_links(second)
    ledger.close()
    assert not ledger.path.exists()


@pytest.mark.parametrize("prefix", ["", "eth", "tbabc12", "tbABC123", "tbabc123-x", "lo"])
def test_only_a_run_prefix_can_be_claimed(state_dir: Path, prefix: str) -> None:
    ledger = state.Ledger.open("tbabc123")
    with pytest.raises(ValueError, match="not a run prefix"):
        ledger.add_links(prefix, None)
    assert "links" not in json.loads(ledger.path.read_text())  # nothing recorded, nothing written


def test_a_ledger_written_before_link_records_still_loads(state_dir: Path) -> None:
    state_dir.mkdir()
    path = state_dir / "tbabc123.json"
    path.write_text(json.dumps({"prefix": "tbabc123", "owner_pid": 1, "owner_create_time": 0.0, "netns": [],
                                "procs": [], "paths": [], "cgroups": []}))  # fmt: skip
    assert load_ledger(path).links == []


# ---- clean ---------------------------------------------------------------------------------------------


def test_clean_removes_the_recorded_links_of_a_dead_ledger(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = state.Ledger.open("tbabc123")
    ledger.add_links("tbdef456", None)
    ledger.add_links("tbdef456", "elsewhere")  # a namespace that exists
    ledger.add_links("tbdef456", "gone")  # one that does not: never opened (that would create it)
    calls: list[tuple[str | None, str]] = []

    def remove(ns: str | None, prefix: str) -> list[str]:
        calls.append((ns, prefix))
        return [f"{prefix}-tc"] if ns is None else []

    monkeypatch.setattr(clean_mod, "remove_prefixed_links", remove)
    monkeypatch.setattr(clean_mod.netns, "listnetns", lambda: ["elsewhere"])
    monkeypatch.setattr(clean_mod, "_kill_recorded", lambda ledger: 0)
    report = clean_ledger(ledger)
    assert calls == [(None, "tbdef456"), ("elsewhere", "tbdef456")]
    assert report.links == ["tbdef456-tc"] and not report.empty()
    assert "1 link(s)" in report.summary()


def test_a_report_with_links_only_is_not_empty_and_crosses_the_channel() -> None:
    assert CleanReport().empty()
    rep = CleanReport(links=["tbdef456-tc"])
    assert not rep.empty()
    assert CleanReport(**json.loads(json.dumps(asdict(rep)))) == rep  # what `clean --hosts` gets back


def test_remove_prefixed_links_never_opens_a_missing_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns_mod, "NETNS_DIR", tmp_path)

    def no_netlink(*a: object, **k: object) -> None:
        raise AssertionError("a netlink socket was opened")

    monkeypatch.setattr(netns_mod, "IPRoute", no_netlink)
    assert netns_mod.remove_prefixed_links("tbabc123-nothere", "tbabc123") == []
    assert netns_mod.remove_prefixed_links(None, "") == []


# ---- the agent records a place's links ----------------------------------------------------------------


@contextlib.contextmanager
def fake_workdir(ledger: Any, tag: str) -> Iterator[Path]:
    yield Path("/nonexistent") / tag


def test_the_agent_records_a_places_links_first_and_drops_them_once_removed(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    removed: list[tuple[str | None, str]] = []
    fail = {"now": False}

    def remove(ns: str | None, prefix: str) -> list[str]:
        removed.append((ns, prefix))
        return []

    def still_there(ns: str | None, prefix: str) -> list[str]:  # a link the kernel would not delete
        return [f"{prefix}-tc"] if fail["now"] else []

    monkeypatch.setattr(agent_mod, "workdir", fake_workdir)
    monkeypatch.setattr(agent_mod, "remove_prefixed_links", remove)
    monkeypatch.setattr(agent_mod, "prefixed_links", still_there)
    ledger = state.Ledger.open("tbabc123")
    with contextlib.ExitStack() as stack:
        agent = agent_mod.Agent(ledger, stack)
        place = agent.op_place_open(tag="t1c", netns=None, roles=[], link_prefix="tbdef456")["place"]
        assert json.loads(ledger.path.read_text())["links"] == [{"prefix": "tbdef456", "netns": None}]
        agent.op_place_close(place)
        assert removed == [(None, "tbdef456")] and ledger.links == []
        # a link that survives its removal keeps the record: `tunbench clean` tries again
        place = agent.op_place_open(tag="t2c", netns=None, roles=[], link_prefix="tbdef456")["place"]
        fail["now"] = True
        with pytest.raises(TunbenchError, match="could not remove the run's links tbdef456-tc"):
            agent.op_place_close(place)
        assert ledger.links == [LinkRecord("tbdef456", None)]
        # the controller's prefix must be a run prefix: nothing else is claimed, nothing is opened
        with pytest.raises(ValueError, match="not a run prefix"):
            agent.op_place_open(tag="t3c", netns=None, roles=[], link_prefix="eth")
    assert agent.places == {}


def test_a_ledger_without_links_reads_as_before_and_unknown_keys_are_ignored(state_dir: Path) -> None:
    ledger = state.Ledger.open("tbabc124")
    assert "links" not in json.loads(ledger.path.read_text())  # an older tunbench on the host still reads it
    data = {**json.loads(ledger.path.read_text()), "from_a_later_version": [1]}
    ledger.path.write_text(json.dumps(data))
    assert load_ledger(ledger.path).prefix == "tbabc124"


def test_clean_on_an_agent_host_keeps_a_live_remote_runs_wireguard_sockets(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's tunnels carry the controller's prefix (tbdef456), not the agent's (tbabc123): while the
    agent lives (its ledger's owner is this test's process), `tunbench clean` on its host removes none of
    them; a socket of a run nobody owns goes."""
    sockets, tmp = tmp_path / "wireguard", tmp_path / "tmp"
    sockets.mkdir()
    tmp.mkdir()
    for name in ("tbdef456-t3c.sock", "tbabc123-x.sock", "tb999999-t1c.sock"):
        (sockets / name).touch()
    monkeypatch.setattr(clean_mod, "WG_SOCKETS", sockets)
    monkeypatch.setattr(clean_mod, "STATE_DIR", state_dir)
    monkeypatch.setattr(clean_mod.tempfile, "gettempdir", lambda: str(tmp))
    monkeypatch.setattr(clean_mod.netns, "listnetns", lambda: [])
    monkeypatch.setattr(clean_mod, "_cgroup_dirs", lambda: [])
    agent_ledger = state.Ledger.open("tbabc123")  # live: this process owns it
    agent_ledger.add_links("tbdef456", None)  # a place of the controller's run tbdef456 is open here
    report = clean_mod.clean()
    assert sorted(p.name for p in sockets.iterdir()) == ["tbabc123-x.sock", "tbdef456-t3c.sock"]
    assert report.paths == [str(sockets / "tb999999-t1c.sock")] and report.skipped_live == ["tbabc123"]


# ---- the agent's file requests stay in the trial's directory ---------------------------------------------


def test_the_agents_file_requests_stay_in_the_trials_directory(state_dir: Path, tmp_path: Path) -> None:
    """The agent runs as root: `put_files`, `read` and `exists` name paths in the trial's directory, checked
    on the agent's side (`workdir / "/etc/x"` is /etc/x); a file probe may also ask under /run."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("root's")
    (work / "link").symlink_to(outside)
    with contextlib.ExitStack() as stack:
        agent = agent_mod.Agent(state.Ledger.open("tbabc123"), stack)
        agent.places["p"] = agent_mod._PlaceState(LocalPlace(None, agent.ledger, work), contextlib.ExitStack())
        agent.op_put_files("p", {"keys/a.key": [base64.b64encode(b"k").decode(), 0o600]})
        assert (work / "keys/a.key").read_bytes() == b"k" and agent.op_exists("p", "keys/a.key")
        assert base64.b64decode(agent.op_read("p", "keys/a.key") or "") == b"k"
        for bad in (str(outside / "x"), "../outside/x", "keys/../../outside/x", "link/x", ""):
            with pytest.raises(TunbenchError, match="trial's directory"):
                agent.op_put_files("p", {"ok": ["", 0o600], bad: [base64.b64encode(b"pwned").decode(), 0o644]})
        assert not (work / "ok").exists() and sorted(p.name for p in outside.iterdir()) == ["secret"]
        for bad in (str(outside / "secret"), "../outside/secret", "link/secret", "/etc/shadow"):
            with pytest.raises(TunbenchError, match="trial's directory"):
                agent.op_read("p", bad)
        for bad in ("../outside/secret", "link/secret", "/etc/shadow", "/run/../etc/shadow", "/run"):
            with pytest.raises(TunbenchError, match="trial's directory"):
                agent.op_exists("p", bad)
        assert agent.op_exists("p", "/run/tunbench-no-such.sock") is False  # WireGuard's UAPI socket's kind
