"""The error tree. cli.py turns every TunbenchError into one `Error: ...` line and an exit code.

Exit codes (README, docs/ci.md, `tunbench run --help`): 0 ok; 1 a verdict of "regressed" (`compare`,
`history --fail-on-regression-since`) or a failed check (`doctor`, `clean`, `link selftest`), nothing else;
2 invalid input (scenario, adapter, profile, flag, a store or export that cannot be read as one); 3 a program
or kernel feature is missing; 4 `tunbench run` finished but some trials failed; 5 `tunbench run` measured
nothing (no trial ok); 6 an error stopped the command (store, tunnel, not root, a host); 70 an internal error,
a bug in tunbench (the traceback goes to a log file); 130 interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence

EXIT_REGRESSED = 1  # compare, history: a regression (doctor, clean: a failed check); never an error
EXIT_INVALID = 2  # a flag, file or reference that cannot be used
EXIT_MISSING = 3  # a program or kernel feature is missing
EXIT_TRIALS_FAILED = 4  # tunbench run: some trials failed, others were measured
EXIT_NOTHING_MEASURED = 5  # tunbench run: not one trial ok
EXIT_ERROR = 6  # an error stopped the command: never read as a verdict
EXIT_INTERNAL = 70  # a bug in tunbench (sysexits' EX_SOFTWARE): an exception tunbench did not expect
EXIT_INTERRUPTED = 130


class TunbenchError(Exception):
    """Base of every error tunbench reports to the user (never shown as a traceback). Its exit code is not 1,
    which means "regressed" to a CI job."""

    exit_code = EXIT_ERROR


class ExportError(TunbenchError):
    """A report cannot be written in the format asked for, or a file is not an export tunbench reads (exit 2,
    as a bad argument)."""

    exit_code = 2


class ConfigError(TunbenchError):
    """A scenario, adapter or profile file (or flag) is invalid. Names file, line and key."""

    exit_code = 2

    def __init__(self, message: str, *, source: str = "", line: int | None = None, key: str = "") -> None:
        self.source = source
        self.line = line
        self.key = key
        self.detail = message
        where = source
        if source and line is not None:
            where = f"{source}:{line}"
        parts = [p for p in (where, key) if p]
        super().__init__(": ".join([*parts, message]))


class DependencyMissing(TunbenchError):
    """A binary or kernel feature a tunnel or workload needs is not on this machine."""

    exit_code = 3


class CommandFailed(TunbenchError):
    """An external command exited non-zero (or timed out)."""

    def __init__(self, argv: Sequence[str], returncode: int | None, output: str, *, what: str = "") -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.output = output
        status = "timed out" if returncode is None else f"exit {returncode}"
        head = f"{what}: " if what else ""
        tail = output.strip().splitlines()[-5:]
        detail = ("\n  " + "\n  ".join(tail)) if tail else ""
        super().__init__(f"{head}`{' '.join(self.argv)}` failed ({status}){detail}")


class TunnelError(TunbenchError):
    """A tunnel did not come up (or died). Carries the tail of every role's log."""


class TrialError(TunbenchError):
    """One trial failed; the run records it and goes on."""


class MachineLost(TrialError):
    """A machine the trial's roles run on can no longer be reached (a host whose SSH connection ended):
    `machine` names it. Where it held only some of a fleet's clients, the trial keeps the others."""

    def __init__(self, message: str, machine: str = "") -> None:
        super().__init__(message)
        self.machine = machine


class RetryTrial(TrialError):
    """The measurement is void for a reason outside the tunnel (e.g. a traffic tool's own race), so running
    the whole trial again is sound. The runner does, a bounded number of times, and records why."""


class Interrupted(TunbenchError):
    """The run was interrupted (Ctrl-C or SIGTERM); finished trials are kept."""

    exit_code = 130
