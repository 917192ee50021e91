"""pyproject.toml: the metadata a build reads, in the forms current build tools accept without a warning."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.licenses import canonicalize_license_expression
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _pyproject() -> dict:
    return tomllib.loads(PYPROJECT.read_text())


def test_license_is_an_spdx_expression_and_the_backend_reads_it() -> None:
    # a `{ text = ... }` table makes setuptools >= 77 print a deprecation warning on every build (PEP 639)
    data = _pyproject()
    license_ = data["project"]["license"]
    assert isinstance(license_, str)
    assert canonicalize_license_expression(license_) == license_
    setuptools = next(Requirement(r) for r in data["build-system"]["requires"] if r.startswith("setuptools"))
    assert Version("77") in setuptools.specifier
    assert not any(Version(v) in setuptools.specifier for v in ("68", "76.1"))
