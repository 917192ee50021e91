"""The values of `tunbench run`'s flags as the scenario takes them: lists split at commas (where a tunnel's
brackets and an inline profile keep their own), IP families, build ids, shares, and the budget of a target.
Bad values are usage errors that name their flag (exit 2)."""

from __future__ import annotations

import re

import typer

from tunbench.cli.options import parse_budget, parse_share, parse_until


def csv_list(value: str | None, cast: type = str) -> list | None:  # type: ignore[type-arg]
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    try:
        return [cast(v) for v in items]
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a comma-separated list of {cast.__name__}") from None


def split_tunnels(values: list[str] | None) -> list[str] | None:
    """`--tunnel a,b` or repeated `--tunnel`; commas inside [...] belong to the parameters."""
    if not values:
        return None
    out: list[str] = []
    for v in values:
        depth, cur = 0, ""
        for ch in v:
            depth += ch == "["
            depth -= ch == "]"
            if ch == "," and depth == 0:
                out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            out.append(cur.strip())
    return out


def build_id(value: str | None, flag: str) -> str:
    """A commit or branch as given, or "" when not given; refused if empty or with whitespace."""
    if value is None:
        return ""
    if not value.strip() or any(ch.isspace() for ch in value):
        raise typer.BadParameter(f"{value!r}: expected one word (no spaces)", param_hint=flag)
    return value


def family(value: str | None, flag: str) -> str | None:
    """`--ip 6` / `--overlay ipv6` -> "ipv6" (the scenario's [topology] underlay / overlay)."""
    if value is None:
        return None
    family = {"4": "ipv4", "6": "ipv6", "ipv4": "ipv4", "ipv6": "ipv6"}.get(value.strip().lower())
    if family is None:
        raise typer.BadParameter(f"{value!r}: expected 4 or 6", param_hint=flag)
    return family


_INLINE_ITEM = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_.]*\s*=")


def split_profiles(values: list[str] | None) -> list[str] | None:
    """`--profile lan,wan-50ms` or repeated `--profile`; an inline profile keeps its own commas: after
    `NAME:key=value`, a comma followed by `key=...` continues it (`dsl:delay=15ms,up.rate=1mbit,lan`)."""
    if not values:
        return None
    out: list[str] = []
    for v in values:
        inline = False
        for part in v.split(","):
            if inline and _INLINE_ITEM.match(part):
                out[-1] += "," + part.strip()
            elif part.strip():
                out.append(part.strip())
                inline = ":" in part
    return out


def precision_flags(
    target: str | None, budget: str | None, until: str | None = None
) -> tuple[float | None, float | None]:
    """(--target-mde as a fraction, --budget (or the time left --until) in seconds), each None when not
    given; bad values name the flag."""
    if budget is not None and until is not None:
        raise typer.BadParameter("give --budget or --until, not both", param_hint="--until")
    budget_s = parse_budget(budget) if budget is not None else parse_until(until) if until is not None else None
    if target is None:
        return None, budget_s
    goal = parse_share(target, "--target-mde")
    if budget_s is None:
        raise typer.BadParameter(
            f"{target!r} needs --budget (or --until): the most wall time the run may take to reach it (e.g. "
            "--budget 2m, or --until 14:30)",
            param_hint="--target-mde",
        )
    return goal, budget_s


def percent(text: str | None, flag: str) -> float | None:
    """'5%' (or the fraction 0.05) -> 5.0 percent, None when not given; a bad value names the flag."""
    return None if text is None else 100.0 * parse_share(text, flag)
