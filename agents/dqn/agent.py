"""DQN as pure functions, `make(config, spec)` (agents/core/parts.py): ε-greedy actor (or
NoisyNet's, --noisy), a trace replay with a look-ahead of n − 1 steps (uniform or
prioritized), the value learner (agents/dqn/learner.py). R2D1 (agents/r2d1/) is `build` with
its recurrent network, learner and ε.

One iteration: act `trace_len` steps in every env, ε-greedy on the online network; count the
env steps (they drive ε: a pure function of the learner's own count, which the checkpoint
holds, so a resumed run explores as the original would have); store the rollout; then the
updates owed (`updates_due`: replay_ratio transitions learnt per env step, as rlpyt).

Why traces with a look-ahead rather than single transitions: a sampled trace of T steps
comes with the n − 1 steps after it (`replay.TraceReplay`'s `lookahead`), so all T
transitions get full n-step targets, the online pass over them also gives double Q's
selections, and frames are stored once. With T = 1 it is transition replay (per-transition
priorities); the presets use T = 4, which costs (2n + T − 1)/T forward passes per learnt
transition instead of 2n, at the price of learning 4 consecutive transitions together.
"""

from __future__ import annotations

import functools
import types

import jax
import jax.numpy as jnp

from agents.core.actors import epsilon_greedy_actor, linear_epsilon, noisy_q_actor
from agents.core.config import module_from_config
from agents.core.hooks import plugged_torso
from agents.core.icm import icm_of
from agents.core.learning import updates_owed
from agents.core.parts import AgentParts, ReplayParts, no_core, reset_with
from agents.dqn.learner import METRICS, DQNLearner, dqn_optimizer
from networks import QNetwork
from replay import window_replay


def make(config, spec) -> AgentParts:
    """DQN's parts for `config` (agents/dqn/config.py) on an env of `spec`."""
    atoms = ()
    if config.distributional:
        atoms = tuple(float(x) for x in jnp.linspace(config.v_min, config.v_max, config.num_atoms))
    net = module_from_config(
        QNetwork, config, obs_spec=spec.obs_spec, num_actions=spec.num_actions,
        num_atoms=config.num_atoms if config.distributional else 0, atoms=atoms,
        plugged=plugged_torso(config, spec.obs_spec) if config.network else None,
    )  # fmt: skip

    def q_values(params, obs, first, core):
        return net.apply(params, obs).q_values, core

    def noisy_q_values(params, obs, noise_key):
        return net.apply(params, obs, noise_key=noise_key).q_values

    if config.noisy:
        actor = noisy_q_actor(noisy_q_values, config.eval_epsilon)
    else:
        actor = epsilon_greedy_actor(q_values, config.eval_epsilon)
    # Schaul et al. 2016 (Algorithm 1, line 6) give every new transition the largest priority
    # so far, so that each is replayed at least once.
    curiosity = icm_of(config, spec) if config.icm_coef else None
    return build(config, spec, net, DQNLearner(config, net, dqn_optimizer), actor,
                 new_at_max=True, curiosity=curiosity)  # fmt: skip


def linear(config, env_steps):
    """ε of the training actor after `env_steps` env steps (a scalar); 0 with --noisy."""
    if getattr(config, "noisy", False):
        return jnp.zeros_like(jnp.asarray(env_steps, jnp.float32))
    return linear_epsilon(
        env_steps, config.eps_start, config.eps_end, config.eps_decay_steps,
        config.eps_decay_start,
    )  # fmt: skip


def build(config, spec, net, learner, actor, *, new_at_max: bool, epsilon=None,
          initial_core=no_core, feedback=None, curiosity=None) -> AgentParts:  # fmt: skip
    """The parts of a value-based replay agent (DQN, R2D1): `actor` = (select_action, act)
    on params (network params, ε); `epsilon(env_steps)`: the training actor's ε (default
    `linear`'s schedule); `curiosity`: the `agents.core.icm.ICM` of --icm-coef (its state is
    the learner state's `icm`), or None."""
    epsilon = epsilon or functools.partial(linear, config)
    steps_per_iteration = config.trace_len * config.num_envs
    select_action, act = actor
    metric_names = METRICS if curiosity is None else (*METRICS, *curiosity.metric_names)

    def init(key, sample_obs):
        state = learner.init(key, sample_obs)
        if curiosity is None:
            return state
        return state._replace(icm=curiosity.init(jax.random.fold_in(key, 1), sample_obs))

    def learn(state, rollout, hyper, axis_name=None):
        """The fresh rollout: count its steps (and take it into ICM's statistics)."""
        state = state._replace(env_steps=state.env_steps + steps_per_iteration)
        if curiosity is not None:
            state = state._replace(icm=curiosity.observe_rollout(state.icm, rollout, axis_name))
        return state, None

    def update(state, batch, hyper, axis_name=None):
        """One learner update, logging the acting ε of the learner's env steps; with ICM,
        --icm-coef times the intrinsic rewards of the batch's steps added to their rewards
        first, and one ICM step on its learnt transitions."""
        eps = jnp.mean(epsilon(state.env_steps))
        extra = {}
        if curiosity is not None:  # raw observations: ICM normalises its own input
            own, r_int, extra = curiosity.bonus(state.icm, batch, axis_name, config.learn_len)
            state = state._replace(icm=own)
            batch = batch._replace(reward=batch.reward + config.icm_coef * r_int)
        state, metrics, priorities = learner.update(state, batch, axis_name, hyper.values or None)
        return state, {**metrics, "epsilon": eps, **extra}, priorities

    def updates_due(iteration: int, env_steps: int, seed: int) -> int:
        """replay_ratio transitions learnt per env step, from `start_train_at` on, once a trace
        and its look-ahead can be sampled."""
        return updates_owed(
            iteration, env_steps, steps_per_iteration, start_train_at=config.start_train_at,
            updates_per_env_step=updates_per_env_step(config),
            warmup_iterations=config.warmup_iterations,
        )  # fmt: skip

    return AgentParts(
        init=init,
        act=select_action,
        acting=lambda state: (state.params, epsilon(state.env_steps)),
        learn=learn,
        evaluate=act,
        reset_params=reset_with(learner),
        metric_names=metric_names,
        initial_core=initial_core,
        feedback=feedback,
        replay=ReplayParts(
            wrap=functools.partial(window_replay, config=config, new_at_max=new_at_max),
            update=update,
            updates_due=updates_due,
        ),
        modules=types.SimpleNamespace(
            network=net, learner=learner, epsilon=epsilon, curiosity=curiosity
        ),
    )


def updates_per_env_step(config) -> float:
    """Learner updates per env step: replay_ratio transitions learnt per env step."""
    return config.replay_ratio / (config.batch_size * config.learn_len)
