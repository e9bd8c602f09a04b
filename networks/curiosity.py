"""The two networks of random network distillation (RND, Burda et al. 2018,
arXiv:1810.12894) for vector observations: a fixed random target network and the predictor
trained to match it (agents/core/rnd.py wires them; agents.losses.curiosity has the losses).

The paper's Atari networks are convolutional, the predictor deeper than the target (extra
fully connected layers) so that it can fit the target where data is plentiful; here both
are MLPs on the (normalised) observation vector, the predictor with one extra hidden layer
of the last width. Orthogonal initialisation with gain √2.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
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
