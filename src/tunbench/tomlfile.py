"""Reading TOML files with errors that name file, line and key.

tomllib reports syntax errors with a line number but keeps no positions for parsed keys, so
`locate()` finds a dotted key's line by scanning the text: table headers (`[a.b]`, `[[a]]`) and
`key =` lines. It is approximate for exotic layouts (inline tables spanning lines), which then fall
back to the nearest enclosing table's line.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tunbench.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")


def _parts(key: str) -> list[str]:
    """`a."b.c".d` -> ["a", "b.c", "d"] (quoted components may contain dots)."""
    return [p.strip("\"'") for p in re.findall(r'"[^"]*"|\'[^\']*\'|[^.\s]+', key)]


def _path_names(path: Sequence[str | int]) -> tuple[list[str], dict[str, int]]:
    """Dotted names of `path`, and for arrays of tables which element (`arr` -> index)."""
    names: list[str] = []
    index: dict[str, int] = {}
    for p in path:
        if isinstance(p, int):
            if names:
                index[".".join(names)] = p
        else:
            names.append(p)
    return names, index


def dotted(key: str) -> list[str | int]:
    """A key as errors name it (`events.2.rate`) -> the path `locate` takes (["events", 2, "rate"])."""
    return [int(part) if part.isdigit() else part for part in key.split(".")]


def locate(text: str, path: Sequence[str | int]) -> int | None:
    """1-based line of the dotted key `path` (ints pick an element of an array of tables): the line that
    matches the most leading components of the path wins, first one on ties; None if nothing matches."""
    names, index = _path_names(path)
    if not names:
        return None
    seen: dict[str, int] = {}
    table: list[str] = []
    in_wanted_element = True
    best, best_depth = None, 0
    for no, line in enumerate(text.splitlines(), start=1):
        if m := _HEADER.match(line):
            table = _parts(m.group(1))
            dotted = ".".join(table)
            if line.lstrip().startswith("[["):
                seen[dotted] = seen.get(dotted, -1) + 1
                in_wanted_element = index.get(dotted, seen[dotted]) == seen[dotted]
            else:
                in_wanted_element = True
            parts = table
        elif m := _KEY.match(line):
            parts = table + _parts(m.group(1))
        else:
            continue
        if not in_wanted_element:
            continue
        if parts == names[: len(parts)] and len(parts) > best_depth:
            best, best_depth = no, len(parts)
    return best


def read_toml(path: Path) -> tuple[dict[str, Any], str]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror or e}", source=str(path)) from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"not UTF-8 text (byte 0x{raw[e.start]:02x}); TOML files must be UTF-8", source=str(path), line=line
        ) from None
    return parse_toml(text, str(path)), text


def parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(m.group(1)) if m else (len(text.splitlines()) if "end of document" in msg else None)
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
        raise ConfigError(f"TOML syntax error: {msg}", source=source, line=line) from e
    except RecursionError:  # tomllib recurses per nesting level: `a = [[[[...` a thousand deep
        raise ConfigError("TOML nested too deeply", source=source, line=1) from None


def validate(
    model: type[M],
    data: dict[str, Any],
    *,
    text: str,
    source: str,
    key_prefix: str = "",
    locate_prefix: Sequence[str] = (),
) -> M:
    """Validate `data` against `model`; the first error becomes a ConfigError naming file, line and key."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = [p for p in err["loc"] if isinstance(p, str | int)]
        key = ".".join(str(p) for p in loc)
        if key_prefix:
            key = f"{key_prefix}.{key}" if key else key_prefix
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        line = locate(text, [*locate_prefix, *loc]) if text else None
        if line is None and err["type"] == "missing" and len(loc) > 1:
            line = locate(text, [*locate_prefix, *loc[:-1]])
        more = len(e.errors()) - 1
        if more:
            msg += f" (and {more} more error{'s' if more > 1 else ''})"
        raise ConfigError(msg, source=source, line=line, key=key) from None
