"""The adapter file format (documented in docs/adapters.md). Loading validates everything, so a broken
adapter fails with file:line: key: message before any namespace exists."""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator

from tunbench.errors import ConfigError
from tunbench.tomlfile import locate, read_toml, validate


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LogProbe(_Strict):
    kind: Literal["log"]
    role: Literal["client", "server"]
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"invalid regular expression: {e}") from e
        return v


class PortProbe(_Strict):
    kind: Literal["port"]
    ns: Literal["client", "server"]
    port: str
    proto: Literal["tcp", "udp"] = "tcp"


class PingProbe(_Strict):
    kind: Literal["ping"]
    ns: Literal["client", "server"] = "client"
    address: str


class FileProbe(_Strict):
    kind: Literal["file"]
    path: str


class CmdProbe(_Strict):
    kind: Literal["cmd"]
    ns: Literal["client", "server", "host"] = "host"
    run: str


Probe = Annotated[LogProbe | PortProbe | PingProbe | FileProbe | CmdProbe, Field(discriminator="kind")]


def _compiled(v: str) -> re.Pattern[str]:
    try:
        return re.compile(v)
    except re.error as e:
        raise ValueError(f"invalid regular expression: {e}") from e


def _number_pattern(v: str) -> str:
    """A pattern whose every match is one number: its first group, and with a second group the nanoseconds
    that go with it (WireGuard's UAPI: `last_handshake_time_sec=`, `last_handshake_time_nsec=`)."""
    if _compiled(v).groups not in (1, 2):
        raise ValueError("needs one group (the number), or two (seconds and nanoseconds)")
    return v


# what the numbers a `cmd` or `socket` handshake counter reads are (docs/adapters.md, "Handshakes")
HandshakeValue = Literal["count", "time", "age"]


class LogHandshakes(_Strict):
    """The handshakes are the lines of a role's daemon log that match `pattern`."""

    kind: Literal["log"]
    role: Literal["client", "server"] = "client"
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        _compiled(v)
        return v


class _NumbersRead(_Strict):
    """What `cmd` and `socket` counters share: the numbers `pattern` finds in what they read, and what they
    are (`value`)."""

    pattern: str
    value: HandshakeValue = "count"

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        return _number_pattern(v)


class CmdHandshakes(_NumbersRead):
    """A command (at `ns`) whose output holds the numbers `pattern` finds: a running count of handshakes,
    or each peer's latest handshake as a time (`time`, Unix seconds, 0: none) or an age (`age`, seconds)."""

    kind: Literal["cmd"]
    ns: Literal["client", "server", "host"] = "client"
    run: str


class SocketHandshakes(_NumbersRead):
    """A request to a unix socket on the role's machine (`path`: the socket file; `send`, then the reply up
    to one that ends with `until`, or the socket's end), whose reply holds the numbers `pattern` finds, as
    for `cmd`. For a UAPI socket (WireGuard in userspace): no fork per reading, and nanoseconds."""

    kind: Literal["socket"]
    role: Literal["client", "server"] = "client"
    path: str
    send: str = ""
    until: str = "\n\n"


HandshakeSpec = LogHandshakes | CmdHandshakes | SocketHandshakes
Handshakes = Annotated[HandshakeSpec, Field(discriminator="kind")]


class KeyStep(_Strict):
    """Runs on the host in the trial's private directory; its stripped stdout becomes variable `name`."""

    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    run: str
    stdin: str | None = None


class FileSpec(_Strict):
    """A file written into the trial's private directory (templated), e.g. a config or a key."""

    path: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    content: str
    mode: str = Field(default="0600", pattern=r"^0[0-7]{3}$")


class RoleSpec(_Strict):
    """One side of the tunnel: commands before, a long-running daemon, probes, commands after."""

    before: list[str] = []
    daemon: str | None = None
    env: dict[str, str] = {}
    ready: list[Probe] = []
    after: list[str] = []


class TargetSpec(_Strict):
    """Where the client-side traffic generator connects to reach the server through the tunnel."""

    address: str
    port: str = "{iperf_port}"


