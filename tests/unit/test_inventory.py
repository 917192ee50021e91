"""remote/inventory/: Ansible-style INI and YAML inventories and the scenario's [hosts] table, with errors
that name file, line and key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tunbench.errors import ConfigError
from tunbench.remote.inventory import Host, inventory_from_table, load_inventory

INI = """\
# the lab
gw0 ansible_host=192.0.2.254

[all:vars]
ansible_user=admin
tunbench_ssh_config=lab_ssh_config

[client]
bench1 ansible_host=192.0.2.1 ansible_port=2222 tunbench_address=198.18.0.1

[server]
bench2.lab ansible_ssh_common_args='-o ProxyJump=gw0' ansible_ssh_extra_args="-o Compression=no"  # a comment

[lab:children]
client
server

[lab:vars]
ansible_user=bench
ansible_ssh_private_key_file=~/.ssh/lab
tunbench_command="/opt/tb/bin/tunbench"

[server:vars]
ansible_user=root
tunbench_address6=2001:db8::2
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_ini_inventory(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "lab.ini", INI))
    assert [h.name for h in inv.hosts] == ["gw0", "bench1", "bench2.lab"]
    assert inv.ssh_config == str(tmp_path / "lab_ssh_config")  # relative to the inventory's directory
    client, server = inv.for_role("client"), inv.for_role("server")
    assert client.name == "bench1" and client.ssh_host == "192.0.2.1" and client.port == 2222
    assert client.address == "198.18.0.1" and client.roles == {"client"}
    assert client.user == "bench"  # the child group lab overrides all
    assert client.identity_file == str(Path("~/.ssh/lab").expanduser())
    assert client.command == "/opt/tb/bin/tunbench"
    assert client.source == f"{tmp_path / 'lab.ini'}:9"
    # server: both `lab` (parent) and `server` (child) set ansible_user: the child wins
    assert server.user == "root" and server.ssh_host == "bench2.lab" and server.port is None
    assert server.ssh_args == ("-o", "ProxyJump=gw0", "-o", "Compression=no")
    assert server.address is None and server.address6 == "2001:db8::2"
    assert client.egress_address is None
    lab = write(tmp_path, "e.ini", "[client]\nh1 tunbench_address=10.0.0.1 tunbench_egress_address=10.0.0.11\n")
    assert load_inventory(lab).for_role("client").egress_address == "10.0.0.11"
    gw = inv.host("gw0")
    assert gw.roles == frozenset() and gw.user == "admin" and gw.address == "192.0.2.254"
    assert gw.command == "tunbench"


def test_ssh_argv_has_only_set_options_and_batch_mode() -> None:
    full = Host("h", "10.0.0.1", "root", 2222, "/k", ("-o", "X=y"), None, None, frozenset(), "tunbench", "f:1")
    assert full.ssh_argv("/cfg") == [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-F",
        "/cfg",
        "-p",
        "2222",
        "-i",
        "/k",
        "-l",
        "root",
        "-o",
        "X=y",
        "10.0.0.1",
    ]
    bare = Host("h", "h", None, None, None, (), None, None, frozenset(), "tunbench", "f:1")
    assert bare.ssh_argv() == ["ssh", "-o", "BatchMode=yes", "h"]


def test_host_host_vars_beat_group_vars_and_roles_union(tmp_path: Path) -> None:
    text = "[client]\nh1 ansible_user=me\n[server]\nh1\n[all:vars]\nansible_user=other\n"
    inv = load_inventory(write(tmp_path, "hosts", text))  # no suffix: INI
    (h,) = inv.hosts
    assert h.roles == {"client", "server"} and h.user == "me"
    assert inv.for_role("client") is inv.for_role("server")


