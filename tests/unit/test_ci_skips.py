"""The CI=true rule of tests/conftest.py, run for real on a small inner test session (pytester): a skip
fails under CI, skips otherwise, and an allow-listed test may still skip."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
INNER = """
import pytest

def test_missing_tool():
    pytest.skip("iperf3 is not installed")

@pytest.mark.skipif(True, reason="needs root")
def test_marked():
    pass

def test_kernel_feature():
    pytest.skip("no sch_netem on this machine")

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    assert False

def test_passes():
    pass
"""
MODULE_SKIP = """
import pytest
pytest.importorskip("tunbench_no_such_module")

def test_never_runs():
    pass
"""


def run_inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None) -> pytest.RunResult:
    allow = '\nALLOWED_SKIPS["test_inner.py::test_kernel_feature"] = "sch_netem is a kernel module"\n'
    pytester.makeconftest(CONFTEST.read_text() + allow)
    pytester.makepyfile(test_inner=INNER, test_module_skip=MODULE_SKIP)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    return pytester.runpytest("-p", "no:cacheprovider", "-rA", "--continue-on-collection-errors")


def test_under_ci_a_skip_fails(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_inner(pytester, monkeypatch, "true")
    # a skip in the test body fails it; one in setup (skipif, the hermetic fixture) or at import (module
    # level) is an error; the allow-listed test and the xfail are kept
    result.assert_outcomes(failed=1, passed=1, skipped=1, xfailed=1, errors=2)
    out = result.stdout.str()
    assert "FAILED test_inner.py::test_missing_tool" in out
    assert "ERROR test_inner.py::test_marked" in out
    assert "ERROR test_module_skip.py" in out
    assert "skipped under CI=true" in out and "iperf3 is not installed" in out
    assert "SKIPPED [1] test_inner.py" in out and "no sch_netem" in out
    assert result.ret != 0


@pytest.mark.parametrize("ci", [None, "false", ""])
def test_without_ci_skips_stay_skips(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    result = run_inner(pytester, monkeypatch, ci)
    result.assert_outcomes(passed=1, skipped=4, xfailed=1)
    assert result.ret == 0


def test_allow_list_matches_parametrized_ids(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest(CONFTEST.read_text() + '\nALLOWED_SKIPS["test_p.py::test_p"] = "kernel module"\n')
    pytester.makepyfile(
        test_p="import pytest\n@pytest.mark.parametrize('x', [1, 2])\ndef test_p(x):\n    pytest.skip('no module')\n"
    )
    monkeypatch.setenv("CI", "true")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(skipped=2)


def test_the_real_allow_list_names_existing_tests() -> None:
    """Every entry of the real ALLOWED_SKIPS names a test file that exists and gives a reason."""
    from tests.conftest import ALLOWED_SKIPS

    root = CONFTEST.parent.parent
    for nodeid, reason in ALLOWED_SKIPS.items():
        assert (root / nodeid.split("::", 1)[0]).is_file(), nodeid
        assert reason.strip(), nodeid
