"""The Reactor as pure functions, `make(config, spec)` (agents/core/parts.py): a recurrent
actor, prioritized sequence replay and the learner (agents/reactor/learner.py), acting
decoupled from learning (Gruslys et al. 2018, §3.5).

Decoupled mode (the default, `AgentParts.decoupled`): an actor thread steps envpool with the
jitted recurrent policy, T steps at a time, and hands each rollout (with its behaviour μ and
the LSTM states at its start) to the learner through a queue of one
(engine/actor_thread.py). The learner writes the rollout into the prioritized replay,
runs the updates due, and publishes a copy of its parameters, which the actor picks up for
its next rollout. The learner runs exactly one update per `env_steps_per_update` env steps (a
pure function of the step count, so it is resume-safe), which fixes the acting-to-learning
ratio; the queue makes the faster side wait.

Lock-step mode (`--no-decoupled`) runs the same pieces one after the other on one thread:
deterministic, for debugging, tests and populations.
"""

from __future__ import annotations

import functools
import types

import jax.numpy as jnp

from agents.core.actors import categorical_actor
from agents.core.config import module_from_config
from agents.core.hooks import plugged_torso
from agents.core.learning import updates_owed
from agents.core.parts import AgentParts, ReplayParts, reset_with
from agents.core.rollout import time_major
from agents.reactor.config import ReactorConfig
from agents.reactor.learner import METRICS, ReactorLearner
from networks import ReactorNetwork
from replay import PrioritizedTraceReplay


def make(config: ReactorConfig, spec) -> AgentParts:
    """The Reactor's parts for `config` (agents/reactor/config.py) on an env of `spec`."""
    net = module_from_config(
        ReactorNetwork, config, obs_spec=spec.obs_spec, num_actions=spec.num_actions,
        plugged=plugged_torso(config, spec.obs_spec) if config.network else None,
    )  # fmt: skip
    learner = ReactorLearner(config, net)

    def policy_logits(params, obs, first, core):
        """The log of the uniform-mixed policy (sampling from it samples the mixture)."""
        out, core = net.apply(params, time_major(obs), first[None], core)
        return jnp.log(out.policy_probs[0]), core

    select_action, act = categorical_actor(policy_logits)

    def update(state, batch, hyper, axis_name=None):
        return learner.update(state, batch, axis_name, hyper.values or None)

    def updates_due(iteration: int, env_steps: int, seed: int) -> int:
        """Learner updates owed by this iteration's env steps (a sequence becomes sampleable
        once the next one is written, so none in iteration 0)."""
        return updates_owed(
            iteration, env_steps, config.trace_len * config.num_envs,
            start_train_at=config.start_train_at,
            updates_per_env_step=1.0 / config.env_steps_per_update,
        )  # fmt: skip

    wrap = functools.partial(
        PrioritizedTraceReplay, epsilon=config.priority_epsilon,
        neighbours=config.priority_neighbours,
    )  # fmt: skip
    return AgentParts(
        init=learner.init,
        act=select_action,
        acting=lambda state: state.params,
        learn=lambda state, rollout, hyper, axis_name=None: (state, None),  # replay only
        evaluate=act,
        reset_params=reset_with(learner),
        metric_names=METRICS,
        initial_core=net.initial_state,
        replay=ReplayParts(wrap=wrap, update=update, updates_due=updates_due),
        decoupled="--decoupled acts in a thread of its own (--no-decoupled: lock-step)"
        if config.decoupled
        else None,
        modules=types.SimpleNamespace(network=net, learner=learner),
    )
