"""The CI recipe (examples/ci/github-actions.yml) runs as GitHub runs it: each `run:` step of the `shell: bash`
job as `bash --noprofile --norc -eo pipefail FILE` with the job's env, in order, a step skipped when its
`if:` says so (none: `success()`), against a real local PostgreSQL. The two sides are two builds of one
small git project, copies of socat the recipe's build step puts at `../base/socat` and `./socat` (relative
`bin=` paths, as the recipe's own). Steps that set up the checkout or use an action (posting the comment)
are GitHub's part: their `if:` is still read, and they count as passed.

Two jobs: an A/A one (the same socat twice: no regression, the job passes), and a real regression (head is
socat with a 512-byte buffer): the comment is written, with the regression in it, and the job fails."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.helpers import RUN_LINE, STARTED

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "ci" / "github-actions.yml"
GITHUB_BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # GitHub's `shell: bash`, then the file
_STATUS = {"success()", "failure()", "always()", "cancelled()"}


def step_runs(condition: str | bool | None, failed: bool) -> bool:
    """Whether a step runs, by its `if:` (GitHub's status functions, `!`, `&&`, `||`, parentheses; without a
    status function, `success() && ...` is implied, as GitHub does). Anything else fails the test: this
    reader would have to learn it first."""
    text = str(condition if condition is not None else "success()").strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2].strip()
    tokens = re.findall(r"[a-z]+\(\)|&&|\|\||!|\(|\)|\S+", text)
    if not _STATUS & set(tokens):
        tokens = ["success()", "&&", "(", *tokens, ")"]
    words = {"&&": "and", "||": "or", "!": "not", "(": "(", ")": ")", "true": "True", "false": "False"}
    values = {"success()": not failed, "failure()": failed, "always()": True, "cancelled()": False}
    out = []
    for t in tokens:
        if t in values:
            out.append(str(values[t]))
        elif t in words:
            out.append(words[t])
        else:
            raise AssertionError(f"the recipe's `if: {condition}` uses {t!r}, which this test cannot evaluate")
    return bool(eval(" ".join(out), {"__builtins__": {}}))  # only True/False/and/or/not/parentheses


@pytest.mark.parametrize(
    ("condition", "failed", "runs"),
    [
        (None, False, True), (None, True, False), ("always()", True, True), ("${{ failure() }}", True, True),
        ("failure()", False, False), ("success() || failure()", True, True), ("!cancelled()", True, True),
        ("true", True, False),
    ],
)  # fmt: skip
def test_step_runs_reads_if_as_github_does(condition: str | None, failed: bool, runs: bool) -> None:
    assert step_runs(condition, failed) is runs


@dataclass
class Job:
    steps: list[tuple[str, int | None]] = field(default_factory=list)  # (name, exit status; None: skipped)
    output: str = ""

    @property
    def failed(self) -> bool:
        return any(code not in (0, None) for _, code in self.steps)


def run_job(job: dict[str, Any], cwd: Path, env: dict[str, str], tmp: Path) -> Job:
    assert job["defaults"]["run"]["shell"] == "bash"
    result = Job()
    for i, step in enumerate(job["steps"]):
        if not step_runs(step.get("if"), result.failed):
            result.steps.append((step["name"], None))
            continue
        if "uses" in step or step["name"].startswith("Set up"):  # GitHub's part: passes
            result.steps.append((step["name"], 0))
            continue
        assert "${{" not in step["run"], f"{step['name']}: expressions in a script are not run by this test"
        script = tmp / f"step{i}.sh"
        script.write_text(step["run"])
        res = subprocess.run([*GITHUB_BASH, str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                             timeout=600)  # fmt: skip
        STARTED.update(RUN_LINE.findall(res.stdout))
        result.output += f"--- {step['name']} (exit {res.returncode})\n{res.stdout}{res.stderr}"
        result.steps.append((step["name"], res.returncode))
    return result


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def project(tmp_path: Path) -> tuple[Path, str, str]:
    """A git project with two commits (base, head): (its checkout, base sha, head sha)."""
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "ci@example.invalid")
    git(root, "config", "user.name", "ci")
    (root / "VERSION").write_text("1\n")
    git(root, "add", "VERSION")
    git(root, "commit", "-q", "-m", "base")
    base = git(root, "rev-parse", "HEAD")
    (root / "VERSION").write_text("2\n")
    git(root, "commit", "-q", "-am", "head")
    return root, base, git(root, "rev-parse", "HEAD")


def job_env(pg_url: str, base: str, head: str, head_params: str, repeat: int) -> dict[str, str]:
    socat = subprocess.run(["bash", "-c", "command -v socat"], capture_output=True, text=True).stdout.strip()
    assert socat, "socat is not installed"
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # tunbench, as installed by make venv
        "COLUMNS": "160",
        "TUNBENCH_DB": pg_url,
        "BASE_SHA": base,
        "HEAD_SHA": head,
        "BRANCH": "feature",
        "PR": "7",
        "BUILD": f"cp {socat} ./socat",  # each side's "build": its own copy, found by a relative bin=
        "TUNNEL_BASE": f"socat[label=base,bin=../base/socat,commit={base}]",
        "TUNNEL_HEAD": f"socat[label=head,bin=./socat,{head_params}commit={head}]",
        "TARGET": "3%",
        "BUDGET": "2m",
        "REPEAT": str(repeat),  # the upper bound of pairs: the recipe stops at TARGET, BUDGET or REPEAT
        "DURATION": "1",
        "OMIT": "0",
        "THRESHOLD": "3%",
        "GATE_FLAGS": "--redo-interfered",  # socat carries TCP, not IP: the timed gate
    }


def recipe_job() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(RECIPE.read_text())["jobs"]["tunbench"]
    given = set(job_env("postgresql://x", "b", "h", "", 1)) - set(os.environ)
    assert set(job["env"]) <= given, f"the recipe's env has keys the test does not set: {set(job['env']) - given}"
    names = [s["name"] for s in job["steps"]]
    assert names[1] == "Build base and head" and names[-1] == "Fail on a significant regression"
    return job


def test_the_recipe_runs_against_a_local_postgresql(tmp_path: Path, pg_url: str) -> None:
    """A/A (the same socat on both sides, 3 pairs): no regression, every step passes."""
    root, base, head = project(tmp_path)
    env = job_env(pg_url, base, head, "", repeat=3)
    job = run_job(recipe_job(), root, env, tmp_path)
    assert not job.failed and all(code == 0 for _, code in job.steps), job.output

    comment = (root / "comment.md").read_text()
    assert "### tunbench: head vs base (threshold 3%)" in comment
    assert "| base |" in comment and "| head |" in comment  # the Markdown tables of the run
    assert (root / "compare.status").read_text().strip() == "0"  # A/A: no regression

    # the run is in the shared store, under the PR's name, with the head's commit and each side's own build
    show = subprocess.run(
        [sys.executable, "-m", "tunbench", "show", "--list", "--db", pg_url], env=env, capture_output=True, text=True
    )
    assert show.returncode == 0 and "pr-7" in show.stdout, show.stdout + show.stderr
    hist = subprocess.run(
        [sys.executable, "-m", "tunbench", "history", "--db", pg_url, "--tunnel", "head"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert hist.returncode == 0 and head[:7] in hist.stdout, hist.stdout + hist.stderr
    trials = json.loads((root / "run.json").read_text())["trials"]
    bins = {t["label"]: t["params"]["tunnel"]["bin"] for t in trials}  # each side ran its own build
    assert bins == {"base": str(tmp_path / "base" / "socat"), "head": str(root / "socat")}
    git(root, "worktree", "remove", "--force", "../base")


def test_a_regression_is_commented_and_fails_the_job(tmp_path: Path, pg_url: str) -> None:
    """Head is socat with a 512-byte buffer (8192 by default), 8 pairs: compare exits 1, the comment is still
    written (and would be posted), and the job fails at its last step."""
    root, base, head = project(tmp_path)
    job = run_job(recipe_job(), root, job_env(pg_url, base, head, "buffer=512,", repeat=8), tmp_path)
    codes = dict(job.steps)
    assert (root / "compare.status").read_text().strip() == "1", job.output
    comment = (root / "comment.md").read_text()
    assert "### tunbench: head vs base (threshold 3%)" in comment and "regressed" in comment, comment
    assert codes["Post the PR comment"] == 0  # it ran: the comment reaches the PR
    assert codes["Fail on a significant regression"] == 1 and job.failed, job.output
    assert all(code == 0 for name, code in job.steps if name != "Fail on a significant regression"), job.output
    git(root, "worktree", "remove", "--force", "../base")
