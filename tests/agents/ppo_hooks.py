"""Hooks for the PPO/A2C tests, named on the command line as `tests.agents.ppo_hooks:NAME`."""

import jax.numpy as jnp


def shaped(obs, action, reward, done):
    """torch-ac style shaping: a bonus of 0.5 per step, −1 at a termination."""
    return reward + 0.5 - done.astype(jnp.float32)


def first_two(obs):
    """Keep the first two observation features (CartPole: cart position and velocity)."""
    return obs[..., :2]


def flat(obs):
    """Each observation as one vector (an image's pixels in a row): `[B, ...]` -> `[B, D]`."""
    return obs.reshape((obs.shape[0], -1)).astype(jnp.float32)


def broken(obs):
    """Not jittable: NumPy on a tracer."""
    import numpy as np

    return np.asarray(obs) * 2.0
