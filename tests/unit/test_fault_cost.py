"""What a profile's counted faults add to a bring-up: each lost handshake message costs its protocol's
retransmission timer (the measured ones of docs/faults.md), and a dry run counts it in its estimate."""

from __future__ import annotations

import re
from typing import Any

import pytest
from typer.testing import CliRunner

from tunbench.cli.app import app
from tunbench.link.fault_cost import RETRY, bringup_fault_s
from tunbench.link.faults import ProfileFault
from tunbench.link.profile import find_profile
from tunbench.tunnels.registry import find_adapter


def faults(*items: dict[str, Any]) -> list[ProfileFault]:
    return [ProfileFault(**f) for f in items]


def test_the_builtin_profile_costs_each_protocol_its_own_timer() -> None:
    loss = find_profile("handshake-loss")
    assert bringup_fault_s(loss.faults, "wg", 20) == pytest.approx(2 * 5.16)  # two lost initiations
    assert bringup_fault_s(loss.faults, "ovpn", 20) == pytest.approx(1.9)
    assert bringup_fault_s(loss.faults, "ike", 20) == pytest.approx(4.0)
    assert bringup_fault_s(loss.faults, None, 20) == 0.0  # a tunnel the emulator does not classify
    stall = find_profile("wg-init-stall")
    assert bringup_fault_s(stall.faults, "wg", 20) == pytest.approx(3 * 5.16)
    two = faults({"match": "ike.sa_init.request", "first": 2})
    assert bringup_fault_s(two, "ike", 20) == pytest.approx(4.0 + 4.0 * 1.8)  # strongSwan's backoff


def test_the_builtin_tunnels_say_which_messages_they_send() -> None:
    assert {t: find_adapter(t).spec.messages for t in ("wireguard-go", "openvpn-udp", "socat")} == {
        "wireguard-go": "wg",
        "openvpn-udp": "ovpn",
        "socat": None,
    }


@pytest.mark.parametrize(
    ("fault", "cost_s"),
    [
        ({"match": "wg.initiation", "nth": 1}, 5.16),
        ({"match": "wg.initiation", "nth": 2}, 0.0),  # the first one passes: there is no second
        ({"match": "wg.*", "first": 1}, 5.16),
        ({"match": "any", "first": 1}, 5.16),
        ({"match": "wg.initiation", "first": 1, "action": "corrupt"}, 5.16),  # rejected: as good as lost
        ({"match": "wg.initiation", "first": 1, "action": "delay", "delay": "500ms"}, 0.5),
        ({"match": "wg.initiation", "first": 1, "action": "delay", "delay": "8s"}, 5.16),  # the retry overtakes
        ({"match": "wg.initiation", "first": 1, "action": "dup"}, 0.0),
        ({"match": "wg.data", "first": 1}, 0.0),  # the readiness ping's, not the handshake's
        ({"match": "ovpn.hard_reset_client", "first": 1}, 0.0),  # another protocol's
        ({"match": "wg.initiation", "during": ["0s", "20s"]}, 0.0),  # follows the traffic's schedule
        ({"match": "wg.initiation", "every": 1}, 20.0),  # never answered: the readiness wait gives up
    ],
)
def test_what_one_fault_costs_a_wireguard_bringup(fault: dict[str, Any], cost_s: float) -> None:
    assert bringup_fault_s(faults(fault), "wg", 20) == pytest.approx(cost_s)


def test_faults_on_two_classes_add_up_and_two_on_one_class_make_one_run() -> None:
    two = faults({"match": "wg.initiation", "first": 1}, {"match": "wg.response", "first": 1, "direction": "down"})
    assert bringup_fault_s(two, "wg", 20) == pytest.approx(2 * RETRY["wg"].first_s)
    run = faults({"match": "wg.initiation", "nth": 1}, {"match": "wg.initiation", "nth": 2})
    assert bringup_fault_s(run, "wg", 20) == pytest.approx(2 * RETRY["wg"].first_s)


def per_trial_s(profile: str) -> str:
    res = CliRunner().invoke(
        app, ["run", "--dry-run", "-t", "wireguard-go", "-w", "connect", "--profile", profile], env={"COLUMNS": "300"}
    )
    assert res.exit_code == 0, res.output
    m = re.search(rf"wireguard-go · {profile} · connect\s+\(~(.+?) per trial\)", res.output)
    assert m is not None, res.output
    return m.group(1)


def test_a_dry_run_counts_the_retries_in_each_bringup() -> None:
    assert per_trial_s("handshake-watch") == "15 s"  # 10 bring-ups of 1.5 s
    assert per_trial_s("wg-init-loss-2") == "2.0 min"  # each 2 x 5.16 s longer
