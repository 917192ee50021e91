"""The README's "Compare two builds" quickstart works as written, with relative build paths, run from a
directory that is not the repository: its commands are read from the README, the builds' absolute paths
(`/src/base/wireguard-go`, `/src/pr/wireguard-go`) become relative ones (`../base/wireguard-go`,
`./wireguard-go`: copies of the installed wireguard-go), and only the times are shortened (a 20 s budget,
1 s trials) to keep the test short."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import RUN_LINE, STARTED

README = Path(__file__).resolve().parents[2] / "README.md"
SHORTER = {"--budget": "20s", "--duration": "1", "--omit": "0"}


def quickstart() -> list[list[str]]:
    """The `tunbench` command lines of the README's quickstart block, as argument lists."""
    text = README.read_text()
    section = text.split("## Compare two builds", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    return [shlex.split(line) for line in block.splitlines() if line.startswith("tunbench ")]


def relative(args: list[str]) -> list[str]:
    """The builds by relative path (from the pr build's directory), and shorter times."""
    out = []
    for i, a in enumerate(args):
        a = a.replace("bin=/src/base/wireguard-go", "bin=../base/wireguard-go")
        a = a.replace("bin=/src/pr/wireguard-go", "bin=./wireguard-go")
        out.append(SHORTER.get(args[i - 1], a) if i else a)
    if "--duration" not in out and out[1] in ("run", "calibrate") and "--dry-run" not in out:
        out += ["--duration", SHORTER["--duration"], "--omit", SHORTER["--omit"]]
    return out


def test_the_quickstart_is_read_from_the_readme() -> None:
    cmds = quickstart()
    assert [c[1] for c in cmds] == ["run", "calibrate", "run", "compare"] and "--dry-run" in cmds[0]
    assert all("bin=/src/" in " ".join(c) for c in cmds[:3])  # absolute paths, as the README gives them


def test_the_readme_quickstart_with_relative_builds_from_another_directory(tmp_path: Path) -> None:
    wg = shutil.which("wireguard-go")
    if wg is None:
        pytest.skip("wireguard-go is not installed (make deps)")
    for side in ("base", "pr"):
        (tmp_path / "src" / side).mkdir(parents=True)
        shutil.copy(wg, tmp_path / "src" / side / "wireguard-go")
    here = tmp_path / "src" / "pr"
    db = tmp_path / "q.db"
    env = {**os.environ, "COLUMNS": "200", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    outputs = []
    for args in quickstart():
        argv = [sys.executable, "-m", "tunbench", *relative(args)[1:], "--db", str(db)]
        res = subprocess.run(argv, cwd=here, env=env, capture_output=True, text=True, timeout=300)
        STARTED.update(RUN_LINE.findall(res.stdout))
        outputs.append(res)
        said = f"{shlex.join(argv[3:])} exit {res.returncode}:\n{res.stdout}\n{res.stderr}"
        assert res.returncode in ((0, 1) if args[1] == "compare" else (0,)), said  # compare: 1 is a verdict

    dry, _, run, compare = outputs
    base, pr = tmp_path / "src" / "base" / "wireguard-go", here / "wireguard-go"
    plan = " ".join(dry.stdout.split())  # a long line wraps at a space
    assert f"base (L3, bin={base})" in plan and f"pr (L3, bin={pr})" in plan
    assert "a real run would fail" not in dry.stdout  # both builds found from the relative paths
    assert "verdict:" in compare.stdout
    said = " ".join(compare.stdout.split())  # the gate it applied, and why, above the verdict
    # the README's line is the work gate's: counted instructions, Go's runtime apart, at 1%; each side's at 2%
    assert "gate: instructions/byte at ±1.0% (the tunnel's own instructions per byte, each side's added" in said, said
    wide = "instructions/byte client, instructions/byte server at ±2.0% in a Holm family of their own"
    assert wide in said, said
    exported = subprocess.run(
        [sys.executable, "-m", "tunbench", "export", "pr-1", "--db", str(db)],
        cwd=here, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    trials = json.loads(exported)["trials"]
    assert trials and all(t["status"] == "ok" for t in trials), run.stdout
    assert {t["label"]: t["params"]["tunnel"]["bin"] for t in trials} == {"base": str(base), "pr": str(pr)}
    assert re.search(r"stored in .* as run #\d+", run.stdout)
