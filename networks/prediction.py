"""SAC's prediction model (--prediction; agents/sac/prediction.py, agents.losses.prediction):
three MLPs on a critic's representation s_t.

* transition: (s_t, e_t, a_t) -> N(μ, σ) of s_{t+1}, its log σ squashed into
  [log_std_min, log_std_max] as the policy's is (`networks.sac.PolicyMLP`);
* reward: (s_t, e_t, a_t) -> r̂_t;
* observation: s_t -> x̂_t, the whole observation (its privileged dimensions included).

e_t: the observation's privileged dimensions (`EnvSpec.privileged_obs`; `[..., 0]` when
there are none); a_t: the action as a vector (one-hot when discrete, in [−1, 1] when
continuous).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import flax.linen as nn
import jax.numpy as jnp


class Predictions(NamedTuple):
    mean: jnp.ndarray  # [..., K] μ of s_{t+1}
    log_std: jnp.ndarray  # [..., K] log σ of s_{t+1}
    reward: jnp.ndarray  # [...] r̂_t
    observation: jnp.ndarray  # [..., D] x̂_t


class PredictionModel(nn.Module):
    """`apply(params, state [..., K], extra [..., E], action [..., A]) -> Predictions` (K,
    the representation's size, is read from `state`)."""

    obs_size: int  # D
    hidden: Sequence[int] = (256, 256)
    log_std_min: float = -5.0
    log_std_max: float = 2.0

    @nn.compact
    def __call__(self, state, extra, action):
        inputs = jnp.concatenate(
            [state.astype(jnp.float32), extra.astype(jnp.float32), action.astype(jnp.float32)],
            axis=-1,
        )
        h = _mlp(inputs, self.hidden, "transition")
        size = state.shape[-1]
        mean = nn.Dense(size, name="transition_mean")(h)
        raw = jnp.tanh(nn.Dense(size, name="transition_log_std")(h))
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (raw + 1.0)
        reward = nn.Dense(1, name="reward_out")(_mlp(inputs, self.hidden, "reward"))[..., 0]
        obs = _mlp(state.astype(jnp.float32), self.hidden, "observation")
        obs = nn.Dense(self.obs_size, name="observation_out")(obs)
        return Predictions(mean, log_std, reward, obs)


def _mlp(x, hidden: Sequence[int], name: str):
    for i, width in enumerate(hidden):
        x = nn.relu(nn.Dense(width, name=f"{name}_{i}")(x))
    return x