class MultiFileSpec(_Strict):
    """A file written per client (or once, for `multi.files`); the path may use {i} and one sub-directory."""

    path: str = Field(pattern=r"^[A-Za-z0-9_.{}-]+(/[A-Za-z0-9_.{}-]+)?$")
    content: str
    mode: str = Field(default="0600", pattern=r"^0[0-7]{3}$")


class MultiSpec(_Strict):
    """One server, many clients (docs/adapters.md, "Many clients"). The top-level `keys` and `files` run
    once; then per client i: `client_keys` (stdout -> per-client variables), `client_files`, and the
    `server_peer` template (joined in client order into {server_peers}); then `files` once; then the
    server role once and the client role in every client namespace."""

    client_keys: list[KeyStep] = []
    client_files: list[MultiFileSpec] = []
    server_peer: str = ""
    files: list[MultiFileSpec] = []
    server: RoleSpec
    client: RoleSpec
    probe_address: str = "{inner_server}"  # "ready" = an ICMP echo to this address through the tunnel
    max_clients: int = Field(default=4000, ge=1, le=4000)


class IPv6Spec(_Strict):
    """What the adapter can do over IPv6 (docs/adapters.md, "IPv6"). Undeclared means no: an adapter written
    before IPv6 runs existed may put `{server_addr}:{port}` in its templates, so a run over IPv6 refuses it
    at plan time instead of failing its trials."""

    underlay: StrictBool = False  # runs over the IPv6 underlay (`--ip 6`): {server_addr} is then 2001:2::2
    overlay: StrictBool = False  # carries IPv6 inside (`overlay = "ipv6"`): {inner_server} is then 2001:2:0:1::1
    # parameter defaults that differ over an IPv6 underlay (the 20 bytes more of outer header: `mtu`)
    underlay_params: dict[str, str] = {}


KernelModule = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]


class KernelNeedWhen(_Strict):
    """`requires_kernel_when = [{ when = { datapath = "kernel" }, modules = ["esp4"] }]`: modules needed only
    when every parameter in `when` has its value (strongSwan needs kernel ESP with one datapath only)."""

    when: dict[str, str]
    modules: list[KernelModule]


class InstructionsSpec(_Strict):
    """`[instructions]`: how the work gate reads a count of this tunnel's daemons (perf/instructions.py). A
    daemon that runs the same traffic in one of two modes per bring-up, each for all its packets (OpenVPN's TLS
    state machine on every wake-up or not: docs/work-gate.md), names the shared object whose instructions mark
    the mode the gate counts: a window with less than `mode_min_share` of its count there is "not counted", and
    says so, instead of mixing two modes into one comparison."""

    mode_object: str = Field(pattern=r"^[A-Za-z0-9_.+-]+$")  # the start of a file name: "libssl.so"
    mode_min_share: float = Field(default=0.01, gt=0, lt=1)
    mode: str = Field(min_length=1)  # what the counted mode is, said of a window in the other


