"""A build given by a relative path (`bin=./wireguard-go`) is made absolute once, before the run: against the
directory tunbench was started in for `--tunnel`, against the scenario file's directory for the file's
tunnels; and a tunnel process that exits at start says what it printed last."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunbench import session
from tunbench.cli import app
from tunbench.config.load import load_scenario, with_overrides
from tunbench.errors import TunnelError
from tunbench.tunnels.programs import absolute, absolute_programs, program_params, rebased
from tunbench.tunnels.registry import parse_ref
from tunbench.tunnels.tunnel import Tunnel, last_words


def test_program_parameters_are_those_requires_names_whole() -> None:
    assert program_params(parse_ref("wireguard-go").adapter.spec) == {"bin"}
    assert program_params(parse_ref("ssh-forward").adapter.spec) == {"bin", "sshd"}
    assert program_params(parse_ref("wireguard-kernel").adapter.spec) == set()


def test_absolute_takes_relative_paths_only(tmp_path: Path) -> None:
    assert absolute("./wg", tmp_path) == str(tmp_path / "wg")
    assert absolute("../base/wg", tmp_path / "head") == str(tmp_path / "base" / "wg")
    assert absolute("build/wg", tmp_path) == str(tmp_path / "build" / "wg")
    assert absolute("wireguard-go", tmp_path) == "wireguard-go"  # a bare name: PATH, as a shell does
    assert absolute("/opt/wg", tmp_path) == "/opt/wg"


def _build(path: Path) -> None:
    """A stand-in for a build at `path` (an executable file): a dry run refuses a build that is not there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_only_program_parameters_change(tmp_path: Path) -> None:
    ref = absolute_programs(parse_ref("socat[bin=./socat,buffer=512,label=s]"), tmp_path)
    assert ref.params == {"bin": str(tmp_path / "socat"), "buffer": "512"} and ref.label == "s"
    plain = parse_ref("socat[buffer=512]")
    assert absolute_programs(plain, tmp_path) is plain


def test_a_tunnel_flag_resolves_against_the_directory_tunbench_started_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _build(tmp_path / "wireguard-go")
    sc, _, source = load_scenario(None)
    sc = with_overrides(sc, {"run": {"tunnels": ["wireguard-go[bin=./wireguard-go,label=pr]"], "direct": False}})
    plan = session.prepare(sc, source, dry_run=True)
    (ref,) = plan.refs
    assert ref.label == "pr"
    assert ref.merged_params()["bin"] == str(tmp_path / "wireguard-go")  # what runs, and what a trial records
    assert f"bin={tmp_path / 'wireguard-go'}" in "\n".join(session.describe(plan))


def test_a_scenario_files_tunnels_resolve_against_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ci").mkdir()
    scenario = tmp_path / "ci" / "ab.toml"
    scenario.write_text(
        '[run]\ntunnels = ["wireguard-go[bin=../base/wireguard-go,label=base]", "wireguard-go[label=distro]"]\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _build(tmp_path / "base" / "wireguard-go")
    monkeypatch.chdir(elsewhere)
    sc, _, source = load_scenario(Path("../ci/ab.toml"))
    assert sc.run.tunnels == [f"wireguard-go[bin={tmp_path / 'base' / 'wireguard-go'},label=base]",
                              "wireguard-go[label=distro]"]  # fmt: skip
    plan = session.prepare(sc, source, dry_run=True)
    bins = {r.label: r.merged_params().get("bin") for r in plan.refs}
    assert bins == {"direct": None, "base": str(tmp_path / "base" / "wireguard-go"), "distro": "wireguard-go"}


def test_rebased_leaves_what_it_cannot_read() -> None:
    assert rebased("no-such-tunnel[bin=./x]", Path("/d")) == "no-such-tunnel[bin=./x]"
    assert rebased("wireguard-go", Path("/d")) == "wireguard-go"
    assert rebased("socat[buffer=512]", Path("/d")) == "socat[buffer=512]"


def test_dry_run_shows_the_absolute_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _build(tmp_path / "socat")
    res = CliRunner().invoke(
        app, ["run", "-t", "socat[bin=./socat,label=pr]", "--no-direct", "--dry-run"], terminal_width=200
    )
    assert res.exit_code == 0, res.output
    assert f"pr (L4, bin={tmp_path / 'socat'})" in res.output


class _Exited:
    """A daemon that exited at start, having printed `log`."""

    what = "fake"
    pid = 1

    def __init__(self, log: str) -> None:
        self.log = log

    def alive(self) -> bool:
        return False

    def returncode(self) -> int:
        return 1

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.splitlines()[-lines:])

    def stop(self) -> None:
        pass


class _Here:
    label = "namespace tb000000-s"


@pytest.mark.parametrize(
    ("log", "first"),
    [
        ('starting\nexec of "./wireguard-go" failed: No such file or directory\n\n', "failed: No such file"),
        ("", "it printed nothing"),
    ],
)
def test_a_process_that_exits_at_start_says_what_it_printed_last(log: str, first: str) -> None:
    tunnel = Tunnel.__new__(Tunnel)
    tunnel.ref = parse_ref("wireguard-go[label=rel]")
    tunnel.daemons = {"server": _Exited(log)}  # type: ignore[dict-item]
    tunnel._places = {"server": _Here()}  # type: ignore[dict-item]
    with pytest.raises(TunnelError) as e:
        tunnel.check_alive()
    head = str(e.value).splitlines()[0]
    assert head.startswith("rel: server process exited (code 1): ") and first in head
    assert last_words(_Exited("x" * 500)).endswith("…")  # type: ignore[arg-type]
