"""The run report's "Faults" table: each trial whose profile's faults fired, the messages they hit (with
their time on the trial's axis) and how the tunnel recovered (report/faults.py writes the cells)."""

from __future__ import annotations

from tunbench.report.faults import fault_rows
from tunbench.report.html.base import esc, h3
from tunbench.results import TrialRecord


def faults_html(trials: list[TrialRecord], pid: str) -> str:
    rows = fault_rows(trials)
    if not rows:
        return ""
    body = "".join(f"<tr><td>{esc(who)}</td><td>{esc(hits)}</td><td>{esc(rec)}</td></tr>" for who, hits, rec in rows)
    head = "<tr><th>trial</th><th>faults fired (s on the trial's axis; &lt; 0: the bring-up)</th><th>recovery</th></tr>"
    return f"{h3(pid, 'faults', 'Faults')}<table><thead>{head}</thead><tbody>{body}</tbody></table>"
