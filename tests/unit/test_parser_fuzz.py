"""Fuzzing the scenario, adapter and profile parsers with hypothesis: no input may raise anything but a
ConfigError (the project's own error, shown as one `Error: ...` line), and that error names the file, the
key, and the line when the key is in the file.

Inputs: TOML documents built from the real schemas' keys (pydantic models walked recursively, each value
either well-typed or hostile: huge/negative numbers, nan/inf, odd strings, wrong types, unknown keys),
raw random text, and raw random bytes. The default run is short; for a long one:
    TUNBENCH_FUZZ_EXAMPLES=10000 .venv/bin/python -m pytest tests/unit/test_parser_fuzz.py
(the count applies to each of the 7 fuzz tests: 10000 gives 70,000 inputs, about 4 minutes).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tunbench import workloads
from tunbench.config.load import check_workloads, load_scenario
from tunbench.config.schema import Scenario
from tunbench.errors import ConfigError
from tunbench.link.profile import Profile, find_profile
from tunbench.plan import expand
from tunbench.session import expected_s, resolve_profiles, resolve_tunnels
from tunbench.tomlfile import locate
from tunbench.tunnels.adapter import AdapterSpec
from tunbench.tunnels.registry import missing_requirements, parse_ref

EXAMPLES = int(os.environ.get("TUNBENCH_FUZZ_EXAMPLES", "300"))  # per test: 7 tests, 2,100 inputs, ~8 s
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    database=None,
)
WORKDIR = Path(tempfile.mkdtemp(prefix="tunbench-fuzz-"))
# made at import, so also removed at exit: a session that collects this module but runs none of its tests
# (`-k`, `--deselect`) never reaches the fixture below
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def _remove_workdir() -> Iterator[None]:
    yield
    shutil.rmtree(WORKDIR, ignore_errors=True)


# ---- values ------------------------------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
_odd_strings = st.sampled_from(
    ["", " ", "-1", "0", "1e999", "nan", "{", "}", "{bin}", "{nope}", "{}", "{0}", "{tmp}/x", "'", '"', "\\", "a b",
     "..", "/", "./x.toml", "x.toml", "lan", "direct", "socat", "wan-50ms", "up", "bidir", "iperf3", "udp",
     "clients", "storm", "delay=5ms", "x:delay=1ms,up.rate=1mbit", "name[", "name[a=b]", "socat[buffer=1,label=]",
     "é", "\u202e", "\t", "\n", "0600", "0999", "l3", "l4", "log", "port", "client", "server", "host", "tcp", "[",
     "(", "*", "net.ipv4.x", "1 2 3", "50ms", "100mbit", "1%", "1000p"]
)  # fmt: skip
_ints = st.one_of(st.integers(-3, 3000), st.integers(), st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**30]))
_floats = st.floats(allow_nan=True, allow_infinity=True)
_scalar = st.one_of(_ints, _floats, st.booleans(), _text, _odd_strings)
_hostile = st.one_of(
    _scalar,
    st.lists(_scalar, max_size=4),
    st.dictionaries(st.one_of(_text, _odd_strings), _scalar, max_size=3),
)


def _typed(annotation: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """A strategy for a well-typed value of `annotation` (pydantic field types), hostile at the leaves."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _typed(args[0], depth)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_typed(a, depth) for a in args if a is not type(None)))
    if origin is typing.Literal:
        return st.one_of(st.sampled_from(args), _odd_strings)
    if origin is list:
        return st.lists(_typed(args[0], depth + 1), max_size=3 if depth < 2 else 1)
    if origin is dict:
        keys = st.one_of(
            st.sampled_from(["delay", "rate", "loss", "queue", "jitter", "ge_p", "net.ipv4.tcp_rmem"]), _text
        )
        return st.dictionaries(keys, _typed(args[1], depth + 1), max_size=3)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model(annotation, depth + 1) if depth < 4 else st.just({})
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return _ints
    if annotation is float:
        return st.one_of(_floats, _ints)
    if annotation is str:
        return st.one_of(_text, _odd_strings)
    return _hostile


