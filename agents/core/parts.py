"""Agents as data plus pure functions (`../DESIGN-agents.md` in the team's notes; issue 66).

An agent written this way is a folder with a config, its presets and one function
`make(config, spec) -> AgentParts`: no class, nothing to override. `AgentParts` holds the pure
functions the shared machinery calls:

    learner = init(key, sample_obs)                          # NamedTuple with params and key
    out = act(acting(learner), obs, first, core, key)        # rollouts: an ActorOutput
    learner, metrics = learn(learner, rollout, hyper, axis)  # one iteration's learning
    action, core = evaluate(greedy)(params, obs, first, core, key)

`learn` takes the fresh time-major rollout (`agents.core.rollout.Rollout`) of the iteration
(an on-policy agent's whole update: PQN's and PPO's epochs × minibatches), the hyper-parameters as a
`Hyper` view (a population member's traced values, or the config's) and the data-parallel
axis name (None on one device; gradients are `lax.pmean`ed over it when given). `metrics` is
one dict with exactly the keys `metric_names`, of scalars (one update) or of `[K]` arrays
(K updates: PPO's epochs × minibatches).

The engine runs these functions (engine/driver.py: one training iteration written once,
scanned, vmapped over a population, `shard_map`ped over devices; `engine.driver.agent_class`
gives an agent, registered with its `make` (agents/core/registry.py), the training protocol
the runner speaks). An agent folder imports nothing of the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


def reset_with(learner):
    """`AgentParts.reset_params` of a learner with `reset_params(state, params, hparams)`:
    the member's hyper-parameter values, or None for the config's."""
    return lambda state, params, hyper: learner.reset_params(state, params, hyper.values or None)


def no_core(num_envs: int):
    """The recurrent state of a feed-forward agent: none."""
    return ()


class StagedLearn(NamedTuple):
    """An iteration's learning as the host drives it, one program per stage (PPO's
    `--update-loop dispatch`: no rolled loop around a convolution's weight gradient on
    XLA:CPU). `prepare` once, then for each entry of `steps` `(refresh first, args)`: the
    buffer recomputed with the current learner if asked, then one `step`. Each function takes
    the data-parallel axis name as its `axis_name` keyword."""

    prepare: Callable  # (learner, rollout) -> (learner, buffer)
    step: Callable  # (learner, buffer, *args) -> (learner, metrics dict of scalars)
    refresh: Callable  # (learner, buffer) -> buffer
    steps: tuple  # ((refresh first: bool, args: tuple of int32 arrays), ...)
    buffer_specs: Any  # the buffer's PartitionSpecs over a data-parallel mesh (axis "data")
    why: str  # the agent's `host_driven`: why the host drives its learning
    population: str  # why a population (which runs each member's learning as one program)
    # cannot take it


class ReplayParts(NamedTuple):
    """How an agent learns from a trace replay (ACER, the Reactor, DQN, R2D1, SAC, TD3): after
    each rollout is stored, `updates_due` updates, each on `batch_size` traces the driver
    samples (prioritised where the replay is), their new priorities stored
    (`agents.core.learning.replay_step`); or, for an agent that samples for itself
    (transitions inside traces: SAC, TD3), each its own `step`."""

    wrap: Callable  # replay.TraceReplay -> the replay the agent samples (window, priorities)
    # (learner, TraceBatch, hyper, axis_name) -> (learner, metrics, priorities), or None with
    # `step`
    update: Callable | None
    updates_due: Callable  # (iteration, env_steps, seed) -> int: the updates an iteration
    # owes, a pure function of the counts before it and the seed (on the host: a resumed run
    # repeats it)
    # (replay, replay state, learner, batch size, hyper, axis_name) -> (learner, replay state,
    # metrics): one whole update, sampling included, where the agent samples for itself
    step: Callable | None = None
    # where the host drives: the updates run as one program (a `lax.scan`) of this many
    # (SAC, TD3 at an update-to-data ratio of 1 or more: one dispatch instead of K; keep 1
    # for a convolution, whose weight gradient is slow inside a rolled loop on XLA:CPU)
    per_program: int = 1


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
    # (core, action, reward) -> core: what a recurrent core learns of the step just taken
    # (R2D2's previous action and reward inputs; engine/protocol.py); None: nothing
    feedback: Callable | None = None
    staged: StagedLearn | None = None  # the learning the host drives, or None
    replay: ReplayParts | None = None  # learning from a trace replay, or None (on-policy)
    # why acting runs in a thread of its own, decoupled from learning (the Reactor's
    # --decoupled: engine/actor_thread.py), or None: acting and learning in lock-step
    decoupled: str | None = None
    check_devices: Callable | None = None  # num_devices -> None, or a one-line error
    modules: Any = None  # what the functions are built from (network, learner), for tests
    # and benchmarks to inspect; the driver never reads it

    # By identity (programs are cached on the parts): `engine.driver.make_parts` gives equal
    # (config, spec)
    # values one object, and a field may hold arrays or objects that do not hash.
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other
