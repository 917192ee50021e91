"""What this machine offers: `tunbench tunnels`, `workloads`, `profiles` and `doctor`."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic.fields import FieldInfo

from tunbench.cli.agent import HostsOpt, doctor_hosts
from tunbench.cli.console import console


def tunnels() -> None:
    """List the built-in tunnel adapters, whether their programs are installed, and their versions."""
    from rich.table import Table

    from tunbench.tunnels.registry import builtin_names, missing_requirements, missing_text, parse_ref
    from tunbench.tunnels.tunnel import tunnel_version

    table = Table("tunnel", "layer", "status", "version", "parameters", "description", header_style="bold")
    for name in builtin_names():
        ref = parse_ref(name)
        miss = missing_requirements(ref)
        status = "[green]ready[/]" if not miss else f"[red]{missing_text(miss)}[/]"
        version = tunnel_version(ref) if not miss else ""
        params = ", ".join(f"{k}={v}" for k, v in ref.adapter.spec.params.items())
        table.add_row(name, ref.adapter.spec.layer, status, version, params, ref.adapter.spec.description)
    console.print(table)
    console.print("Your own adapter: `--tunnel ./my-vpn.toml` (format: docs/adapters.md).")


def option_default(field: FieldInfo) -> str:
    """A workload option's default as `tunbench workloads` shows it: the value (a factory's, called), or
    "required" for an option a scenario must give."""
    if field.is_required():
        return "required"
    return repr(field.get_default(call_default_factory=True))


def workloads() -> None:
    """List the workload kinds (traffic generators) and their options."""
    from rich.markup import escape
    from rich.table import Column, Table

    from tunbench.workloads import REGISTRY

    # wide enough for the longest single option (the pps ladder's six sizes) to stay on one line
    options = Column("options (\\[workload.KIND] in a scenario)", min_width=40)
    table = Table("workload", "axes", "tunnels", options, "description", header_style="bold")
    for kind, w in sorted(REGISTRY.items()):
        opts = ", ".join(f"{name}={option_default(f)}" for name, f in w.Options.model_fields.items()) or "–"
        table.add_row(kind, " × ".join(w.axes) or "–", "/".join(w.layers), escape(opts), escape(w.description))
    console.print(table)


def shown(items: dict[str, str]) -> str:
    """One direction's impairments for the profiles list: a trace by its file's name, not its path."""
    from pathlib import Path

    return ",".join(f"{k}={Path(v).name if k == 'trace' else v}" for k, v in items.items()) or "–"


def profiles() -> None:
    """List the built-in WAN profiles."""
    from rich.markup import escape
    from rich.table import Table

    from tunbench.link.profile import builtin_names, find_profile

    table = Table("profile", "link", "up (client→server)", "down (server→client)", "description", header_style="bold")
    for name in builtin_names():
        p = find_profile(name)
        events = f" ({len(p.events)} event{'s' if len(p.events) != 1 else ''})" if p.events else ""
        events += f" ({len(p.faults)} fault{'s' if len(p.faults) != 1 else ''})" if p.faults else ""
        table.add_row(
            p.name, "emulated" if p.emulated else "veth", shown(p.up), shown(p.down), escape(p.description + events)
        )
    console.print(table)
    console.print(
        escape(
            "Your own: `--profile ./my.toml` or inline `--profile 'name:delay=20ms,rate=50mbit'`; a file may add "
            "[[events]] (an outage, a rebind, a rate change at a time), a trace or a timeline: docs/profiles.md; "
            "[[faults]] aimed at a tunnel's handshake messages: docs/faults.md."
        )
    )


def doctor(
    noise: Annotated[
        bool,
        typer.Option(
            "--noise",
            help="Also say how quiet the host is (load, steal over 1 s, governor, turbo, SMT, irqbalance, THP, "
            "other tunbench runs), each with what to do. Advice only: it does not change the exit status.",
        ),
    ] = False,
    hosts: HostsOpt = None,
) -> None:
    """Check kernel features, permissions and tools, and say what to install (exit 1 if something is
    missing). With --hosts, check each host of the inventory over ssh as well."""
    from rich.markup import escape

    from tunbench.doctor import checks, install_lines, noise_checks
    from tunbench.doctor.packages import host_family

    bad = 0
    family = host_family()
    found = checks(family)
    for c in found:
        mark = "[green]✓[/]" if c.ok else "[red]✗[/]"
        console.print(f"{mark} {c.name}: {c.detail}")
        if not c.ok:
            bad += 1
            if c.fix:
                console.print(f"    fix: {c.fix}")
    for line in install_lines(found, family):
        console.print(escape(line), highlight=False, soft_wrap=True)  # one line, to copy whole
    if noise:
        console.print("\n[bold]host noise[/] (sampling 1 s)")
        for c in noise_checks():
            mark = "[green]✓[/]" if c.ok else "[yellow]![/]"
            console.print(f"{mark} {c.name}: {c.detail}")
            if not c.ok and c.fix:
                console.print(f"    fix: {c.fix}")
    if hosts is not None:
        console.print("\n[bold]hosts[/]")
        bad += doctor_hosts(hosts)
    if bad:
        raise typer.Exit(1)