# plausible values for keys whose random strings would rarely get past the first check
_PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "tunnels": st.lists(
        st.sampled_from(["direct", "socat", "wireguard-go", "stunnel", "socat[buffer=65536]", "openvpn-udp[label=a]",
                         "socat[nope=1]", "socat[bin=/x/socat,label=s]", "./missing.toml", "socat[", "x"]),
        min_size=1, max_size=3,
    ),
    "profiles": st.lists(
        st.sampled_from(["lan", "wan-50ms", "passthrough", "x:delay=5ms,up.rate=10mbit", "y:delay=-1ms",
                         "z:loss=200%", "w:queue=0", "v:bogus=1", "u:", ":delay=1ms", "lan:rate=1kbit"]),
        min_size=1, max_size=3,
    ),
    "kind": st.lists(st.sampled_from([*workloads.REGISTRY, "nope"]), min_size=1, max_size=3),
    "directions": st.lists(st.sampled_from(["up", "down", "bidir"]), min_size=1, max_size=3),
    "flows": st.lists(st.integers(-1, 130), min_size=1, max_size=3),
    "clients": st.lists(st.integers(-1, 5000), min_size=1, max_size=3),
    "requires": st.lists(st.sampled_from(["{bin}", "sh", "{nope}", "{", "", "{bin}x"]), max_size=2),
    "daemon": st.sampled_from(["{bin} -l {port}", "sleep 1", "{nope}", "'unclosed", "", "{server_addr}"]),
    "KeyStep.run": st.sampled_from(["echo {port}", "sh -c 'echo x'", "{", "", "{tmp}/x"]),
    "address": st.sampled_from(["{server_addr}", "127.0.0.1", "{inner_server}", "{x}"]),
    "port": st.sampled_from(["{port}", "{iperf_port}", "5201", "{proxy_port}", "-1", "{"]),
    "params": st.dictionaries(
        st.sampled_from(["bin", "port", "bin", "port", "x_y", "label", "Bad"]), st.sampled_from(["socat", "1"])
    ),
    "name": st.sampled_from(["my-vpn", "x", "dsl", "Bad Name", "", "a.b-c_d", "k"]),
    "layer": st.sampled_from(["l3", "l4", "l2"]),
    "delay": st.sampled_from(["5ms", "-5ms", "1s", "x"]),
    "rate": st.sampled_from(["10mbit", "0mbit", "1kbit", "fast"]),
    "loss": st.sampled_from(["0.1%", "200%", "-1%"]),
}  # fmt: skip


