"""The agent registry: agent name -> config class, `make` and paper presets.

Adding an agent is a folder `agents/<name>/` whose `__init__.py` defines `SPEC`, an
`AgentSpec` carrying its config class and its `make(config, env_spec)` (its pure functions,
agents/core/parts.py), and one line in `BUILTIN` below. Tests and user code can also
`register` an agent at run time. The engine looks agents up here and gives each the training
protocol of engine/protocol.py (`engine.driver.agent_class(spec)`): nothing here, nor in an
agent's folder, imports the engine.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.core.config import check_only_with_table

# name -> package defining SPEC. One line per agent.
BUILTIN: dict[str, str] = {
    "acer": "agents.acer",
    "reactor": "agents.reactor",
    "dqn": "agents.dqn",
    "r2d1": "agents.r2d1",
    "sac": "agents.sac",
    "td3": "agents.td3",
    "ppo": "agents.ppo",
    "a2c": "agents.a2c",
    "pqn": "agents.pqn",
}

# Run options (engine/args.py RunArgs) a preset may set besides the agent's config.
RUN_PRESET_FIELDS = frozenset(
    {
        "env",
        "protocol",
        "total_steps",
        "checkpoint_every",
        "return_window",
        "eval_episodes",
        "eval_greedy",
        "reward_clip",
        "flatten_obs",
    }
)


@dataclass(frozen=True, eq=False)  # compared and hashed by identity (the engine caches by it)
class AgentSpec:
    """How to build an agent.

    Attributes:
      name: the `--agent` value.
      config_cls: its frozen config dataclass (the agent's command line).
      make: `make(config, env_spec) -> AgentParts`, the agent's pure functions
        (agents/core/parts.py), to which the engine gives the training protocol; or, for an
        agent that does not fit them, a class whose `cls(config, env, *, seed, mesh)`
        implements engine.protocol.Agent itself (its own `tunable` and `discrete_only`).
      presets: preset name -> values; keys are config fields or run options
        (`RUN_PRESET_FIELDS`). A comment beside each preset names its source paper.
      default_preset: the preset used when none is given (an empty one means the defaults).
      description: one line for `--help`.
      dict_obs: whether it takes dict (pytree) observations such as MiniGrid's; the runner
        refuses an env that has them, before anything is built, for an agent that does not.
      privileged_obs: whether it keeps the privileged dimensions of an env's observations
        (`EnvSpec.privileged_obs`, --privileged-obs) from its networks; the runner refuses
        such an env for an agent that does not.
      tunable: the config fields a population may vary per member (`--vary`, `--evolve`),
        with their ranges: numbers `learn` reads through its `hyper` argument, and
        `discount`, which the rollout writes into the traces.
      discrete_only: whether it needs discrete actions (the runner refuses a continuous env).
    """

    name: str
    config_cls: type
    make: Callable[[Any, Any], Any] | type
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    default_preset: str | None = None
    description: str = ""
    dict_obs: bool = False
    privileged_obs: bool = False
    tunable: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    discrete_only: bool = True

    def __post_init__(self):
        fields = {f.name for f in dataclasses.fields(self.config_cls)}
        for preset, values in self.presets.items():
            bad = sorted(set(values) - fields - RUN_PRESET_FIELDS)
            if bad:
                raise ValueError(f"preset {preset!r} of agent {self.name!r} sets unknown {bad}")
        bad = sorted(set(self.tunable) - fields)
        if bad:
            raise ValueError(f"tunable of agent {self.name!r} names unknown fields {bad}")
        if self.default_preset is not None and self.default_preset not in self.presets:
            raise ValueError(f"default preset {self.default_preset!r} is not a preset")

    def split_preset(self, preset: str | None) -> tuple[dict, dict]:
        """(run option values, config values) of a preset (None: the default preset)."""
        preset = self.default_preset if preset is None else preset
        if preset is None:
            return {}, {}
        if preset not in self.presets:
            owner = preset_owner(preset)
            if owner is not None:
                raise ValueError(f"preset {preset!r} is for --agent {owner}, not {self.name}")
            raise ValueError(
                f"unknown preset {preset!r} for --agent {self.name}; choose from "
                f"{', '.join(self.presets) or '(none)'}"
            )
        values = dict(self.presets[preset])
        run = {k: values.pop(k) for k in list(values) if k in RUN_PRESET_FIELDS}
        return run, values

    def make_config(self, preset: str | None = None, **overrides):
        """The config of a preset with `overrides` (field names) applied."""
        _, values = self.split_preset(preset)
        return self.config_cls(**{**values, **overrides})


_REGISTERED: dict[str, AgentSpec] = {}


def register(spec: AgentSpec, *, replace: bool = False) -> AgentSpec:
    """Make `spec` available as `--agent spec.name`, after checking its config's `ONLY_WITH`
    table (a typo there would silently disable a check; the built-in agents' tables are
    checked by tests/agents/test_config_only_with.py)."""
    check_only_with_table(spec.config_cls)
    if not replace and spec.name in _REGISTERED | dict.fromkeys(BUILTIN):
        raise ValueError(f"an agent named {spec.name!r} is already registered")
    _REGISTERED[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def agent_names() -> list[str]:
    return sorted({*BUILTIN, *_REGISTERED})


def get_agent(name: str) -> AgentSpec:
    """The spec of agent `name`; an unknown name is a one-line ValueError with choices."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in BUILTIN:
        spec = importlib.import_module(BUILTIN[name]).SPEC
        _REGISTERED[name] = spec
        return spec
    close = difflib.get_close_matches(name, agent_names(), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown agent {name!r}{hint}; choose from {', '.join(agent_names())}")


def all_specs() -> list[AgentSpec]:
    return [get_agent(n) for n in agent_names()]


def preset_owner(preset: str) -> str | None:
    """The agent whose presets include `preset` (preset names are unique), or None."""
    return next((s.name for s in all_specs() if preset in s.presets), None)
