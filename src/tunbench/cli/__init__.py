"""The command line: one module per command group, one console, `main()` (the `tunbench` entry point).

app.py        the typer app, global options, every command registered, main()
console.py    the one rich Console (and its stderr twin)
options.py    options and guards several commands share (--db, RUN)
checks.py     output paths and the store checked before work starts
argcheck.py   a command group that refuses an option given as another option's value
outcome.py    how a measuring command exits (run, calibrate)
progress.py   the run's progress observer (the bar, each trial's line)
run.py        tunbench run: parses its flags and calls the session
run_flags.py  the flags of tunbench run, each declared with its help
run_values.py the values of those flags as the scenario takes them
show.py       tunbench show (and the tables `run` prints at its end)
report.py     tunbench report, export (= report --format json)
compare.py    tunbench compare
calibrate.py  tunbench calibrate (a short A/A: this host's noise and the MDE per budget; the A/A's plan is
              session/calibration.py's, what it says report/calibration.py's)
catalog.py    tunbench tunnels, workloads, profiles, doctor
clean.py      tunbench clean
agent.py      tunbench agent, and clean / doctor --hosts (docs/multi-host.md)
history.py    tunbench history (each case over the runs of one machine, with its change points)
db.py         tunbench db migrate | import | export (the result store itself)
link/         tunbench link shell | selftest (the emulator on its own: shell.py, selftest.py: its output; the
              measurements are link/selftest.py's)
"""

from tunbench.cli.app import app, main

__all__ = ["app", "main"]
