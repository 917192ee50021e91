"""`--cpuset` / `[run] cpuset` is parsed once, into config.cpuset.CpuSetting: the flag and the file's table
give the same value, the scenario stores its TOML form, and calibrate writes back the flag that gives it."""

from __future__ import annotations

import pytest

from tunbench.config.cpuset import CpuSetting
from tunbench.config.schema import RunSection


def test_the_flag_and_the_table_give_one_value_stored_in_its_toml_form() -> None:
    flag = CpuSetting.parse("client=0-1, server=2,link=2")
    table = CpuSetting.parse({"client": "1,0", "server": "2", "link": "2"})
    assert flag == table and flag.roles == (("client", (0, 1)), ("server", (2,)), ("link", (2,)))
    assert flag.cpu_lists() == {"client": "0,1", "server": "2", "link": "2"}
    assert CpuSetting.parse(flag.flag()) == flag  # calibrate's equivalent command gives it back
    run = RunSection(cpuset="client=0,server=1")  # type: ignore[arg-type]
    assert run.model_dump()["cpuset"] == {"client": "0", "server": "1"}
    assert RunSection().model_dump()["cpuset"] == "off" and RunSection().cpuset.off
    assert RunSection(cpuset="split").cpuset.flag() == "split"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "says"),
    [("half", "--cpuset"), ("client=0,router=1", "router"), ("client=0-", "CPU list"), ("client=", "client=0")],
)
def test_a_bad_setting_says_what_is_expected(value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        CpuSetting.parse(value)
