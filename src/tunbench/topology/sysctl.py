"""Per-namespace sysctls. Only keys that the kernel namespaces (they exist under /proc/sys inside a fresh
namespace) can be set, so a profile can never change the root namespace's settings."""

from __future__ import annotations

from collections.abc import Mapping

from tunbench.errors import ConfigError
from tunbench.proc import run_cmd


def key_path(key: str) -> str:
    if not key.startswith("net.") or ".." in key or "/" in key:
        raise ConfigError("only per-namespace net.* sysctls can be set", key=f"sysctl.{key}")
    return "/proc/sys/" + key.replace(".", "/")


def apply(netns: str, settings: Mapping[str, str]) -> dict[str, str]:
    """Write each setting inside `netns` and read back what the kernel kept."""
    if not settings:
        return {}
    script = []
    for key, value in settings.items():
        path = key_path(key)
        script.append(f"test -e {path} || {{ echo 'not per-namespace: {key}' >&2; exit 3; }}")
        script.append(f"printf '%s' '{value}' > {path}")
    run_cmd(["sh", "-c", "; ".join(script)], netns=netns, what="setting sysctls")
    return read(netns, list(settings))


def read(netns: str, keys: list[str]) -> dict[str, str]:
    if not keys:
        return {}
    paths = [key_path(k) for k in keys]
    res = run_cmd(["sh", "-c", 'for p in "$@"; do tr -s "\\t " " " < "$p"; done', "sh", *paths], netns=netns)
    values = res.stdout.splitlines()
    return {k: v.strip() for k, v in zip(keys, values, strict=False)}
