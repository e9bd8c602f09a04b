"""User network plug-ins for the `--network` tests, named `tests.agents.network_plugins:NAME`:
each takes the env's observation spec and returns a flax module mapping a batch of
observations to features."""

import flax.linen as nn
import jax.numpy as jnp


class TwoLayer(nn.Module):
    width: int = 16

    @nn.compact
    def __call__(self, obs):
        x = jnp.tanh(nn.Dense(self.width)(obs.astype(jnp.float32)))
        return jnp.tanh(nn.Dense(self.width)(x))


def tiny(obs_spec):
    return TwoLayer()


def not_a_module(obs_spec):
    return lambda obs: obs


class Flat(nn.Module):
    @nn.compact
    def __call__(self, obs):
        return nn.Dense(4)(obs.astype(jnp.float32))[..., 0]  # [B]: no feature axis


def wrong_shape(obs_spec):
    return Flat()
