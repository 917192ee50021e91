"""WAN profile files -> validated Profile, and Profile -> tunbench-link arguments (pure)."""

from __future__ import annotations

import ipaddress
import re
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from tunbench.errors import ConfigError
from tunbench.link.faults import ProfileFault, fault_indexes, faults_spec
from tunbench.tomlfile import locate, read_toml, validate
from tunbench.topology import sysctl
from tunbench.topology.addresses import AddressPlan
from tunbench.topology.settings import check_congestion_control

_VALUE = re.compile(r"^[A-Za-z0-9_.%+-]+$")
# `trace` names a file: anything tunbench-link's SPEC can carry (no ',' or ';', no space at either end)
_PATH = re.compile(r"^[^,;\s](?:[^,;]*[^,;\s])?$")
FILE_KEYS = ("trace",)


def builtin_dir() -> Path:
    return Path(str(resources.files("tunbench.wan_profiles")))


def _check_items(items: dict[str, str]) -> None:
    for key, value in items.items():
        if not re.fullmatch(r"[a-z_]+", key):
            raise ValueError(f"bad impairment name {key!r}")
        if key in FILE_KEYS and not _PATH.match(str(value)):
            raise ValueError(
                f"{key}: {value!r}: a path with ',' or ';' (or spaces at its ends) cannot be passed to tunbench-link"
            )
        if key not in FILE_KEYS and not _VALUE.match(str(value)):
            raise ValueError(f"{key}: bad value {value!r}")


class ProfileEvent(BaseModel):
    """One change of the link at `at` after the schedule's start (the start of the trial's traffic): either
    impairment keys (`rate = "10mbit"`: those keys change, the others keep their values) or `outage = "3s"`
    (the link is down: packets entering it are lost). `direction`: up, down or both (the default)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    at: str
    direction: Literal["up", "down", "both"] = "both"
    outage: str | None = None
    # the client's underlay address (and/or its ports) changes, as a NAT rebinding or a move to another
    # network would: the server sees the client's packets from a new address from then on
    rebind: Literal["address", "port", "both"] | None = None
    origin: str | None = None  # where a timeline row came from (`file.csv:12`), for errors

    @property
    def origin_line(self) -> tuple[str, int] | None:
        """The timeline file and line this event came from, if it came from one."""
        return None if self.origin is None else file_line(self.origin)

    @model_validator(mode="after")
    def _keys(self) -> ProfileEvent:
        extra = {k: str(v) for k, v in (self.model_extra or {}).items()}
        _check_items(extra)
        if not _VALUE.match(self.at):
            raise ValueError(f"at: bad value {self.at!r}")
        if self.outage is not None and not _VALUE.match(self.outage):
            raise ValueError(f"outage: bad value {self.outage!r}")
        if self.rebind is not None and (extra or self.outage is not None or self.direction != "both"):
            raise ValueError("a rebind event takes only `at` (it changes the client's address both ways)")
        return self

    def changes(self) -> dict[str, str]:
        """The impairment keys this event sets."""
        return {k: str(v) for k, v in (self.model_extra or {}).items()}

    def spec(self, rebinds: int = 1, plan: AddressPlan | None = None) -> str:
        """tunbench-link's form of the event: `at=5s,rate=10mbit`, `at=8s,outage=3s`, or for the `rebinds`-th
        rebind the rewriting of the client's addresses in `plan` and of its ports (rebind_keys)."""
        items = {"at": self.at, **({"outage": self.outage} if self.outage is not None else {}), **self.changes()}
        if self.rebind is not None:
            items.update(rebind_keys(self.rebind, rebinds, plan or AddressPlan()))
        return ",".join(f"{k}={v}" for k, v in items.items())

    def applies_to(self, direction: str) -> bool:
        return self.direction in ("both", direction)


def file_line(origin: str) -> tuple[str, int]:
    """`file.csv:12` -> ("file.csv", 12)."""
    file, _, line = origin.rpartition(":")
    return file, int(line)


def rebind_keys(kind: str, n: int, plan: AddressPlan) -> dict[str, str]:
    """tunbench-link's NAT keys for the n-th rebind (n >= 1): the client's addresses move by 99 + n (198.18.0.1
    to .101 for the first; still inside the underlay's network, so the server routes its replies back through
    the link), its TCP and UDP source ports by 1000 x n."""
    moved = kind in ("address", "both")
    v4 = ipaddress.ip_address(plan.client)
    v6 = ipaddress.ip_address(plan.client6)
    to4, to6 = (v4 + 99 + n, v6 + 99 + n) if moved else (v4, v6)
    return {
        "nat_v4": f"{v4}>{to4}",
        "nat_v6": f"{v6}>{to6}",
        "nat_port": str(1000 * n % 65536 if kind in ("port", "both") else 0),
    }


