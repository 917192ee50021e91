from __future__ import annotations

import itertools
from collections import Counter

from tunbench.link.profile import find_profile
from tunbench.plan import expand, interleave
from tunbench.tunnels.registry import parse_ref


def cases():  # type: ignore[no-untyped-def]
    tunnels = [parse_ref("direct"), parse_ref("socat"), parse_ref("stunnel")]
    return expand(tunnels, [find_profile("lan")], [1, 2], ["up", "down"], ["iperf3"])


def test_expand_is_the_full_matrix() -> None:
    cs = cases()
    assert len(cs) == 3 * 2 * 2
    assert len({(c.tunnel.label, c.flows, c.direction) for c in cs}) == 12


def test_interleave_visits_every_case_once_per_repetition() -> None:
    cs = cases()
    trials = interleave(cs, 4, seed=7)
    assert [t.seq for t in trials] == list(range(1, 49))
    for rep in range(1, 5):
        block = [t for t in trials if t.repetition == rep]
        assert Counter(t.case.title for t in block) == Counter(c.title for c in cs)
    # interleaved: the first repetition block is not "all of tunnel A first"
    first = [t.case.tunnel.label for t in trials[:12]]
    assert first != sorted(first)


def test_interleave_is_deterministic_per_seed() -> None:
    cs = cases()
    a = [t.case for t in interleave(cs, 3, seed=1)]
    b = [t.case for t in interleave(cs, 3, seed=1)]
    c = [t.case for t in interleave(cs, 3, seed=2)]
    assert a == b and a != c


def test_blocks_keep_a_cases_tunnels_together_in_shuffled_orders() -> None:
    cs = cases()
    trials = interleave(cs, 6, seed=3)
    orders = set()
    for rep in range(1, 7):
        rnd = [t.case for t in trials if t.repetition == rep]
        # each block of 3 tunnels is contiguous: (flows, direction) changes exactly 3 times per round
        keys = [(c.flows, c.direction) for c in rnd]
        assert sum(a != b for a, b in itertools.pairwise(keys)) == 3
        orders.add(tuple(c.tunnel.label for c in rnd[:3]))
    assert len(orders) > 1  # the order inside a block is shuffled per round
    shuffled = interleave(cs, 6, seed=3, blocks=False)
    assert [t.case for t in shuffled] != [t.case for t in trials]


def _pair_cases():  # type: ignore[no-untyped-def]
    tunnels = [parse_ref("socat[label=a]"), parse_ref("socat[label=b]")]
    return expand(tunnels, [find_profile("lan")], [1], ["up"], ["iperf3"])


def test_two_tunnels_are_counterbalanced_every_two_rounds() -> None:
    # AB and BA equally often after every second round, for any seed (position in a block cannot lean on a label)
    for seed in range(50):
        trials = interleave(_pair_cases(), 13, seed=seed)
        firsts = [t.case.tunnel.label for t in trials if t.seq % 2 == 1]
        assert len(firsts) == 13
        for rounds in range(2, 14, 2):
            assert firsts[:rounds].count("a") == rounds // 2, (seed, firsts)
    # and the order of AB and BA within each two rounds is still random
    starts = {tuple(t.case.tunnel.label for t in interleave(_pair_cases(), 6, seed=s)[:2]) for s in range(20)}
    assert starts == {("a", "b"), ("b", "a")}


def test_each_tunnel_takes_each_position_once_per_cycle() -> None:
    cs = cases()  # blocks of 3 tunnels: every 3 rounds each tunnel once first, once second, once third
    trials = interleave(cs, 6, seed=11)
    for key in {(c.flows, c.direction) for c in cs}:
        for cycle in (range(1, 4), range(4, 7)):
            positions = Counter()  # type: ignore[var-annotated]
            for rep in cycle:
                block = [t for t in trials if t.repetition == rep and (t.case.flows, t.case.direction) == key]
                positions.update((t.case.tunnel.label, i) for i, t in enumerate(block))
            assert set(positions.values()) == {1} and len(positions) == 9


def test_blocks_are_numbered_consecutively() -> None:
    cs = cases()
    trials = interleave(cs, 3, seed=5)
    assert [t.block for t in trials] == [b for b in range(1, 13) for _ in range(3)]
    for b in range(1, 13):
        block = [t for t in trials if t.block == b]
        assert len({(t.case.flows, t.case.direction, t.repetition) for t in block}) == 1
    shuffled = interleave(cs, 3, seed=5, blocks=False)
    assert [t.block for t in shuffled] == [t.repetition for t in shuffled]


def test_warm_one_is_the_cold_plan() -> None:
    cs = cases()
    cold, warm1 = interleave(cs, 5, seed=9), interleave(cs, 5, seed=9, warm=1)
    assert [(t.case, t.block, t.repetition, t.window) for t in cold] == [
        (t.case, t.block, t.repetition, t.window) for t in warm1
    ]
    assert all(t.window == 0 for t in cold)