def test_tunbench_roles_var_and_host_port_and_ranges(tmp_path: Path) -> None:
    text = "[bench]\nbox[1:3] tunbench_roles=middle\nsrv:2200 tunbench_roles=client,server\n"
    inv = load_inventory(write(tmp_path, "x.cfg", text))
    assert [h.name for h in inv.hosts] == ["box1", "box2", "box3", "srv"]
    assert inv.host("srv").port == 2200 and inv.host("srv").roles == {"client", "server"}
    assert all(inv.host(f"box{i}").roles == {"middle"} for i in (1, 2, 3))
    with pytest.raises(ConfigError, match="'middle' is on 3 hosts"):
        inv.for_role("middle")


YAML = """\
all:
  vars:
    tunbench_ssh_config: /etc/tb/ssh_config
    ansible_user: admin
  hosts:
    gw0:
  children:
    client:
      hosts:
        bench1:
          ansible_host: 192.0.2.1
          ansible_port: 2222
    server:
      vars:
        ansible_user: root
      hosts:
        bench2:
          tunbench_address: 198.18.0.2
          tunbench_roles: [server, middle]
          ansible_ssh_common_args: -o ProxyJump=gw0
"""


def test_yaml_inventory(tmp_path: Path) -> None:
    path = write(tmp_path, "lab.yml", YAML)
    inv = load_inventory(path)
    assert inv.ssh_config == "/etc/tb/ssh_config"
    client, server = inv.for_role("client"), inv.for_role("server")
    assert (client.name, client.ssh_host, client.port, client.user) == ("bench1", "192.0.2.1", 2222, "admin")
    assert client.address == "192.0.2.1"  # ansible_host is an IPv4 literal
    assert server.user == "root" and server.roles == {"server", "middle"} and server.address == "198.18.0.2"
    assert server.ssh_args == ("-o", "ProxyJump=gw0")
    assert client.source == f"{path}:10" and server.source == f"{path}:17"
    assert inv.host("gw0").roles == frozenset()


def test_unknown_suffix_tries_yaml_then_ini(tmp_path: Path) -> None:
    assert load_inventory(write(tmp_path, "lab.inv", YAML)).for_role("client").name == "bench1"
    assert load_inventory(write(tmp_path, "lab.txt", "[client]\nh1\n")).for_role("client").name == "h1"


def test_table_hosts() -> None:
    inv = inventory_from_table(
        {
            "ssh_config": "/cfg",
            "client": {
                "ssh": "root@bench1",
                "address": "192.0.2.1",
                "ssh_args": "-o ProxyJump=gw",
                "egress_address": "192.0.2.11",
            },
            "server": {"ssh": "ssh://bench@[2001:db8::2]:2200", "address": "192.0.2.2", "command": "/opt/tunbench"},
        },
        "s.toml",
    )
    assert inv.ssh_config == "/cfg"
    c, s = inv.for_role("client"), inv.for_role("server")
    assert (c.egress_address, s.egress_address) == ("192.0.2.11", None)
    assert (c.name, c.ssh_host, c.user, c.port, c.ssh_args) == (
        "bench1",
        "bench1",
        "root",
        None,
        ("-o", "ProxyJump=gw"),
    )
    assert (s.ssh_host, s.user, s.port, s.address, s.address6) == (
        "2001:db8::2",
        "bench",
        2200,
        "192.0.2.2",
        "2001:db8::2",
    )
    assert s.command == "/opt/tunbench" and c.command == "tunbench"
    both = inventory_from_table({"client": {"ssh": "10.0.0.1"}, "server": {"ssh": "10.0.0.1"}}, "s.toml")
    assert len(both.hosts) == 1 and both.hosts[0].roles == {"client", "server"} and both.hosts[0].address == "10.0.0.1"


