"""Heads and complete actor-critic networks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from networks.cores import ResetLSTM
from networks.torsos import check_obs, make_torso


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
    `obs_spec` is the env's `EnvSpec.obs_spec` (or an array observation's shape); for a
    pytree observation `obs` is a pytree of leaves `[..., *leaf_shape]` and the torso is a
    `DictEncoder` (`networks.torsos.make_torso`).
    """

    obs_spec: Any
    num_actions: int
    hidden: Sequence[int] = (64, 64)
    lstm_size: int = 0
    text: bool = False

    def setup(self):
        self.torso = make_torso(self.obs_spec, self.hidden, text=self.text)
        self.head = PolicyQHead(self.num_actions)
        if self.lstm_size:
            self.core = ResetLSTM(self.lstm_size)

    def __call__(self, obs, first=None, state=None):
        check_obs(obs, self.obs_spec)
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
