"""A remote place gets the trial's files rendered with its own `{tmp}`: a config naming `{tmp}/server.key`
must name the path on that host, not the controller's (tunnels/steps.py, files_for)."""

from __future__ import annotations

from pathlib import Path

from tunbench.host.ledger import Ledger
from tunbench.tunnels.registry import parse_ref
from tunbench.tunnels.steps import Steps


def test_templated_files_are_rendered_again_for_another_trial_directory(tmp_path: Path) -> None:
    spec = parse_ref("wireguard-go").adapter.spec
    steps = Steps(spec, "wireguard-go.toml", tmp_path, Ledger.__new__(Ledger), {})
    v = {"tmp": str(tmp_path), "name": "srv"}
    steps.write("conf/{name}.conf", "key = {tmp}/server.key\n", "0640", v, "files[0]")
    (tmp_path / "made-by-a-key-step.pem").write_bytes(b"PEM")  # a key step's own output file
    (tmp_path / "daemon.log").write_text("not shipped")
    assert (tmp_path / "conf" / "srv.conf").read_text() == f"key = {tmp_path}/server.key\n"
    there = steps.files_for(Path("/var/tmp/tbremote-t3s"))
    assert there["conf/srv.conf"] == (b"key = /var/tmp/tbremote-t3s/server.key\n", 0o640)
    assert there["made-by-a-key-step.pem"][0] == b"PEM"
    assert "daemon.log" not in there
