"""CPU placement in host.cgroup.RoleCgroup ([run] cpuset), on fake cgroup trees in a temporary directory (no real
cgroup is touched): the CPU-list parser, the split layout, what is written on v1 and v2 (cpuset.cpus and mems
before any task joins; the v2 root's settings never written), which cgroups each kind of process joins, and
that every cgroup made is in the ledger first and removed (and dropped) at the end."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tunbench.errors import TrialError
from tunbench.host import cgroup
from tunbench.host.cgroup import RoleCgroup, parse_cpu_list, split_placement
from tunbench.host.proc import joined_argv


class Ledger:
    def __init__(self) -> None:
        self.cgroups: list[str] = []
        self.log: list[str] = []

    def add_cgroup(self, path: str) -> None:
        assert not Path(path).exists(), "recorded before it exists"
        self.cgroups.append(path)
        self.log.append(f"add {Path(path).name}")

    def drop_cgroup(self, path: str) -> None:
        self.cgroups.remove(path)
        self.log.append(f"drop {Path(path).name}")


@pytest.fixture
def removed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """remove_cgroup on a fake tree: the directory and the files we wrote (a real cgroup's are virtual)."""
    gone: list[str] = []

    def remove(path: Path, timeout_s: float = 3.0) -> bool:
        shutil.rmtree(path)
        gone.append(path.name)
        return True

    monkeypatch.setattr(cgroup, "remove_cgroup", remove)
    return gone


def v1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    acct, cpuset = tmp_path / "cpuacct", tmp_path / "cpuset"
    acct.mkdir()
    cpuset.mkdir()
    (cpuset / "cpuset.cpus").write_text("0-1\n")
    (cpuset / "cpuset.mems").write_text("0\n")
    monkeypatch.setattr(cgroup, "cgroup_root", lambda: ("v1", acct))
    monkeypatch.setattr(cgroup, "V1_CPUSET", cpuset)
    return acct, cpuset


def v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, controllers: str) -> Path:
    root = tmp_path / "unified"
    root.mkdir()
    (root / "cgroup.subtree_control").write_text(controllers + "\n")
    monkeypatch.setattr(cgroup, "cgroup_root", lambda: ("v2", root))
    monkeypatch.setattr(cgroup, "V1_CPUSET", tmp_path / "no-v1-cpuset")
    return root


def test_cpu_lists_parse_like_the_kernels() -> None:
    assert parse_cpu_list("0") == [0]
    assert parse_cpu_list("0-2,4") == [0, 1, 2, 4]
    assert parse_cpu_list(" 3,1-2 ") == [1, 2, 3]
    for bad in ("", "a", "1-", "2-1", "0,,1", "-1"):
        with pytest.raises(ValueError):
            parse_cpu_list(bad)


def test_split_gives_each_side_a_cpu_and_the_emulator_a_third_or_the_servers() -> None:
    assert split_placement([0, 1, 2, 3]) == ({"client": "0", "server": "1", "link": "2"}, "")
    placed, note = split_placement([0, 1])
    assert placed == {"client": "0", "server": "1", "link": "1"}
    assert "shares CPU 1 with the server side" in note
    with pytest.raises(ValueError, match="needs 2 CPUs"):
        split_placement([0])


def test_v1_writes_cpus_and_mems_before_tasks_and_removes_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, removed: list[str]
) -> None:
    acct, cpuset = v1(tmp_path, monkeypatch)
    ledger = Ledger()
    with RoleCgroup("tbabc123-t1-client", ledger, cpus="0") as cg:  # type: ignore[arg-type]
        placed = cpuset / "tbabc123-t1-client"
        assert (placed / "cpuset.cpus").read_text() == "0"
        assert (placed / "cpuset.mems").read_text() == "0"
        # the tunnel's processes: accounted and placed; the traffic generator: placed only
        assert cg.procs_files == [acct / "tbabc123-t1-client" / "cgroup.procs", placed / "cgroup.procs"]
        assert cg.placement_files == [placed / "cgroup.procs"]
        (placed / "cgroup.procs").write_text("41\n42\n")  # the tunnel's and the generator's, in one cpuset
        assert cg.placed_pids() == [41, 42]
        assert sorted(ledger.cgroups) == sorted([str(acct / "tbabc123-t1-client"), str(placed)])
    assert not (acct / "tbabc123-t1-client").exists() and not placed.exists()
    assert ledger.cgroups == [] and sorted(removed) == ["tbabc123-t1-client"] * 2


def test_without_cpus_nothing_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, removed: list[str]) -> None:
    acct, cpuset = v1(tmp_path, monkeypatch)
    ledger = Ledger()
    with RoleCgroup("tbabc123-t1-server", ledger) as cg:  # type: ignore[arg-type]
        assert cg.procs_files == [acct / "tbabc123-t1-server" / "cgroup.procs"]
        assert cg.placement_files == []
    assert not any(cpuset.glob("tb*")) and ledger.log == ["add tbabc123-t1-server", "drop tbabc123-t1-server"]
    # and an emulator's placement without CPUs makes nothing at all
    with RoleCgroup("tbabc123-t1-link", ledger, account=False) as link:  # type: ignore[arg-type]
        assert link.procs_files == [] and link.placement_files == [] and link.placed_pids() == []
    assert ledger.log[2:] == []


