"""`tunbench link shell`: two namespaces joined by the emulated link, a command (default: a shell) in the
client namespace with TUNBENCH_PEER set, optionally a command in the server namespace; everything is torn
down when the client command exits. The `mm-delay 50 bash` of tunbench."""

from __future__ import annotations

import contextlib
import os

from tunbench.host.proc import Daemon, run_foreground
from tunbench.host.scope import run_scope
from tunbench.host.workdir import workdir as host_workdir
from tunbench.link.emulator import LinkEmulator
from tunbench.link.pair import emulated_pair
from tunbench.link.profile import Profile


def run_shell(profile: Profile, command: list[str], server_command: list[str] | None, *, seed: int) -> int:
    """Returns the client command's exit status."""
    with (
        run_scope() as ledger,
        host_workdir(ledger, "shell") as workdir,
        emulated_pair(profile, ledger, workdir, seed=seed) as topo,
        contextlib.ExitStack() as stack,
    ):
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