@pytest.mark.parametrize(
    ("text", "line", "key", "msg"),
    [
        ("[client]\nh1 ansible_port=99999\n", 2, "ansible_port", "bad port"),
        ("[client]\nh1\n[client:vars]\nansible_port=ssh\n", 4, "ansible_port", "bad port"),
        ("[x]\nh1 tunbench_roles=client,boss\n", 2, "tunbench_roles", "unknown role 'boss'"),
        ("[client]\nh1 tunbench_adress=1.2.3.4\n", 2, "tunbench_adress", "unknown tunbench variable"),
        ("[client]\nh1 tunbench_address=fe80::1\n", 2, "tunbench_address", "IPv4"),
        ("[client]\nh1 tunbench_address6=10.0.0.1\n", 2, "tunbench_address6", "IPv6"),
        ("[client]\nh1 tunbench_egress_address=eth0\n", 2, "tunbench_egress_address", "IPv4"),
        ("[client]\nh1 tunbench_client_addresses=10.0.0.9-10.0.0.1\n", 2, "tunbench_client_addresses", "below"),
        ("[client]\nh1 tunbench_client_addresses=10.0.0.9\n", 2, "tunbench_client_addresses", "FIRST-LAST"),
        ("[client]\nh1 tunbench_client_addresses=2001:db8::/64\n", 2, "tunbench_client_addresses", "IPv4"),
        ("[client]\nh1 tunbench_client_weight=0\n", 2, "tunbench_client_weight", "bad weight '0'"),
        ("[client]\nh1 tunbench_client_weight=-2\n", 2, "tunbench_client_weight", "bad weight '-2'"),
        ("[client]\nh1 tunbench_client_weight=nan\n", 2, "tunbench_client_weight", "bad weight 'nan'"),
        ("[client]\nh1 tunbench_client_weight=heavy\n", 2, "tunbench_client_weight", "bad weight 'heavy'"),
        ("[client]\nh1\n[client:vars]\ntunbench_client_weight=inf\n", 4, "tunbench_client_weight", "bad weight"),
        ("[client]\nh1\n[client:vars]\ntunbench_client_weight=[2]\n", 4, "tunbench_client_weight", "positive"),
        ("[client]\nh1 ansible_port\n", 2, "h1", "key=value"),
        ("[client]\nh1 x='unclosed\n", 2, "", "cannot split"),
        ("[client:kids]\nh1\n", 1, "[client:kids]", "unknown section type"),
        ("[client]\n-oProxyCommand=x\n", 2, "-oProxyCommand=x", "invalid host name"),
        ("[client]\nh1\n[client:vars]\ntunbench_ssh_config=x\n", 4, "tunbench_ssh_config", "on `all`"),
        ("[client]\nh1 ansible_connection=local\n", 2, "ansible_connection", "only with ssh"),
        ("[a:children]\nb\n[b:children]\na\n[a]\nh1\n", 2, "b", "group cycle: a -> b -> a"),
        ("[a]\nh[3:1]\n", 2, "h[3:1]", "empty range"),
        ("# nothing\n", None, "", "no hosts"),
    ],
)
def test_ini_errors_name_file_line_key(tmp_path: Path, text: str, line: int | None, key: str, msg: str) -> None:
    path = write(tmp_path, "bad.ini", text)
    with pytest.raises(ConfigError) as exc:
        load_inventory(path)
    e = exc.value
    assert (e.source, e.line, e.key) == (str(path), line, key), str(e)
    assert msg in str(e)
    assert str(e).startswith(str(path) + (f":{line}" if line else ""))


@pytest.mark.parametrize(
    ("text", "line", "key", "msg"),
    [
        ("all:\n  hosts:\n    h1:\n      ansible_port: 0\n", 4, "ansible_port", "bad port"),
        ("all:\n  children:\n    client:\n      hostz:\n        h1:\n", 4, "client.hostz", "unknown key"),
        ("all:\n  hosts: [h1, h2]\n", 2, "all.hosts", "expected a mapping"),
        ("all:\n  hosts:\n    h1:\n      tunbench_roles: [client, db]\n", 4, "tunbench_roles", "unknown role 'db'"),
        ("all:\n  hosts:\n    h1: {ansible_host: [1]}\n", 3, "ansible_host", "expected a string"),
        ("all:\n  hosts:\n    h1:\n      tunbench_client_weight: .inf\n", 4, "tunbench_client_weight", "bad weight"),
        ("all:\n  hosts:\n    h1:\n      tunbench_client_weight: true\n", 4, "tunbench_client_weight", "bad weight"),
        ("all:\n  hosts:\n    h1:\n      tunbench_client_weight: 0.0\n", 4, "tunbench_client_weight", "bad weight"),
        ("all:\n  hosts:\n   h1:\n  - x\n", 4, "", "YAML syntax error"),
    ],
)
def test_yaml_errors_name_file_line_key(tmp_path: Path, text: str, line: int, key: str, msg: str) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError) as exc:
        load_inventory(path)
    e = exc.value
    assert (e.source, e.line, e.key) == (str(path), line, key), str(e)
    assert msg in str(e)


