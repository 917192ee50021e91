"""A host whose only cgroup hierarchy is v2, the default on current distributions, made here in a mount
namespace of the test's own: /sys/fs/cgroup there is a lone cgroup2 mount (the machine's v2 hierarchy; its
v1 hierarchies, if any, are not mounted), everything else is the machine's. In it: per-role CPU comes from
the v2 cgroups and agrees with the sampled figures, `tunbench clean` removes what a killed run left there,
and CPU placement is refused before the run where the v2 root does not hand out cpuset."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import RUN_LINE, STARTED, leftovers
from tests.integration.test_lifecycle import wait_for

# /sys becomes a slave of the machine's mounts in the new namespace first, so unmounting the cgroup file
# systems there never propagates back; /run/netns stays shared, so the machine sees the run's namespaces
V2_ONLY = 'mount --make-rslave /sys && umount -R /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$@"'


def v2_only(*argv: str) -> list[str]:
    return ["unshare", "--mount", "--propagation", "unchanged", "--", "sh", "-c", V2_ONLY, "sh", *argv]


def tunbench_v2(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        v2_only(sys.executable, "-m", "tunbench", *args),
        capture_output=True, text=True, timeout=timeout, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    STARTED.update(RUN_LINE.findall(res.stdout))
    return res


def _cgroup_mounts() -> list[str]:
    """The machine's mounts under /sys/fs/cgroup (mount point, type, source), which the test must not change."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return sorted(" ".join((f[4], *f[f.index("-") + 1 : f.index("-") + 3])) for f in (ln.split() for ln in lines)
                  if f[4].startswith("/sys/fs/cgroup"))  # fmt: skip


@pytest.fixture(autouse=True)
def machine_cgroups_unchanged() -> object:
    before = _cgroup_mounts()
    yield
    assert _cgroup_mounts() == before


def _v2_root_hands_out_cpuset() -> bool:
    out = subprocess.run(
        v2_only("cat", "/sys/fs/cgroup/cgroup.subtree_control"), capture_output=True, text=True, check=True
    ).stdout
    return "cpuset" in out.split()


def test_the_namespace_has_cgroup_v2_alone() -> None:
    res = tunbench_v2("doctor")
    assert "✓ cgroup CPU accounting: v2 at /sys/fs/cgroup" in res.stdout, res.stdout + res.stderr
    mounts = subprocess.run(v2_only("findmnt", "-R", "-n", "-o", "FSTYPE", "/sys/fs/cgroup"), capture_output=True,
                            text=True, check=True).stdout.split()  # fmt: skip
    assert mounts == ["cgroup2"]


def test_per_role_cpu_and_its_cross_check_on_v2(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    res = tunbench_v2(
        "run", "-t", "stunnel", "--no-direct", "--duration", "4", "--omit", "0", "--repeat", "1",
        "--direction", "up", "--db", str(tmp_path / "r.db"), "--json", str(out),
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = json.loads(out.read_text())["trials"]
    assert t["status"] == "ok", t["error"]
    for role in ("client", "server"):
        cg = t["cgroup_cpu"][role]["user_s"] + t["cgroup_cpu"][role]["sys_s"]
        sampled = t["sampled_cpu"][role]["user_s"] + t["sampled_cpu"][role]["sys_s"]
        # the exact figure can only have come from the v2 cgroups: no other hierarchy is mounted
        assert cg > 0.5, f"{role}: stunnel at full speed for 4 s should use well over 0.5 CPU-s"
        assert t["cpu"][role] == t["cgroup_cpu"][role], "headline CPU is the cgroup's exact figure"
        assert sampled == pytest.approx(cg, rel=0.25), role
        assert f"check.cpu.{role}.diff_s" in t["checks"], "the run's own cross-check"


def test_clean_removes_a_killed_runs_v2_cgroups(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        v2_only(sys.executable, "-m", "tunbench", "run", "--db", str(tmp_path / "r.db"), "-t", "stunnel",
                "--no-direct", "--duration", "30", "--omit", "0", "--repeat", "1", "--direction", "up"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = RUN_LINE.search(line)
        assert m, f"no run line: {line!r}"
        prefix = m.group(1)
        STARTED.add(prefix)
        wait_for(lambda: any(x.startswith("cgroup") for x in leftovers(prefix)), 60, "the trial's v2 cgroups")
        wait_for(lambda: any(x.startswith("process") for x in leftovers(prefix)), 60, "the tunnel to run")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = leftovers(prefix)
    assert any(x.startswith("cgroup") for x in left), f"SIGKILL should have left its cgroups: {left}"
    res = tunbench_v2("clean", timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert leftovers(prefix) == []


def test_placement_is_decided_at_plan_time(tmp_path: Path) -> None:
    res = tunbench_v2("run", "-t", "socat", "--cpuset", "split", "--dry-run")
    if _v2_root_hands_out_cpuset():  # a host whose v2 root hands cpuset to its children can place
        assert res.returncode == 0 and "cpuset: client side on CPU" in res.stdout, res.stdout + res.stderr
        return
    assert res.returncode == 2, res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert "run.cpuset: no cpuset controller to place roles on CPUs: the cgroup v2 root at /sys/fs/cgroup" in err
    # a real run is refused the same way, before any trial (no trial failing one by one)
    res = tunbench_v2("run", "-t", "socat", "--cpuset", "split", "--repeat", "1", "--db", str(tmp_path / "r.db"))
    assert res.returncode == 2 and "run.cpuset" in res.stderr, res.stdout + res.stderr
    assert not RUN_LINE.search(res.stdout), "a run started"
