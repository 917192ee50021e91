"""What `tunbench run` shows while it runs: the progress bar with its ETA and one line per finished trial
(a session.RunObserver), and the signal handling that turns the first Ctrl-C or SIGTERM into an orderly
stop."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tunbench.monitor.interference import INTERFERED
from tunbench.plan import PlannedTrial, RunPlan
from tunbench.report.summary import lost_text, saturated_text
from tunbench.report.terminal import trial_headline
from tunbench.results import TrialRecord
from tunbench.session import minutes, repetition_warning, warm_note
from tunbench.store.backend import redact


class RunProgress:
    """The bar advances by each trial's estimated seconds, so the ETA weighs a 500-client storm above a
    ping. Use as a context manager around session.execute."""

    def __init__(self, console: Console, db_path: str | Path) -> None:
        self.console = console
        self.db_path = db_path
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[done]}/{task.fields[trials]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[note]}"),
            console=console,
            transient=True,
            speed_estimate_period=7 * 24 * 3600.0,  # a trial can outlast rich's default 30 s: keep every sample
            refresh_per_second=1,  # the bar redraws once a second: the controller stays quiet in the windows
        )
        self.task: TaskID | None = None
        self.weight: dict[int, float] = {}
        self.finished = 0

    def __enter__(self) -> RunProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.__exit__(et, e, tb)

    def run_started(self, run_id: int, uid: str, plan: RunPlan) -> None:
        self.console.print(
            f"run [bold]{uid}[/] (#{run_id}): {len(plan.cases)} cases × {plan.scenario.run.repeat} "
            f"repetitions = {len(plan.trials)} trials, about {minutes(plan.total_s)}; results in {redact(self.db_path)}"
        )
        if warm := warm_note(plan):
            self.console.print(warm)
        if few := repetition_warning(plan):
            self.console.print(f"[yellow]{escape(few)}[/]")
        for line in plan.site.lines():  # each side's CPUs; with several client hosts, who does what
            self.console.print(escape(line), highlight=False)
        self.weight = {pt.seq: e for pt, e in zip(plan.trials, plan.expected, strict=True)}
        self.task = self.progress.add_task("starting", total=plan.total_s, done=0, trials=len(plan.trials), note="")

    def note(self, text: str) -> None:
        """A status beside the bar (the precision reached and the budget left, `run --target-mde`), and the same
        as a line, so a log without the bar keeps it."""
        if self.task is not None:
            self.progress.update(self.task, note=text)
        self.console.print(f"  [dim]{escape(text)}[/]")

    def trial_started(self, pt: PlannedTrial) -> None:
        if self.task is not None:
            self.progress.update(self.task, description=f"{pt.case.title} · rep {pt.repetition}")

    def trial_done(self, pt: PlannedTrial, rec: TrialRecord) -> None:
        self.finished += 1
        if self.task is not None:
            self.progress.update(self.task, advance=self.weight.get(pt.seq, 0.0), done=self.finished)
        title = escape(pt.case.title)
        if rec.status == "ok":
            mark = (
                f" [yellow](interfered: {escape(str(rec.params.get('interference')))})[/]"
                if rec.metrics.get(INTERFERED.name) == 1.0
                else ""
            )
            if lost := rec.params.get("clients_lost"):
                mark += f" [yellow](lost: {escape(lost_text(lost))})[/]"
            if hot := saturated_text(rec.params):
                mark += f" [yellow](saturated: {escape(hot)})[/]"
            self.console.print(f"  [green]✓[/] {title} · rep {pt.repetition}: {trial_headline(rec)}{mark}")
            for why in rec.params.get("retried", []):
                self.console.print(f"      (an earlier attempt was void and run again: {escape(why)})")
        else:
            lines = rec.error.splitlines() or ["failed"]
            self.console.print(f"  [red]✗[/] {title} · rep {pt.repetition}: {escape(lines[0])}")
            for line in lines[1:40]:  # the tunnel's own log, when it failed
                self.console.print(f"      {line}", markup=False, highlight=False)


@contextmanager
def graceful_signals(console: Console) -> Iterator[None]:
    """First Ctrl-C / SIGTERM / SIGHUP interrupts the run (KeyboardInterrupt unwinds every context
    manager); further ones are ignored while teardown finishes, so cleanup itself is never cut short."""
    state = {"hit": False}
    main_pid = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != main_pid:
            # a forked helper (pyroute2 forks to enter namespaces) must die, never unwind our stack
            os._exit(128 + signum)
        if state["hit"]:
            console.print("[yellow]still cleaning up, please wait…[/]")
            return
        state["hit"] = True
        raise KeyboardInterrupt

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
