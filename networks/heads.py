"""Heads and complete actor-critic networks."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax.numpy as jnp

from networks.cores import ResetLSTM
from networks.torsos import make_torso


class PolicyQHead(nn.Module):
    """ACER's head pair: policy logits and Q(x, ·) for every action, from shared features."""

    num_actions: int

    @nn.compact
    def __call__(self, features):
        logits = nn.Dense(
            self.num_actions, kernel_init=nn.initializers.orthogonal(0.01), name="policy"
        )(features)
        q = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(1.0), name="q")(
            features
        )
        return logits, q


class ACERNetwork(nn.Module):
    """Shared torso → (optional LSTM) → policy logits and Q values.

    Feed-forward: `apply(params, obs)` with obs `[..., *obs_shape]` returns
    (logits, q) `[..., A]`. Recurrent (`lstm_size > 0`): `apply(params, obs, first, state)`
    with time-major obs `[T, B, ...]` and `first` `[T, B]` returns ((logits, q), state).
    """

    obs_shape: tuple[int, ...]
    num_actions: int
    hidden: Sequence[int] = (64, 64)
    lstm_size: int = 0

    def setup(self):
        self.torso = make_torso(self.obs_shape, self.hidden)
        self.head = PolicyQHead(self.num_actions)
        if self.lstm_size:
            self.core = ResetLSTM(self.lstm_size)

    def __call__(self, obs, first=None, state=None):
        if tuple(obs.shape[-len(self.obs_shape) :]) != tuple(self.obs_shape):
            raise ValueError(
                f"observation shape {obs.shape} does not end with the network's obs_shape "
                f"{self.obs_shape}"
            )
        features = self.torso(obs)
        if not self.lstm_size:
            return self.head(features)
        if first is None or state is None:
            raise ValueError("a recurrent ACERNetwork needs `first` [T, B] and a core state")
        features, state = self.core(features, first, state)
        return self.head(features), state

    def initial_state(self, batch_size: int):
        return (
            jnp.zeros((batch_size, self.lstm_size), jnp.float32),
            jnp.zeros((batch_size, self.lstm_size), jnp.float32),
        )
