"""Real SSH "hosts" on this one machine, for the multi-host integration tests.

Each host is a network namespace `tbh-<6 hex>-<name>` running its own `sshd` with a throwaway host key;
the hosts share an underlay 198.18.200.0/23 (h1 .200.1, h2 .200.2, ...; the rest of it is free for client
addresses) and 2001:2:0:c8::/64 (h1 ::1, h2 ::2, ...) through a bridge in one more namespace, `tbh-<hex>-sw0`.
The root namespace gets no address, route or link: the controller reaches a host only with
`ssh -F <ssh_config> <name>`, whose `ProxyCommand` is `ip netns exec <ns> socat STDIO TCP:127.0.0.1:22`.
The `tbh-` prefix is not a run prefix (`tb` + 6 hex), so `tunbench clean` never sweeps these namespaces.

What a session on a host sees (sshd runs through a launcher, and its sessions inherit what it sees):
- the host's network namespace (its `eth0` on the underlay, `lo`);
- a mount namespace of sshd's own, private (nothing mounted in it reaches the root's), with
  - its own tmpfs on /run: sshd's privilege-separation directory /run/sshd exists there and never on the
    machine, and each host has its own /run/tunbench (ledgers) and /run/netns (namespaces a remote tunbench
    creates there), like a machine of its own. They are not visible from the root namespace: check them
    through ssh (`SshHosts.leftovers`);
  - a sysfs for the host's network namespace (as `ip netns exec` gives), with the machine's cgroup
    hierarchies (/sys/fs/cgroup) bound back in, so cgroup accounting works in a session;
- the machine's /tmp, /etc, pid namespace and cgroups, shared with the other hosts and the controller (a
  remote `tunbench clean` sweeps tb-prefixed temp dirs and cgroups of runs it does not know: run it when
  no other run is live).

`cut(name)` drops every SSH connection of a host, as a network cut would: it SIGKILLs that host's
per-connection sshd processes (the descendants of its listening sshd named sshd/sshd-session/sshd-auth,
by pid), which closes their TCP sockets at once. The local ssh (and its control master) sees EOF and exits
255 within milliseconds; the remote commands are not killed: their stdin reaches EOF, as it would on a real
host whose sshd lost the connection (a remote tunbench agent tears down on that EOF). The listener stays,
so a later `ssh` connects again.

Every created object is removed on exit, on error too, and the exit asserts that nothing is left: control
masters (`ssh -O exit`, then their pids), sshd and every process left in a host's namespaces, the
namespaces (their veths go with them) and the files written.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

SUBNET4 = "198.18.200"
SUBNET6 = "2001:2:0:c8"
SSHD_NAMES = {"sshd", "sshd-session", "sshd-auth"}
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
SWITCH = "sw0"
PROXY = ["socat", "STDIO", "TCP:127.0.0.1:22"]
SRC_DIR = Path(__file__).resolve().parents[1] / "src"
# The sshd launcher (runs inside the host's network namespace and a fresh private mount namespace): a sysfs
# for this network namespace with the machine's cgroup hierarchies bound back, and a tmpfs on /run that
# holds sshd's privilege-separation directory. Arguments: the empty directory for the old /sys, then sshd's
# argv ("$@", never pasted into the script).
LAUNCHER = r"""set -e
old=$1; shift
mount --rbind /sys "$old"
mount -t sysfs tbh-sysfs /sys
for d in fs/cgroup kernel/debug kernel/tracing fs/bpf kernel/security; do
  if mountpoint -q "$old/$d" && [ -d "/sys/$d" ]; then mount --rbind "$old/$d" "/sys/$d"; fi
done
umount -l "$old"
mount -t tmpfs -o mode=0755,size=64m tbh-run /run
mkdir -m 0755 /run/sshd
exec "$@"
"""


def _run(argv: Sequence[str], *, timeout: float = 10, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and res.returncode != 0:
        raise RuntimeError(f"`{shlex.join(argv)}` exited {res.returncode}: {res.stdout}{res.stderr}")
    return res


def _ns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _pids_in(inodes: set[int], kind: str) -> list[int]:
    """Every process whose `kind` namespace (net, mnt) is one of `inodes`."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _ns_inode(f"/proc/{entry.name}/ns/{kind}") in inodes:
            out.append(int(entry.name))
    return out


def _netns_list() -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


@dataclass
class _Host:
    name: str
    netns: str
    index: int
    dir: Path
    sshd: subprocess.Popen[bytes] | None = None
    net_inode: int | None = None
    mnt_inode: int | None = None