class Profile(BaseModel):
    """Link conditions. `up` is client -> server, `down` server -> client; values use tunbench-link's units
    (delay=50ms, rate=100mbit, loss=0.1%, queue=1000p ... see docs/profiles.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    emulated: bool = True
    up: dict[str, str] = {}
    down: dict[str, str] = {}
    mtu: int | None = Field(default=None, ge=576, le=65535)
    sysctl: dict[str, str] = {}
    congestion_control: str | None = None  # pinned in tunbench's namespaces; None: the scenario's or host's
    events: list[ProfileEvent] = []  # a schedule of changes (docs/profiles.md, "Links that change")
    timeline: str | None = None  # a CSV of changes over time, read into `events` when the file is loaded
    faults: list[ProfileFault] = []  # faults aimed at the tunnel's messages (docs/faults.md)
    classify: bool = False  # record the tunnel's messages without faults (a profile with faults always does)
    ovpn_ports: list[int] = []  # the ports the emulator takes OpenVPN on (its default: 1194)

    @field_validator("congestion_control")
    @classmethod
    def _cc(cls, v: str | None) -> str | None:
        return None if v is None else check_congestion_control(v)

    @field_validator("sysctl")
    @classmethod
    def _sysctl(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            try:
                sysctl.check(key, value)
            except ConfigError as e:
                raise ValueError(f"{key}: {e.detail}") from None
        return v

    @field_validator("up", "down")
    @classmethod
    def _values(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        _check_items(v)
        if "trace" in v and not info.data.get("emulated", True):
            raise ValueError("a trace needs the emulator (emulated = true)")
        return v

    @field_validator("events", "faults", "classify")
    @classmethod
    def _need_the_emulator(cls, v: object, info: ValidationInfo) -> object:
        """Events, faults and classify are the emulator's: an error on the key that asks for them (`emulated`
        is declared, so validated, before them)."""
        if v and not info.data.get("emulated", True):
            raise ValueError(f"{info.field_name} needs the emulator (emulated = true)")
        return v

    def traced(self) -> bool:
        """Whether a direction follows a packet-delivery trace."""
        return "trace" in self.up or "trace" in self.down

    def timed(self) -> bool:
        """Whether the link changes over time (events, a trace, a fault `during` a span): it starts with the
        workload's traffic."""
        return bool(self.events) or self.traced() or any(f.timed for f in self.faults)

    def classified(self) -> bool:
        """Whether the emulator classifies the tunnel's messages (faults, or `classify`)."""
        return bool(self.faults) or self.classify

    def spec(self, direction: str) -> str:
        """tunbench-link's SPEC for one direction: `delay=50ms,loss=0.1%`."""
        items = self.up if direction == "up" else self.down
        return ",".join(f"{k}={v}" for k, v in items.items())

    def event_indexes(self, direction: str) -> list[int]:
        """Which of `events` apply to one direction, in order (tunbench-link numbers them per direction)."""
        return [i for i, e in enumerate(self.events) if e.applies_to(direction)]

    def events_spec(self, direction: str, plan: AddressPlan | None = None) -> str:
        """tunbench-link's EVENTS for one direction: `at=5s,rate=10mbit;at=8s,outage=3s` (rebinds rewrite the
        client's addresses of `plan`, the pair's by default)."""
        rebinds = {i: n for n, i in enumerate((i for i, e in enumerate(self.events) if e.rebind), start=1)}
        return ";".join(self.events[i].spec(rebinds.get(i, 1), plan) for i in self.event_indexes(direction))

    def link_args(self, plan: AddressPlan | None = None) -> list[str]:
        """The SPEC and EVENTS arguments of `tunbench-link run` and `check`."""
        args = []
        for direction, wire in (("up", "a2b"), ("down", "b2a")):
            if spec := self.spec(direction):
                args += [f"--{wire}", spec]
            if events := self.events_spec(direction, plan):
                args += [f"--{wire}-events", events]
            if faults := faults_spec(self.faults, direction):
                args += [f"--{wire}-faults", faults]
        if self.classify and not self.faults:
            args += ["--classify", "on"]
        if self.ovpn_ports and self.classified():
            args += ["--ovpn-ports", ",".join(str(p) for p in self.ovpn_ports)]
        return args


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.toml"))


