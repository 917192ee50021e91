"""The multi-host commands: `tunbench agent` (what `--hosts` starts over SSH on each host), and the
`--hosts` side of `clean` and `doctor`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import typer

from tunbench.cli.console import console, err_console

HostsOpt = Annotated[
    Path | None,
    typer.Option(
        "--hosts",
        help="An Ansible-style inventory (INI or YAML) naming the client and server hosts: roles run there, "
        "reached with the system `ssh` (docs/multi-host.md).",
    ),
]


def agent() -> None:
    """Serve one controller over stdin/stdout (JSON lines). Started by `tunbench run --hosts` through ssh;
    everything it starts is removed when its input closes."""
    from tunbench.remote.agent import main

    raise typer.Exit(main())


@contextlib.contextmanager
def connected(path: Path) -> Iterator[list[tuple[str, Any]]]:
    """Connect to every host of an inventory, all at once: (name, AgentConnection or the TunbenchError that
    stopped it), in the inventory's order."""
    from tunbench.host.scope import run_scope
    from tunbench.host.workdir import workdir
    from tunbench.remote.connection import AgentConnection
    from tunbench.remote.inventory import load_inventory

    inv = load_inventory(path)
    with run_scope() as ledger, workdir(ledger, "ssh") as logdir, contextlib.ExitStack() as stack:
        conns = [AgentConnection(h, ledger, logdir, inv.ssh_config) for h in inv.hosts]
        results = _at_once(lambda c: c.__enter__(), conns, on_done=stack.push)
        yield [(h.name, res) for h, res in zip(inv.hosts, results, strict=True)]


def _at_once(fn: Callable[[Any], Any], items: list[Any], on_done: Callable[[Any], object] | None = None) -> list[Any]:
    """`fn` of each item in threads of their own (one host's slow answer does not hold up the others'): each
    result, or the TunbenchError it raised, in the items' order. `on_done(item)`, in the caller's thread, for
    each item whose call returned, before any other exception is raised (so what was opened is closed)."""
    from tunbench.errors import TunbenchError

    def one(item: Any) -> Any:
        try:
            return fn(item)
        except TunbenchError as e:  # handed back: the caller says which host failed, and how
            return e

    if not items:
        return []
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        futures = [pool.submit(one, item) for item in items]
    for item, f in zip(items, futures, strict=True):
        if on_done is not None and f.exception() is None and not isinstance(f.result(), TunbenchError):
            on_done(item)
    return [f.result() for f in futures]  # any other exception is raised here


def clean_hosts(path: Path) -> int:
    """`tunbench clean --hosts`: each host removes what killed runs left there, all hosts at once. Returns the
    hosts that could not be cleaned."""
    from tunbench.errors import TunbenchError
    from tunbench.host.clean import CleanReport

    failed = 0
    with connected(path) as conns:
        live = [conn for _, conn in conns if not isinstance(conn, TunbenchError)]
        reports = dict(zip(map(id, live), _at_once(lambda c: c.call("clean", wait_s=120.0), live), strict=True))
        for name, conn in conns:
            rep = conn if isinstance(conn, TunbenchError) else reports[id(conn)]
            if isinstance(rep, TunbenchError):
                err_console.print(f"[red]{name}: not cleaned: {rep}[/]", highlight=False)
                failed += 1
                continue
            done = CleanReport(**rep)
            console.print(
                f"{name}: " + ("nothing to clean" if done.empty() else f"removed {done.summary()}"), highlight=False
            )
    return failed


