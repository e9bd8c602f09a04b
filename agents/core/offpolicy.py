"""What the off-policy actor-critics with separate actor and critic networks share (SAC,
discrete SAC, TD3, DDPG): their common flags, transition sampling from the trace replay,
prioritized replay with an annealed IS exponent, the update-to-data schedule and random
exploration at the start.

An agent here is `make(config, spec) -> AgentParts` (agents/core/parts.py) over `build`
below, which gives it what they share; the agent brings its networks, actor and learner.

Transitions from traces. The rollout of T steps per env is stored as one trace slot per env.
A learner update wants B transitions, each with the n − 1 steps after it for n-step or
V-trace targets: the replay is given a look-ahead of n − 1 steps
(`replay.TraceReplay.lookahead`), B slots are drawn (uniformly, or by priority) and in each
one offset o ∈ [0, T) uniformly, inside the jitted update. Uniform slot × uniform offset is a
uniform transition; every offset has its full n-step window because of the look-ahead. The
learner gets a `TraceBatch` of n steps (n + 1 observations) per sample, time-major, whose
step 0 is the sampled transition.

Prioritized replay keeps one priority per slot (the replay's sum tree): the |TD| of the
transition learnt from it, to the power α (Schaul et al. 2016); with --trace-len 1 a slot is a
transition and this is exact PER. The replay's IS weights 1/(N·P(i)), normalised by the batch
maximum, are raised to β, which is annealed linearly from --importance-exponent to 1 over
--importance-exponent-steps env steps (DQN's flags; --per-alpha, --per-beta and
--per-beta-steps are their former names here). New slots get the maximum priority of the
slots learnt so far.

Many updates per env step run as one `lax.scan` over updates (`ReplayParts.per_program` = the
updates of one iteration): one dispatch per iteration where the host drives.

Episode boundaries follow the trace conventions (engine/rollout.py): discount_t = γ(1 −
terminated_{t+1}) (a time-limit truncation keeps γ and so bootstraps from the final
observation) and mask_t = 0 on the fake auto-reset transition, which is never learnt and cuts
n-step and V-trace windows.

Observation normalisation (--normalize-obs). A running mean and variance of the observations
(`agents.core.normalization.RunningStats`) is a field of the learner state, so it is checkpointed
and survives a resume. `learn` takes each rollout's observations into it (summed over the
devices under data parallelism, so every replica holds the same statistics). The replay
stores RAW observations; a sampled batch is normalised when it is learnt, with the current
statistics, and the actor normalises with the same statistics (`ActingParams.obs_stats`):
after an iteration's `learn`, its updates and the next rollout see the same mean and
variance. Normalised values are clipped to ±--obs-clip (5).

Curiosity, one of two: random network distillation (--rnd-coef > 0, agents/core/rnd.py) or
the intrinsic curiosity module (--icm-coef > 0, agents/core/icm.py). Its own state (networks,
optimiser, input and error statistics) is the learner state's `rnd` or `icm` field; `learn`
takes each rollout into its statistics, and each update adds the coefficient times the
intrinsic rewards of the sampled windows to their extrinsic rewards before the learner
computes its critic targets, then trains the curiosity's networks one step on the sampled
transitions, so SAC, discrete SAC, TD3 and DDPG all get it from this seam.
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.core.config import (
    ConfigError,
    ReplayWindow,
    check,
    check_floats_finite,
    check_only_with,
    check_positive_int,
    check_prioritized_replay,
    check_trace_replay,
    flag,
)
from agents.core.hooks import check_hooks
from agents.core.icm import ICM_ONLY_WITH, check_icm, icm_of
from agents.core.learning import (
    TraceBatch,
    bounded_td,
    per_importance_exponent,
    sample_key,
    updates_owed,
)
from agents.core.normalization import RunningStats, normalize
from agents.core.parts import AgentParts, ReplayParts, no_core, reset_with
from agents.core.rnd import RND
from replay import window_replay


@dataclass(frozen=True)
class OffPolicyConfig(ReplayWindow):
    """The flags every separate-actor-critic agent has (see the module docstring)."""

    num_envs: int = 4
    """Parallel environments (envpool batch; over all processes)."""
    trace_len: int = 8
    """Env steps per env per iteration (one replay slot)."""
    batch_size: int = 256
    """Transitions per update (sequences of --seq-len steps with SAC's --recurrent)."""
    buffer_size: int = 100_000
    """Replay capacity in transitions over all envs (rounded down to whole slots)."""
    start_train_at: int = 1_000
    """Env steps of uniformly random actions before the first update."""
    update_to_data: float = 1.0
    """Updates per env step (the updates of one iteration run as one scanned program)."""
    discount: float = 0.99
    """Discount factor γ."""
    tau: float = 0.005
    """Polyak rate of the target networks: θ' ← τ·θ + (1 − τ)·θ' after every update."""
    target_update_period: int = 0
    """Copy the online networks to the target networks every this many updates, in place of
    Polyak averaging (the Advanced-SAC seed's update_target_per_step; 0: Polyak, --tau)."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""
    critic_lr: float = 1e-3
    """Adam learning rate of the critics."""
    max_grad_norm: float = 0.0
    """Clip each network's gradient to this global L2 norm (0: no clipping)."""
    hidden: tuple[int, ...] = (256, 256)
    """MLP widths of the actor and of each critic."""
    n_step: int = 1
    """Steps of the critic target (1: the one-step target)."""
    policy_delay: int = 1
    """Update the actor (and α) every this many critic updates (TD3: 2)."""
    prioritized: bool = False
    """Prioritized replay (proportional, one priority per slot; module docstring)."""
    priority_exponent: float = 0.6
    """α: a slot's priority is |TD|^α (Schaul et al. 2016: 0.6). The flag DQN and R2D1 have
    (formerly --per-alpha here)."""
    importance_exponent: float = 0.4
    """β at the start: the loss is weighted by (1 / (N·P(i)))^β, normalised by its batch
    maximum, β rising linearly to 1 over --importance-exponent-steps (formerly --per-beta)."""
    importance_exponent_steps: int = 100_000
    """Env steps over which β rises to 1 (0: held at --importance-exponent; formerly
    --per-beta-steps)."""
    td_error_min: float = 0.0
    """Prioritized replay: the |δ| a priority is made from is raised to at least this (the
    Advanced-SAC seed's td_error_min; 0: no floor)."""
    td_error_max: float | None = None
    """Prioritized replay: the |δ| a priority is made from is cut at this (the seed's
    td_error_max; none by default)."""
    normalize_obs: bool = False
    """Normalise observations by a running mean and variance, clipped to ±--obs-clip, for
    the actor and the critics. The statistics are learner state (checkpointed: they survive
    --resume), updated from every rollout; the replay stores raw observations, normalised
    when learnt with the statistics the actor acts with."""
    obs_clip: float = 5.0
    """With --normalize-obs: clip normalised observations to this magnitude."""
    rnd_coef: float = 0.0
    """Curiosity by random network distillation (Burda et al. 2018, arXiv:1810.12894): the
    weight of RND's intrinsic reward added to the extrinsic reward in the critic targets (0:
    off; agents/core/rnd.py)."""
    rnd_lr: float = 1e-4
    """With --rnd-coef: Adam learning rate of RND's predictor (the paper's 1e-4)."""
    rnd_features: int = 64
    """With --rnd-coef: size of RND's embedding (the output of its target and predictor)."""
    icm_coef: float = 0.0
    """Curiosity by the intrinsic curiosity module (Pathak et al. 2017, arXiv:1705.05363): the
    weight of ICM's intrinsic reward (its forward model's error, divided by a running
    standard deviation as RND's) added to the extrinsic reward (0: off; agents/core/icm.py).
    Not with --rnd-coef."""
    icm_beta: float = 0.2
    """With --icm-coef: β of ICM's loss (1 − β)·inverse + β·forward (the paper's 0.2)."""
    icm_lr: float = 1e-3
    """With --icm-coef: Adam learning rate of ICM's encoder, inverse and forward models (the
    paper's 1e-3)."""
    icm_features: int = 64
    """With --icm-coef: size of ICM's feature embedding φ(s) (the paper's 288 after its
    convolutions on pixels)."""
    network: str | None = None
    """Hook `module:function`: function(obs_spec) -> a flax module mapping a batch of
    observations [B, ...] (a dict of them for dict observations) to features [B, F], on which
    the actor and the critics put their MLPs, in place of the built-in encoder (one instance
    for the actor, one the critics share); its output is checked before anything compiles.
    Recorded in config.json, never imported from a run folder: --resume and evaluate need
    the flag again."""

    # The hook fields and the arguments each is called with (agents.core.hooks).
    HOOKS: ClassVar[dict[str, tuple[str, ...]]] = {"network": ("obs_spec",)}

    # The trace agents' microbatching of updates does not apply to transition batches.
    microbatch_traces = 0

    # Flags that do nothing without their switch (agents.core.config.check_only_with); SAC and TD3
    # extend the table.
    # The prioritized-replay flags' former names (issue 66: one vocabulary with DQN's): old
    # run folders load under the new names, and the old flags still parse, with a
    # deprecation line, until 0.4 (engine.args).
    RENAMED: ClassVar[dict[str, str]] = {
        "per_alpha": "priority_exponent",
        "per_beta": "importance_exponent",
        "per_beta_steps": "importance_exponent_steps",
    }
    DEPRECATED_FLAGS: ClassVar[dict[str, str]] = RENAMED

    ONLY_WITH: ClassVar[dict[str, str]] = {
        **dict.fromkeys(
            (
                "priority_exponent",
                "importance_exponent",
                "importance_exponent_steps",
                "td_error_min",
                "td_error_max",
            ),
            "prioritized",
        ),
        "obs_clip": "normalize_obs",
        "tau": "target_update_period=0",
        **dict.fromkeys(("rnd_lr", "rnd_features"), "rnd_coef>0"),
        **ICM_ONLY_WITH,
    }

    def __post_init__(self):
        check_positive_int(
            self, "num_envs", "trace_len", "batch_size", "buffer_size", "n_step", "policy_delay",
            "rnd_features",
        )  # fmt: skip
        check_floats_finite(self)
        check(self.start_train_at >= 0, "start_train_at", self.start_train_at, ">= 0")
        check(self.update_to_data > 0, "update_to_data", self.update_to_data, "> 0")
        check(0.0 < self.discount <= 1.0, "discount", self.discount, "in (0, 1]")
        check(0.0 < self.tau <= 1.0, "tau", self.tau, "in (0, 1]")
        check(
            self.target_update_period >= 0, "target_update_period", self.target_update_period,
            ">= 0 (0: Polyak averaging)",
        )  # fmt: skip
        check(self.actor_lr > 0, "actor_lr", self.actor_lr, "> 0")
        check(self.critic_lr > 0, "critic_lr", self.critic_lr, "> 0")
        check(self.max_grad_norm >= 0, "max_grad_norm", self.max_grad_norm, ">= 0")
        check(all(h >= 1 for h in self.hidden), "hidden", self.hidden, "widths >= 1")
        check_prioritized_replay(self)
        check(self.obs_clip > 0, "obs_clip", self.obs_clip, "> 0")
        check(self.rnd_coef >= 0, "rnd_coef", self.rnd_coef, ">= 0")
        check(self.rnd_lr > 0, "rnd_lr", self.rnd_lr, "> 0")
        check_icm(self)
        check(
            self.icm_coef == 0 or self.rnd_coef == 0, "icm_coef", self.icm_coef,
            "0 with --rnd-coef > 0 (one curiosity at a time)",
        )  # fmt: skip
        sizes = f", n_step={self.n_step}"
        if self.learn_len != self.trace_len or self.lookback:  # sequences
            sizes += f", seq_len={self.learn_len}, burn_in={self.lookback}"
        # the replay window (agents.core.config.ReplayWindow)
        check_trace_replay(self, self.min_traces_per_env, "slots", sizes, divisible=())
        check_only_with(self)  # last: a value out of range is named as such first
        if self.network is not None:  # --network (agents.core.hooks)
            check_hooks(self)

    @property
    def updates_per_iteration(self) -> int:
        """Updates scanned in one program: those of one iteration, at least 1 (with a
        fractional count, iterations alternate between this many and one more, the extra
        ones dispatched singly)."""
        return max(1, math.floor(self.update_to_data * self.num_envs * self.trace_len + 1e-9))


def window_at(batch: TraceBatch, offset, length: int) -> TraceBatch:
    """Steps offset_b .. offset_b + length − 1 of every trace b (observations and `first`
    to offset_b + length): a time-major `TraceBatch` of `length` steps."""

    def cut(x, n):
        take = lambda xb, o: jax.lax.dynamic_slice_in_dim(xb, o, n, axis=0)  # noqa: E731
        return jax.vmap(take, in_axes=(1, 0), out_axes=1)(x, offset)

    steps = lambda tree: jax.tree.map(lambda x: cut(x, length), tree)  # noqa: E731
    return batch._replace(
        obs=jax.tree.map(lambda x: cut(x, length + 1), batch.obs),
        first=cut(batch.first, length + 1),
        action=steps(batch.action),
        mu=steps(batch.mu),
        reward=steps(batch.reward),
        discount=steps(batch.discount),
        mask=steps(batch.mask),
    )


def per_beta(config, env_steps):
    """β after `env_steps` env steps: linear from --importance-exponent to 1 over
    --importance-exponent-steps."""
    return per_importance_exponent(
        config.importance_exponent, config.importance_exponent_steps, env_steps
    )


class ActingParams(NamedTuple):
    """What the off-policy actors take (`AgentParts.acting` of `build`)."""

    actor: Any  # the actor network's params
    explore: Any  # bool: act uniformly at random (before start_train_at)
    obs_stats: Any  # RunningStats of --normalize-obs, or ()
    critic: Any = ()  # the critics' params where acting runs their recurrent core, or ()


# What a population (`--num-seeds`, `--vary`, `--evolve`) may vary in SAC's and TD3's configs:
# fields their learners read only as numbers inside the traced update, and the discount the
# rollout writes. Not the acting fields (TD3's exploration noise): every member acts with
# member 0's `select_action`.
OFF_POLICY_TUNABLE: dict[str, tuple[float, float]] = {
    "actor_lr": (1e-7, 1.0),
    "critic_lr": (1e-7, 1.0),
    "tau": (0.0, 1.0),
    "discount": (0.5, 1.0),
}


def check_spec(name: str, spec, config) -> None:
    """For continuous actions, finite bounds; the options that take vector observations only
    (--normalize-obs, --rnd-coef) refused for images and dict observations: a one-line
    error."""
    if spec.obs_shape is None or len(spec.obs_shape) != 1:
        kind = "dict" if spec.obs_shape is None else f"shape {spec.obs_shape}"
        for field in ("normalize_obs", "rnd_coef"):
            if getattr(config, field):
                raise ConfigError(
                    f"{flag(field)} takes vector observations; {spec.env_id} has "
                    f"observations of {kind}"
                )
    if not spec.discrete and (
        spec.action_low is None
        or not (np.all(np.isfinite(spec.action_low)) and np.all(np.isfinite(spec.action_high)))
    ):
        raise ValueError(f"{name} needs finite action bounds; {spec.env_id} has none")


def observation(config, obs, obs_stats):
    """What the actor and the critics see: raw observations normalised with `obs_stats`
    (--normalize-obs), or as they are."""
    if not config.normalize_obs:
        return obs
    return normalize(obs, obs_stats, config.obs_clip)


def step_position(config, info, offset):
    """Ring position of each sampled transition in its env's stream `[B]`."""
    return info.slot * config.trace_len + offset


def sample_transitions(config, replay, replay_state, learner, key, batch_size, axis_name=None):
    """B transitions with their n-step windows (module docstring): (TraceBatch, info,
    offsets); `axis_name`: the mesh axis under `shard_map` (the importance weights' maximum
    is over every device's draws)."""
    k_slot, k_offset = jax.random.split(key)
    sample = replay.sample(replay_state, k_slot, batch_size, axis_name=axis_name)
    full = TraceBatch.from_sample(sample, replay.window_len)
    offset = jax.random.randint(k_offset, (batch_size,), 0, config.trace_len)
    batch = window_at(full, offset, config.n_step)
    if config.prioritized:
        beta = per_beta(config, learner.env_steps)
        batch = batch._replace(is_weight=batch.is_weight**beta)
    return batch, sample.info, offset


def keep_replay(replay, replay_state, learner, batch, info, offset, computed=()):
    """The replay after an update, unchanged (`build`'s default `after_update`)."""
    return replay_state


def build(
    config, spec, name: str, learner, actor, metric_names: tuple[str, ...], *,
    sample: Callable | None = None, after_update: Callable = keep_replay,
    acting_critic: bool = False, initial_core=no_core, feedback=None,
) -> AgentParts:  # fmt: skip
    """The parts of a separate-actor-critic agent (module docstring) from its `learner` and
    `actor` = (select_action, act) on `ActingParams`, whose functions see observations
    through `observation`. The learner has `init(key, sample_obs)` and `update(state,
    TraceBatch of n steps, axis_name, hparams) -> (state, metrics, |TD| [B], *computed)`
    (a recurrent learner returns its recomputed core states as `computed`), and a state with
    `params` (a dict with "actor" and "critic"), `key`, `env_steps`, and `obs_stats`, `rnd`
    and `icm` (all `()` from `init`; filled here).

    `sample(replay, replay state, learner, key, batch size, axis_name) -> (TraceBatch, info,
    offsets)`: the batch of an update (default `sample_transitions`); `after_update(replay,
    replay state, learner, batch, info, offsets, computed) -> replay state`: what an update
    writes back (default none); `acting_critic`: the actor steps the critics' recurrent core
    too (their params are in `ActingParams.critic`)."""
    check_spec(name, spec, config)
    curiosity, field, coef = curiosity_of(config, spec)
    if curiosity is not None:
        metric_names = (*metric_names, *curiosity.metric_names)
    steps_per_iteration = config.trace_len * config.num_envs
    sample = sample or functools.partial(sample_transitions, config)
    select_action, act = actor

    def init(key, sample_obs):
        """The learner's state with the observation statistics (--normalize-obs) and the
        curiosity's state (--rnd-coef, --icm-coef), `()` when off."""
        state = learner.init(key, sample_obs)
        stats = RunningStats.zeros(sample_obs.shape[1:]) if config.normalize_obs else ()
        state = state._replace(obs_stats=stats)
        if curiosity is None:
            return state
        return state._replace(**{field: curiosity.init(jax.random.fold_in(key, 1), sample_obs)})

    def acting(state) -> ActingParams:
        """The actor's params, whether to act uniformly at random (before start_train_at)
        and the observation statistics the learner uses (and the critics' params where
        acting steps their core)."""
        critic = state.params["critic"] if acting_critic else ()
        explore = state.env_steps < config.start_train_at
        return ActingParams(state.params["actor"], explore, state.obs_stats, critic)

    def learn(state, rollout, hyper, axis_name=None):
        """The fresh rollout (stored by the driver): count its env steps, and take its
        observations into the running statistics (over all devices)."""
        obs_stats = state.obs_stats
        if config.normalize_obs:
            obs_stats = obs_stats.update(rollout.obs, 2, axis_name)
        state = state._replace(env_steps=state.env_steps + steps_per_iteration, obs_stats=obs_stats)
        if curiosity is not None:
            seen = curiosity.observe_rollout(getattr(state, field), rollout, axis_name)
            state = state._replace(**{field: seen})
        return state, None

    def step(replay, replay_state, state, batch_size, hyper, axis_name=None):
        """One update: sample, add curiosity, normalise, learn, store priorities, write
        back (`after_update`)."""
        key, sub = sample_key(state.key, axis_name)
        batch, info, offset = sample(replay, replay_state, state, sub, batch_size, axis_name)
        extra = {}
        if curiosity is not None:  # raw observations: the curiosity normalises its own input
            own, r_int, extra = curiosity.bonus(getattr(state, field), batch, axis_name)
            state = state._replace(**{field: own})
            batch = batch._replace(reward=batch.reward + coef * r_int, env_reward=batch.reward)
        batch = batch._replace(obs=observation(config, batch.obs, state.obs_stats))
        state, metrics, td, *computed = learner.update(
            state._replace(key=key), batch, axis_name, hyper.values or None
        )
        if config.prioritized:
            priorities = jnp.power(bounded_td(td, config) + 1e-6, config.priority_exponent)
            replay_state = replay.set_priorities(replay_state, info.env_index, info.slot,
                                                 priorities)  # fmt: skip
        replay_state = after_update(replay, replay_state, state, batch, info, offset, *computed)
        return state, replay_state, {**metrics, **extra}

    def updates_due(iteration: int, env_steps: int, seed: int) -> int:
        """update_to_data updates per env step from start_train_at on, once a slot and its
        look-ahead can be sampled; a pure function of the counts (resume-safe)."""
        return updates_owed(
            iteration, env_steps, steps_per_iteration, start_train_at=config.start_train_at,
            updates_per_env_step=config.update_to_data,
            warmup_iterations=config.warmup_iterations,
        )  # fmt: skip

    return AgentParts(
        init=init,
        act=select_action,
        acting=acting,
        learn=learn,
        evaluate=act,
        reset_params=reset_with(learner),
        metric_names=metric_names,
        initial_core=initial_core,
        feedback=feedback,
        replay=ReplayParts(
            wrap=functools.partial(window_replay, config=config),
            update=None,
            updates_due=updates_due,
            step=step,
            per_program=config.updates_per_iteration,
        ),
        modules=types.SimpleNamespace(
            learner=learner,
            sample=sample,
            after_update=after_update,
            curiosity=curiosity,
            rnd=curiosity if field == "rnd" else None,
        ),
    )


def curiosity_of(config, spec):
    """(the curiosity, its learner-state field, its reward coefficient) of an off-policy
    config: RND with --rnd-coef, ICM with --icm-coef, or (None, None, 0.0)."""
    if config.rnd_coef > 0:
        return RND(config.hidden, config.rnd_features, config.rnd_lr), "rnd", config.rnd_coef
    if config.icm_coef > 0:
        return icm_of(config, spec), "icm", config.icm_coef
    return None, None, 0.0
