"""How many repetitions can give a verdict at all, said before a run and in the help: one rule,
``stats.min_repetitions``, for the gated family compare will judge (pure).
"""

from __future__ import annotations

from tunbench.stats import min_repetitions


def repetitions_for(level: float, *, paired: bool) -> int:
    """The fewest repetitions (pairs, or per side) with which the analysis can reach p < level
    (``stats.min_repetitions``, the one rule)."""
    return min_repetitions(paired=paired, alpha=level)


GATED_PER_CASE = 3
"""Gated comparisons per case of a throughput workload: throughput, CPU/bit client, CPU/bit server (latency
metrics add more where a workload measures them, so the family a plan is judged by is a lower bound)."""


LARGEST_FAMILY = 321
"""The largest family the rule's sentence spells out (at alpha 0.05, 8 per side up to it); it says what holds
above it too, so no plan's figure lies past the end of the sentence (it stopped at 23, and a plan of 27
comparisons printed 7)."""


def min_repetitions_text(alpha: float = 0.05) -> str:
    """The rule in one sentence, from ``stats.min_repetitions`` (compare's help, README, docs/precision.md and
    docs/ci.md state exactly this; a unit test checks that they do)."""
    spans: list[tuple[int, int, int]] = []
    for family in range(1, LARGEST_FAMILY + 1):
        n = min_repetitions(family, paired=False, alpha=alpha)
        if spans and spans[-1][2] == n:
            spans[-1] = (spans[-1][0], family, n)
        else:
            spans.append((family, family, n))
    parts = [
        f"{n} per side for {lo} gated comparison" if lo == hi == 1 else f"{n} for {lo}-{hi}" for lo, hi, n in spans
    ]
    beyond = min_repetitions(LARGEST_FAMILY + 1, paired=False, alpha=alpha)
    return (
        f"fewest repetitions for any verdict: {min_repetitions(paired=True, alpha=alpha)} pairs (paired); unpaired, "
        + ", ".join(parts)
        + f", {beyond} or more above {LARGEST_FAMILY}"
    )


def repetition_note(*, labels: int, cases_per_label: int, units: int, warm: int = 1) -> str:
    """Before a run (`run --dry-run` and the run's header): "" when `units` independent units per case (cold
    trials, or warm bring-ups) can give a verdict for the gated family `compare` will judge, else a warning
    with the fewest that can (``stats.min_repetitions``, the one rule). Two labels or more besides direct are
    compared paired within the run (family: each label's cases x the gated metrics); one label is compared
    with another run, unpaired. `warm`: windows per bring-up (a unit), for the --repeat to suggest."""
    if labels < 1 or cases_per_label < 1:
        return ""
    paired = labels >= 2
    family = GATED_PER_CASE * cases_per_label
    need = min_repetitions(family, paired=paired)
    if units >= need:
        return ""
    how = (
        f"compared paired by repetition (--label-a/--label-b), {need} pairs"
        if paired
        else f"compared with another run (unpaired, Holm over {family} gated comparisons), {need} per side"
    )
    unit = "bring-up(s)" if warm > 1 else "repetition(s)"
    return (
        f"warning: {units} {unit} per case cannot give any verdict: {how} is the fewest that can "
        f"(docs/precision.md); use --repeat {need * warm} or more"
    )
