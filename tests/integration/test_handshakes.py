"""Whether a real tunnel re-handshook through a real disruption (the recovery workload's
`recovery.handshakes`), against answers known from the protocols:

- WireGuard starts a new handshake when it has sent data and heard nothing for KEEPALIVE_TIMEOUT +
  REKEY_TIMEOUT (10 + 5 s; the whitepaper's section 6), and sends it again every REKEY_TIMEOUT until
  answered: an outage from 1 s to 17 s loses the first try (at about 16 s) and the second (about 21 s)
  completes. Exactly one, for wireguard-go and boringtun alike, read through their UAPI sockets.
- OpenVPN in point-to-point mode does not follow a client whose address changed (the server answers
  "TLS keys are out of sync" to every packet from the new address, and keeps sending to the old one,
  which the emulator drops as a real path would): the built-in, without a ping-restart, never comes back
  and makes no handshake; with `--ping 1 --ping-restart 2` (its `ping` and `ping_restart` parameters)
  the client restarts 2 s after it last heard the server and comes back with exactly one new TLS
  handshake.
(A rebind, which WireGuard rides without a handshake, is in test_link.py.)
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.integration.helpers import run_json
from tunbench.link.binary import link_binary_or_none

pytestmark = pytest.mark.skipif(link_binary_or_none() is None, reason="tunbench-link not built (make build)")


def _profile(tmp_path: Path, at: str, outage: str) -> Path:
    prof = tmp_path / "outage.toml"
    prof.write_text(f'name = "outage"\n[up]\ndelay = "2ms"\n\n[[events]]\nat = "{at}"\noutage = "{outage}"\n')
    return prof


def test_a_long_outage_makes_wireguard_handshake_again_once(tmp_path: Path) -> None:
    # wireguard-go's socket gives the time of the latest handshake, boringtun's its age; the `wg show`
    # command wireguard-kernel declares is checked on its captured output only (tests/unit), to keep this
    # 24 s trial to two tunnels
    res, doc = run_json(
        tmp_path, "-t", "wireguard-go,boringtun", "--no-direct", "-w", "recovery",
        "--profile", str(_profile(tmp_path, "1s", "16s")), "--duration", "24", "--repeat", "1",
        timeout=400,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    by = {t["label"]: t for t in doc["trials"]}
    assert set(by) == {"wireguard-go", "boringtun"}
    for label, t in by.items():
        assert t["status"] == "ok", (label, t["error"])
        m = t["metrics"]
        assert m["recovery.outage_ms"] == 16_000
        assert m["recovery.first_after_ms"] < 50, f"{label} did not come back when the link did"
        assert m["recovery.handshakes"] == 1, f"{label}: {m['recovery.handshakes']} handshakes, not 1"


def test_openvpn_follows_a_rebind_only_by_restarting_with_one_handshake(tmp_path: Path) -> None:
    prof = tmp_path / "rebind.toml"
    prof.write_text('name = "rebind"\n[up]\ndelay = "2ms"\n\n[[events]]\nat = "1s"\nrebind = "both"\n')
    res, doc = run_json(
        tmp_path, "-t", "openvpn-udp,openvpn-udp[ping=1,ping_restart=2,label=openvpn-restart]",
        "-w", "recovery", "--profile", str(prof), "--duration", "8", "--repeat", "1",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    by = {t["label"]: t for t in doc["trials"]}
    for label, t in by.items():
        assert t["status"] == "ok", (label, t["error"])
    plain, restart = by["openvpn-udp"], by["openvpn-restart"]
    assert plain["metrics"]["recovery.handshakes"] == 0
    assert plain["metrics"].get("recovery.first_after_ms") is None, "it followed its client without a restart"
    assert plain["metrics"]["link.down.dropped_stale"] > 0, "the server never answered the old address"
    assert restart["metrics"]["recovery.handshakes"] == 1
    assert 2000 < restart["metrics"]["recovery.first_after_ms"] < 6000, "not back by ping-restart"
    assert "recovery.handshakes" not in by["direct"]["metrics"], "direct has no handshake: no figure, not 0"
    # the logs say why (the recovery workload keeps them with every trial, not only failed ones)
    with sqlite3.connect(tmp_path / "r.db") as db:
        logs = {n for (n,) in db.execute("SELECT a.name FROM artifacts a JOIN trials t ON t.id = a.trial_id "
                                         "WHERE t.label = 'openvpn-udp'")}  # fmt: skip
    assert {"log/server.log", "log/client.log"} <= logs, logs
