"""The output samples of the README, docs/ci.md and docs/precision.md are what today's code prints for the
runs they come from: each marked block (`<!-- sample:NAME -->`) is rendered again from its committed JSON
export (docs/samples/*.json) by scripts/readme_samples.py and must be the same, so a change of the output's
format shows here without running a tunnel. The commands the docs show are the ones that made the runs."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_samples", ROOT / "scripts" / "readme_samples.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["readme_samples"] = mod
    spec.loader.exec_module(mod)
    return mod


samples = _script()


def test_every_block_has_a_sample_and_every_sample_a_block() -> None:
    found = {name: doc.relative_to(ROOT).as_posix() for doc in samples.DOCS for name in samples.blocks(doc)}
    assert found == {name: s.doc for name, s in samples.SAMPLES.items()}


@pytest.mark.parametrize("name", sorted(samples.SAMPLES))
def test_the_block_is_what_the_code_prints(name: str) -> None:
    sample = samples.SAMPLES[name]
    held = samples.blocks(ROOT / sample.doc)[name]
    assert held == samples.block_text(sample), (
        f"{sample.doc}: the {name} sample is not what the code prints now: run scripts/readme_samples.py render"
    )


def test_the_docs_show_the_commands_that_made_the_samples() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert samples.QUICKSTART in readme
    # the README's A/B line (the work gate's) and the timed line of docs/precision.md, each with the installed
    # wireguard-go on both sides instead of two builds
    for doc, run in (("README.md", samples.AB_WORK), ("docs/precision.md", samples.AB)):
        assert "'wireguard-go[label=base]'" in run and "'wireguard-go[label=pr]'" in run
        lines = (ROOT / doc).read_text().splitlines()
        line = next(ln for ln in lines if ln.startswith("tunbench run -t") and "label=pr]" in ln)
        same = [w for w in shlex.split(line) if not w.startswith("wireguard-go[")]
        assert same == [w for w in shlex.split(run) if not w.startswith("wireguard-go[")], doc
    ci = " ".join((ROOT / "docs" / "ci.md").read_text().split())
    assert f"{samples.CI} --json run.json" in ci
    compare = "tunbench compare run.json " + " ".join(samples.CI_COMPARE)
    assert compare in ci


def test_a_blocks_body_is_replaced_and_nothing_else(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("before\n<!-- sample:x -->\nold\n<!-- /sample -->\nafter\n")
    text = samples.BLOCK.sub(lambda m: m.group(1) + "new\n" + m.group(4), doc.read_text())
    assert text == "before\n<!-- sample:x -->\nnew\n<!-- /sample -->\nafter\n"
