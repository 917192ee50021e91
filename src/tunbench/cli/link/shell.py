"""`tunbench link shell`: two namespaces joined by the emulated link, a command (default: a shell) in the
client namespace with TUNBENCH_PEER set, optionally a command in the server namespace; everything is torn
down when the client command exits. The `mm-delay 50 bash` of tunbench.

The namespaces get the network settings `tunbench run` gives a trial's: the scenario's (the default one
unless `--scenario`: tcp_rmem/tcp_wmem up to 32 MiB) with the profile's on top, through the same
`TopologySpec` (session/network.py, `TopologySpec.with_profile`). What the kernel then has is printed on
entry, so a number measured here can be set beside a run's."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from tunbench.host.proc import Daemon, run_foreground
from tunbench.host.scope import run_scope
from tunbench.host.workdir import workdir as host_workdir
from tunbench.link.emulator import LinkEmulator
from tunbench.link.pair import emulated_pair
from tunbench.link.profile import Profile
from tunbench.topology.build import TopologySpec

# what the entry lines show of a namespace's effective settings (topology/settings.py), in this order
SHOWN = (
    ("tcp_rmem", "tcp_rmem"),
    ("tcp_wmem", "tcp_wmem"),
    ("congestion_control", "congestion control"),
    ("default_qdisc", "default qdisc"),
)


def _namespace_line(block: Mapping[str, Any]) -> str:
    parts = [f"{label} {block.get(key) or '?'}" for key, label in SHOWN]
    # the link's devices (not lo): their MTUs, without their names, which differ per side
    mtus = sorted({str(dev.get("mtu")) for name, dev in (block.get("interfaces") or {}).items() if name != "lo"})
    return ", ".join(parts) + (f", MTU {'/'.join(mtus)}" if mtus else "")


def settings_lines(net: Mapping[str, Any], source: str, profile: str) -> list[str]:
    """The lines printed on entry (pure): the settings the kernel has in the two namespaces (`net` as
    `Topology.effective_settings()` reads it), one line for both when they agree."""
    head = f"link shell: the network settings of `tunbench run` ({source}, profile {profile}):"
    client, server = net.get("client") or {}, net.get("server") or {}
    a, b = _namespace_line(client), _namespace_line(server)
    if a == b:
        return [head, f"  client, server: {a}"]
    return [head, f"  client: {a}", f"  server: {b}"]


def run_shell(
    profile: Profile,
    command: list[str],
    server_command: list[str] | None,
    *,
    seed: int,
    base: TopologySpec,
    source: str,
) -> int:
    """Returns the client command's exit status. `base` is the scenario's settings (`source` names the
    scenario), as session/network.py gives them to a run."""
    with (
        run_scope() as ledger,
        host_workdir(ledger, "shell") as workdir,
        emulated_pair(profile, ledger, workdir, seed=seed, base=base) as topo,
        contextlib.ExitStack() as stack,
    ):
        print("\n".join(settings_lines(topo.effective_settings(), source, profile.name)), flush=True)
        if server_command:
            stack.enter_context(
                Daemon(
                    server_command,
                    ledger=ledger,
                    log_path=workdir / "server.log",
                    what="server command",
                    netns=topo.server.name,
                )
            )
        env = {
            **os.environ,
            "TUNBENCH_PEER": topo.addr.server,
            "TUNBENCH_PEER6": topo.addr.server6,
            "TUNBENCH_SELF": topo.addr.client,
            "TUNBENCH_PROFILE": profile.name,
            "TUNBENCH_SERVER_NS": topo.server.name,
            "TUNBENCH_CLIENT_NS": topo.client.name,
        }
        cmd = command or [os.environ.get("SHELL", "/bin/bash")]
        if isinstance(topo.link, LinkEmulator):  # a profile's events and trace start with the command
            topo.link.start_schedule()
        # the child shares our terminal; while it runs, Ctrl-C is its business, not ours
        status = run_foreground(cmd, ledger=ledger, what="link shell command", netns=topo.client.name, env=env)
        if server_command and (workdir / "server.log").exists():
            tail = (workdir / "server.log").read_text(errors="replace").strip()
            if tail:
                print(f"--- server command output ---\n{tail[-4000:]}")
        return status