def test_the_emulator_joins_its_placement_once_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, removed: list[str]
) -> None:
    acct, cpuset = v1(tmp_path, monkeypatch)
    with RoleCgroup("tbabc123-t1-link", Ledger(), cpus="1", account=False) as link:  # type: ignore[arg-type]
        assert not (acct / "tbabc123-t1-link").exists()  # no accounting cgroup
        link.join(4242)
        assert (cpuset / "tbabc123-t1-link" / "cgroup.procs").read_text() == "4242"


def test_v2_places_the_accounting_cgroup_and_a_load_sibling_without_touching_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, removed: list[str]
) -> None:
    root = v2(tmp_path, monkeypatch, "cpuset cpu io memory pids")
    ledger = Ledger()
    with RoleCgroup("tbabc123-t1-client", ledger, cpus="0") as cg:  # type: ignore[arg-type]
        own, load = root / "tbabc123-t1-client", root / "tbabc123-t1-client-load"
        assert (own / "cpuset.cpus").read_text() == "0" and (load / "cpuset.cpus").read_text() == "0"
        assert not (own / "cpuset.mems").exists()  # v2 inherits the parent's memory nodes
        assert cg.procs_files == [own / "cgroup.procs"]  # one cgroup per process on v2
        assert cg.placement_files == [load / "cgroup.procs"]
        (own / "cgroup.procs").write_text("41\n")
        (load / "cgroup.procs").write_text("42\n41\n")
        assert cg.placed_pids() == [41, 42]  # the tunnel's and the generator's, each once
        (own / "cgroup.procs").unlink()
        (load / "cgroup.procs").unlink()
    assert (root / "cgroup.subtree_control").read_text() == "cpuset cpu io memory pids\n"
    assert sorted(p.name for p in root.iterdir()) == ["cgroup.subtree_control"]
    assert ledger.cgroups == []


def test_v2_without_cpuset_at_the_root_is_refused_not_enabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, removed: list[str]
) -> None:
    root = v2(tmp_path, monkeypatch, "cpu io memory pids")
    ledger = Ledger()
    with pytest.raises(TrialError, match="no cpuset controller"):
        RoleCgroup("tbabc123-t1-client", ledger, cpus="0").__enter__()  # type: ignore[arg-type]
    assert (root / "cgroup.subtree_control").read_text() == "cpu io memory pids\n"
    assert ledger.cgroups == [] and not any(root.glob("tb*"))


def test_a_failed_placement_removes_what_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, removed: list[str]
) -> None:
    acct, cpuset = v1(tmp_path, monkeypatch)
    (cpuset / "cpuset.mems").unlink()  # reading the parent's mems fails
    ledger = Ledger()
    with pytest.raises(TrialError, match="could not place"):
        RoleCgroup("tbabc123-t1-client", ledger, cpus="0").__enter__()  # type: ignore[arg-type]
    assert ledger.cgroups == [] and not any(acct.glob("tb*")) and not any(cpuset.glob("tb*"))


def test_processes_join_every_cgroup_before_exec() -> None:
    assert joined_argv(None, ["iperf3", "-c", "x"]) == ["iperf3", "-c", "x"]
    argv = joined_argv([Path("/a/cgroup.procs"), Path("/b/cgroup.procs")], ["iperf3", "-s"])
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["2", "/a/cgroup.procs", "/b/cgroup.procs", "iperf3", "-s"]


def test_the_refusal_names_what_the_host_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a lone cgroup2 mount on a host whose cpuset is bound to v1 (or compiled out): the root does not offer it
    root = v2(tmp_path, monkeypatch, "")
    (root / "cgroup.controllers").write_text("hugetlb\n")
    why = cgroup.cpuset_refusal()
    assert f"the cgroup v2 root at {root} does not offer the cpuset controller (its controllers: hugetlb" in why
    # offered but not handed to the children: tunbench says how, and does not do it
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    why = cgroup.cpuset_refusal()
    assert "does not hand cpuset to its children (its cgroup.subtree_control: empty)" in why
    assert f"echo +cpuset > {root}/cgroup.subtree_control" in why
    assert (root / "cgroup.subtree_control").read_text() == "\n"
    (root / "cgroup.subtree_control").write_text("cpuset cpu\n")
    assert cgroup.cpuset_refusal() == ""


def test_v1_cpuset_can_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v1(tmp_path, monkeypatch)
    assert cgroup.cpuset_refusal() == ""


def test_a_host_without_cpuset_refuses_split_at_plan_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before the run starts, naming the key and the reason: not a failed trial per case."""
    import sys

    from tunbench import cli

    root = v2(tmp_path, monkeypatch, "")
    (root / "cgroup.controllers").write_text("hugetlb\n")
    monkeypatch.setattr(cgroup, "online_cpus", lambda: [0, 1])
    monkeypatch.setattr(sys, "argv", ["tunbench", "run", "--dry-run", "-t", "socat", "--cpuset", "split"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    err = " ".join(capsys.readouterr().err.split())
    assert exit_.value.code == 2, err
    assert "run.cpuset: no cpuset controller to place roles on CPUs: the cgroup v2 root" in err
    assert 'set cpuset = "off"' in err
