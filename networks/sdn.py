"""Continuous ACER's network (Wang et al. 2017, arXiv:1611.01224, §5): a diagonal Gaussian
policy and a stochastic dueling network (SDN) critic.

* Policy: an MLP on the observation → the mean `[..., D]`; the log-std is a state-independent
  parameter vector `[D]` (as in PPO's MuJoCo network). The paper fixes the covariance; a
  learnt state-independent log-std generalises that (it starts at `log_std_init`) while
  keeping the statistics the trust region works on small: (mean, log_std). The actions are in
  normalised units: the env receives them clipped to [−1, 1] and scaled to its bounds.
* Critic: a separate MLP on the observation → V(x) (one linear unit) and, with a candidate
  action a concatenated to those features, one more hidden layer → A(x, a). The SDN
  estimate Q̃(x, a) = V(x) + A(x, a) − (1/n) Σ_i A(x, u_i) is formed by the learner
  (`agents.losses.sdn_q_values`) from A at several actions, which `critic` evaluates in one
  batched pass over a leading action axis.

Policy and critic have separate torsos (no shared features), as in the PPO papers' MuJoCo
networks: the score-function policy gradient and the critic's regression do not pull on
the same weights. Vector observations only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from networks.torsos import MLP, check_obs


class GaussianSDNNetwork(nn.Module):
    """`policy(obs) -> (mean [..., D], log_std [D])`; `critic(obs, actions [K, ..., D]) ->
    (V [...], A [K, ...])`; `__call__(obs, actions)` runs both (used to initialise)."""

    obs_spec: Any  # an array observation's shape (D_obs,) or its EnvSpec.obs_spec
    action_dim: int
    hidden: Sequence[int] = (64, 64)
    log_std_init: float = 0.0

    def setup(self):
        ortho = nn.initializers.orthogonal
        self.policy_torso = MLP(tuple(self.hidden), "tanh")
        self.mean_head = nn.Dense(self.action_dim, kernel_init=ortho(0.01))
        self.log_std = self.param(
            "log_std", nn.initializers.constant(self.log_std_init), (self.action_dim,)
        )
        self.value_torso = MLP(tuple(self.hidden), "relu")
        self.value_head = nn.Dense(1, kernel_init=ortho(1.0))
        width = self.hidden[-1] if self.hidden else 64
        self.adv_hidden = nn.Dense(width, kernel_init=ortho(jnp.sqrt(2.0)))
        self.adv_head = nn.Dense(1, kernel_init=ortho(1.0))

    def policy(self, obs):
        check_obs(obs, self.obs_spec)
        return self.mean_head(self.policy_torso(obs)), self.log_std

    def critic(self, obs, actions):
        """V(x) `[...]` and A(x, a) `[K, ...]` for K candidate actions `[K, ..., D]`."""
        lead = check_obs(obs, self.obs_spec)
        if actions.shape[1:] != (*lead, self.action_dim):
            raise ValueError(
                f"actions have shape {actions.shape}, expected (K, *{lead}, {self.action_dim})"
            )
        h = self.value_torso(obs)
        v = self.value_head(h)[..., 0]
        hk = jnp.broadcast_to(h[None], (actions.shape[0], *h.shape))
        x = jnp.concatenate([hk, actions.astype(h.dtype)], axis=-1)
        adv = self.adv_head(nn.relu(self.adv_hidden(x)))[..., 0]
        return v, adv

    def __call__(self, obs, actions):
        return self.policy(obs), self.critic(obs, actions)