class AdapterSpec(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    description: str = ""
    layer: Literal["l3", "l4"]
    requires: list[str] = []
    # kernel modules (or built-in kernel features) the tunnel needs, by module name: "wireguard", "ip_gre"
    requires_kernel: list[KernelModule] = []
    requires_kernel_when: list[KernelNeedWhen] = []
    kernel_hint: str = ""  # said with a missing module: the way to run without it
    version: str | None = None
    version_regex: str | None = None
    params: dict[str, str] = {}
    keys: list[KeyStep] = []
    files: list[FileSpec] = []
    server: RoleSpec = RoleSpec()
    client: RoleSpec = RoleSpec()
    ready: list[Probe] = []
    target: TargetSpec
    ready_timeout_s: float = Field(default=20.0, gt=0, le=600)
    multi: MultiSpec | None = None  # optional: how to run one server with many clients
    ipv6: IPv6Spec = IPv6Spec()
    # optional: how to count the tunnel's handshakes (the recovery workload: did it re-handshake?)
    handshakes: Handshakes | None = None
    # optional: the family of tunbench-link's message classes the tunnel's packets fall in (docs/faults.md),
    # so a dry run counts what a profile's counted faults on its handshake cost each bring-up
    messages: Literal["wg", "ovpn", "ike"] | None = None
    # optional: the mode of a daemon that the work gate counts (InstructionsSpec)
    instructions: InstructionsSpec | None = None

    @field_validator("params")
    @classmethod
    def _param_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", k):
                raise ValueError(f"parameter name {k!r} must be lower_snake_case")
            if k == "label":
                raise ValueError("'label' is reserved (every adapter accepts it)")
        return v

    @field_validator("ipv6")
    @classmethod
    def _ipv6(cls, v: IPv6Spec, info: ValidationInfo) -> IPv6Spec:
        """Checked as the `ipv6` field (declared after `layer` and `params`), so an error names its key."""
        if v.overlay and info.data.get("layer") == "l4":
            raise ValueError("ipv6.overlay: an L4 proxy has no inner network (overlay is for L3 tunnels)")
        unknown = sorted(set(v.underlay_params) - set(info.data.get("params") or {}))
        if unknown:
            raise ValueError(f"ipv6.underlay_params: {unknown[0]!r} is not a parameter of the adapter")
        if v.underlay_params and not v.underlay:
            raise ValueError("ipv6.underlay_params without ipv6.underlay = true")
        return v

    @field_validator("handshakes")
    @classmethod
    def _handshakes(cls, v: HandshakeSpec | None, info: ValidationInfo) -> HandshakeSpec | None:
        """A log is a daemon's: the role whose log is read must have one (checked as the `handshakes` field,
        declared after the roles)."""
        if isinstance(v, LogHandshakes):
            role = info.data.get(v.role)
            if isinstance(role, RoleSpec) and not role.daemon:
                raise ValueError(f"a log is a daemon's output, and role {v.role!r} has no daemon")
        return v


class LoadedAdapter(BaseModel):
    model_config = ConfigDict(frozen=True)

    spec: AdapterSpec
    source: str
    text: str


# values that are not `{name}` templates: names, regexes, enums, file modes; params are the variables' values
_NOT_TEMPLATES = {"name", "description", "version_regex", "pattern", "mode", "layer", "kind", "role", "ns", "proto",
                  "params", "requires_kernel", "requires_kernel_when", "kernel_hint", "underlay_params", "value",
                  "until", "messages", "instructions"}  # fmt: skip


def _templates(value: object, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], str]]:
    """Every template string in a validated adapter (as a plain dump), with its path."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [t for k, v in value.items() if k not in _NOT_TEMPLATES for t in _templates(v, (*path, k))]
    if isinstance(value, list):
        return [t for i, v in enumerate(value) for t in _templates(v, (*path, i))]
    return []


def check_templates(spec: AdapterSpec, text: str, source: str) -> None:
    """Placeholders are well-formed everywhere, and `requires` and `version` (rendered with the parameters
    alone, before any trial) use only parameters: a bad one fails at load time with file:line: key."""
    formatter = string.Formatter()
    for path, template in _templates(spec.model_dump(exclude_none=True)):
        key = ".".join(f"[{p}]" if isinstance(p, int) else p for p in path).replace(".[", "[")
        try:
            fields = {f for _, f, _, _ in formatter.parse(template) if f is not None}
            if any(not f.isidentifier() for f in fields):
                raise ValueError("a placeholder is {name}")
        except ValueError as e:
            raise ConfigError(
                f"bad template {template!r}: {e} (write {{{{ and }}}} for literal braces)",
                source=source,
                line=locate(text, path),
                key=key,
            ) from None
        unknown = fields - set(spec.params) if path[0] in ("requires", "version") else set()
        if unknown:
            raise ConfigError(
                f"{{{sorted(unknown)[0]}}} is not a parameter (known: {', '.join(sorted(spec.params)) or 'none'})",
                source=source,
                line=locate(text, path),
                key=key,
            )


def load_adapter(path: Path) -> LoadedAdapter:
    data, text = read_toml(path)
    spec = validate(AdapterSpec, data, text=text, source=str(path))
    check_templates(spec, text, str(path))
    return LoadedAdapter(spec=spec, source=str(path), text=text)
