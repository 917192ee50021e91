"""The cores axis (docs/scaling.md): how each cores value places the sides, how it crosses the cases, and
what is refused before anything runs, naming the flag or the file's line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_run_cli import main, sandbox  # noqa: F401 (a fixture)
from tunbench import plan
from tunbench.host.cgroup import cores_placement
from tunbench.link.profile import find_profile
from tunbench.tunnels.registry import parse_ref


def test_one_core_per_side_splits_a_two_cpu_host_and_two_share_it() -> None:
    assert cores_placement([0, 1], 1) == (
        {"client": "0", "server": "1", "link": "1"},
        "the emulator shares CPU 1 with the server side",
    )
    placed, note = cores_placement([0, 1], 2)
    assert placed == {"client": "0,1", "server": "0,1", "link": "0,1"}
    assert note.startswith("both sides share CPU 0,1")


def test_a_larger_host_gives_each_side_its_own_cpus_while_they_last() -> None:
    assert cores_placement(list(range(8)), 3) == ({"client": "0,1,2", "server": "5,6,7", "link": "3,4"}, "")
    placed, note = cores_placement(list(range(8)), 5)
    assert (placed["client"], placed["server"]) == ("0,1,2,3,4", "3,4,5,6,7")
    assert note.startswith("both sides share CPU 3,4")
    assert cores_placement([0, 1], 1, emulator=False) == ({"client": "0", "server": "1"}, "")
    assert cores_placement([0, 1], 2, emulator=False)[1] == "both sides share CPU 0,1, with their traffic generators"


def test_more_cores_than_cpus_is_refused() -> None:
    with pytest.raises(ValueError, match=r"3 core\(s\) per side, this host offers 2 CPU\(s\) \(0,1\)"):
        cores_placement([0, 1], 3)


def test_the_axis_crosses_the_pair_workloads_and_separates_their_blocks() -> None:
    refs = [parse_ref("socat"), parse_ref("direct")]
    lan = find_profile("lan")
    cases = plan.expand(refs, [lan], [1, 4], ["up"], ["iperf3", "latency"], cores=[1, 2])
    iperf = [c for c in cases if c.workload == "iperf3"]
    assert sorted({(c.flows, c.cores) for c in iperf}) == [(1, 1), (1, 2), (4, 1), (4, 2)]
    assert {c.cores for c in cases if c.workload == "latency"} == {1, 2}  # a pair workload too
    assert len({plan.block_key(c) for c in iperf}) == 4  # tunnels are paired at one cores value only
    assert {c.title for c in iperf if c.label == "socat" and c.flows == 1} == {
        "socat · lan · up · 1 flow · 1 core",
        "socat · lan · up · 1 flow · 2 cores",
    }
    assert {c.cores for c in plan.expand(refs, [lan], [1], ["up"], ["iperf3"])} == {0}  # off the axis


@pytest.fixture
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tunbench.sites.cpuset.online_cpus", lambda: [0, 1])
    monkeypatch.setattr("tunbench.sites.cpuset.cpuset_refusal", lambda: "")


def test_the_dry_run_shows_each_placement(
    sandbox: Path,  # noqa: F811
    two_cpus: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = main(
        ["run", "--dry-run", "-t", "socat", "--cores", "1,2", "--direction", "up"], capsys, monkeypatch
    )
    assert code == 0, out + err
    text = " ".join(out.split())
    assert "cores 1: client side on CPU 0, server side on CPU 1" in text
    assert "cores 2: client side on CPU 0,1, server side on CPU 0,1 (both sides share CPU 0,1" in text
    assert "socat · lan · up · 1 flow · 2 cores" in text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--cores", "1,3"],
            "command line: --cores: 3 core(s) per side, this host offers 2 CPU(s) (0,1): give cores of 1 to 2",
        ),
        (["--cores", "1", "--cpuset", "split"], "--cores: the cores axis places each side itself"),
        (
            ["--cores", "1", "-w", "clients"],
            "--cores: the cores axis places the client/server pair; workload 'clients'",
        ),
        (["--cores", "0"], "cores must be between 1 and 1024"),
    ],
)
def test_what_cannot_be_placed_is_refused_naming_the_flag(
    sandbox: Path,  # noqa: F811
    two_cpus: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    says: str,
) -> None:
    code, _out, err = main(["run", "--dry-run", "-t", "wireguard-go", *args], capsys, monkeypatch)
    assert code == 2 and says in " ".join(err.split()), err


def test_a_scenario_file_is_named_by_its_line(
    sandbox: Path,  # noqa: F811
    two_cpus: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text('[run]\ntunnels = ["socat"]\n\n[workload]\nflows = [1]\ncores = [1, 4]\n')
    code, _out, err = main(["run", "--dry-run", str(scenario)], capsys, monkeypatch)
    assert code == 2 and f"{scenario}:6: workload.cores: 4 core(s) per side" in " ".join(err.split()), err


def test_on_hosts_the_dry_run_says_the_hosts_choose(
    sandbox: Path,  # noqa: F811
    two_cpus: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hosts = Path(__file__).parents[2] / "examples" / "hosts" / "lab.ini"
    code, out, err = main(
        ["run", "--dry-run", "-t", "socat", "--hosts", str(hosts), "--cores", "1,2"], capsys, monkeypatch
    )
    assert code == 0, err
    assert "cores on hosts: 1, 2, each at most a host's CPUs less one for the generator" in " ".join(out.split())


def test_on_hosts_a_workload_off_the_pair_is_refused(
    sandbox: Path,  # noqa: F811
    two_cpus: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hosts = Path(__file__).parents[2] / "examples" / "hosts" / "lab.ini"
    code, _out, err = main(
        ["run", "--dry-run", "-t", "socat", "--hosts", str(hosts), "--cores", "1", "-w", "connect"],
        capsys,
        monkeypatch,
    )
    assert code == 2 and "--cores: the cores axis places the client/server pair; workload 'connect'" in " ".join(
        err.split()
    ), err


def test_the_store_and_the_json_export_keep_the_cores(store_db: str | Path) -> None:
    import json
    from dataclasses import replace

    from tests.unit.report_data import run, trial
    from tests.unit.store_data import new_run
    from tunbench.report.compare import run_from_export
    from tunbench.report.exporters import json as json_format
    from tunbench.store.db import Store

    t = replace(trial(1, "socat", 1e9), cores=2)
    with Store(store_db) as s:
        rid = new_run(s)
        s.add_trial(rid, t)
        (back,) = s.trials(rid)
    assert back.cores == 2 and back.case == t.case
    doc = json.loads(json_format.render(run([t])))
    assert doc["trials"][0]["cores"] == 2 and doc["summary"][0]["cores"] == 2
    assert run_from_export(doc).trials[0].cores == 2


def test_on_hosts_one_host_for_both_roles_is_refused(
    sandbox: Path,  # noqa: F811
    two_cpus: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    inv = tmp_path / "one.ini"
    inv.write_text("[client]\nbench1 tunbench_address=10.10.0.1\n\n[server]\nbench1\n")
    code, _out, err = main(
        ["run", "--dry-run", "-t", "socat", "--hosts", str(inv), "--cores", "1"], capsys, monkeypatch
    )
    assert (
        code == 2
        and "--cores: the cores axis on hosts gives each side a host of its own, and bench1 takes both"
        in (" ".join(err.split()))
    ), err
