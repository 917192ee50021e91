from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.integration.helpers import STARTED, leftovers, root_namespace_snapshot


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def hermetic() -> Iterator[None]:
    """Every integration test: needs root + iperf3; must leave nothing behind and not touch the root
    namespace's addresses, routes, rules, firewall or sysctls."""
    if os.geteuid() != 0:
        pytest.skip("integration tests need root (network namespaces)")
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 is not installed (make deps)")
    before = root_namespace_snapshot()
    STARTED.clear()
    yield
    left = [x for prefix in sorted(STARTED) for x in leftovers(prefix)]
    assert not left, "tunbench left things behind:\n" + "\n".join(left)
    after = root_namespace_snapshot()
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert not changed, f"root namespace changed: {changed}"