def test_for_role_errors_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "lab.ini", "[client]\na\nb\n[server]\nc\nd\n")
    inv = load_inventory(path)
    with pytest.raises(ConfigError) as exc:
        inv.for_role("server")
    assert exc.value.source == str(path) and f"c ({path}:5), d ({path}:6)" in str(exc.value)
    # any number of client hosts: a fleet spreads over them, a one-client workload takes the first
    assert inv.for_role("client").name == "a" and [h.name for h in inv.clients()] == ["a", "b"]
    path = write(tmp_path, "lab.ini", "[client]\na\nb\n")
    inv = load_inventory(path)
    with pytest.raises(ConfigError, match=r"no host takes the role 'server'.*\[server\] group") as exc:
        inv.for_role("server")
    assert exc.value.source == str(path)
    with pytest.raises(ConfigError, match="unknown role 'db'"):
        inv.for_role("db")


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read") as exc:
        load_inventory(Path("/nonexistent/hosts.ini"))
    assert exc.value.source == "/nonexistent/hosts.ini"


@pytest.mark.parametrize(
    ("table", "key", "msg"),
    [
        ({"client": {"address": "1.2.3.4"}}, "hosts.client.ssh", "required key is missing"),
        ({"boss": {"ssh": "h"}}, "hosts.boss", "unknown role"),
        ({"client": {"ssh": "h", "prot": 22}}, "hosts.client.prot", "unknown key"),
        ({"client": {"ssh": "h", "port": 0}}, "hosts.client.port", "bad port"),
        ({"client": {"ssh": "h", "address": "h2"}}, "hosts.client.address", "IPv4"),
        ({"client": {"ssh": "-oProxyCommand=x"}}, "hosts.client.ssh", "bad destination"),
        ({"client": {"ssh": "@h"}}, "hosts.client.ssh", "bad destination '@h'"),
        ({"client": [{"ssh": "h"}, {"ssh": "ssh://h:x"}]}, "hosts.client.1.ssh", "bad ssh URI"),
        ({"client": {"ssh": "h", "ssh_args": [1]}}, "hosts.client.ssh_args", "list of strings"),
        ({"client": {"ssh": "h", "client_weight": 0}}, "hosts.client.client_weight", "bad weight 0"),
        ({"client": {"ssh": "h", "client_weight": "2"}}, "hosts.client.client_weight", "bad weight '2'"),
        ({"client": {"ssh": "h", "client_weight": True}}, "hosts.client.client_weight", "bad weight True"),
        ({"client": {"ssh": "h", "client_weight": float("inf")}}, "hosts.client.client_weight", "bad weight inf"),
        ({"client": {"ssh": "h"}, "server": {"ssh": "h", "port": 2}}, "hosts.server", "different settings"),
        ({}, "hosts", "no hosts"),
    ],
)
def test_table_errors(table: dict[str, object], key: str, msg: str) -> None:
    text = "[hosts.client]\nssh = 'h'\n[hosts.server]\nssh = 'h'\n"
    with pytest.raises(ConfigError) as exc:
        inventory_from_table(table, "s.toml", text=text)
    assert exc.value.key == key and exc.value.source == "s.toml" and msg in str(exc.value)
    if key.startswith("hosts.client"):
        assert exc.value.line in (1, 2)


