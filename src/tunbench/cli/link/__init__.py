"""`tunbench link`: the emulated WAN link on its own, a shell over it and its self-test."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tunbench.cli.console import console

link_app = typer.Typer(
    help="The emulated WAN link on its own: a shell over it, and its self-test.", no_args_is_help=True
)


@link_app.command("shell", context_settings={"allow_interspersed_args": False})
def shell(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="Command to run in the client namespace (default: $SHELL). Put it after --."),
    ] = None,
    profile: Annotated[str, typer.Option(help="WAN profile (name, file, or inline NAME:delay=20ms,...).")] = "wan-50ms",
    server_cmd: Annotated[
        str | None,
        typer.Option(
            "--server-cmd",
            help="Command to run in the server namespace while the client command runs (e.g. 'iperf3 -s').",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for the emulator's random impairments.")] = 1,
) -> None:
    """Run a command over an emulated WAN link: client namespace -> tunbench-link -> server namespace.

    The command sees TUNBENCH_PEER (the server side's address). Example:
    tunbench link shell --profile wan-50ms --server-cmd 'iperf3 -s' -- sh -c 'iperf3 -c $TUNBENCH_PEER'
    """
    import shlex

    from tunbench.cli.link.shell import run_shell
    from tunbench.link.profile import find_profile, validate_with_link

    prof = find_profile(profile)
    validate_with_link(prof)
    status = run_shell(prof, command or [], shlex.split(server_cmd) if server_cmd else None, seed=seed)
    raise typer.Exit(status)


@link_app.command("selftest")
def selftest(
    quick: Annotated[bool, typer.Option("--quick", help="Shorter measurements (about 1 minute).")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the numbers as JSON.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the emulated loss.")] = 1,
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            help="Comma-separated steps to run: passthrough, path, delay, rate, cost, loss, schedule, trace "
            "(default: all).",
        ),
    ] = None,
) -> None:
    """Measure the emulator against its targets: passthrough throughput vs veth, delay error idle and
    loaded, rate accuracy (10 Mbit/s - 1 Gbit/s), the emulator's CPU at 10 Mbit/s - 1 Gbit/s, Bernoulli
    and Gilbert-Elliott loss, scheduled events landing on time (seen from outside) and trace replay per
    100 ms."""
    import dataclasses
    import json

    from tunbench.cli.link.selftest import STEPS, Result, run_selftest
    from tunbench.link.binary import find_link_binary

    steps = STEPS if only is None else tuple(s.strip() for s in only.split(",") if s.strip())
    bad = [s for s in steps if s not in STEPS]
    if bad or not steps:
        raise typer.BadParameter(
            f"unknown step(s) {', '.join(bad) or '(none given)'}; choose from {', '.join(STEPS)}", param_hint="--only"
        )
    find_link_binary()

    def report(r: Result) -> None:
        mark = {True: "[green]PASS[/]", False: "[red]FAIL[/]", None: "[blue]INFO[/]"}[r.passed]
        console.print(f"{mark} {r.name}: {r.detail}", highlight=False)

    results = run_selftest(seed=seed, quick=quick, report=report, only=steps)
    if json_out:
        json_out.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2) + "\n")
    failed = [r.name for r in results if r.passed is False]
    console.print(
        f"{len(results) - len(failed)}/{len(results)} within bounds"
        + (f"; missed: {', '.join(failed)}" if failed else "")
    )
    if failed:
        raise typer.Exit(1)