@dataclass
class SshHosts:
    """What `ssh_hosts()` yields. `hosts`: name -> network namespace."""

    ssh_config: Path
    inventory: Path
    hosts: dict[str, str]
    known_hosts: Path
    user_key: Path
    _hosts: dict[str, _Host] = field(repr=False, default_factory=dict)

    def address(self, name: str) -> str:
        return f"{SUBNET4}.{self._hosts[name].index}"

    def address6(self, name: str) -> str:
        return f"{SUBNET6}::{self._hosts[name].index}"

    def ssh_argv(self, name: str, *command: str) -> list[str]:
        """`ssh -F <ssh_config> <name> [command...]` (ssh joins `command` with spaces for the remote shell)."""
        return ["ssh", "-F", str(self.ssh_config), name, *command]

    def ssh(
        self, name: str, *argv: str, timeout: float = 30, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run argv on host `name` (each element arrives as one word: it is quoted for the remote shell)."""
        return self.sh(name, shlex.join(argv), timeout=timeout, input=input)

    def sh(
        self, name: str, script: str, *, timeout: float = 30, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a shell command line on host `name` (the remote user's shell parses it)."""
        return subprocess.run(
            self.ssh_argv(name, script),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )

    def sshd_pid(self, name: str) -> int:
        proc = self._hosts[name].sshd
        assert proc is not None, f"sshd of {name} is not running"
        return proc.pid

    def connection_pids(self, name: str) -> list[int]:
        """The per-connection sshd processes of host `name` (descendants of its listening sshd)."""
        try:
            children = psutil.Process(self.sshd_pid(name)).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        out = []
        for c in children:
            with contextlib.suppress(psutil.Error):
                if c.name() in SSHD_NAMES:
                    out.append(c.pid)
        return out

    def cut(self, name: str) -> int:
        """Drop every SSH connection of host `name` now (see the module docstring); returns how many sshd
        processes were killed."""
        pids = self.connection_pids(name)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def leftovers(self, name: str) -> list[str]:
        """What a tunbench run left on host `name`, seen from inside it (through ssh): namespaces, ledgers,
        tb-prefixed links; and processes in the host's namespaces other than sshd and its sessions."""
        h = self._hosts[name]
        script = (
            "ip netns list; ls -A /run/tunbench 2>/dev/null | sed 's/^/state /';"
            " ip -o link | sed -n 's/^[0-9]*: \\(tb[0-9a-f]\\{6\\}-[^:@]*\\).*/link \\1/p'; true"
        )
        res = self.sh(name, script, timeout=15)
        found = [f"{name}: {line}" for line in res.stdout.splitlines() if line.strip()]
        if res.returncode != 0:
            found.append(f"{name}: ssh failed ({res.returncode}): {res.stderr.strip()}")
        ours: set[int] = set()
        with contextlib.suppress(psutil.Error):
            sshd = psutil.Process(self.sshd_pid(name))
            ours = {sshd.pid, *(c.pid for c in sshd.children(recursive=True))}
        inodes = {i for i in (h.net_inode,) if i is not None}
        for pid in sorted(set(_pids_in(inodes, "net")) | set(_pids_in({h.mnt_inode} if h.mnt_inode else set(), "mnt"))):
            if pid in ours:
                continue
            with contextlib.suppress(psutil.Error):
                argv = psutil.Process(pid).cmdline()
                if argv != PROXY:  # the ProxyCommand of a local ssh: the transport itself
                    found.append(f"{name}: process {pid}: {' '.join(argv)[:120]}")
        return found


def _master_pid(cfg: Path, name: str) -> int | None:
    res = _run(["ssh", "-F", str(cfg), "-O", "check", name], timeout=5, check=False)
    m = re.search(r"pid=(\d+)", res.stderr + res.stdout)
    return int(m.group(1)) if m else None


@contextlib.contextmanager
def ssh_hosts(
    tmp: Path, names: Sequence[str] = ("h1", "h2"), *, tunbench_command: str | None = None
) -> Iterator[SshHosts]:
    """SSH hosts `names` (each [a-z][a-z0-9]{0,7}) on this machine; see the module docstring. Files go to
    `tmp` (control sockets to a short directory under /tmp when `tmp` is too long for a socket path)."""
    if os.geteuid() != 0:
        raise RuntimeError("ssh_hosts needs root (network namespaces)")
    if len(set(names)) != len(names) or not names or len(names) > 250:
        raise ValueError(f"bad host names {names!r}")
    for n in names:
        if not NAME_RE.match(n) or n == SWITCH:
            raise ValueError(f"bad host name {n!r} (expected [a-z][a-z0-9]{{0,7}}, not {SWITCH})")
    sshd_bin = shutil.which("sshd") or "/usr/sbin/sshd"
    tag = f"tbh-{secrets.token_hex(3)}"
    base = Path(tmp) / f"{tag}-ssh"
    sock_dir = base if len(str(base)) <= 60 else Path(tempfile.mkdtemp(prefix=f"{tag}-", dir="/tmp"))
    switch = f"{tag}-{SWITCH}"
    hosts = {n: _Host(n, f"{tag}-{n}", i, base / n) for i, n in enumerate(names, start=1)}
    made_ns: list[str] = []
    cfg = base / "ssh_config"
    errors: list[str] = []
    try:
        base.mkdir(mode=0o700)
        for h in hosts.values():
            h.dir.mkdir()
            (h.dir / "oldsys").mkdir()
        # keys: one user key for every host, one host key each
        user_key = base / "user_key"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tbh-user", "-f", str(user_key)])
        (base / "authorized_keys").write_text((base / "user_key.pub").read_text())
        known = []
        for h in hosts.values():
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"tbh-{h.name}", "-f", str(h.dir / "host_key")])
            kind, blob = (h.dir / "host_key.pub").read_text().split()[:2]
            known.append(f"{h.name} {kind} {blob}\n")
        known_hosts = base / "known_hosts"
        known_hosts.write_text("".join(known))

        # namespaces: the switch, then each host joined to its bridge by a veth made across namespaces
        for ns in [switch, *(h.netns for h in hosts.values())]:
            made_ns.append(ns)
            _run(["ip", "netns", "add", ns])
        sw_cmds = ["link add br0 type bridge", "link set br0 up", "link set lo up"]
        for h in hosts.values():
            _run(
                [
                    "ip",
                    "-n",
                    h.netns,
                    "link",
                    "add",
                    "eth0",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    f"p{h.index}",
                    "netns",
                    switch,
                ]
            )
            sw_cmds += [f"link set p{h.index} master br0", f"link set p{h.index} up"]
            host_cmds = [
                "link set lo up",
                f"addr add {SUBNET4}.{h.index}/23 dev eth0",
                f"addr add {SUBNET6}::{h.index}/64 dev eth0 nodad",
                "link set eth0 up",
            ]
            subprocess.run(
                ["ip", "-n", h.netns, "-batch", "-"],
                input="\n".join(host_cmds) + "\n",
                text=True,
                check=True,
                capture_output=True,
            )
        subprocess.run(
            ["ip", "-n", switch, "-batch", "-"],
            input="\n".join(sw_cmds) + "\n",
            text=True,
            check=True,
            capture_output=True,
        )

        # sshd per host
        for h in hosts.values():
            pidfile = h.dir / "sshd.pid"
            (h.dir / "sshd_config").write_text(
                f"ListenAddress {SUBNET4}.{h.index}:22\n"
                "ListenAddress 127.0.0.1:22\n"
                f"HostKey {h.dir}/host_key\n"
                f"PidFile {pidfile}\n"
                f"AuthorizedKeysFile {base}/authorized_keys\n"
                "PermitRootLogin prohibit-password\n"
                "PubkeyAuthentication yes\n"
                "PasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\n"
                "UsePAM no\n"
                "StrictModes no\n"
                "UseDNS no\n"
                "PrintMotd no\n"
                "PrintLastLog no\n"
                "MaxSessions 100\n"
                "MaxStartups 100:30:200\n"
                "LogLevel ERROR\n"
            )
            log = open(h.dir / "sshd.log", "wb")  # noqa: SIM115 (the child keeps it)
            with log:
                h.sshd = subprocess.Popen(
                    [
                        "nsenter",
                        f"--net=/run/netns/{h.netns}",
                        "unshare",
                        "--mount",
                        "--propagation",
                        "private",
                        "--",
                        "sh",
                        "-c",
                        LAUNCHER,
                        "tbh-sshd",
                        str(h.dir / "oldsys"),
                        sshd_bin,
                        "-D",
                        "-e",
                        "-f",
                        str(h.dir / "sshd_config"),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
        deadline = time.monotonic() + 10
        for h in hosts.values():
            assert h.sshd is not None
            while not (h.dir / "sshd.pid").exists():  # sshd writes it after it listens
                if h.sshd.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"sshd of {h.name} did not start: {(h.dir / 'sshd.log').read_text()[-2000:]}")
                time.sleep(0.01)
            h.net_inode = _ns_inode(f"/run/netns/{h.netns}")
            h.mnt_inode = _ns_inode(f"/proc/{h.sshd.pid}/ns/mnt")
            if h.mnt_inode == _ns_inode("/proc/self/ns/mnt") or h.net_inode != _ns_inode(f"/proc/{h.sshd.pid}/ns/net"):
                raise RuntimeError(f"sshd of {h.name} is not in its own namespaces")

        cfg.write_text(
            "".join(
                f"Host {h.name}\n"
                "  HostName 127.0.0.1\n"
                "  Port 22\n"
                "  User root\n"
                f"  IdentityFile {user_key}\n"
                "  IdentitiesOnly yes\n"
                "  IdentityAgent none\n"
                f"  UserKnownHostsFile {known_hosts}\n"
                "  GlobalKnownHostsFile /dev/null\n"
                f"  HostKeyAlias {h.name}\n"  # every host is 127.0.0.1 to ssh: its key is looked up by name
                "  StrictHostKeyChecking yes\n"
                "  UpdateHostKeys no\n"
                "  BatchMode yes\n"
                "  LogLevel ERROR\n"
                f"  ProxyCommand ip netns exec {h.netns} {' '.join(PROXY)}\n"
                "  ControlMaster auto\n"
                # %n (the name given to ssh), not %C: %C hashes HostName, which is 127.0.0.1 for every host
                f"  ControlPath {sock_dir}/cm-%n\n"
                "  ControlPersist 60\n"
                for h in hosts.values()
            )
        )
        command = tunbench_command or (
            f"env PYTHONPATH={shlex.quote(str(SRC_DIR))} {shlex.quote(sys.executable)} -m tunbench"
        )
        inventory = base / "hosts.ini"
        first, *rest = hosts.values()
        lines = ["# written by tests/sshhosts.py", "[all:vars]", f"tunbench_ssh_config={cfg}", ""]
        groups = {"client": [first], "server": rest[:1] or [first]}
        for group, members in groups.items():
            lines.append(f"[{group}]")
            lines += [
                f"{h.name} tunbench_address={SUBNET4}.{h.index} tunbench_address6={SUBNET6}::{h.index}"
                f" tunbench_command={shlex.quote(command)}"
                for h in members
            ]
            lines.append("")
        others = rest[1:]
        if others:
            lines.append("[others]")
            lines += [
                f"{h.name} tunbench_address={SUBNET4}.{h.index} tunbench_command={shlex.quote(command)}" for h in others
            ]
        inventory.write_text("\n".join(lines) + "\n")
        yield SshHosts(
            ssh_config=cfg,
            inventory=inventory,
            hosts={n: h.netns for n, h in hosts.items()},
            known_hosts=known_hosts,
            user_key=user_key,
            _hosts=hosts,
        )
    finally:
        errors = _teardown(cfg, hosts, made_ns, base, sock_dir)
        if errors:  # also when an exception is on its way out (it wins; this says what it left)
            print("ssh_hosts left things behind:\n" + "\n".join(errors), file=sys.stderr)
    assert not errors, "ssh_hosts left things behind:\n" + "\n".join(errors)


def _teardown(cfg: Path, hosts: dict[str, _Host], made_ns: list[str], base: Path, sock_dir: Path) -> list[str]:
    """Remove everything `ssh_hosts` made; return what is still there (empty: all gone)."""
    masters: list[int] = []
    if cfg.exists():
        for h in hosts.values():
            sock = sock_dir / f"cm-{h.name}"
            if sock.exists():
                pid = _master_pid(cfg, h.name)
                if pid:
                    masters.append(pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    _run(["ssh", "-F", str(cfg), "-O", "exit", h.name], timeout=5, check=False)
    for h in hosts.values():
        if h.sshd is not None and h.sshd.poll() is None:
            h.sshd.terminate()
            try:
                h.sshd.wait(3)
            except subprocess.TimeoutExpired:
                h.sshd.kill()
                h.sshd.wait()
    # whatever sessions left in a host: by namespace (network and sshd's mount namespace), by pid
    net = {h.net_inode for h in hosts.values() if h.net_inode} | {
        i for i in (_ns_inode(f"/run/netns/{n}") for n in made_ns) if i
    }
    mnt = {h.mnt_inode for h in hosts.values() if h.mnt_inode}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [p for p in set(_pids_in(net, "net")) | set(_pids_in(mnt, "mnt")) | set(masters) if psutil.pid_exists(p)]
        left = [p for p in left if _alive(p)]
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    for ns in made_ns:
        _run(["ip", "netns", "delete", ns], check=False)
    shutil.rmtree(base, ignore_errors=True)
    if sock_dir != base:
        shutil.rmtree(sock_dir, ignore_errors=True)

    errors = []
    present = set(_netns_list())
    errors += [f"netns {ns}" for ns in made_ns if ns in present]
    errors += [f"sshd {h.name} pid {h.sshd.pid}" for h in hosts.values() if h.sshd and _alive(h.sshd.pid)]
    errors += [f"control master pid {p}" for p in masters if _alive(p)]
    errors += [f"process {p} in a host namespace" for p in set(_pids_in(net, "net")) | set(_pids_in(mnt, "mnt"))]
    errors += [f"path {p}" for p in (base, sock_dir) if p.exists()]
    return errors


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
