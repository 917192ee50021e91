from __future__ import annotations

import pytest

from tunbench.errors import ConfigError
from tunbench.link.profile import builtin_names, find_profile


def test_lan_is_plain_veth() -> None:
    p = find_profile("lan")
    assert not p.emulated and p.link_args() == []


def test_every_builtin_loads() -> None:
    for name in builtin_names():
        assert find_profile(name).name == name


def test_inline_profile_per_direction() -> None:
    p = find_profile("x:delay=20ms,up.rate=5mbit,down.rate=20mbit")
    assert p.emulated
    assert p.spec("up") == "delay=20ms,rate=5mbit"
    assert p.spec("down") == "delay=20ms,rate=20mbit"
    assert p.link_args() == ["--a2b", "delay=20ms,rate=5mbit", "--b2a", "delay=20ms,rate=20mbit"]


def test_unknown_profile_lists_builtins() -> None:
    with pytest.raises(ConfigError, match="unknown profile 'moon'.*lan"):
        find_profile("moon")


def test_inline_garbage() -> None:
    with pytest.raises(ConfigError, match="not key=value"):
        find_profile("x:delay")
