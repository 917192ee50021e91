"""`--help` shows what the source says: no markup eats `NAME[key=value,...]` or `[run] warm`, and the options
whose default is the scenario's say what that default is, truly."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tunbench.cli import app
from tunbench.config.load import load_scenario
from tunbench.config.schema import RunSection, WorkloadSection


def _commands() -> list[tuple[list[str], Any]]:
    """Every command and group of the app, with its path of names (the root: [])."""
    out: list[tuple[list[str], Any]] = []

    def walk(cmd: Any, path: list[str]) -> None:
        out.append((path, cmd))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


COMMANDS = _commands()


def _help(path: list[str]) -> str:
    res = CliRunner().invoke(app, [*path, "--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


def _bracketed(text: str) -> list[str]:
    """Each `[...]` in a help text, with the word before it when it hangs on one (`NAME[key=value,...]`)."""
    return [m.group(0) for m in re.finditer(r"\S*\[[^\[\]\s][^\[\]]*\]\S*", text)]


def test_every_command_is_walked() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"run", "compare", "calibrate", "db migrate", "link shell"} <= names


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) or "tunbench" for p, _ in COMMANDS])
def test_help_keeps_every_bracketed_form(path: list[str], cmd: Any) -> None:
    shown = _help(path)
    texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    for text in texts:
        for form in _bracketed(" ".join(text.split())):
            assert form.rstrip(".,;:)") in shown, f"`{' '.join(path)} --help` lost {form!r}"
    assert "\\[" not in shown  # an escape meant for rich markup shows as a backslash in plain help
    assert "[[" not in shown.split(" Options:")[0]  # a metavar given as "[RUN]": typer brackets it again


def test_run_help_names_the_tunnel_syntax_and_scenario_sections() -> None:
    shown = _help(["run"])
    for form in ("NAME[key=value,...]", "([run] warm)", "([run] redo_steal_pct)", "([run] cpuset)",
                 "(the scenario's [topology] underlay)", "([topology] overlay)"):  # fmt: skip
        assert form in shown
    assert "NAME[key=value,...]" in _help(["calibrate"])


def test_run_help_gives_the_true_defaults() -> None:
    """The scenario decides these four: the help gives the built-in scenario's value and the one a scenario
    file gets by leaving the key out, as the code has them."""
    builtin, _, _ = load_scenario(None)
    wl, run = WorkloadSection(), RunSection()
    shown = _help(["run"])
    expected = {
        "--duration": (builtin.workload.duration_s, "[workload] duration_s", wl.duration_s),
        "--omit": (builtin.workload.omit_s, "[workload] omit_s", wl.omit_s),
        "--repeat": (builtin.run.repeat, "[run] repeat", run.repeat),
        "--direction": (",".join(builtin.workload.directions), "[workload] directions", ",".join(wl.directions)),
    }
    for flag, (given, key, omitted) in expected.items():
        part = shown.split(f" {flag} ", 1)[1][:400]
        assert f"Default: the scenario's (the built-in one: {given}; a scenario file without {key}: {omitted})" in (
            part
        ), f"{flag}: {part}"


def test_options_with_a_fixed_default_show_it() -> None:
    for path, cmd in COMMANDS:
        shown = _help(path)
        for p in cmd.params:
            default = getattr(p, "default", None)
            if getattr(p, "is_flag", False) or default in (None, "", [], ()) or not getattr(p, "show_default", 1):
                continue
            assert f"default: {default}" in shown, f"`{' '.join(path)} --help`: {p.name} hides its default"