def _model(model: type[BaseModel], depth: int = 0) -> Any:
    """A dict with a random subset of the model's keys, a value mostly well-typed (sometimes hostile), and
    now and then an unknown key. Required keys are usually there, so most documents get past the first check."""
    fields = {
        name: (
            _PLAUSIBLE.get(f"{model.__name__}.{name}", _PLAUSIBLE.get(name, _typed(f.annotation, depth))),
            f.is_required(),
        )
        for name, f in model.model_fields.items()
    }

    @st.composite
    def build(draw: Callable[..., Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, (strat, required) in fields.items():
            if draw(st.integers(0, 19)) < (19 if required else 10):
                out[name] = draw(strat) if draw(st.integers(0, 19)) else draw(_hostile)
        if draw(st.integers(0, 19)) == 0:
            out[draw(st.one_of(_text, _odd_strings))] = draw(_hostile)
        return out

    return build()


# a [workload] table also takes one options table per workload kind
_WORKLOAD_OPTIONS = {kind: _model(w.Options) for kind, w in workloads.REGISTRY.items()}


@st.composite
def _scenario(draw: Callable[..., Any]) -> dict[str, Any]:
    doc = draw(_model(Scenario))
    if isinstance(doc.get("workload"), dict):
        for kind, strat in _WORKLOAD_OPTIONS.items():
            if draw(st.integers(0, 9)) < 2:
                doc["workload"][kind] = draw(strat)
    return doc


def _toml(doc: dict[str, Any]) -> str | None:
    try:
        return tomli_w.dumps(doc)
    except (TypeError, ValueError):  # a shape TOML cannot express (e.g. a key that is not a string)
        return None


# ---- the contract -------------------------------------------------------------------------------------------


def _check_error(e: ConfigError, path: Path, text: str | None) -> None:
    msg = str(e)
    assert "Traceback" not in msg
    assert str(path) in msg, f"the file is not named: {msg}"
    assert e.key or e.line is not None, f"neither key nor line: {msg}"
    if e.key and text is not None:
        top = e.key.split(".")[0].split("[")[0]
        if locate(text, [top]) is not None:
            assert e.line is not None, f"key {e.key} is in the file, but no line: {msg}\n---\n{text}"


def _write(data: bytes, suffix: str = ".toml") -> Path:
    fd, name = tempfile.mkstemp(dir=WORKDIR, suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name)


def _scenario_pipeline(path: Path) -> None:
    """Everything a dry run does with a scenario file, short of asking tunbench-link."""
    sc, text, source = load_scenario(path)
    refs = resolve_tunnels(sc, source, text)
    profiles = resolve_profiles(sc, source, notes=[], text=text)  # tunbench-link judges the values
    options = check_workloads(sc, text, source)
    wl = sc.workload
    from tunbench.plan import PlannedTrial

    for case in expand(refs, profiles, wl.flows, list(wl.directions), wl.kind, options=options)[:50]:
        expected_s(PlannedTrial(1, case, 1), options, wl.window)


def _adapter_pipeline(path: Path) -> None:
    ref = parse_ref(str(path))
    missing_requirements(ref)  # renders the `requires` templates


def _profile_pipeline(path: Path) -> None:
    prof = find_profile(str(path))
    prof.link_args()


def _run(pipeline: Callable[[Path], None], data: bytes) -> None:
    path = _write(data)
    text: str | None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    try:
        pipeline(path)
    except ConfigError as e:
        _check_error(e, path, text)
    finally:
        path.unlink()


PIPELINES = {"scenario": _scenario_pipeline, "adapter": _adapter_pipeline, "profile": _profile_pipeline}
DOCS: dict[str, st.SearchStrategy[Any]] = {
    "scenario": _scenario(),
    "adapter": _model(AdapterSpec),
    "profile": _model(Profile),
}


@pytest.mark.parametrize("kind", list(PIPELINES))
@FUZZ
@given(data=st.data())
def test_fuzz_schema_documents(kind: str, data: st.DataObject) -> None:
    text = _toml(data.draw(DOCS[kind]))
    if text is not None:
        _run(PIPELINES[kind], text.encode())


@pytest.mark.parametrize("kind", list(PIPELINES))
@FUZZ
@example(raw=b"a = " + b"[" * 5000 + b"]" * 5000)  # tomllib: RecursionError (found by this test's author)
@example(raw=b'name = "caf\xe9"\n')  # latin-1, not UTF-8: UnicodeDecodeError before the fix
@example(raw=b"\xef\xbb\xbfname = 'x'\n")  # a UTF-8 byte-order mark
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(lambda t: t.encode("utf-8", "replace"))))
def test_fuzz_raw_input(kind: str, raw: bytes) -> None:
    _run(PIPELINES[kind], raw)


@FUZZ
@given(ref=st.one_of(_text, _odd_strings, st.text(st.sampled_from(":=,.abcdelprtuwmsx0159%"), max_size=40)))
def test_fuzz_inline_profiles_and_tunnel_refs(ref: str) -> None:
    for parse in (find_profile, parse_ref):
        try:
            parse(ref)
        except ConfigError as e:
            assert str(e) and (e.source or e.key)
