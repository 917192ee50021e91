"""Per-namespace sysctls. Only keys that the kernel namespaces (they exist under /proc/sys inside a fresh
namespace) can be set, so a profile can never change the root namespace's settings.

Keys and values come from scenario and profile files and are applied as root, so both must match a strict
allow-pattern (checked before anything runs), and they are written as files under /proc/sys from a thread
inside the namespace: no shell, no command line, nothing that could interpret them."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping

from tunbench.errors import ConfigError
from tunbench.host.netns import run_in_netns

# net.<part>(.<part>)+, each part lower-case letters, digits and underscores: no "..", "/", "-", spaces
_KEY = re.compile(r"net(\.[a-z0-9_]+)+")
# one integer or several separated by single spaces ("4096 131072 33554432"), or one plain word ("bbr",
# "fq_codel") for the keys that take a name
_VALUE = re.compile(r"-?[0-9]+( -?[0-9]+)*|[a-z][a-z0-9_]*")
PROC_SYS = "/proc/sys/"


def key_path(key: str) -> str:
    """The /proc/sys file of `key`; a ConfigError unless `key` is a plain dotted net.* name."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ConfigError(
            f"only per-namespace net.* sysctls can be set (dotted names of [a-z0-9_] parts), not {key!r}",
            key=f"sysctl.{key}",
        )
    return PROC_SYS + key.replace(".", "/")


def check(key: str, value: str) -> str:
    """Validate one setting (key and value) before it gets near the kernel; returns the /proc/sys path."""
    path = key_path(key)
    if not isinstance(value, str) or not _VALUE.fullmatch(value):
        raise ConfigError(
            f"value {value!r} is not allowed: an integer, integers separated by single spaces, or one lower-case word",
            key=f"sysctl.{key}",
        )
    return path


def _read_file(path: str) -> str:
    with open(path) as f:
        return " ".join(f.read().split())


def _write_all(settings: dict[str, str], paths: dict[str, str]) -> dict[str, str]:
    """Inside the namespace: write each value to its /proc/sys file, then read back what the kernel kept."""
    for key, path in paths.items():
        real = os.path.realpath(path)
        if not real.startswith(PROC_SYS + "net/") or not os.path.isfile(real):
            raise ConfigError(
                "not a per-namespace sysctl (no such file under /proc/sys in tunbench's namespace)",
                key=f"sysctl.{key}",
            )
    for key, path in paths.items():
        try:
            # a key the kernel shows read-only inside a namespace (net.core.rmem_default on 6.x) fails here
            fd = os.open(path, os.O_WRONLY)
        except OSError as e:
            raise ConfigError(_refused(settings[key], e), key=f"sysctl.{key}") from e
        try:
            os.write(fd, settings[key].encode())
        except OSError as e:
            raise ConfigError(_refused(settings[key], e), key=f"sysctl.{key}") from e
        finally:
            os.close(fd)
    return {key: _read_file(path) for key, path in paths.items()}


def _refused(value: str, e: OSError) -> str:
    if e.errno == errno.EACCES:
        why = "the kernel makes this key read-only inside a network namespace (set it on the host, or drop it)"
    elif e.errno == errno.EPERM:
        why = "the kernel does not allow it inside a namespace"
    else:
        why = e.strerror or str(e)
    return f"the kernel refused {value!r}: {why}"


def apply(netns: str, settings: Mapping[str, str]) -> dict[str, str]:
    """Write each setting inside `netns` and read back what the kernel kept."""
    if not settings:
        return {}
    values = dict(settings)
    paths = {key: check(key, value) for key, value in values.items()}  # everything checked before any write
    return run_in_netns(netns, lambda: _write_all(values, paths))


def read(netns: str, keys: list[str]) -> dict[str, str]:
    """Current values of `keys` inside `netns` (whitespace collapsed to single spaces)."""
    if not keys:
        return {}
    paths = {key: key_path(key) for key in keys}
    return run_in_netns(netns, lambda: {key: _read_file(path) for key, path in paths.items()})