def test_client_addresses_are_a_range_or_a_block(tmp_path: Path) -> None:
    lab = write(tmp_path, "c.ini", "[client]\nh1 tunbench_client_addresses=10.0.0.100-10.0.0.102\n")
    h = load_inventory(lab).for_role("client")
    assert h.client_addresses == ("10.0.0.100", "10.0.0.102")
    assert h.client_pool(2) == ["10.0.0.100", "10.0.0.101"]
    assert h.client_pool(5) == ["10.0.0.100", "10.0.0.101", "10.0.0.102"]  # fewer: the caller refuses
    block = write(tmp_path, "b.ini", "[client]\nh1 tunbench_client_addresses=10.0.0.128/30\n")
    assert load_inventory(block).for_role("client").client_pool(9) == ["10.0.0.129", "10.0.0.130"]
    table = inventory_from_table(
        {"client": {"ssh": "h1", "client_addresses": "192.0.2.10-192.0.2.29"}, "server": {"ssh": "h2"}}, "s.toml"
    )
    assert len(table.for_role("client").client_pool(100)) == 20
    with pytest.raises(ConfigError, match="client_addresses"):
        inventory_from_table({"client": {"ssh": "h1", "client_addresses": "x"}}, "s.toml")


TABLE_CLIENTS = """\
[hosts.server]
ssh = "root@srv"
[[hosts.client]]
ssh = "root@c1"
client_weight = 2
[[hosts.client]]
ssh = "root@c2"
client_addresses = "192.0.2.100-192.0.2.119"
"""


def test_a_table_gives_several_client_hosts_as_an_array_of_tables() -> None:
    import tomllib

    text = TABLE_CLIENTS
    inv = inventory_from_table(tomllib.loads(text)["hosts"], "s.toml", text=text)
    assert [(h.name, h.client_weight) for h in inv.clients()] == [("c1", 2.0), ("c2", 1.0)]
    assert inv.for_role("client").name == "c1" and inv.for_role("server").name == "srv"
    assert inv.host("c2").client_pool(1) == ["192.0.2.100"] and inv.host("c2").source == "s.toml:6"
    bad = text.replace('ssh = "root@c2"', 'ssh = "root@c2"\nclient_weight = -1')
    with pytest.raises(ConfigError) as exc:
        inventory_from_table(tomllib.loads(bad)["hosts"], "s.toml", text=bad)
    assert (exc.value.key, exc.value.line) == ("hosts.client.1.client_weight", 8) and "bad weight -1" in str(exc.value)
    with pytest.raises(ConfigError, match="expected a table") as exc:
        inventory_from_table({"server": [{"ssh": "a"}, {"ssh": "b"}]}, "s.toml")  # one server host only
    assert exc.value.key == "hosts.server"
    with pytest.raises(ConfigError, match="required key is missing") as exc:
        inventory_from_table({"client": [{"ssh": "a"}, {"address": "192.0.2.1"}]}, "s.toml")
    assert exc.value.key == "hosts.client.1.ssh"


def test_client_weight_is_a_number_from_text_groups_or_yaml(tmp_path: Path) -> None:
    """INI's text, a [group:vars] literal, YAML's number and the table's all read as one weight; default 1."""
    ini = "[client]\nh1 tunbench_client_weight=2.5\nh2\nh3\n[client:vars]\ntunbench_client_weight=3\n[server]\nh4\n"
    inv = load_inventory(write(tmp_path, "w.ini", ini))
    assert [h.client_weight for h in inv.clients()] == [2.5, 3.0, 3.0]
    assert inv.host("h4").client_weight == 1.0  # [client:vars] is the client group's only
    assert load_inventory(write(tmp_path, "n.ini", "[client]\nh1\n")).hosts[0].client_weight == 1.0
    yml = "all:\n  children:\n    client:\n      hosts:\n        h1: {tunbench_client_weight: 2}\n        h2:\n"
    assert [h.client_weight for h in load_inventory(write(tmp_path, "w.yml", yml)).clients()] == [2.0, 1.0]
    table = inventory_from_table({"client": {"ssh": "h1", "client_weight": 4}}, "s.toml")
    assert table.hosts[0].client_weight == 4.0


