"""Under CI (CI=true), a skipped test is a failed test: a missing tool or a missing root must not pass as
green. The only exceptions are listed in ALLOWED_SKIPS, each with the reason this machine may lack it.
Expected failures (xfail) are left alone. Proven by tests/unit/test_ci_skips.py."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

# test node id (or its id without the [parameters]) -> why CI may skip it: kernel features a CI machine can
# lack. The one list of them; add an entry only for such a feature, never for a tool we can install. (The
# main suite needs none: WireGuard is measured with wireguard-go, the WAN with tunbench-link, not the
# wireguard module or sch_netem; only the kernel tunnels below need a module, and they skip naming it.)
_KERNEL_TUNNEL = "tests/integration/test_adapters_more.py::test_kernel_tunnel_carries_traffic"
ALLOWED_SKIPS: dict[str, str] = {
    f"{_KERNEL_TUNNEL}[wireguard-kernel]": "in-kernel WireGuard needs the wireguard module (CONFIG_WIREGUARD)",
    f"{_KERNEL_TUNNEL}[gre]": "GRE needs the ip_gre module (CONFIG_NET_IPGRE)",
    f"{_KERNEL_TUNNEL}[ipip]": "IP-in-IP needs the ipip module (CONFIG_NET_IPIP)",
    # exactly one of these two runs on any kernel: ESP (CONFIG_INET_ESP + GCM) present, or not
    "tests/integration/test_adapters_ipsec.py::test_kernel_esp_carries_traffic": (
        "kernel ESP (CONFIG_INET_ESP, CONFIG_CRYPTO_GCM): this CI kernel has XFRM but no ESP"
    ),
    "tests/integration/test_adapters_ipsec.py::test_missing_kernel_esp_is_reported_clearly": (
        "runs only where the kernel lacks ESP; test_kernel_esp_carries_traffic runs where it has it"
    ),
}


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def allowed_skip(nodeid: str) -> bool:
    return nodeid in ALLOWED_SKIPS or nodeid.split("[", 1)[0] in ALLOWED_SKIPS


def _skip_reason(longrepr: Any) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = _skip_reason(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI=true, which makes every skip a failure: {reason}\n"
        f"(install what it needs; only a kernel feature this machine lacks may be listed in "
        f"tests/conftest.py ALLOWED_SKIPS)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    if in_ci() and report.skipped and not hasattr(report, "wasxfail") and not allowed_skip(item.nodeid):
        _fail_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    """A whole module skipped at import (pytest.skip(allow_module_level=True), importorskip) counts too."""
    report: pytest.CollectReport = yield
    if in_ci() and report.skipped and not allowed_skip(report.nodeid):
        _fail_skip(report)
    return report


# ---- PostgreSQL: a real throwaway server (tests/pg.py), shared by the session; one database per test ----


@pytest.fixture(scope="session")
def pg_server() -> Generator[Any, None, None]:
    from tests.pg import PgServer

    server = PgServer().start()
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def pg_url(pg_server: Any) -> Generator[str, None, None]:
    """A fresh, empty database on the test server, as a --db URL."""
    name = pg_server.new_database()
    yield pg_server.url(name)
    pg_server.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_db(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    """A --db value for each backend: an SQLite file, a PostgreSQL URL."""
    if request.param == "sqlite":
        return tmp_path / "r.db"
    return request.getfixturevalue("pg_url")
