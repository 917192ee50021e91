"""`tunbench link shell`: two namespaces joined by the emulated link, a command (default: a shell) in the
client namespace with TUNBENCH_PEER set, optionally a command in the server namespace; everything is torn
down when the client command exits. The `mm-delay 50 bash` of tunbench."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tunbench.clean import finish_ledger
from tunbench.link.emulator import profile_link_builder
from tunbench.link.profile import Profile
from tunbench.proc import Daemon, become_subreaper, ns_argv
from tunbench.state import Ledger
from tunbench.topology.build import Topology, TopologySpec


@contextlib.contextmanager
def emulated_pair(
    profile: Profile,
    ledger: Ledger,
    workdir: Path,
    *,
    seed: int,
    mtu: int = 1500,
    sysctls: dict[str, str] | None = None,
) -> Iterator[Topology]:
    """Client and server namespaces joined by the profile's link (veth for `lan`)."""
    build = profile_link_builder(profile, ledger, workdir, seed)
    spec = TopologySpec(
        mtu=profile.mtu or mtu,
        sysctls={**(sysctls or {}), **profile.sysctl},
        congestion_control=profile.congestion_control,
    )
    with Topology(ledger, "sh", spec, link_builder=build) as topo:
        yield topo


def run_shell(profile: Profile, command: list[str], server_command: list[str] | None, *, seed: int) -> int:
    """Returns the client command's exit status."""
    become_subreaper()
    ledger = Ledger.open()
    workdir = Path(tempfile.mkdtemp(prefix=f"{ledger.prefix}-shell-"))
    ledger.add_path(str(workdir))
    try:
        with emulated_pair(profile, ledger, workdir, seed=seed) as topo, contextlib.ExitStack() as stack:
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
            # the child shares our terminal; while it runs, Ctrl-C is its business, not ours
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                proc = subprocess.Popen(
                    ns_argv(topo.client.name, cmd),
                    env=env,
                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                )
                rec = ledger.add_proc(proc.pid, "link shell command")
                status = proc.wait()
                ledger.drop_proc(rec)
            finally:
                signal.signal(signal.SIGINT, old)
            if server_command and (workdir / "server.log").exists():
                tail = (workdir / "server.log").read_text(errors="replace").strip()
                if tail:
                    print(f"--- server command output ---\n{tail[-4000:]}")
            return status
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        ledger.drop_path(str(workdir))
        finish_ledger(ledger)
