"""`tunbench link`: the emulated WAN link on its own, a shell over it and its self-test."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
    scenario: Annotated[
        Path | None,
        typer.Option(
            "--scenario",
            help="Take the network settings ([sysctl], [topology] mtu and congestion_control) from this "
            "scenario, as `tunbench run FILE` would (default: the default scenario's).",
        ),
    ] = None,
) -> None:
    """Run a command over an emulated WAN link: client namespace -> tunbench-link -> server namespace.

    The namespaces get the same network settings as a `tunbench run` trial over that profile (socket
    buffers, congestion control, MTU), printed on entry. The command sees TUNBENCH_PEER (the server side's
    address). Example:
    tunbench link shell --profile wan-50ms --server-cmd 'iperf3 -s' -- sh -c 'iperf3 -c $TUNBENCH_PEER'
    """
    import shlex

    from tunbench.cli.link.shell import run_shell
    from tunbench.config.load import load_scenario
    from tunbench.link.profile import find_profile, validate_with_link
    from tunbench.session.network import topology_spec

    prof = find_profile(profile)
    validate_with_link(prof)
    loaded, _, source = load_scenario(scenario)
    status = run_shell(
        prof,
        command or [],
        shlex.split(server_cmd) if server_cmd else None,
        seed=seed,
        base=topology_spec(loaded),
        source=source,
    )
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
    from tunbench.cli.link.selftest import show, summary, write_json
    from tunbench.link.binary import find_link_binary
    from tunbench.link.selftest import STEPS, run_selftest

    steps = STEPS if only is None else tuple(s.strip() for s in only.split(",") if s.strip())
    bad = [s for s in steps if s not in STEPS]
    if bad or not steps:
        raise typer.BadParameter(
            f"unknown step(s) {', '.join(bad) or '(none given)'}; choose from {', '.join(STEPS)}", param_hint="--only"
        )
    find_link_binary()
    results = run_selftest(seed=seed, quick=quick, report=show, only=steps)
    if json_out:
        write_json(results, json_out)
    if summary(results):
        raise typer.Exit(1)
