"""`agents.core.config.check_only_with`: a config field that has no effect without its switch
(each config's `ONLY_WITH` table) is an error naming the switch, given explicitly (the
command line's flags) or, in a config built in code, set away from its default while an
opt-in switch is off. The command line's cases are in tests/experiments/test_cli_validation.py."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from agents.core.config import ConfigError, check_only_with, check_only_with_table, describe_switch
from agents.core.registry import AgentSpec, agent_names, all_specs, register
from agents.dqn import DQNConfig
from agents.r2d1 import R2D1Config


@dataclasses.dataclass(frozen=True)
class Toy:
    on: bool = False  # an opt-in switch (as DQN's --prioritized)
    off: bool = True  # a switch on by default (as R2D1's --prioritized)
    count: int = 0
    mode: str = "a"
    x: float = 1.0
    y: float = 2.0
    v: float = 2.5
    z: float = 3.0
    w: float = 4.0

    ONLY_WITH: ClassVar[dict[str, str]] = {
        "x": "on", "y": "!on", "v": "off", "z": "count>2", "w": "mode=b|c",
    }  # fmt: skip


@pytest.mark.parametrize(
    "switch, text",
    [("on", "--on"), ("!on", "--no-on"), ("count>2", "--count > 2"), ("mode=b|c", "--mode b or c")],
)
def test_a_switch_is_named_as_the_command_line_says_it(switch, text):
    assert describe_switch(switch) == text


@pytest.mark.parametrize(
    "values, given, error",
    [
        ({}, {"x"}, "--x needs --on"),
        ({"on": True}, {"x"}, None),
        ({}, {"y"}, None),
        ({"on": True}, {"y"}, "--y needs --no-on"),
        ({}, {"v"}, None),
        ({"off": False}, {"v"}, "--v needs --off"),
        ({}, {"z"}, "--z needs --count > 2"),
        ({"count": 2}, {"z"}, "--z needs --count > 2"),
        ({"count": 3}, {"z"}, None),
        ({"mode": "a"}, {"w"}, "--w needs --mode b or c"),
        ({"mode": "c"}, {"w"}, None),
        ({}, {"count", "mode", "on", "off"}, None),  # switches themselves need nothing
    ],
)
def test_explicit_fields_need_their_switch(values, given, error):
    config = Toy(**values)
    if error is None:
        check_only_with(config, given)
    else:
        with pytest.raises(ConfigError, match=f"^{error}$"):
            check_only_with(config, given)


def test_values_set_in_code_are_checked_for_opt_in_switches_only():
    """Without `given`, a field away from its default counts as set, for switches that are
    off by default; a switch on by default that was turned off keeps the values (a preset's
    for that feature), as `--preset dqn-atari --noisy` keeps its ε schedule."""
    check_only_with(Toy())
    with pytest.raises(ConfigError, match=r"^--x needs --on$"):
        check_only_with(Toy(x=5.0))
    with pytest.raises(ConfigError, match=r"^--z needs --count > 2$"):
        check_only_with(Toy(z=5.0))
    with pytest.raises(ConfigError, match=r"^--w needs --mode b or c$"):
        check_only_with(Toy(w=5.0))
    check_only_with(Toy(on=True, x=5.0))
    check_only_with(Toy(on=True, y=5.0))  # opt-out switches: not checked in code
    check_only_with(Toy(off=False, v=5.0))
    # The same through real configs' own checks.
    with pytest.raises(ConfigError, match=r"^--priority-exponent needs --prioritized$"):
        DQNConfig(priority_exponent=0.9)
    with pytest.raises(ConfigError, match=r"^--v-max needs --distributional$"):
        DQNConfig(v_max=500.0)
    assert DQNConfig(noisy=True, eps_end=0.01).noisy
    assert not R2D1Config(prioritized=False, priority_exponent=0.5).prioritized


def test_explicit_is_stricter_than_code():
    """A flag given at its default value is still refused without its switch."""
    config = DQNConfig()
    check_only_with(config)
    with pytest.raises(ConfigError, match=r"^--priority-exponent needs --prioritized$"):
        check_only_with(config, {"priority_exponent"})
    name_of = lambda name: f"--vary {name}"  # noqa: E731
    with pytest.raises(ConfigError, match=r"^--vary priority_exponent needs --prioritized$"):
        check_only_with(config, {"priority_exponent"}, name_of=name_of)


def test_every_agent_table_names_its_own_fields():
    for spec in all_specs():
        check_only_with_table(spec.config_cls)


@pytest.mark.parametrize(
    "table", [{"nope": "on"}, {"x": "nope"}, {"x": "!nope"}, {"x": "x"}, {"z": "nope>1"}]
)
def test_a_bad_table_is_refused_when_the_agent_is_registered(table):
    bad = dataclasses.make_dataclass("Bad", [], bases=(Toy,), frozen=True)
    bad.ONLY_WITH = table
    with pytest.raises(ValueError, match="ONLY_WITH: bad entry"):
        check_only_with_table(bad)
    with pytest.raises(ValueError, match="ONLY_WITH: bad entry"):
        register(AgentSpec("bad", bad, object))
    assert "bad" not in agent_names()


def test_every_literal_field_refuses_other_words_when_built_in_code():
    """`check_choices`: a config built in code (or read from a file) with a word its
    `Literal` field does not list is a one-line error naming the flag and the words; the
    command line's parser refuses such words itself."""
    import typing

    checked = 0
    for spec in all_specs():
        hints = typing.get_type_hints(spec.config_cls)
        for f in dataclasses.fields(spec.config_cls):
            if typing.get_origin(hints[f.name]) is not typing.Literal:
                continue
            words = "|".join(typing.get_args(hints[f.name]))
            flag = "--" + f.name.replace("_", "-")
            with pytest.raises(ConfigError) as info:
                spec.config_cls(**{f.name: "bogus"})
            assert str(info.value) == f"{flag} must be {words}, got 'bogus'", str(info.value)
            checked += 1
    assert checked >= 7  # DQN's cnn and optimizer, ACER's and the Reactor's cnn, PPO's two...
