"""TD3 / DDPG as pure functions, `make(config, spec)` over the off-policy seam's `build`
(agents/core/offpolicy.py): a deterministic tanh actor with Gaussian exploration noise, a
critic ensemble, `TD3Learner`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from agents import losses
from agents.core.hooks import plugged_torso
from agents.core.offpolicy import build, observation
from agents.core.parts import AgentParts
from agents.core.rollout import ActorOutput
from agents.td3.config import TD3Config
from agents.td3.learner import METRICS, TD3Learner
from networks.sac import PolicyMLP, QEnsemble, obs_torso


def make(config: TD3Config, spec) -> AgentParts:
    """TD3's parts for `config` (agents/td3/config.py) on an env of `spec`."""
    if spec.discrete:
        raise ValueError(
            f"td3 needs continuous actions; {spec.env_id} has {spec.num_actions} discrete "
            "actions (use --agent sac for discrete SAC)"
        )
    dim = int(np.prod(spec.action_shape))
    plugged = plugged_torso(config, spec.obs_spec) if config.network else None
    clone = None if plugged is None else plugged.clone
    actor_net = PolicyMLP(dim, config.hidden, "deterministic",
                          torso=obs_torso(spec.obs_spec, clone))  # fmt: skip
    critic_net = QEnsemble(config.num_critics, config.hidden,
                           torso=obs_torso(spec.obs_spec, clone))  # fmt: skip
    learner = TD3Learner(config, actor_net, critic_net, dim)
    low = np.asarray(spec.action_low, np.float32)
    high = np.asarray(spec.action_high, np.float32)
    noise_scale = config.exploration_noise

    def select_action(params, obs, first, core, key):
        k_noise, k_uniform = jax.random.split(key)
        greedy = actor_net.apply(params.actor, observation(config, obs, params.obs_stats))
        action = jnp.clip(greedy + noise_scale * jax.random.normal(k_noise, greedy.shape), -1, 1)
        uniform = jax.random.uniform(k_uniform, greedy.shape, greedy.dtype, -1.0, 1.0)
        action = jnp.where(params.explore, uniform, action)  # before start_train_at
        return ActorOutput(action, {"greedy": greedy}, core, losses.scale_action(action, low, high))

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            a = actor_net.apply(params.actor, observation(config, obs, params.obs_stats))
            if not greedy:
                a = jnp.clip(a + noise_scale * jax.random.normal(key, a.shape), -1, 1)
            return losses.scale_action(a, low, high), core

        return act_fn

    return build(config, spec, "td3", learner, (select_action, act), METRICS)
