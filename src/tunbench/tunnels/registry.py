"""Finding adapters: built-ins shipped in tunnels/builtin/, user files given by path, and the
`name[key=value,...]` syntax that overrides parameters (binary, cipher, label...).

Some keys are the reference's own, not the adapter's: `label` (the name the tunnel's cases go by), `commit`
(the commit the tunnel's build was made from, recorded in the run's provenance for `tunbench history`; it
is never passed to the adapter's templates), `client_cpu` / `server_cpu` (a CPU cap on that role's tunnel
processes, in % of one core: a slower machine, or a known slowdown to test a comparison's power) and
`cpu_period` (the caps' CFS period: 100 ms, the kernel's default, throttles in 100 ms stalls; 10 ms spreads
the same share evenly)."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tunbench.errors import ConfigError
from tunbench.topology.addresses import Family
from tunbench.tunnels.adapter import LoadedAdapter, load_adapter

BUILTIN_DIR = Path(__file__).parent / "builtin"
DEFAULT_CPU_PERIOD_US = 100_000  # the kernel's own default CFS period
MIN_QUOTA_US = 1000  # the kernel's smallest CFS quota
_REF = re.compile(r"^(?P<name>[^\[\]]+?)(?:\[(?P<params>[^\]]*)\])?$")


@dataclass(frozen=True)
class TunnelRef:
    """A tunnel as the user named it: adapter + parameter overrides + a unique label (+ the build's commit)."""

    adapter: LoadedAdapter
    params: dict[str, str] = field(default_factory=dict)
    label: str = ""
    commit: str = ""
    cpu_caps: dict[str, float] = field(default_factory=dict)  # role -> % of one core (client_cpu=, server_cpu=)
    cpu_period_us: int = DEFAULT_CPU_PERIOD_US  # the caps' CFS period (cpu_period=)
    # the run's IP families ([topology] underlay / overlay), set by the session for every tunnel of a run
    underlay: Family = "ipv4"
    overlay: Family = "ipv4"

    @property
    def name(self) -> str:
        return self.adapter.spec.name

    def merged_params(self) -> dict[str, str]:
        """The defaults (over an IPv6 underlay, `ipv6.underlay_params` first), then the reference's own."""
        v6 = self.adapter.spec.ipv6.underlay_params if self.underlay == "ipv6" else {}
        return {**self.adapter.spec.params, **v6, **self.params}

    def families(self) -> dict[str, str | None]:
        """What a trial records (`params.ip`): the underlay's family and, for an L3 tunnel, the overlay's (an
        L4 proxy carries TCP streams, not packets: none)."""
        return {"underlay": self.underlay, "overlay": self.overlay if self.adapter.spec.layer == "l3" else None}

    def ip_refusal(self) -> str | None:
        """Why this tunnel cannot run with the run's families (its adapter's `ipv6` table), or None."""
        spec = self.adapter.spec
        if self.underlay == "ipv6" and not spec.ipv6.underlay:
            return "the adapter does not declare an IPv6 underlay (ipv6.underlay in its file)"
        if self.overlay == "ipv6" and spec.layer == "l4":
            return "overlay = ipv6 is for L3 tunnels (an L4 proxy has no inner network)"
        if self.overlay == "ipv6" and not spec.ipv6.overlay:
            return "the adapter does not declare an IPv6 overlay (ipv6.overlay in its file)"
        return None


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))


def find_adapter(name: str, source: str = "--tunnel") -> LoadedAdapter:
    if "/" in name or name.endswith(".toml"):
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"adapter file {name} does not exist", source=source)
        return load_adapter(path)
    path = BUILTIN_DIR / f"{name}.toml"
    if not path.is_file():
        known = ", ".join(builtin_names())
        raise ConfigError(
            f"unknown tunnel {name!r} (built-ins: {known}; or give a path to a .toml adapter)", source=source
        )
    return load_adapter(path)


def parse_ref(text: str, source: str = "--tunnel") -> TunnelRef:
    """`openvpn-udp[bin=/opt/old/sbin/openvpn,cipher=AES-128-GCM,label=old]` -> TunnelRef."""
    m = _REF.match(text.strip())
    if not m:
        raise ConfigError(f"cannot parse tunnel {text!r}: expected NAME or NAME[key=value,...]", source=source)
    adapter = find_adapter(m.group("name").strip(), source)
    params: dict[str, str] = {}
    caps: dict[str, float] = {}
    period_us: int | None = None
    label = commit = ""
    raw = m.group("params")
    if raw:
        for item in raw.split(","):
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key:
                raise ConfigError(f"parameter {item!r} in {text!r} is not key=value", source=source)
            if key == "label":
                label = value
            elif key == "commit":
                if not value:
                    raise ConfigError(f"commit= in {text!r} is empty", source=source)
                commit = value
            elif key in CAP_KEYS:
                caps[CAP_KEYS[key]] = _cap(value, key, text, source)
            elif key == "cpu_period":
                period_us = _period(value, text, source)
            elif key not in adapter.spec.params:
                known = ", ".join(sorted([*adapter.spec.params, "commit", "cpu_period", "label", *CAP_KEYS]))
                raise ConfigError(
                    f"tunnel {adapter.spec.name!r} has no parameter {key!r} (known: {known})", source=source
                )
            else:
                params[key] = value
    if period_us is not None and not caps:
        raise ConfigError(f"cpu_period= in {text!r} sets the period of a CPU cap: add client_cpu= or server_cpu=",
                          source=source)  # fmt: skip
    period = period_us or DEFAULT_CPU_PERIOD_US
    for role, pct in caps.items():
        if period * pct / 100 < MIN_QUOTA_US:  # the kernel's smallest quota: the cap would not hold
            raise ConfigError(
                f"{role}_cpu={pct:g}% of a {period / 1000:g} ms period in {text!r} is a quota under the kernel's "
                f"1 ms minimum: use a longer cpu_period= or a larger share",
                source=source,
            )
    if not label:  # the commit is left out: one label's history runs across commits
        shown = [f"{k}={v}" for k, v in params.items()] + [f"{r}_cpu={p:g}%" for r, p in caps.items()]
        if period_us is not None:
            shown.append(f"cpu_period={period_us / 1000:g}ms")
        label = adapter.spec.name + (f"[{','.join(shown)}]" if shown else "")
    return TunnelRef(
        adapter=adapter,
        params=params,
        label=label,
        commit=commit,
        cpu_caps=caps,
        cpu_period_us=period_us or DEFAULT_CPU_PERIOD_US,
    )


