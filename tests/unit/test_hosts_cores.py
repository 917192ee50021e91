"""The cores axis on hosts (sites/hosts_cores.py): how far each host's CPUs allow it, what is refused and
how it is said, and where each side's tunnel, generator and emulator go."""

from __future__ import annotations

import pytest

from tunbench.errors import ConfigError
from tunbench.sites.hosts_cores import HostCpus, HostPlacement, check_cores, cores_line, host_placement

AT = ("command line", None, "--cores")


def test_the_host_with_fewest_cpus_sets_the_most_cores_less_one_for_the_generator() -> None:
    hosts = [HostCpus("h1", (0, 1, 2, 3)), HostCpus("h2", (0, 1, 2))]
    most, least = check_cores([1, 2], hosts, AT)
    assert (most, least.name) == (2, "h2")
    assert cores_line(most, least) == "cores on hosts: up to 2 (host h2 has 3 CPUs, one kept for the generator)"


def test_a_value_above_a_hosts_cpus_less_one_is_refused_naming_the_host_and_its_cpus() -> None:
    hosts = [HostCpus("h1", (0, 1, 2, 3)), HostCpus("h2", (0, 1))]
    with pytest.raises(ConfigError) as e:
        check_cores([1, 2], hosts, AT)
    text = str(e.value)
    assert "--cores" in text and "cores 2: host h2 has 2 CPU(s) (0,1), one kept for the traffic generator" in text
    assert "give cores of 1 to 1" in text


def test_a_one_cpu_host_allows_none_and_a_host_without_cpuset_is_refused() -> None:
    with pytest.raises(ConfigError, match="host h1 has 1 CPU.*run without cores there"):
        check_cores([1], [HostCpus("h1", (0,)), HostCpus("h2", (0, 1))], AT)
    lacking = HostCpus("h2", (0, 1, 2), refusal="no cpuset controller to place roles on CPUs: ...")
    with pytest.raises(ConfigError, match="host h2: no cpuset controller"):
        check_cores([1], [HostCpus("h1", (0, 1)), lacking], AT)


def test_the_tunnel_takes_the_first_cpus_the_generator_the_last_the_emulator_those_between() -> None:
    assert host_placement([0, 1], 1) == HostPlacement("0", "1")
    assert host_placement([0, 1], 1, emulator=True) == HostPlacement("0", "1", "1")
    assert host_placement([0, 1, 2, 3, 4], 2, emulator=True) == HostPlacement("0,1", "4", "2,3")
    assert host_placement([2, 5, 7], 2).agent_cpus() == {"tunnel": "2,5", "generator": "7"}
    with pytest.raises(ValueError, match="one for the generator"):
        host_placement([0, 1], 2)


def test_show_names_the_host_of_each_sides_cpus_on_hosts(capsys: pytest.CaptureFixture[str]) -> None:
    """`tunbench show` of a `--hosts` run on the cores axis: which CPUs of which host each side had, its
    generator's beside them; a local run's line is as before."""
    from tests.unit.report_data import run, trial
    from tunbench.cli.show import print_run
    from tunbench.report.common import placement_line

    trials = []
    for seq, cores, cpus in ((1, 1, "0"), (2, 2, "0-1")):
        t = trial(seq, "wg", 1e9)
        t.cores = cores
        t.params.update(
            cpuset={"client": cpus, "server": cpus},
            cpuset_generator={"client": "7", "server": "3"},
            cpuset_hosts={"client": "bench1", "server": "bench2"},
        )
        trials.append(t)
    assert placement_line(trials) == (
        "cores 1: client side on bench1 CPU 0 (generator CPU 7), server side on bench2 CPU 0 (generator CPU 3); "
        "cores 2: client side on bench1 CPU 0-1 (generator CPU 7), server side on bench2 CPU 0-1 (generator CPU 3)"
    )
    print_run(run(trials[:1]), "a run")
    assert "client side on bench1 CPU 0 (generator CPU 7), server side on bench2" in " ".join(
        capsys.readouterr().out.split()
    )
    local = trial(3, "wg", 1e9)
    local.params["cpuset"] = {"client": "0", "server": "1"}
    assert placement_line([local]) == "cpuset: client side on CPU 0, server side on CPU 1"
