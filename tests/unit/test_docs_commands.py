"""Every `tunbench ...` command in README.md and docs/*.md works as written (the output samples aside).

Commands are taken from code blocks (lines that start with `tunbench`, `\\` continuations joined, `#`
comments dropped, `a  /  b` alternatives split) and from inline code spans. `tunbench run ...` goes through
`--dry-run`: scenario, tunnels, profiles and workload options are resolved and validated, no root needed,
nothing created. Other subcommands need a store, root or a real link, so they are checked by parsing their
arguments with the real click command (unknown options, bad types and missing arguments fail).
Placeholders are read as the docs mean them: `[RUN]` / `[RUN...]` optional (dropped), `[--quick]` given.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer
from typer._click import ClickException  # typer 0.29 ships click as typer._click
from typer.testing import CliRunner

from tunbench.cli import app
from tunbench.errors import DependencyMissing
from tunbench.host import ledger as state

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# the user's own adapter the docs refer to, stood in for by the worked example of docs/adapters.md
FIXTURES = {
    "my-vpn.toml": ROOT / "examples" / "adapters" / "socat-tls.toml",
    "lab.ini": ROOT / "examples" / "hosts" / "lab.ini",
    "lab-fleet.ini": ROOT / "examples" / "hosts" / "lab-fleet.ini",
}


SAMPLE = re.compile(r"<!-- sample:[\w-]+ -->\n.*?<!-- /sample -->", re.S)


def _commands(path: Path) -> list[tuple[str, str]]:
    """(where, command) for each documented command line in a Markdown file. The output samples
    (`<!-- sample:NAME -->` blocks, scripts/readme_samples.py) are what tunbench printed, not commands: a
    table's title reads "tunbench run tb1a2b3c (#1)"; each is blanked, its lines kept for the line numbers."""
    text = SAMPLE.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text())
    out: list[tuple[str, str]] = []
    in_block = False
    pending, start = "", 0
    prose: list[tuple[int, str]] = []
    for no, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            prose.append((no, line))
            continue
        if pending:
            pending += " " + line.strip()
        elif line.strip().startswith("tunbench "):
            pending, start = line.strip(), no
        else:
            continue
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        code = re.sub(r"\s+#\s.*$", "", pending)  # a trailing comment (no command here has a quoted " # ")
        for alt in re.split(r"\s+/\s+", code):
            out.append((f"{path.name}:{start}", alt.strip()))
        pending = ""
    # inline code spans may wrap across lines: join the prose of each paragraph first
    joined = " ".join(line for _, line in prose)
    for m in re.finditer(r"`(tunbench [^`]+)`", joined):
        out.append((f"{path.name} (inline)", " ".join(m.group(1).split())))
    return out


def _args(command: str) -> list[str]:
    words = shlex.split(command)[1:]
    out: list[str] = []
    for w in words:
        if re.fullmatch(r"\[[A-Z.]+\]", w):  # [RUN], [RUN...]: optional, left out
            continue
        if m := re.fullmatch(r"\[(--?[a-z-]+)\]", w):  # [--quick]: an optional flag, given
            out.append(m.group(1))
            continue
        out.append(w)
    return out


COMMANDS = sorted({(where, cmd) for p in DOCS for where, cmd in _commands(p)})


def test_the_docs_have_commands() -> None:
    cmds = {c for _, c in COMMANDS}
    assert "tunbench run --profile 'dsl:delay=15ms,up.rate=1mbit,down.rate=16mbit'" in cmds
    assert any(c.startswith("tunbench compare ") for c in cmds) and any(c.startswith("tunbench link ") for c in cmds)
    assert len(COMMANDS) > 30


def _parse_only(args: list[str]) -> None:
    """Parse like the real CLI would, down to the leaf subcommand, without invoking it."""
    cmd: Any = typer.main.get_command(app)
    name = "tunbench"
    parent: Any = None
    while True:
        ctx = cmd.make_context(name, list(args), parent=parent)
        if not hasattr(cmd, "resolve_command"):  # a leaf command, not a group
            return
        rest = [*(getattr(ctx, "protected_args", None) or getattr(ctx, "_protected_args", [])), *ctx.args]
        if not rest:
            return
        name, sub, args = cmd.resolve_command(ctx, rest)
        assert sub is not None and name is not None, f"no subcommand {rest[0]!r}"
        cmd, parent = sub, ctx


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[f"{w}: {c}" for w, c in COMMANDS])
def test_documented_command(
    where: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args(command)
    if not args or args[0] != "run":
        try:
            _parse_only(args)
        except ClickException as e:
            pytest.fail(f"{where}: `{command}` does not parse: {e.format_message()}")
        if args[:2] == ["link", "shell"] and "--profile" in args:  # resolvable without root: the profile
            from tunbench.link.profile import find_profile, validate_with_link

            profile = find_profile(args[args.index("--profile") + 1])
            with contextlib.suppress(DependencyMissing):  # like --dry-run: values unchecked without the binary
                validate_with_link(profile)
        return
    # a run: in a scratch directory that has the repository's examples and the docs' own adapter file
    work = tmp_path / "w"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    for name, src in FIXTURES.items():
        shutil.copy(src, work / name)
    monkeypatch.chdir(work)
    monkeypatch.delenv("TUNBENCH_DB", raising=False)
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    before = sorted(p.name for p in work.rglob("*"))
    res = CliRunner().invoke(app, [*args, "--dry-run"], terminal_width=200)
    builds = re.findall(r"bin=([^,\]]+)", command)
    if builds and not all(Path(b).exists() for b in builds):
        # a documented A/B line names the user's builds (/src/pr/..., ./wireguard-go): a dry run without them
        # fails on them, naming each
        assert isinstance(res.exception, DependencyMissing), f"{where}: {res.output}\n{res.exception!r}"
        assert all(Path(b).name in str(res.exception) for b in builds if not Path(b).exists()), str(res.exception)
        return
    assert res.exit_code == 0, f"{where}: `{command} --dry-run` failed:\n{res.output}\n{res.exception!r}"
    assert re.search(r"trials?( at most)?, about", res.output), res.output
    assert sorted(p.name for p in work.rglob("*")) == before and not (tmp_path / "state").exists()