def doctor_hosts(path: Path) -> int:
    """`tunbench doctor --hosts`: per host, a verdict on each thing a run needs there. Returns the count of
    failed checks."""
    from tunbench import workloads
    from tunbench.errors import TunbenchError
    from tunbench.session import program_needs
    from tunbench.tunnels.registry import builtin_names, parse_ref

    needs = program_needs([parse_ref(name) for name in builtin_names()], workloads.REGISTRY)

    bad = 0

    def say(ok: bool, name: str, text: str, fix: str = "") -> None:
        nonlocal bad
        console.print(f"  {'[green]✓[/]' if ok else '[red]✗[/]'} {name}: {text}", highlight=False)
        if not ok:
            bad += 1
            if fix:
                console.print(f"      fix: {fix}", highlight=False)

    from tunbench.remote.instructions import instructions_verdict
    from tunbench.remote.inventory import load_inventory
    from tunbench.remote.work import count_verdict

    inv = load_inventory(path)
    can_perf: dict[str, str] = {}  # each host's perf: "" where it counts instructions:u, else why not
    with connected(path) as conns:
        for name, conn in conns:
            console.print(f"[bold]{name}[/]")
            if isinstance(conn, Exception):
                say(False, "reachable", str(conn))
                continue
            say(True, "reachable", f"tunbench {conn.info.version} (build {conn.info.build}), same as here")
            clock = conn.clock
            say(True, "clock", f"offset {clock.wall_s * 1e3:+.3f} ms ± {clock.uncertainty_s * 1e3:.3f} ms")
            try:
                caps = conn.call("capabilities")
                have = conn.call("tools", programs=sorted({p for ps in needs.values() for p in ps}))
            except TunbenchError as e:
                say(False, "agent", str(e))
                continue
            say(caps["root"], "root", "yes" if caps["root"] else "no", "connect as root")
            say(caps["tun"], "TUN device", "/dev/net/tun" if caps["tun"] else "missing", "modprobe tun")
            say(
                bool(caps["cgroup"]),
                "cgroup CPU accounting",
                caps["cgroup"] or "none (CPU is then sampled only)",
                "mount cgroup2 or cpuacct",
            )
            for what, progs in needs.items():
                missing = [p for p in progs if not have.get(p)]
                if missing:
                    say(False, what, "missing " + ", ".join(missing), "install it there (`make deps` in a checkout)")
            if all(have.values()):
                say(True, "programs", "every tunnel's and workload's programs are there")
            console.print(
                "  · link emulation: "
                + (
                    "tunbench-link"
                    if caps["tunbench_link"]
                    else "no tunbench-link (`make build` there): an emulated profile with this host as the client "
                    "is refused"
                )
                + ("; the kernel's netem is there too (unused)" if caps["netem"] else ""),
                highlight=False,
            )
            say(*count_verdict(conn))  # counted work (remote/work.py)
            say(*instructions_verdict(conn))  # counted instructions (remote/instructions.py)
            with contextlib.suppress(TunbenchError):
                can_perf[name] = str(conn.call("instr_capability")["why"])
            for line in _address_verdicts(conn, inv, name):
                say(*line)
    if said := pair_counter_line(inv, can_perf):
        console.print(said, highlight=False)
    return bad


def pair_counter_line(inv: Any, can_perf: dict[str, str]) -> str:
    """What `--instr-counter auto` uses for a run's client/server pair on this inventory (one counter for both
    sides: remote/instructions.py run_counter); "" when the inventory has no pair or a host was unreachable."""
    from tunbench.errors import ConfigError
    from tunbench.remote.instructions import run_counter

    try:
        pair = dict.fromkeys(inv.for_role(role).name for role in ("client", "server"))
    except ConfigError:
        return ""
    if any(name not in can_perf for name in pair):
        return ""
    counter, why = run_counter("auto", {name: can_perf[name] for name in pair})
    return f"counted instructions of a run's pair ({', '.join(pair)}): {counter} ({why})"


def _address_verdicts(conn: Any, inv: Any, name: str) -> list[tuple[bool, str, str, str]]:
    """On each client host apart from the server's: whether its egress address and its client addresses are
    usable there (free, on the network of the NIC that routes to the server), and whether its client
    addresses are its own (no other client host's, no host's own address)."""
    from tunbench.errors import ConfigError, TunbenchError
    from tunbench.topology.layout import MAX_CLIENTS

    host = next(h for h in inv.hosts if h.name == name)
    try:
        server = inv.for_role("server")
    except ConfigError:  # no single server host: nothing to route to
        return []
    if "client" not in host.roles or server.name == name or not server.address:
        return []
    out = _pool_verdicts(inv, host)
    for var, what, addresses in (
        ("tunbench_egress_address", "the egress address", [host.egress_address] if host.egress_address else []),
        ("tunbench_client_addresses", "the client address", host.client_pool(MAX_CLIENTS)),
    ):
        if not addresses:
            continue
        try:
            why = conn.call("check_addresses", server=server.address, addresses=addresses, what=what, key=var)
        except TunbenchError as e:
            why = str(e)
        shown = addresses[0] if len(addresses) == 1 else f"{addresses[0]}-{addresses[-1]} ({len(addresses)})"
        out.append((not why, var, why or f"{shown}: free, on the network that routes to {server.name}", "pick others"))
    return out


def _pool_verdicts(inv: Any, host: Any) -> list[tuple[bool, str, str, str]]:
    """A client host's tunbench_client_addresses against the inventory (no host needed): a range another
    client host's overlaps, or one holding a host's own or egress address, is a ✗; with several client
    hosts, the host's share of a fleet by tunbench_client_weight."""
    from tunbench.remote.inventory import pool_overlap

    if host.client_addresses is None:
        return []
    var = "tunbench_client_addresses"
    clients = inv.clients()
    for other in clients:
        if other.name != host.name and (both := pool_overlap(host, other)):
            return [(False, var, f"{both[0]}-{both[1]} are {other.name}'s too", "give each client host its own")]
    for h in inv.hosts:
        for what, addr in (("own", h.address), ("egress", h.egress_address)):
            if addr and host.pool_holds(addr):
                return [(False, var, f"holds {addr}, {h.name}'s {what} address", "leave the hosts' addresses out")]
    if len(clients) < 2:
        return []
    total = sum(h.client_weight for h in clients)
    share = f"{host.client_weight:g} of {total:g}, {100 * host.client_weight / total:.0f}% of a fleet's clients"
    return [(True, "tunbench_client_weight", f"{share}; no other client host's addresses", "")]
