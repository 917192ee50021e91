"""What a scenario's references name, resolved: the hosts its roles run on."""

from __future__ import annotations

from pathlib import Path

from tunbench.config.schema import Scenario
from tunbench.remote.inventory import Inventory, inventory_from_table, load_inventory


def run_inventory(hosts: Path | None, scenario: Scenario, source: str, text: str = "") -> Inventory | None:
    """The hosts a run's roles go to: an inventory file (`hosts`, --hosts) wins over the scenario's [hosts]
    table (`text`: the scenario file's, for the line of an error); None when neither names any: this
    machine's namespaces."""
    if hosts is not None:
        return load_inventory(hosts)
    if scenario.hosts:
        return inventory_from_table(scenario.hosts, source, text=text)
    return None
