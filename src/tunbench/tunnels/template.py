"""`{name}` templates in adapter files. Command lines are split (shlex) before substitution, so a value
with spaces stays one argument and nothing is ever passed through a shell unless the adapter asks."""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Mapping

from tunbench.errors import ConfigError

_FMT = string.Formatter()


def render(template: str, variables: Mapping[str, str], *, source: str = "", key: str = "") -> str:
    for _, field, _, _ in _FMT.parse(template):
        if field is None:
            continue
        if field == "" or not field.isidentifier():
            raise ConfigError(f"bad placeholder {{{field}}} in {template!r}", source=source, key=key)
        if field not in variables:
            known = ", ".join(sorted(variables))
            raise ConfigError(f"unknown variable {{{field}}} (known: {known})", source=source, key=key)
    return template.format_map(variables)


def render_argv(command: str, variables: Mapping[str, str], *, source: str = "", key: str = "") -> list[str]:
    try:
        tokens = shlex.split(command)
    except ValueError as e:
        raise ConfigError(f"cannot split command: {e}", source=source, key=key) from e
    if not tokens:
        raise ConfigError("empty command", source=source, key=key)
    out = []
    for tok in tokens:
        value = render(tok, variables, source=source, key=key)
        # a word that is only a placeholder and renders empty is left out, so a parameter can hold an
        # optional flag: `{nodelay}` with nodelay="--tcp-nodelay" or ""
        if value == "" and re.fullmatch(r"\{[A-Za-z_][A-Za-z0-9_]*\}", tok):
            continue
        out.append(value)
    return out


def placeholders(template: str) -> set[str]:
    return {f for _, f, _, _ in _FMT.parse(template) if f}