def test_warm_blocks_hold_consecutive_rounds_as_counterbalanced_windows() -> None:
    trials = interleave(_pair_cases(), 10, seed=4, warm=4)  # blocks of 4, 4 and 2 rounds
    assert [len([t for t in trials if t.block == b]) for b in (1, 2, 3)] == [8, 8, 4]
    for b in (1, 2, 3):
        block = [t for t in trials if t.block == b]
        # one window per tunnel per round, numbered by the round's place in the block
        assert [t.window for t in block] == [w for w in range(1, len(block) // 2 + 1) for _ in range(2)]
        assert len({t.repetition for t in block}) == len(block) // 2
        for rep in {t.repetition for t in block}:
            assert sorted(t.case.tunnel.label for t in block if t.repetition == rep) == ["a", "b"]
    # every repetition of every case exactly once, and ab/ba still balanced every two rounds
    assert Counter((t.case.tunnel.label, t.repetition) for t in trials) == Counter(
        (label, r) for label in "ab" for r in range(1, 11)
    )
    firsts = [t.case.tunnel.label for t in trials if t.seq % 2 == 1]
    assert all(firsts[:n].count("a") == n // 2 for n in range(2, 11, 2))


def test_warm_leaves_workloads_that_bring_up_their_own_tunnels_cold() -> None:
    tunnels = [parse_ref("wireguard-go")]
    cs = expand(tunnels, [find_profile("lan")], [1], ["up"], kinds=("iperf3", "storm"))
    trials = interleave(cs, 4, seed=1, warm=2)
    assert {t.window for t in trials if t.case.workload == "storm"} == {0}
    assert {t.window for t in trials if t.case.workload == "iperf3"} == {1, 2}
    storm_blocks = [t.block for t in trials if t.case.workload == "storm"]
    assert len(set(storm_blocks)) == len(storm_blocks)  # a cold trial is a block of its own here


def test_a_case_and_its_stored_trial_have_one_title() -> None:
    from tunbench.results import TrialRecord
    from tunbench.workloads import case_title

    tunnels = [parse_ref("direct"), parse_ref("wireguard-go[label=wg]")]
    cases = expand(tunnels, [find_profile("lan")], [2], ["down"], ["iperf3", "latency"])
    for c in cases:
        rec = TrialRecord(1, c.tunnel.name, c.label, c.profile, c.workload, c.flows, c.direction, 1, {})
        assert c.title == case_title(rec.case) == case_title(c.key)
    assert {c.title for c in cases} >= {"wg · lan · down · 2 flows", "wg · lan · latency"}


def test_one_case_type_a_planned_case_is_its_key() -> None:
    """Case extends CaseKey (issue 29: one case type): its names come from the tunnel and the profile it
    holds, it is compared by its key's fields, and its key equals its stored trial's."""
    import dataclasses

    import pytest

    from tunbench.plan import Case
    from tunbench.results import CaseKey, TrialRecord

    wg, lan = parse_ref("wireguard-go[label=wg]"), find_profile("lan")
    c = Case.of(wg, lan, "iperf3", 2, "down")
    assert isinstance(c, CaseKey) and (c.label, c.profile, c.tunnel, c.link) == ("wg", "lan", wg, lan)
    assert {f.name for f in dataclasses.fields(Case)} == {f.name for f in dataclasses.fields(CaseKey)} | {
        "tunnel",
        "link",
    }
    assert c == Case.of(parse_ref("wireguard-go[label=wg]"), lan, "iperf3", 2, "down")
    assert c.key == TrialRecord(1, "wireguard-go", "wg", "lan", "iperf3", 2, "down", 1, {}).case
    with pytest.raises(ValueError):  # a name that is not its tunnel's label
        Case("other", "lan", "iperf3", 2, "down", tunnel=wg, link=lan)


def test_the_report_names_cases_with_the_one_title_function() -> None:
    """Issue 29: one case-title function. The report's case names (compare, history, chart groups, the
    many-clients failures) are workloads.case_title's: a latency case is not 'latency · - · 1 flow'."""
    from tunbench.report.html.base import group_title
    from tunbench.results import CaseKey
    from tunbench.workloads import case_title

    latency = CaseKey("wg", "lan", "latency", 1, "-")
    assert group_title(latency) == "lan · latency" and case_title(latency) == "wg · lan · latency"
    storm = CaseKey("wg", "lan", "storm", 1, "-", clients=50, variant="connect")
    assert group_title(storm) == "lan · storm · 50 clients · connect"
    assert group_title(CaseKey("wg", "lan", "iperf3", 2, "up")) == "lan · up · 2 flows"  # the default: unnamed
    # a workload this version does not know (an older store's) is still named, by its kind and axes
    assert case_title(CaseKey("wg", "lan", "retired", 4, "up")) == "wg · lan · retired · up · 4 flows"
