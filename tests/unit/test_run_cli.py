"""`tunbench run` and friends from the command line, without measuring: inline profiles, --dry-run, exit codes,
and bad inputs that must give one `Error: ...` line and leave nothing behind (no ledger, no store)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.unit.report_data import trial
from tunbench import cli, session
from tunbench.cli import app
from tunbench.cli.run_values import split_profiles
from tunbench.host import ledger as state
from tunbench.results import TrialRecord
from tunbench.session import RunOutcome
from tunbench.store.db import Store


@pytest.fixture(autouse=True)
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Work in an empty directory; ledgers would go to tmp/state, and opening one is a test failure."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")

    def no_ledger(*a: object, **k: object) -> None:
        raise AssertionError("a ledger was opened")

    monkeypatch.setattr(state.Ledger, "open", no_ledger)
    monkeypatch.delenv("TUNBENCH_DB", raising=False)
    return tmp_path


def main(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """The real entry point (`Error: ...` printing included): exit code, stdout, stderr."""
    monkeypatch.setattr(sys, "argv", ["tunbench", *args])
    code = 0
    try:
        cli.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err
    return lines[0]


def stored_run(db: Path, records: list[TrialRecord], status: str) -> int:
    """A run (uid tbabcdef) with `records`, finished as `status`, in the store at `db`: its id."""
    with Store(db) as s:
        rid = s.create_run(
            uid="tbabcdef", name="", tunbench_version="0", provenance={}, scenario_text="", scenario_hash="",
            scenario={},
        )  # fmt: skip
        for r in records:
            s.add_trial(rid, r)
        s.finish_run(rid, status)
    return rid


def files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


# ---- 9: inline profiles and --dry-run ----------------------------------------------------------------


def test_split_profiles_keeps_inline_commas() -> None:
    assert split_profiles(["lan,wan-50ms"]) == ["lan", "wan-50ms"]
    assert split_profiles(["dsl:delay=15ms,up.rate=1mbit,down.rate=16mbit"]) == [
        "dsl:delay=15ms,up.rate=1mbit,down.rate=16mbit"
    ]
    assert split_profiles(["lan,dsl:delay=15ms, rate=1mbit,wan-50ms", "./p.toml"]) == [
        "lan",
        "dsl:delay=15ms,rate=1mbit",
        "wan-50ms",
        "./p.toml",
    ]
    assert split_profiles(None) is None


def test_documented_inline_profile_dry_run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = main(
        ["run", "--dry-run", "-t", "socat", "--profile", "dsl:delay=15ms,up.rate=1mbit,down.rate=16mbit"],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    assert "profiles: dsl (emulated)" in out and "socat · dsl · up · 1 flow" in out
    assert "4 cases × 3 repetitions = 12 trials" in out


def test_dry_run_creates_nothing_and_needs_no_root(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 65534)
    before = files(sandbox)
    code, out, err = main(
        ["run", "--dry-run", "--db", "sub/x.db", "--json", "out/r.json", "--flamegraph", "-w", "iperf3,latency"],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    assert "nothing was created" in out and "trials, about" in out
    assert files(sandbox) == before


def test_dry_run_reports_missing_programs_without_failing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shutil.which", lambda prog, *a, **k: None)
    code, out, err = main(["run", "--dry-run", "-t", "wireguard-go"], capsys, monkeypatch)
    assert code == 0, err
    assert "note: a real run would fail: missing programs:" in out and "iperf3" in out


# ---- 11: exit codes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statuses", "run_status", "code"),
    [
        (["ok", "ok"], "done", 0),
        (["ok", "failed"], "done", 4),
        (["failed", "failed"], "done", 5),
        (["ok", "failed"], "interrupted", 130),
    ],
)
def test_run_exit_codes(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch, statuses: list[str], run_status: str, code: int
) -> None:
    db = sandbox / "r.db"
    records = [trial(i + 1, "socat", 1e9, status=st, repetition=i + 1) for i, st in enumerate(statuses)]
    rid = stored_run(db, records, run_status)

    def fake_execute(*a: object, **k: object) -> RunOutcome:
        return RunOutcome(run_id=rid, uid="tbabcdef", status=run_status, records=records)

    monkeypatch.setattr(session, "execute", fake_execute)
    res = CliRunner().invoke(app, ["run", "-t", "socat", "--db", str(db)])
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


def test_exit_codes_are_documented() -> None:
    res = CliRunner().invoke(app, ["run", "--help"], terminal_width=200)
    text = " ".join(res.output.split())
    for piece in ("0 = every trial ok", "4 = the run finished but some", "5 = no trial", "130 = interrupted"):
        assert piece in text
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    assert "| 4 |" in readme and "| 5 |" in readme and "| 130 |" in readme


# ---- 14: clear errors, nothing left behind ----------------------------------------------------------------


def test_not_root(sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    before = files(sandbox)
    code, _, err = main(["run", "-t", "socat", "--db", "x.db"], capsys, monkeypatch)
    line = one_error(err)
    assert "tunbench run needs root (network namespaces, cgroups): run it with sudo" in line
    assert code == 6 and files(sandbox) == before


@pytest.mark.parametrize(
    "args",
    [
        ["run", "-t", "socat", "--db", "junk.db"],
        ["run", "--dry-run", "--db", "junk.db"],
        ["show", "--db", "junk.db"],
        ["show", "--list", "--db", "junk.db"],
        ["export", "--db", "junk.db"],
        ["compare", "1", "2", "--db", "junk.db"],
        ["report", "--db", "junk.db"],
    ],
    ids=lambda a: "-".join(a[:2]),
)
def test_db_not_sqlite(
    args: list[str], sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    junk = sandbox / "junk.db"
    junk.write_bytes(b"this is not a database\n" * 100)
    before = files(sandbox)
    code, _, err = main(args, capsys, monkeypatch)
    line = one_error(err)
    assert "junk.db" in line and "not" in line and code != 0
    assert files(sandbox) == before and junk.read_bytes() == b"this is not a database\n" * 100


@pytest.mark.parametrize("what", ["scenario", "adapter", "profile"])
def test_non_utf8_files(
    what: str, sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = sandbox / "x.toml"
    bad.write_bytes(b'# fine\nname = "caf\xe9"\n')
    args = {
        "scenario": ["run", "x.toml"],
        "adapter": ["run", "-t", "./x.toml"],
        "profile": ["run", "--profile", "./x.toml"],
    }[what]
    before = files(sandbox)
    code, _, err = main([*args, "--db", "r.db"], capsys, monkeypatch)
    line = one_error(err)
    assert "x.toml:2" in line and "not UTF-8" in line and code == 2
    assert files(sandbox) == before


@pytest.mark.parametrize(
    ("option", "target", "setup"),
    [
        ("--json", "afile/r.json", "file"),
        ("--json", "adir", "dir"),
        ("--flamegraph-dir", "afile/fg", "file"),
        ("--flamegraph-dir", "afile", "file"),
    ],
)
def test_run_outputs_checked_before_the_run(
    option: str,
    target: str,
    setup: str,
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if setup == "file":
        (sandbox / "afile").write_text("x")
    else:
        (sandbox / "adir").mkdir()

    def no_run(*a: object, **k: object) -> None:
        raise AssertionError("the run started")

    monkeypatch.setattr(session, "execute", no_run)
    extra = ["--flamegraph"] if option == "--flamegraph-dir" else []
    before = files(sandbox)
    for dry in ([], ["--dry-run"]):
        code, _, err = main(["run", "-t", "socat", *extra, option, target, "--db", "r.db", *dry], capsys, monkeypatch)
        line = one_error(err)
        assert option in line and code == 6  # EXIT_ERROR: never 1, "regressed"
    assert files(sandbox) == before


def test_missing_output_directory_is_created_not_refused(sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Like --db's, a missing directory for --json / -o is created (`make demo` writes results/demo.json into
    a fresh results/); it is checked to be creatable before the run, and a dry run creates nothing."""
    from tunbench.cli.checks import check_output_path, write_output

    check_output_path(sandbox / "new" / "deeper" / "r.json", "--json")
    assert not (sandbox / "new").exists()
    write_output(sandbox / "new" / "deeper" / "r.json", "{}", "--json")
    assert (sandbox / "new" / "deeper" / "r.json").read_text() == "{}"


