"""R2D1 as pure functions: DQN's `build` (agents/dqn/agent.py) with a recurrent value network
(R2D2 without the distributed actors, as rlpyt's R2D1).

What changes from DQN: the network is `networks.RecurrentQNetwork` (LSTM fed the previous
action and reward, which the acting loops hand to its state through the parts' `feedback`);
the replay stores the recurrent state at the start of every trace and samples windows with a
burn-in before them (`replay.TraceReplay`'s look-back) and the rest of the sequence plus the
n-step look-ahead after; priorities are per sequence (η·max + (1 − η)·mean |δ|); ε is either
the linear schedule or Ape-X's fixed per-env rates.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from agents.core.actors import apex_epsilons, epsilon_greedy_actor
from agents.core.config import module_from_config
from agents.core.hooks import plugged_torso
from agents.core.learning import adam_with_clipping
from agents.core.parts import AgentParts
from agents.dqn.agent import build, linear
from agents.dqn.learner import learning_rate
from agents.r2d1.learner import r2d1_learner
from networks import RecurrentQNetwork
from networks.cores import feed_back


def adam(cfg):
    """R2D2's optimizer: Adam with gradient clipping."""
    return adam_with_clipping(learning_rate(cfg), cfg.max_grad_norm, eps=cfg.adam_eps)


def make(config, spec) -> AgentParts:
    """R2D1's parts for `config` (agents/r2d1/config.py) on an env of `spec`."""
    net = module_from_config(
        RecurrentQNetwork, config, obs_spec=spec.obs_spec, num_actions=spec.num_actions,
        plugged=plugged_torso(config, spec.obs_spec) if config.network else None,
    )  # fmt: skip

    def q_values(params, obs, first, core):
        out, core = net.apply(params, obs[None], first[None], core)
        return out.q_values[0], core

    def apex(env_steps):
        # Per env over all processes (in training, config.num_envs; an evaluation's envs may
        # be more or fewer): this process's envs take their own slice.
        n = spec.num_envs
        rates = apex_epsilons(n * jax.process_count()).reshape(-1, n)[jax.process_index()]
        return jnp.asarray(rates)

    # R2D2's actors compute a new sequence's priority from their own TD errors (Kapturowski
    # et al. 2019, §2); without an actor-side pass, the replay's lazy initial priority (the
    # recent priorities of the same env's neighbouring traces) stands in for it.
    return build(
        config, spec, net, r2d1_learner(config, net, adam),
        epsilon_greedy_actor(q_values, config.eval_epsilon), new_at_max=False,
        epsilon=apex if config.apex_epsilon else functools.partial(linear, config),
        initial_core=net.initial_state, feedback=feed_back,
    )  # fmt: skip
