"""WAN profile files -> validated Profile, and Profile -> tunbench-link arguments (pure)."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tunbench.errors import ConfigError
from tunbench.tomlfile import read_toml, validate
from tunbench.topology import sysctl
from tunbench.topology.settings import check_congestion_control

_VALUE = re.compile(r"^[A-Za-z0-9_.%+-]+$")


def builtin_dir() -> Path:
    return Path(str(resources.files("tunbench.profiles")))


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
    def _values(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not re.fullmatch(r"[a-z_]+", key):
                raise ValueError(f"bad impairment name {key!r}")
            if not _VALUE.match(str(value)):
                raise ValueError(f"{key}: bad value {value!r}")
        return v

    def spec(self, direction: str) -> str:
        """tunbench-link's SPEC for one direction: `delay=50ms,loss=0.1%`."""
        items = self.up if direction == "up" else self.down
        return ",".join(f"{k}={v}" for k, v in items.items())

    def link_args(self) -> list[str]:
        args = []
        if self.up:
            args += ["--a2b", self.spec("up")]
        if self.down:
            args += ["--b2a", self.spec("down")]
        return args


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.toml"))


def load_profile_file(path: Path) -> Profile:
    data, text = read_toml(path)
    return validate(Profile, data, text=text, source=str(path))


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
    key = ".".join(k for k in (side, p.key or "") if k)
    msg = p.message if p.key or not p.value else f"{p.value}: {p.message}"
    raise ConfigError(f"{msg} (see tunbench-link --help)", source=source or f"profile {profile.name}", key=key)
