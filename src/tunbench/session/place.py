"""Where a run's roles go: the inventory its hosts come from, and the plan's site choice (sites.registry)
settled against what the plan needs (sites/needs.py): the site refuses what it cannot do, and resolves each
side's CPUs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tunbench.config.schema import Scenario
from tunbench.errors import ConfigError
from tunbench.plan import RunPlan
from tunbench.remote.inventory import Inventory, inventory_from_table, load_inventory
from tunbench.session.check import not_pair, program_needs
from tunbench.sites.base import SiteChoice
from tunbench.sites.needs import SiteNeeds
from tunbench.sites.registry import choose, of_inventory
from tunbench.workloads import REGISTRY
from tunbench.workloads import get as get_workload


def run_inventory(hosts: Path | None, scenario: Scenario, source: str, text: str = "") -> Inventory | None:
    """The hosts a run's roles go to: an inventory file (`hosts`, --hosts) wins over the scenario's [hosts]
    table (`text`: the scenario file's, for the line of an error); None when neither names any: this
    machine's namespaces."""
    if hosts is not None:
        return load_inventory(hosts)
    if scenario.hosts:
        return inventory_from_table(scenario.hosts, source, text=text)
    return None


def run_site(site: str | None, hosts: Path | None, scenario: Scenario, source: str, text: str = "") -> SiteChoice:
    """Where a run's roles go: the site `--site` names (sites.registry), else the hosts of --hosts or of the
    scenario's [hosts] table (run_inventory), else this machine. --site and --hosts together are refused."""
    if site is not None and hosts is not None:
        raise ConfigError(
            "--site and --hosts both say where the roles run: give one", source="command line", key="site"
        )
    if site is not None:
        return choose(site)
    return of_inventory(run_inventory(hosts, scenario, source, text))


def settled(plan: RunPlan, cores_at: tuple[str, int | None, str] | None = None) -> RunPlan:
    """The plan with its site settled against what it needs (`cores_at`: where the cores axis was given,
    for the site's refusal to name)."""
    needs = site_needs(plan, cores_at)
    return dataclasses.replace(plan, site=plan.site.settle(needs))


def site_needs(plan: RunPlan, cores_at: tuple[str, int | None, str] | None = None) -> SiteNeeds:
    """What the plan asks of its site, as the values a site reads (sites.needs): the site refuses from them
    what it cannot do, and sets itself up with them."""
    kinds = tuple(plan.scenario.workload.kind)
    workloads = {kind: get_workload(kind) for kind in kinds}
    tolerances = []
    for kind, w in workloads.items():
        tolerance = w.start_tolerance_s(plan.options.get(kind) or w.options(None))
        if tolerance is not None:
            tolerances.append(tolerance)
    return SiteNeeds(
        source=plan.source,
        kinds=kinds,
        pair_kinds=tuple(k for k, w in workloads.items() if w.pair()),
        not_pair=not_pair(plan),
        fleet_kinds=tuple(k for k, w in workloads.items() if w.fleet),
        fleet_sizes=tuple(sorted({c.clients for c in plan.cases if get_workload(c.workload).fleet})),
        hosts_unplaced=tuple(k for k, w in workloads.items() if not w.on_hosts()),
        hosts_placeable=tuple(k for k, w in REGISTRY.items() if w.on_hosts()),
        emulated=tuple(p.name for p in plan.profiles if p.emulated),
        timed=tuple(p.name for p in plan.profiles if p.timed() or p.faults),
        underlay=plan.scenario.topology.underlay,
        flamegraphs=plan.flamegraphs,
        capped=tuple(r.label for r in plan.refs if r.cpu_caps),
        warm=plan.warm,
        cpuset=plan.scenario.run.cpuset,
        programs=program_needs(plan.refs, kinds, plan.options),
        start_tolerances=tuple(tolerances),
        cores=tuple(plan.scenario.workload.cores),
        cores_at=cores_at or (plan.source, None, "workload.cores"),
        instr_counter=plan.scenario.run.instr_counter if plan.scenario.run.count_instructions else "",
    )
