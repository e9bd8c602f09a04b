"""Observation torsos: Nature CNN for Atari frames and an MLP for vector observations."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax.numpy as jnp


class NatureCNN(nn.Module):
    """The DQN torso (Mnih et al. 2015): 3 convolutions and a dense layer.

    Input: uint8 frames `[..., C, 84, 84]` channel-first, as envpool returns them (C = stack
    of 4). They are scaled to [0, 1] inside the module, so the replay and the actor keep
    uint8 and the host never converts.
    """

    hidden: int = 512
    channels_first: bool = True

    @nn.compact
    def __call__(self, obs):
        lead = obs.shape[:-3]
        x = obs.reshape((-1, *obs.shape[-3:]))
        if self.channels_first:
            x = jnp.transpose(x, (0, 2, 3, 1))
        x = x.astype(jnp.float32) / 255.0
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        x = nn.relu(nn.Conv(32, (8, 8), (4, 4), padding="VALID", kernel_init=init)(x))
        x = nn.relu(nn.Conv(64, (4, 4), (2, 2), padding="VALID", kernel_init=init)(x))
        x = nn.relu(nn.Conv(64, (3, 3), (1, 1), padding="VALID", kernel_init=init)(x))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(self.hidden, kernel_init=init)(x))
        return x.reshape((*lead, self.hidden))


ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


class MLP(nn.Module):
    """An MLP torso for vector observations `[..., D]` (ReLU, or tanh as in the PPO papers'
    MuJoCo and classic-control networks)."""

    hidden: Sequence[int] = (64, 64)
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs):
        x = obs.astype(jnp.float32)
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        act = ACTIVATIONS[self.activation]
        for width in self.hidden:
            x = act(nn.Dense(width, kernel_init=init)(x))
        return x


def make_torso(
    obs_shape: tuple[int, ...], hidden: Sequence[int] = (64, 64), activation: str = "relu"
) -> nn.Module:
    """Nature CNN for image stacks `[C, H, W]`, MLP for vectors `[D]`."""
    if len(obs_shape) == 3:
        return NatureCNN()
    if len(obs_shape) == 1:
        return MLP(tuple(hidden), activation)
    raise ValueError(f"no torso for observations of shape {obs_shape}: expected [C, H, W] or [D]")
