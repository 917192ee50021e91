"""The CI recipe (examples/ci/github-actions.yml) runs: its `run:` steps, in order, as GitHub would run
them (bash, the job's env), against a real local PostgreSQL, with the A and B sides two builds of one
small git project (socat under two labels, so the comparison is A/A). Steps that set up the checkout or
use an action (posting the comment) are GitHub's part and are left out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.integration.helpers import RUN_LINE, STARTED

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "ci" / "github-actions.yml"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def local_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if "run" in s and "uses" not in s and not s["name"].startswith("Set up")]


def test_the_recipe_runs_against_a_local_postgresql(tmp_path: Path, pg_url: str) -> None:
    job = yaml.safe_load(RECIPE.read_text())["jobs"]["tunbench"]
    names = [s["name"] for s in local_steps(job)]
    assert names[0] == "Build base and head" and names[-1] == "Fail on a significant regression"

    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    git(project, "config", "user.email", "ci@example.invalid")
    git(project, "config", "user.name", "ci")
    (project / "VERSION").write_text("1\n")
    git(project, "add", "VERSION")
    git(project, "commit", "-q", "-m", "base")
    base = git(project, "rev-parse", "HEAD")
    (project / "VERSION").write_text("2\n")
    git(project, "commit", "-q", "-am", "head")
    head = git(project, "rev-parse", "HEAD")

    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # tunbench, as installed by make venv
        "COLUMNS": "160",
        "TUNBENCH_DB": pg_url,
        "BASE_SHA": base,
        "HEAD_SHA": head,
        "BRANCH": "feature",
        "PR": "7",
        "BUILD": "true",  # nothing to build: both sides run the system's socat
        "TUNNEL_BASE": f"socat[label=base,commit={base}]",
        "TUNNEL_HEAD": f"socat[label=head,commit={head}]",
        "REPEAT": "3",
        "THRESHOLD": "3%",
    }
    shell = job["defaults"]["run"]["shell"]
    for step in local_steps(job):
        res = subprocess.run(
            [shell, "-c", step["run"]], cwd=project, env=env, capture_output=True, text=True, timeout=600
        )
        STARTED.update(RUN_LINE.findall(res.stdout))
        assert res.returncode == 0, f"step {step['name']!r} exit {res.returncode}:\n{res.stdout}\n{res.stderr}"

    comment = (project / "comment.md").read_text()
    assert "### tunbench: head vs base (threshold 3%)" in comment
    assert "| base |" in comment and "| head |" in comment  # the Markdown tables of the run
    assert (project / "compare.status").read_text().strip() == "0"  # A/A: no regression

    # the run is in the shared store, under the PR's name, with the head's commit
    show = subprocess.run(
        [sys.executable, "-m", "tunbench", "show", "--list", "--db", pg_url], env=env, capture_output=True, text=True
    )
    assert show.returncode == 0 and "pr-7" in show.stdout, show.stdout + show.stderr
    hist = subprocess.run(
        [sys.executable, "-m", "tunbench", "history", "--db", pg_url, "--tunnel", "head"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert hist.returncode == 0 and head[:7] in hist.stdout, hist.stdout + hist.stderr
    git(project, "worktree", "remove", "--force", "../base")
