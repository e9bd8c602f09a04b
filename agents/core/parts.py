"""Agents as data plus pure functions (`../DESIGN-agents.md` in the team's notes; issue 66).

An agent written this way is a folder with a config, its presets and one function
`make(config, spec) -> AgentParts`: no class, nothing to override. `AgentParts` holds the pure
functions the shared machinery calls:

    learner = init(key, sample_obs)                          # NamedTuple with params and key
    out = act(acting(learner), obs, first, core, key)        # rollouts: an ActorOutput
    learner, metrics = learn(learner, rollout, hyper, axis)  # one iteration's learning
    action, core = evaluate(greedy)(params, obs, first, core, key)

`learn` takes the fresh time-major rollout (`agents.core.rollout.Rollout`) of the iteration
(an on-policy agent's whole update: PQN's epochs × minibatches), the hyper-parameters as a
`Hyper` view (a population member's traced values, or the config's) and the data-parallel
axis name (None on one device; gradients are `lax.pmean`ed over it when given). `metrics` is
one dict of scalars with exactly the keys `metric_names`.

`parts_agent(name, make, ...)` gives such an agent the training protocol
(agents/core/protocol.py) that the runner, evaluation, populations (vmap over members), data
parallelism (shard_map), checkpoints and sweeps already speak, so a new agent is its folder
and a registry line. `make` is called once per (config, env spec), and its functions are
shared by every agent built from equal values (a resume, an evaluation, the next test); a
second agent with the same config, seed and env task also gets the first one's compiled
chunk program (`agents.core.base.shared_chunk_key`: on envs with a `program_key`, gymnax's),
so it traces and compiles nothing (tests/agents/test_no_recompile.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax

from agents.core.base import RolloutAgent
from agents.core.learning import Hyper
from envs.core import spec_key


def no_core(num_envs: int):
    """The recurrent state of a feed-forward agent: none."""
    return ()


class AgentParts(NamedTuple):
    """An agent's pure functions (module docstring)."""

    init: Callable  # (key, sample_obs [B, ...]) -> learner state (a NamedTuple: params, key)
    act: Callable  # (acting params, obs, first, core, key) -> agents.core.rollout.ActorOutput
    acting: Callable  # learner state -> acting params (what `act` and `evaluate` take)
    learn: Callable  # (learner, rollout, hyper, axis_name) -> (learner, metrics dict)
    evaluate: Callable  # greedy -> (acting params, obs, first, core, key) -> (action, core)
    reset_params: Callable  # (learner, params, hyper) -> learner restarted from `params`
    metric_names: tuple[str, ...]
    initial_core: Callable = no_core  # num_envs -> the cores of fresh episodes


class _SpecByValue:
    """An env spec that compares and hashes by `spec_key` (the cache key of `make`)."""

    def __init__(self, spec):
        self.spec, self.key = spec, spec_key(spec)

    def __eq__(self, other):
        return isinstance(other, _SpecByValue) and self.key == other.key

    def __hash__(self):
        return hash(self.key)


@functools.lru_cache(maxsize=64)
def _cached_parts(make, config, spec: _SpecByValue) -> AgentParts:
    return make(config, spec.spec)


def make_parts(make, config, spec) -> AgentParts:
    """`make(config, spec)`, the same object for equal (config, spec) values."""
    return _cached_parts(make, config, _SpecByValue(spec))


@functools.lru_cache(maxsize=128)
def _jitted_policy(parts: AgentParts, greedy: bool):
    return jax.jit(parts.evaluate(greedy))


class _PartsLearner:
    """The learner view the protocol's users read (`init`, `reset_params`)."""

    def __init__(self, parts: AgentParts, config):
        self.parts, self.config = parts, config

    def init(self, key, sample_obs):
        return self.parts.init(key, sample_obs)

    def reset_params(self, state, params, hparams: dict | None = None):
        return self.parts.reset_params(state, params, Hyper(self.config, hparams))


class PartsAgent(RolloutAgent):
    """The training protocol over an agent's `AgentParts` (module docstring): each iteration
    rolls out with `act`, then `learn`s from the rollout. Built by `parts_agent`."""

    make: ClassVar[Callable[[Any, Any], AgentParts]]
    supports_population = True  # `learn` reads its hyper-parameters through `hyper` only

    def __init__(self, config, env, *, seed: int = 0, mesh=None):
        super().__init__(config, env, seed=seed, mesh=mesh)
        self._build_absorb()  # the one-iteration path's learning program

    def make_network(self, spec):
        self.parts = make_parts(type(self).make, self.config, spec)
        self.metric_names = self.parts.metric_names
        return None  # the network lives inside the parts' functions

    def make_learner(self, network):
        return _PartsLearner(self.parts, self.config)

    def make_actor(self):
        return self.parts.act, functools.partial(_jitted_policy, self.parts)

    def policy_params(self, learner):
        return self.parts.acting(learner)

    def initial_core(self, num_envs: int):
        return self.parts.initial_core(num_envs)

    def absorb(self, learner, replay, traj, axis_name=None, hparams=None):
        learner, metrics = self.parts.learn(learner, traj, Hyper(self.config, hparams), axis_name)
        return learner, replay, [metrics]


def parts_agent(
    name: str,
    make: Callable[[Any, Any], AgentParts],
    *,
    tunable: dict[str, tuple[float, float]] | None = None,
    discrete_only: bool = True,
) -> type:
    """The agent class (`AgentSpec.agent_cls`) of an agent written as `make(config, spec)`.
    `tunable`: the config fields a population may vary per member (`--vary`, `--evolve`),
    with their ranges: fields `learn` reads through its `hyper` argument, and `discount`,
    which the rollout writes into the traces."""
    return type(
        f"{name.upper()}Agent",
        (PartsAgent,),
        {
            "name": name,
            "make": staticmethod(make),
            "tunable": dict(tunable or {}),
            "discrete_only": discrete_only,
            "__module__": make.__module__,
        },
    )
