"""`tunbench workloads` shows each option's real default: a default factory's value, or "required"."""

from __future__ import annotations

from pydantic import BaseModel, Field
from typer.testing import CliRunner

from tunbench.cli import app
from tunbench.cli.catalog import option_default
from tunbench.workloads import REGISTRY


class _Opts(BaseModel):
    needed: int
    listed: list[int] = Field(default_factory=lambda: [5, 20])
    plain: float = 2.5
    empty: str | None = None


def test_option_default_reads_factories_and_says_required() -> None:
    fields = _Opts.model_fields
    assert option_default(fields["needed"]) == "required"
    assert option_default(fields["listed"]) == "[5, 20]"
    assert option_default(fields["plain"]) == "2.5"
    assert option_default(fields["empty"]) == "None"


def test_workloads_lists_the_defaults_the_options_get() -> None:
    res = CliRunner().invoke(app, ["workloads"], terminal_width=400)
    assert res.exit_code == 0, res.output
    assert "PydanticUndefined" not in res.output
    text = " ".join(res.output.split())
    for kind, w in REGISTRY.items():
        built = w.Options()  # every built-in option has a default today: what a scenario without them gets
        for name in w.Options.model_fields:
            assert f"{name}={getattr(built, name)!r}" in text, (kind, name)
