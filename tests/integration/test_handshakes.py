"""Whether a real tunnel re-handshook through a real disruption (the recovery workload's
`recovery.handshakes`), against answers known from the protocols:

- WireGuard starts a new handshake when it has sent data and heard nothing for KEEPALIVE_TIMEOUT +
  REKEY_TIMEOUT (10 + 5 s; the whitepaper's section 6), and sends it again every REKEY_TIMEOUT until
  answered: an outage from 1 s to 17 s loses the first try (at about 16 s) and the second (about 21 s)
  completes. Exactly one, for wireguard-go and boringtun alike, read through their UAPI sockets.
- OpenVPN keeps its TLS session through a 3 s outage (no keepalive configured: 0), while a client with
  `--ping 1 --ping-restart 2` restarts during it and completes one new TLS handshake once the link is back.
(A rebind, which WireGuard rides without a handshake, is in test_link.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.helpers import run_json
from tunbench.link.binary import link_binary_or_none
from tunbench.tunnels.registry import BUILTIN_DIR

pytestmark = pytest.mark.skipif(link_binary_or_none() is None, reason="tunbench-link not built (make build)")


def _profile(tmp_path: Path, at: str, outage: str) -> Path:
    prof = tmp_path / "outage.toml"
    prof.write_text(f'name = "outage"\n[up]\ndelay = "2ms"\n\n[[events]]\nat = "{at}"\noutage = "{outage}"\n')
    return prof


def _parts(name: str) -> tuple[str, str]:
    """A built-in adapter's text for one client, without its [handshakes] table; and that table (the
    one-client part's last, or the file's; the [multi] part, if any, is left out)."""
    text = (BUILTIN_DIR / f"{name}.toml").read_text().split("# ---- many clients")[0]
    before, table = text.split("[handshakes]")
    return before, "[handshakes]" + table


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


def test_openvpn_handshakes_again_only_when_its_client_restarts(tmp_path: Path) -> None:
    restart = tmp_path / "openvpn-restart.toml"
    text, table = _parts("openvpn-udp")
    client = text.index("[client]")
    assert text.count("--verb 3") == 2
    restart.write_text(  # the client only: it restarts after 2 s without a packet, keeping its TUN device
        text[:client].replace('name = "openvpn-udp"', 'name = "openvpn-restart"', 1)
        + text[client:].replace("--verb 3", "--ping 1 --ping-restart 2 --persist-tun --verb 3")
        + table
    )
    res, doc = run_json(
        tmp_path, "-t", f"openvpn-udp,{restart}", "-w", "recovery", "--profile",
        str(_profile(tmp_path, "1s", "3s")), "--duration", "8", "--repeat", "1",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    by = {t["label"]: t for t in doc["trials"]}
    for label, t in by.items():
        assert t["status"] == "ok", (label, t["error"])
    assert by["openvpn-udp"]["metrics"]["recovery.handshakes"] == 0
    assert by["openvpn-udp"]["metrics"]["recovery.first_after_ms"] < 50
    assert by["openvpn-restart"]["metrics"]["recovery.handshakes"] == 1
    assert by["openvpn-restart"]["metrics"]["recovery.first_after_ms"] > 500, "it came back without restarting"
    assert "recovery.handshakes" not in by["direct"]["metrics"], "direct has no handshake: no figure, not 0"