def load_profile_file(path: Path) -> Profile:
    """A profile file; its `trace` and `timeline` paths are taken relative to it, and the timeline's rows
    become events after the file's own."""
    data, text = read_toml(path)

    def beside(value: str) -> str:
        return value if Path(value).is_absolute() else str(path.parent / value)

    for direction in ("up", "down"):
        items = data.get(direction)
        if isinstance(items, dict) and isinstance(items.get("trace"), str):
            validate(Profile, {"name": "x", direction: items}, text=text, source=str(path))  # as the user wrote it
            items["trace"] = beside(items["trace"])
    if isinstance(data.get("timeline"), str):
        csv = Path(beside(data["timeline"]))
        data["timeline"] = str(csv)
        events = data.get("events", [])
        if isinstance(events, list):  # else the schema names what is wrong with it
            data["events"] = [*events, *_timeline_events(csv, path, locate(text, ["timeline"]))]
    return validate(Profile, data, text=text, source=str(path))


def _timeline_events(csv: Path, profile: Path, line: int | None) -> list[dict[str, str]]:
    """The rows of `profile`'s timeline `csv` (named on `line` of it) as validated event tables; an error
    names the CSV's line (or the profile's, when the CSV cannot be read) and whose timeline it is."""
    from tunbench.link.timeline import parse_timeline

    try:
        content = csv.read_text(encoding="utf-8")
    except (OSError, ValueError) as e:  # ValueError: not UTF-8, or a NUL in the path
        raise ConfigError(
            f"cannot read the timeline {csv}: {getattr(e, 'strerror', None) or e}",
            source=str(profile),
            line=line,
            key="timeline",
        ) from None
    whose = f" (the timeline of {profile})"
    try:
        rows = parse_timeline(content, str(csv))
        for row in rows:
            try:
                validate(ProfileEvent, row, text="", source=str(csv))
            except ConfigError as e:  # a row's schema error: its line
                raise ConfigError(e.detail, source=str(csv), line=file_line(row["origin"])[1], key=e.key) from None
    except ConfigError as e:
        raise ConfigError(e.detail + whose, source=e.source, line=e.line, key=e.key) from None
    return rows


def parse_inline(text: str, source: str) -> Profile:
    """`name:delay=50ms,rate=100mbit` (both directions) or with `up.`/`down.` prefixes per direction."""
    name, _, rest = text.partition(":")
    up: dict[str, str] = {}
    down: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"{item!r} is not key=value", source=source, key=name)
        if key.startswith("up."):
            up[key[3:]] = value
        elif key.startswith("down."):
            down[key[5:]] = value
        else:
            up[key] = down[key] = value
    return validate(Profile, {"name": name, "up": up, "down": down}, text="", source=source)


def find_profile(ref: str, source: str = "--profile") -> Profile:
    if ":" in ref:
        return parse_inline(ref, source)
    if "/" in ref or ref.endswith(".toml"):
        path = Path(ref)
        if not path.is_file():
            raise ConfigError(f"profile file {ref} does not exist", source=source)
        return load_profile_file(path)
    path = builtin_dir() / f"{ref}.toml"
    if not path.is_file():
        raise ConfigError(
            f"unknown profile {ref!r} (built-ins: {', '.join(builtin_names())}; or a .toml path, "
            f"or inline NAME:delay=50ms,...)",
            source=source,
        )
    return load_profile_file(path)


def validate_with_link(profile: Profile, source: str = "") -> None:
    """Let tunbench-link itself judge the impairment values (one parser, one truth), so a bad profile
    fails before any namespace exists. Its first complaint is raised, its direction mapped back to up/down."""
    if not profile.emulated:
        return
    from tunbench.link.binary import check

    problems = check(profile.link_args())
    if not problems:
        return
    p = problems[0]
    side = {"a2b": "up", "b2a": "down"}.get(p.direction or "", "")
    msg = (p.message if p.key or not p.value else f"{p.value}: {p.message}") + " (see tunbench-link --help)"
    if p.fault is not None and side:  # the direction's n-th fault -> the profile's faults[i]
        index = fault_indexes(profile.faults, side)[p.fault]
        key = ".".join(k for k in ("faults", str(index), p.key or "") if k)
    elif p.event is not None and side:  # the direction's n-th event -> the profile's events[i]
        index = profile.event_indexes(side)[p.event]
        if where := profile.events[index].origin_line:  # a timeline row: name its file and line
            raise ConfigError(
                f"{msg} (the timeline of profile {profile.name})", source=where[0], line=where[1], key=p.key or ""
            )
        key = ".".join(k for k in ("events", str(index), p.key or "") if k)
    else:
        key = ".".join(k for k in (side, p.key or "") if k)
    raise ConfigError(msg, source=source or f"profile {profile.name}", key=key)
