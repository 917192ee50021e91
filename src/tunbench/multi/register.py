"""The multi-client workloads, for workloads.REGISTRY."""

from __future__ import annotations

from tunbench.multi.clients import ClientsWorkload
from tunbench.multi.storm import StormWorkload

WORKLOADS = (ClientsWorkload(), StormWorkload())
