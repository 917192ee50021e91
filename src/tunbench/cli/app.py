"""The `tunbench` typer app: global options, every command registered in one place, and `main()`, which
turns a TunbenchError into one `Error: ...` line and its exit code."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Annotated

import typer

from tunbench import __version__
from tunbench.cli import agent, calibrate, catalog, clean, compare, flent, history, report, run, show
from tunbench.cli.argcheck import CheckedGroup
from tunbench.cli.console import console, err_console
from tunbench.cli.db import db_app
from tunbench.cli.link import link_app
from tunbench.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, TunbenchError

app = typer.Typer(
    cls=CheckedGroup,  # an option's value that is another option is refused (cli/argcheck.py)
    help="Reproducible performance tests for VPNs, tunnels and proxies, in hermetic network namespaces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help is plain text: rich markup would eat `NAME[key=value,...]` and `[run] warm` as tags (every sub-app
    # inherits this mode from the root)
    rich_markup_mode=None,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "max_content_width": 120,
    },  # the terminal's width, up to 120
)

# in `tunbench --help`'s order
app.command("run")(run.run)
app.command("show")(show.show)
app.command("export")(report.export)
app.command("import-flent")(flent.import_flent)
app.command("tunnels")(catalog.tunnels)
app.command("workloads")(catalog.workloads)
app.command("profiles")(catalog.profiles)
app.command("doctor")(catalog.doctor)
app.command("clean")(clean.clean)
app.command("compare")(compare.compare)
app.command("calibrate")(calibrate.calibrate)
app.command("report")(report.report)
app.command("history")(history.history)
app.command("agent")(agent.agent)
app.add_typer(link_app, name="link")
app.add_typer(db_app, name="db")


def version_callback(value: bool) -> None:
    if value:
        console.print(f"tunbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version and exit.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what tunbench does.")] = False,
) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(message)s")


def main() -> None:
    try:
        app()
    except TunbenchError as e:
        err_console.print(f"Error: {e}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as e:  # a bug: its own exit status, never 1 ("regressed"), the traceback in a log
        log = crash_log(e)
        where = f"; the traceback is in {log}" if log else ""
        err_console.print(
            f"Internal error: {type(e).__name__}: {e}. This is a bug in tunbench{where} "
            f"(exit {EXIT_INTERNAL}, never a verdict).",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        sys.exit(EXIT_INTERNAL)


def crash_log(e: BaseException) -> Path | None:
    """Write ``e``'s traceback, the command line and the version to a log file of its own
    ($XDG_STATE_HOME/tunbench, else ~/.local/state/tunbench, else the temporary directory) and return its
    path; None when no place could be written."""
    text = f"tunbench {__version__}\nargv: {sys.argv}\n\n" + "".join(
        traceback.format_exception(type(e), e, e.__traceback__)
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    for folder in (Path(state) / "tunbench", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"tunbench-crash-{stamp}-{os.getpid()}.log"
            path.write_text(text)
            return path
        except OSError:
            continue
    return None