CAP_KEYS = {"client_cpu": "client", "server_cpu": "server"}


def _cap(value: str, key: str, text: str, source: str) -> float:
    """`client_cpu=74%` (or `74`): a share of one core, above 0 and at most 100 x the CPUs."""
    try:
        pct = float(value.strip().removesuffix("%"))
    except ValueError:
        pct = -1.0
    limit = 100.0 * (os.cpu_count() or 1)
    if not 0 < pct <= limit:
        raise ConfigError(
            f"{key}={value!r} in {text!r}: expected a share of one core such as 74% (above 0, at most {limit:.0f}%)",
            source=source,
        )
    return pct


def _period(value: str, text: str, source: str) -> int:
    """`cpu_period=10ms` (or `10`, in ms): the CFS period, 1 ms to 1 s as the kernel allows; in microseconds."""
    try:
        ms = float(value.strip().removesuffix("ms"))
    except ValueError:
        ms = -1.0
    if not 1 <= ms <= 1000:
        raise ConfigError(
            f"cpu_period={value!r} in {text!r}: expected a CFS period such as 10ms (1 to 1000 ms)", source=source
        )
    return int(ms * 1000)


def required_programs(ref: TunnelRef) -> list[str]:
    """The programs an adapter needs (`requires`, templated with its parameters: `{bin}` as given)."""
    from tunbench.tunnels.template import render

    params = ref.merged_params()
    return [render(req, params, source=ref.adapter.source, key="requires") for req in ref.adapter.spec.requires]


def missing_programs(ref: TunnelRef) -> list[str]:
    """Required programs not on PATH (the `bin` parameter, when present, is checked as given)."""
    return [prog for prog in required_programs(ref) if shutil.which(prog) is None]


def _module_name(name: str) -> str:
    """The kernel treats - and _ in module names alike; a modules.dep path ends in NAME.ko[.xz|.zst|.gz]."""
    return name.rsplit("/", 1)[-1].split(".ko", 1)[0].replace("-", "_")


def kernel_module_available(name: str, root: Path = Path("/")) -> bool:
    """Whether the running kernel has the module `name`, reading only (nothing is loaded): loaded or built in
    with a /sys/module entry, listed in modules.builtin, or loadable (listed in modules.dep; `ip link add`
    loads such a module on demand). `root` is / but in tests."""
    want = _module_name(name)
    if (root / "sys/module" / want).is_dir():
        return True
    release = os.uname().release
    for base in ("lib/modules", "usr/lib/modules"):
        for listing in ("modules.builtin", "modules.dep"):
            try:
                text = (root / base / release / listing).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if any(_module_name(line.split(":", 1)[0].strip()) == want for line in text.splitlines() if line.strip()):
                return True
    return False


KERNEL_MODULE = "kernel module "  # how a missing kernel module is named among missing requirements


def kernel_modules(ref: TunnelRef) -> list[str]:
    """The kernel modules this tunnel needs with its parameters: `requires_kernel`, and each
    `requires_kernel_when` entry whose parameter values match (strongswan's esp4 with datapath=kernel)."""
    params = ref.merged_params()
    spec = ref.adapter.spec
    conditional = [m for need in spec.requires_kernel_when for m in need.modules
                   if all(params.get(k) == v for k, v in need.when.items())]  # fmt: skip
    return list(dict.fromkeys([*spec.requires_kernel, *conditional]))


def missing_requirements(ref: TunnelRef) -> list[str]:
    """What the tunnel needs and this machine lacks: programs by name, kernel modules as "kernel module NAME"
    (the adapter's `requires`, `requires_kernel` and matching `requires_kernel_when`), followed by the
    adapter's `kernel_hint` in parentheses when it has one."""
    hint = f" ({ref.adapter.spec.kernel_hint})" if ref.adapter.spec.kernel_hint else ""
    mods = [m for m in kernel_modules(ref) if not kernel_module_available(m)]
    return missing_programs(ref) + [KERNEL_MODULE + m + hint for m in mods]


def module_name(missing: str) -> str:
    """The module of a missing-requirement entry `kernel module NAME (hint)`."""
    return missing.removeprefix(KERNEL_MODULE).split(" ", 1)[0]


def missing_text(missing: list[str]) -> str:
    """`missing wg; kernel module missing: wireguard` for `tunbench tunnels` and `doctor`."""
    progs = [m for m in missing if not m.startswith(KERNEL_MODULE)]
    mods = [m.removeprefix(KERNEL_MODULE) for m in missing if m.startswith(KERNEL_MODULE)]
    parts = (["missing " + ", ".join(progs)] if progs else []) + (
        ["kernel module missing: " + ", ".join(mods)] if mods else []
    )
    return "; ".join(parts)
