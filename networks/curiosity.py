"""The curiosity networks for vector observations: random network distillation's two (RND,
Burda et al. 2018, arXiv:1810.12894: a fixed random target network and the predictor trained
to match it; agents/core/rnd.py wires them) and the intrinsic curiosity module's encoder,
inverse and forward models (`ICMNetworks`; agents/core/icm.py). agents.losses.curiosity has
the losses.

RND's networks: the paper's Atari networks are convolutional, the predictor deeper than the
target (extra fully connected layers) so that it can fit the target where data is plentiful;
here both are MLPs on the (normalised) observation vector, the predictor with one extra
hidden layer of the last width. Orthogonal initialisation with gain √2.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


class RNDEmbedding(nn.Module):
    """An MLP embedding `[..., D]` -> `[..., features]`: ReLU hidden layers, linear output."""

    hidden: Sequence[int] = (64, 64)
    features: int = 64

    @nn.compact
    def __call__(self, obs):
        x = obs.astype(jnp.float32)
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        for width in self.hidden:
            x = nn.relu(nn.Dense(width, kernel_init=init)(x))
        return nn.Dense(self.features, kernel_init=init, name="out")(x)


def rnd_networks(hidden: Sequence[int], features: int) -> tuple[RNDEmbedding, RNDEmbedding]:
    """(target, predictor): the predictor has one more hidden layer (module docstring)."""
    hidden = tuple(hidden)
    extra = (hidden[-1],) if hidden else (features,)
    return RNDEmbedding(hidden, features), RNDEmbedding(hidden + extra, features)


class ICMNetworks(nn.Module):
    """The intrinsic curiosity module's three networks (Pathak et al. 2017, arXiv:1705.05363,
    §2.2) for vector observations: an encoder φ (an MLP with ReLU hidden layers and a linear
    output of `features`), an inverse model g(φ(s), φ(s')) -> the action's logits (`discrete`,
    `action_size` of them) or the action itself, and a forward model f(φ(s), a) -> φ(s'), the
    action one-hot when discrete. The paper's heads are one hidden layer of 256 units on its
    288 convolutional features; here each head has one hidden layer of `head_hidden` units.
    `__call__` initialises all three; `encode`, `inverse` and `forward` apply one each."""

    action_size: int
    discrete: bool
    hidden: Sequence[int] = (64, 64)
    features: int = 64
    head_hidden: int = 256

    def setup(self):
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        self.encoder = RNDEmbedding(tuple(self.hidden), self.features)
        self.inverse_hidden = nn.Dense(self.head_hidden, kernel_init=init)
        self.inverse_out = nn.Dense(self.action_size, kernel_init=init)
        self.forward_hidden = nn.Dense(self.head_hidden, kernel_init=init)
        self.forward_out = nn.Dense(self.features, kernel_init=init)

    def encode(self, obs):
        return self.encoder(obs)

    def inverse(self, phi, next_phi):
        x = nn.relu(self.inverse_hidden(jnp.concatenate([phi, next_phi], axis=-1)))
        return self.inverse_out(x)

    def forward(self, phi, action):
        if self.discrete:
            action = jax.nn.one_hot(action, self.action_size, dtype=phi.dtype)
        x = nn.relu(self.forward_hidden(jnp.concatenate([phi, action.astype(phi.dtype)], -1)))
        return self.forward_out(x)

    def __call__(self, obs, action):
        phi = self.encode(obs)
        return self.inverse(phi, phi), self.forward(phi, action)
