"""The TD3 / DDPG agent on the shared off-policy seam (agents/core/offpolicy.py): a deterministic
tanh actor with Gaussian exploration noise, a critic ensemble, `TD3Learner`."""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from agents import losses
from agents.core.offpolicy import OFF_POLICY_TUNABLE, OffPolicyAgent
from agents.core.rollout import ActorOutput
from agents.td3.config import TD3Config
from agents.td3.learner import METRICS, TD3Learner
from networks.sac import PolicyMLP, QEnsemble


class TD3Agent(OffPolicyAgent):
    name = "td3"
    metric_names = METRICS
    supports_population = True  # tests/agents/test_population.py
    tunable: ClassVar[dict[str, tuple[float, float]]] = {
        **OFF_POLICY_TUNABLE,
        "target_noise": (0.0, 10.0),
    }

    def __init__(self, config: TD3Config, env, *, seed=0, mesh=None, replay_memory_limit=None):
        if env.spec.discrete:
            raise ValueError(
                f"td3 needs continuous actions; {env.spec.env_id} has {env.spec.num_actions} "
                "discrete actions (use --agent sac for discrete SAC)"
            )
        super().__init__(config, env, seed=seed, mesh=mesh, replay_memory_limit=replay_memory_limit)

    def make_network(self, spec):
        cfg = self.config
        dim = int(np.prod(spec.action_shape))
        return PolicyMLP(dim, cfg.hidden, "deterministic"), QEnsemble(cfg.num_critics, cfg.hidden)

    def make_learner(self, network):
        actor, critic = network
        return TD3Learner(self.config, actor, critic, int(np.prod(self.env.spec.action_shape)))

    def make_actor(self):
        spec, learner, cfg, observe = self.env.spec, self.learner, self.config, self.observation
        low = np.asarray(spec.action_low, np.float32)
        high = np.asarray(spec.action_high, np.float32)

        def select_action(params, obs, first, core, key):
            explore = params.explore
            k_noise, k_uniform = jax.random.split(key)
            greedy = learner.actor.apply(params.actor, observe(obs, params.obs_stats))
            noise = cfg.exploration_noise * jax.random.normal(k_noise, greedy.shape)
            action = jnp.clip(greedy + noise, -1.0, 1.0)
            uniform = jax.random.uniform(k_uniform, greedy.shape, greedy.dtype, -1.0, 1.0)
            action = jnp.where(explore, uniform, action)  # before start_train_at
            return ActorOutput(
                action, {"greedy": greedy}, core, losses.scale_action(action, low, high)
            )

        def act(greedy: bool):
            def act_fn(params, obs, first, core, key):
                a = learner.actor.apply(params.actor, observe(obs, params.obs_stats))
                if not greedy:
                    a = jnp.clip(a + cfg.exploration_noise * jax.random.normal(key, a.shape), -1, 1)
                return losses.scale_action(a, low, high), core

            return jax.jit(act_fn)

        return select_action, act
