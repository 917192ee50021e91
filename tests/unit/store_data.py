"""A blank run to store trials under, for the unit tests that write a store."""

from __future__ import annotations

from tunbench.store.db import Store


def new_run(store: Store) -> int:
    """A run with no name, provenance or scenario: its id."""
    return store.create_run(
        uid="tb000001",
        name="",
        tunbench_version="0",
        provenance={},
        scenario_text="",
        scenario_hash="",
        scenario={},
    )
