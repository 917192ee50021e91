"""An option's value that is another option is refused, for every command and every option that takes a value.

Click takes the token after an option that takes a value as that value, whatever it looks like, so `run
--commit SHA --branch --dry-run` named the branch "--dry-run" and then ran for real, as root. The root group
(``CheckedGroup``) reads the whole command line once before click parses it: where an option that takes a
value is followed by a token that starts with "--" or is one of the command's own short options (`-t`), it is a
usage error (exit 2) that names both. `--opt=value` gives a value explicitly and is never refused; a value
such as `-1` or `-5s` that is no option of the command passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup


def refuse_option_values(command: Any, ctx: typer.Context, args: Sequence[str]) -> None:
    """Raise typer.BadParameter (a usage error, exit 2) where an option of ``command`` (or of the subcommand
    the arguments name, at any depth) that takes a value is given an option as its value."""
    rest = list(args)
    while True:
        values, names = _options(command)
        i = 0
        while i < len(rest):
            token = rest[i]
            if token == "--":
                return
            if token in values and i + 1 < len(rest):
                nxt = rest[i + 1]
                if nxt.startswith("--") or nxt in names:
                    raise typer.BadParameter(
                        f"it takes a value, but the next word is the option {nxt}: give {token} its value "
                        f"(e.g. {token} VALUE {nxt}), or write {token}=VALUE",
                        ctx=ctx,
                        param_hint=token,
                    )
                i += 2
                continue
            if hasattr(command, "get_command") and not token.startswith("-"):
                sub = command.get_command(ctx, token)
                if sub is None:
                    return  # click says what is wrong with the name
                command, rest = sub, rest[i + 1 :]
                break
            i += 1
        else:
            return


def _options(command: Any) -> tuple[set[str], set[str]]:
    """(the names of the command's options that take a value, every option name of the command). Typer
    carries a click of its own, so options are told by what they have (`is_flag`), not by their class."""
    values: set[str] = set()
    names: set[str] = {"--help", "-h"}
    for param in command.params:
        if not hasattr(param, "is_flag"):  # an argument
            continue
        opts = [*param.opts, *param.secondary_opts]
        names.update(opts)
        if not param.is_flag and not param.count:
            values.update(param.opts)
    return values, names


class CheckedGroup(TyperGroup):
    """The root group: the command line is checked by ``refuse_option_values`` before click parses it."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        refuse_option_values(self, ctx, args)
        return super().parse_args(ctx, args)
