"""The sites a run can be placed on, by name: each registers how its choice is made from the text after
its name (`hosts:inventory.ini`; nothing for `local`). Adding a site is its module and one line here
(docs/architecture.md, "Adding a site"); nothing outside sites/ names a site."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tunbench.errors import ConfigError
from tunbench.remote.inventory import Inventory, load_inventory
from tunbench.sites.base import SiteChoice
from tunbench.sites.hosts import HostsChoice
from tunbench.sites.local import LocalChoice


def _hosts(where: str) -> SiteChoice:
    if not where:
        raise ConfigError("the hosts site needs its inventory: hosts:FILE", source="command line", key="site")
    return HostsChoice(load_inventory(Path(where)))


SITES: dict[str, Callable[[str], SiteChoice]] = {
    "local": lambda where: LocalChoice(),
    "hosts": _hosts,
}


def choose(spec: str) -> SiteChoice:
    """The site `spec` names, `name` or `name:where` (e.g. `hosts:lab.ini`), not yet settled."""
    name, _, where = spec.partition(":")
    if name not in SITES:
        raise ConfigError(f"no site {name!r}: the sites are {', '.join(SITES)}", source="command line", key="site")
    return SITES[name](where)


def of_inventory(inventory: Inventory | None) -> SiteChoice:
    """What `--hosts` or a scenario's [hosts] table chooses: the hosts of that inventory; none, this machine."""
    return HostsChoice(inventory) if inventory is not None else LocalChoice()