@pytest.mark.parametrize("cmd", ["report", "export"])
def test_report_and_export_output_checked(
    cmd: str, sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (sandbox / "afile").write_text("x")
    code, _, err = main([cmd, "-o", "afile/out.html", "--db", "nostore.db"], capsys, monkeypatch)
    line = one_error(err)
    assert "afile" in line and code != 0
    assert not (sandbox / "nostore.db").exists()


@pytest.mark.parametrize(
    ("args", "key", "needle"),
    [
        (["--seed", "-1"], "run.seed", "greater than or equal to 0"),
        (["-w", "udp", "--direction", "bidir"], "workload.directions", "bidir is not supported by udp"),
        (["-w", "udp-search", "--direction", "up,bidir"], "workload.directions", "udp-search"),
        (["-w", "clients", "--direction", "bidir"], "workload.directions", "clients"),
        (["-w", "udp", "-t", "socat"], "run.tunnels", "socat × udp"),
    ],
)
def test_refused_at_validation(
    args: list[str],
    key: str,
    needle: str,
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = files(sandbox)
    for dry in ([], ["--dry-run"]):
        code, _, err = main(["run", *args, "--db", "r.db", *dry], capsys, monkeypatch)
        line = one_error(err)
        assert key in line and needle in line and code == 2
    assert files(sandbox) == before


def test_bidir_in_a_scenario_file_names_its_line(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (sandbox / "s.toml").write_text('[workload]\nkind = ["clients"]\n\ndirections = ["up", "bidir"]\n')
    code, _, err = main(["run", "s.toml", "--dry-run"], capsys, monkeypatch)
    assert "s.toml:4: workload.directions: bidir is not supported by clients" in one_error(err) and code == 2


def test_l4_proxies_skipped_for_udp_are_listed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = main(
        ["run", "--dry-run", "-w", "iperf3,udp", "-t", "socat,stunnel,wireguard-go"], capsys, monkeypatch
    )
    assert code == 0, err
    note = [ln for ln in out.splitlines() if ln.startswith("note: skipped")]
    assert len(note) == 1 and "socat × udp, stunnel × udp" in note[0] and "L4 proxy" in note[0]
    assert "wireguard-go · lan · udp · up" in out


# ---- issue 12: --target-mde / --budget and --cpuset --------------------------------------------------------

AA = ["-t", "wireguard-go[label=a]", "-t", "wireguard-go[label=b]", "--no-direct"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--target-mde", "0", "--budget", "2m", *AA], "--target-mde"),
        (["--target-mde", "0%", "--budget", "2m", *AA], "must be above 0%"),
        (["--target-mde", "abc", "--budget", "2m", *AA], "'abc': expected a percentage"),
        (["--target-mde", "3%", *AA], "needs --budget"),
        (["--target-mde", "3%", "--budget", "2m", "-t", "wireguard-go"], "needs exactly two tunnels"),
        (["--target-mde", "3%", "--budget", "soon", *AA], "--budget"),
        (["--target-mde", "3%", "--budget", "2m", "--until", "23:59", *AA], "--budget or --until, not both"),
        (["--target-mde", "3%", "--until", "noon", *AA], "--until"),
        (["--redo-steal", "0%", *AA], "--redo-steal"),
        (["--redo-steal", "lots", *AA], "--redo-steal"),
        (["--foreign-cpu", "10furlongs", *AA], "--foreign-cpu"),
        (["--foreign-cpu", "0", *AA], "--foreign-cpu"),
        (["--cpuset", "half", *AA], "--cpuset"),
        (["--cpuset", "client=0,router=1", *AA], "run.cpuset"),
        (["--cpuset", "client=0-", *AA], "run.cpuset"),
        (["--gate", "speed", "--target-mde", "3%", "--budget", "2m", *AA], "unknown gate 'speed'"),
    ],
)
def test_bad_precision_and_placement_flags_name_the_flag(
    args: list[str], says: str, sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = main(["run", "--dry-run", *args], capsys, monkeypatch)
    assert code == 2, out + err
    assert says in " ".join(err.split()), err
    assert not (sandbox / "tunbench.db").exists() and not (sandbox / "state").exists()


def test_until_is_a_budget_given_as_a_clock_time(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime

    end = (datetime.datetime.now() + datetime.timedelta(minutes=10)).strftime("%H:%M")
    code, out, err = main(["run", "--dry-run", *AA, "--target-mde", "3%", "--until", end], capsys, monkeypatch)
    assert code == 0, out + err
    # the plan's upper bound comes from the time left (9-10 minutes: far more rounds than the default 3)
    reps = int(re.search(r"× (\d+) repetitions", out).group(1))  # type: ignore[union-attr]
    assert reps > 10, out


def test_a_target_plans_the_budget_as_the_upper_bound_and_shows_the_placement(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tunbench.host.cgroup.online_cpus", lambda: [0, 1])
    monkeypatch.setattr("tunbench.host.cgroup.cpuset_refusal", lambda: "")  # a host that can place, whatever this is
    code, out, err = main(
        ["run", "--dry-run", *AA, "--direction", "up", "--duration", "2", "--omit", "1",
         "--target-mde", "3%", "--budget", "2m", "--cpuset", "split"],
        capsys, monkeypatch,
    )  # fmt: skip
    assert code == 0, out + err
    text = " ".join(out.split())
    assert "2 cases × 20 repetitions = 40 trials" in text  # 120 s / (2 cases × 3 s): no round can be faster
    assert "cpuset: client side on CPU 0, server side on CPU 1" in text
    # an A/B comparison with a target places its sides by default (A/A validity, docs/precision.md) ...
    monkeypatch.setattr("tunbench.session.defaults.split_where_placeable", lambda: "split")
    code, out, err = main(["run", "--dry-run", *AA, "--target-mde", "3%", "--budget", "2m"], capsys, monkeypatch)
    assert code == 0 and "cpuset: client side on CPU 0, server side on CPU 1" in " ".join(out.split()), out
    # ... unless told not to; and a run without a target keeps it off
    code, out, err = main(
        ["run", "--dry-run", *AA, "--target-mde", "3%", "--budget", "2m", "--cpuset", "off"], capsys, monkeypatch
    )
    assert code == 0 and "cpuset" not in out
    code, out, err = main(["run", "--dry-run", *AA, "--budget", "2m"], capsys, monkeypatch)
    assert code == 0 and "cpuset" not in out  # off by default: nothing shown, nothing changes


def test_cpuset_split_names_the_shared_cpu_and_is_refused_with_hosts(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tunbench.host.cgroup.online_cpus", lambda: [0, 1])
    monkeypatch.setattr("tunbench.host.cgroup.cpuset_refusal", lambda: "")  # a host that can place, whatever this is
    code, out, err = main(
        ["run", "--dry-run", "-t", "socat", "--profile", "wan-50ms", "--cpuset", "split"], capsys, monkeypatch
    )
    assert code == 0, out + err
    assert (
        "cpuset: client side on CPU 0, server side on CPU 1, emulator on CPU 1 (only 2 CPUs: the emulator shares "
        "CPU 1 with the server side)" in " ".join(out.split())
    )
    code, out, err = main(["run", "--dry-run", "-t", "socat", "--cpuset", "client=0,server=7"], capsys, monkeypatch)
    assert code == 2 and "CPU(s) 7 not available here" in " ".join(err.split())
    hosts = Path(__file__).parents[2] / "examples" / "hosts" / "lab.ini"
    code, out, err = main(
        ["run", "--dry-run", "-t", "socat", "--hosts", str(hosts), "--cpuset", "split"], capsys, monkeypatch
    )
    assert code == 2 and "not with --hosts" in " ".join(err.split()), err


def bench1_line(inventory: Path) -> int:
    return next(n for n, ln in enumerate(inventory.read_text().splitlines(), 1) if ln.startswith("bench1 "))


def test_ipv6_with_hosts_needs_each_hosts_ipv6_address(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = Path(__file__).parents[2] / "examples" / "hosts" / "lab.ini"  # IPv4 underlay addresses only
    code, out, err = main(
        ["run", "--dry-run", "-t", "wireguard-go", "--hosts", str(lab), "--ip", "6"], capsys, monkeypatch
    )
    line = " ".join(one_error(err).split())
    assert code == 2 and "host bench1 (client) has no IPv6 underlay address" in line and "tunbench_address6" in line
    assert f"{lab}:{bench1_line(lab)}" in line, line  # the host's line
    v6 = sandbox / "lab6.ini"
    v6.write_text(
        lab.read_text()
        .replace("tunbench_address=10.10.0.1", "tunbench_address=10.10.0.1 tunbench_address6=2001:db8::1")
        .replace("tunbench_address=10.10.0.2", "tunbench_address=10.10.0.2 tunbench_address6=2001:db8::2")
    )
    code, out, err = main(
        ["run", "--dry-run", "-t", "wireguard-go", "--hosts", str(v6), "--ip", "6"], capsys, monkeypatch
    )
    assert code == 0, out + err


def test_an_emulated_profile_between_two_hosts_needs_the_client_hosts_egress_address(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = Path(__file__).parents[2] / "examples" / "hosts" / "lab.ini"
    args = ["run", "--dry-run", "-t", "wireguard-go", "--profile", "wan-50ms"]
    code, out, err = main([*args, "--hosts", str(lab)], capsys, monkeypatch)
    line = " ".join(one_error(err).split())
    assert code == 2 and "tunbench_egress_address" in line and "host bench1" in line, line
    assert f"{lab}:{bench1_line(lab)}" in line, line  # the client host's line
    egress = sandbox / "lab-egress.ini"
    extra = "tunbench_address6=2001:db8::1 tunbench_egress_address=10.10.0.11"
    egress.write_text(
        lab.read_text()
        .replace("tunbench_address=10.10.0.1", f"tunbench_address=10.10.0.1 {extra}")
        .replace("tunbench_address=10.10.0.2", "tunbench_address=10.10.0.2 tunbench_address6=2001:db8::2")
    )
    code, out, err = main([*args, "--hosts", str(egress)], capsys, monkeypatch)
    assert code == 0, out + err
    code, out, err = main([*args, "--hosts", str(egress), "--ip", "6"], capsys, monkeypatch)
    assert code == 2 and "IPv4 only" in " ".join(err.split()), err
    same = sandbox / "lab-same.ini"
    same.write_text(
        egress.read_text().replace("tunbench_egress_address=10.10.0.11", "tunbench_egress_address=10.10.0.2")
    )
    code, out, err = main([*args, "--hosts", str(same)], capsys, monkeypatch)
    assert code == 2 and "is the server bench2's underlay address" in " ".join(err.split()), err


def test_the_clients_workload_between_two_hosts_needs_an_address_per_client(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = Path(__file__).parents[2] / "examples" / "hosts" / "lab.ini"
    args = ["run", "--dry-run", "-t", "wireguard-go", "-w", "clients", "--no-direct"]
    code, out, err = main([*args, "--hosts", str(lab)], capsys, monkeypatch)
    line = " ".join(one_error(err).split())
    assert code == 2 and "tunbench_client_addresses is not set" in line and "up to 100 clients" in line, line
    assert f"{lab}:{bench1_line(lab)}" in line, line  # the client host's line
    few = sandbox / "lab-few.ini"
    few.write_text(
        lab.read_text().replace(
            "tunbench_address=10.10.0.1", "tunbench_address=10.10.0.1 tunbench_client_addresses=10.10.0.100-10.10.0.149"
        )
    )
    code, out, err = main([*args, "--hosts", str(few)], capsys, monkeypatch)
    assert code == 2 and "has 50" in " ".join(err.split()), err
    enough = sandbox / "lab-clients.ini"
    enough.write_text(few.read_text().replace("10.10.0.149", "10.10.0.199"))
    code, out, err = main([*args, "--hosts", str(enough)], capsys, monkeypatch)
    assert code == 0, out + err
    code, out, err = main([*args, "--hosts", str(enough), "--profile", "wan-50ms"], capsys, monkeypatch)
    assert code == 2 and "use --profile lan" in " ".join(err.split()) and "run.profiles" in err, err
    clash = sandbox / "lab-clash.ini"
    clash.write_text(enough.read_text().replace("10.10.0.100-10.10.0.199", "10.10.0.1-10.10.0.100"))
    code, out, err = main([*args, "--hosts", str(clash)], capsys, monkeypatch)
    assert code == 2 and "holds 10.10.0.1, bench1's own underlay address" in " ".join(err.split()), err
    code, out, err = main([*args[:-2], "storm", "--hosts", str(enough)], capsys, monkeypatch)
    assert code == 0, out + err  # a storm spreads over the client hosts (one here)


# ---- show --logs: a trial's stored logs ------------------------------------------------------------------


def test_show_logs_prints_a_trials_stored_logs(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = sandbox / "r.db"
    with_logs = trial(1, "openvpn-udp", 1e9)
    with_logs.artifacts["log/server.log"] = b"TLS Error: local/remote TLS keys are out of sync\n"
    with_logs.artifacts["irtt.json"] = b"{}"
    stored_run(db, [with_logs, trial(2, "openvpn-udp", 1e9, repetition=2)], "done")
    code, out, err = main(["show", "1", "--logs", "1", "--db", str(db)], capsys, monkeypatch)
    assert code == 0, err
    assert "log/server.log" in out and "keys are out of sync" in out
    assert "irtt.json" not in out, "only logs"
    code, out, err = main(["show", "1", "--logs", "2", "--db", str(db)], capsys, monkeypatch)
    assert code == 0, err
    assert "has no stored logs" in out
    code, out, err = main(["show", "1", "--logs", "9", "--db", str(db)], capsys, monkeypatch)
    assert code == 2 and "no trial 9" in err and "1, 2" in err


def test_show_says_when_no_trial_finished(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped by Ctrl-C inside its first trial is stored with no trials: show says so, not nothing."""
    db = sandbox / "r.db"
    stored_run(db, [], "interrupted")
    code, out, err = main(["show", "1", "--db", str(db)], capsys, monkeypatch)
    assert code == 0, err
    assert "interrupted" in out and "no trial finished" in " ".join(out.split())


def test_redo_interfered_and_foreign_cpu_reach_the_scenario(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunbench.config import load

    seen = {}
    real = load.with_overrides

    def spy(sc: Any, overrides: dict[str, dict[str, Any]]) -> Any:
        out = real(sc, overrides)
        seen["run"] = out.run
        return out

    monkeypatch.setattr(load, "with_overrides", spy)
    code, out, err = main(["run", "--dry-run", "--redo-interfered", "--foreign-cpu", "25%", *AA], capsys, monkeypatch)
    assert code == 0, out + err
    assert seen["run"].redo_interfered is True
    assert seen["run"].foreign_cpu_pct == pytest.approx(25.0)


def test_count_work_is_a_flag_and_a_scenario_key_also_with_hosts(
    sandbox: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunbench.config.load import load_scenario, with_overrides

    sc, _, _ = load_scenario(None)
    assert sc.run.count_work is False  # off unless asked: it costs throughput (docs/benchmarks/counted-work.md)
    assert with_overrides(sc, {"run": {"count_work": True}}).run.count_work is True
    scenario = sandbox / "s.toml"
    scenario.write_text("[run]\ntunnels = ['socat']\ncount_work = true\n")
    assert load_scenario(scenario)[0].run.count_work is True
    code, out, err = main(["run", "--dry-run", "-t", "socat", "--count-work"], capsys, monkeypatch)
    assert code == 0, out + err
    hosts = Path(__file__).parents[2] / "examples" / "hosts" / "lab.ini"
    code, out, err = main(
        ["run", "--dry-run", "-t", "socat", "--hosts", str(hosts), "--count-work"], capsys, monkeypatch
    )
    assert code == 0, out + err  # each host's agent counts its roles (remote/work.py)


# ---- 47: --site names a site of sites/registry.py --------------------------------------------------------


def test_site_hosts_plans_as_hosts_does(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    lab = str(Path(__file__).parents[2] / "examples" / "hosts" / "lab.ini")
    by_site = main(["run", "--dry-run", "--site", f"hosts:{lab}"], capsys, monkeypatch)
    by_flag = main(["run", "--dry-run", "--hosts", lab], capsys, monkeypatch)
    assert by_site[0] == 0, by_site[2]
    assert by_site == by_flag
    local = main(["run", "--dry-run", "--site", "local"], capsys, monkeypatch)
    assert local[0] == 0 and local[1] != by_site[1]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--site", "moon"], "no site 'moon': the sites are local, hosts"),
        (["--site", "hosts"], "the hosts site needs its inventory: hosts:FILE"),
        (["--site", "local", "--hosts", "lab.ini"], "--site and --hosts both say where the roles run"),
    ],
)
def test_a_wrong_site_is_refused_by_name(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = main(["run", "--dry-run", *args], capsys, monkeypatch)
    assert code == 2 and says in " ".join(err.split()), err
