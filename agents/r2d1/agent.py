"""The R2D1 agent: `agents.dqn.DQNAgent` with a recurrent value network (R2D2 without the
distributed actors, as rlpyt's R2D1).

What changes from DQN: the network is `networks.RecurrentQNetwork` (LSTM fed the previous
action and reward, which the acting loops hand to its state through `core_feedback`); the
replay stores the recurrent state at the start of every trace and samples windows with a
burn-in before them (`replay.TraceReplay`'s look-back) and the rest of the sequence plus the
n-step look-ahead after; priorities are per sequence (η·max + (1 − η)·mean |δ|); ε is either
the linear schedule or Ape-X's fixed per-env rates.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agents.core.actors import apex_epsilons
from agents.core.config import module_from_config
from agents.core.learning import adam_with_clipping
from agents.dqn.agent import DQNAgent
from agents.dqn.learner import learning_rate
from agents.r2d1.config import R2D1Config
from agents.r2d1.learner import R2D1Learner
from networks import RecurrentQNetwork
from networks.cores import feed_back


class R2D1Agent(DQNAgent):
    name = "r2d1"
    # R2D2's actors compute a new sequence's priority from their own TD errors (Kapturowski
    # et al. 2019, §2); without an actor-side pass, the replay's lazy initial priority (the
    # recent priorities of the same env's neighbouring traces) stands in for it.
    new_traces_at_max = False

    def __init__(self, config: R2D1Config, env, *, seed=0, mesh=None, replay_memory_limit=None):
        super().__init__(config, env, seed=seed, mesh=mesh, replay_memory_limit=replay_memory_limit)

    def make_network(self, spec):
        return module_from_config(
            RecurrentQNetwork, self.config, obs_spec=spec.obs_spec, num_actions=spec.num_actions
        )

    def make_learner(self, network):
        def adam(cfg):  # R2D2's
            return adam_with_clipping(learning_rate(cfg), cfg.max_grad_norm, eps=cfg.adam_eps)

        return R2D1Learner(self.config, network, adam)

    def q_values(self, params, obs, first, core):
        out, core = self.network.apply(params, obs[None], first[None], core)
        return out.q_values[0], core

    def initial_core(self, num_envs):
        return self.network.initial_state(num_envs)

    # The action taken and the reward received become the next step's inputs.
    core_feedback = staticmethod(feed_back)

    def epsilon(self, env_steps):
        cfg = self.config
        if not cfg.apex_epsilon:
            return super().epsilon(env_steps)
        # Per env over all processes (in training, config.num_envs; an evaluation's envs,
        # `Member.acting`, may be more or fewer): this process's envs take their own slice.
        n = self.env.spec.num_envs
        rates = apex_epsilons(n * jax.process_count()).reshape(-1, n)[jax.process_index()]
        return jnp.asarray(rates)
