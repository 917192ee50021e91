"""What goes wrong is reported clearly, one trial at a time, and the run goes on."""

from __future__ import annotations

from pathlib import Path

from tests.integration.helpers import run_json, tunbench

REPO = Path(__file__).resolve().parents[2]


def test_user_adapter_file_works(tmp_path: Path) -> None:
    res, doc = run_json(
        tmp_path,
        "-t",
        str(REPO / "examples/adapters/socat-tls.toml"),
        "--no-direct",
        "--duration",
        "1",
        "--omit",
        "0",
        "--repeat",
        "1",
        "--direction",
        "up",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (t,) = doc["trials"]
    assert t["status"] == "ok" and t["throughput_bps"] > 1e6


def test_hung_iperf3_fails_that_trial_only(tmp_path: Path) -> None:
    # a proxy that accepts connections and never forwards a byte: iperf3 waits forever for its server
    adapter = tmp_path / "blackhole.toml"
    adapter.write_text(
        'name = "blackhole"\nlayer = "l4"\nrequires = ["socat"]\n'
        "[client]\ndaemon = \"socat TCP-LISTEN:{proxy_port},bind=127.0.0.1,fork,reuseaddr SYSTEM:'sleep 60'\"\n"
        'ready = [{ kind = "port", ns = "client", port = "{proxy_port}" }]\n'
        '[target]\naddress = "127.0.0.1"\nport = "{proxy_port}"\n'
    )
    res, doc = run_json(
        tmp_path,
        "-t",
        f"{adapter},socat",
        "--no-direct",
        "--duration",
        "1",
        "--omit",
        "0",
        "--repeat",
        "1",
        "--direction",
        "up",
    )
    assert res.returncode == 4, res.stdout + res.stderr  # some trials failed (README: exit status)
    trials = {t["label"]: t for t in doc["trials"]}
    assert trials["blackhole"]["status"] == "failed"
    assert "timed out" in trials["blackhole"]["error"] and "iperf3" in trials["blackhole"]["error"]
    assert trials["socat"]["status"] == "ok"
    assert "1 trial(s) failed" in res.stderr


def test_tunnel_that_dies_shows_its_log(tmp_path: Path) -> None:
    adapter = tmp_path / "dies.toml"
    adapter.write_text(
        'name = "dies"\nlayer = "l3"\n'
        "[server]\ndaemon = \"sh -c 'echo fatal: no such cipher >&2; exit 3'\"\n"
        'ready = [{ kind = "port", ns = "server", port = "4000" }]\n'
        '[target]\naddress = "{inner_server}"\n'
    )
    res, doc = run_json(
        tmp_path, "-t", str(adapter), "--no-direct", "--duration", "1", "--repeat", "1", "--direction", "up"
    )
    assert res.returncode == 5, res.stdout + res.stderr  # nothing measured
    (t,) = doc["trials"]
    assert t["status"] == "failed"
    assert "server process exited (code 3)" in t["error"]
    assert "fatal: no such cipher" in t["error"], "the tunnel's own log must be shown"
    assert "fatal: no such cipher" in t["error"].splitlines()[0]  # also in the line the run's table shows
    assert "fatal: no such cipher" in res.stdout


def test_malformed_adapter_is_one_clear_line(tmp_path: Path) -> None:
    adapter = tmp_path / "bad.toml"
    adapter.write_text('name = "bad"\nlayer = "l3"\n[target]\naddress = "x"\n\n[server]\ndeamon = "x"\n')
    res = tunbench("run", "--db", str(tmp_path / "r.db"), "-t", str(adapter))
    assert res.returncode == 2
    assert res.stderr.strip() == f"Error: {adapter}:7: server.deamon: unknown key"
    assert "Traceback" not in res.stdout + res.stderr
    assert not (tmp_path / "r.db").exists(), "nothing starts when the input is bad"


def test_malformed_scenario_is_one_clear_line(tmp_path: Path) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text("[run]\ntunnels = ['socat']\n\n[workload]\nduration_s = -1\n")
    res = tunbench("run", "--db", str(tmp_path / "r.db"), str(sc))
    assert res.returncode == 2
    assert res.stderr.strip() == f"Error: {sc}:5: workload.duration_s: Input should be greater than or equal to 1"


def test_wrong_flag_and_unknown_tunnel(tmp_path: Path) -> None:
    res = tunbench("run", "--flwos", "2")
    assert res.returncode == 2 and "No such option" in res.stderr and "Traceback" not in res.stderr
    res = tunbench("run", "--db", str(tmp_path / "r.db"), "-t", "wireguard")
    assert res.returncode == 2 and "unknown tunnel 'wireguard'" in res.stderr
    res = tunbench("run", "--db", str(tmp_path / "r.db"), "--flows", "1,x")
    assert res.returncode == 2 and "not a comma-separated list of int" in res.stderr