def test_both_vocabularies_describe_one_host_alike(tmp_path: Path) -> None:
    """The inventory and the [hosts] table go through one validator: the same host, the same Host."""
    ini = write(
        tmp_path,
        "lab.ini",
        "[client]\nbench1 ansible_host=192.0.2.1 ansible_user=root ansible_port=2222"
        " ansible_ssh_private_key_file=~/.ssh/lab ansible_ssh_common_args='-o ProxyJump=gw'"
        " tunbench_address6=2001:db8::1 tunbench_egress_address=192.0.2.11"
        " tunbench_client_addresses=192.0.2.100-192.0.2.119 tunbench_client_weight=2.5 tunbench_command=/opt/tb\n",
    )
    table = {
        "client": {
            "ssh": "ssh://root@192.0.2.1:2222",
            "name": "bench1",
            "identity_file": "~/.ssh/lab",
            "ssh_args": "-o ProxyJump=gw",
            "address6": "2001:db8::1",
            "egress_address": "192.0.2.11",
            "client_addresses": "192.0.2.100-192.0.2.119",
            "client_weight": 2.5,
            "command": "/opt/tb",
        }
    }
    a = load_inventory(ini).for_role("client")
    b = inventory_from_table(table, "s.toml").for_role("client")
    assert dataclasses.replace(a, source="") == dataclasses.replace(b, source="")
    assert a.address == "192.0.2.1"  # the destination's literal, in both
    assert a.client_weight == 2.5


@pytest.mark.parametrize(
    ("ini_var", "table_key", "value", "msg"),
    [
        ("ansible_port", "port", "0", "bad port"),
        ("tunbench_address", "address", "h2", "expected an IPv4 address, not 'h2'"),
        ("tunbench_address6", "address6", "10.0.0.1", "expected an IPv6 address, not '10.0.0.1'"),
        ("tunbench_client_addresses", "client_addresses", "10.0.0.9", "expected FIRST-LAST"),
        ("tunbench_client_weight", "client_weight", "-1", "bad weight"),
        ("ansible_host", "ssh", "-oProxyCommand=x", "bad destination '-oProxyCommand=x'"),
    ],
)
def test_both_vocabularies_refuse_a_value_alike(
    tmp_path: Path, ini_var: str, table_key: str, value: str, msg: str
) -> None:
    """One check, one message, each naming the key as its own file spells it."""
    path = write(tmp_path, "bad.ini", f"[client]\nh1 {ini_var}={value}\n")
    with pytest.raises(ConfigError) as ini:
        load_inventory(path)
    number = table_key in ("port", "client_weight")  # a TOML number, where INI has text
    entry: dict[str, object] = {"ssh": "h1", table_key: int(value) if number else value}
    with pytest.raises(ConfigError) as tbl:
        inventory_from_table({"client": entry}, "s.toml")
    assert (ini.value.key, tbl.value.key) == (ini_var, f"hosts.client.{table_key}")
    assert msg in str(ini.value) and msg in str(tbl.value)


def test_a_port_in_the_ssh_uri_is_checked_as_any_port() -> None:
    with pytest.raises(ConfigError, match="bad port 99999") as exc:
        inventory_from_table({"client": {"ssh": "ssh://h:99999"}}, "s.toml")
    assert exc.value.key == "hosts.client.ssh"


def test_every_variable_and_table_key_is_documented() -> None:
    """docs/multi-host.md's table lists every tunbench_* variable, and the [hosts] reader's docstring every key."""
    import re

    from tunbench.remote.inventory import HOST_TABLE_KEYS, TUNBENCH_VARS

    docs = (Path(__file__).parents[2] / "docs" / "multi-host.md").read_text()
    assert [v for v in sorted(TUNBENCH_VARS) if f"| `{v}` |" not in docs] == []
    doc = inventory_from_table.__doc__ or ""
    assert [k for k in sorted(HOST_TABLE_KEYS) if not re.search(rf"\b{k}\b", doc)] == []
