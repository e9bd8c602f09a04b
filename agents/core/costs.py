"""Compute-bound cost models of the agents, as data, for experiments.bench_throughput.

An agent's cost model is a function `network_costs(agent) -> {name: NetworkCost}` of the
network passes it makes per env step, kept beside the agent (not in its class) and named in
its registry line (`AgentSpec.network_costs`); `network_pass_costs` builds the usual one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array


class NetworkCost(NamedTuple):
    """One part of an agent's compute-bound cost model (`AgentSpec.network_costs`), as data:
    experiments.bench_throughput times `apply(params, *inputs(batch))` jitted, alone at its
    best batch size. With an `optimizer`, the timed step is the gradient of a loss over every
    output of `apply` with respect to `params` (the first argument) followed by the
    optimizer's update: a forward+backward pass and the update, whatever the agent's loss.
    `passes`: samples of that part per env step."""

    apply: Callable[..., Any]
    params: Any
    inputs: Callable[[int], tuple]
    passes: float
    optimizer: Any = None  # an optax.GradientTransformation, or None: a forward pass


def random_inputs(shape: tuple[int, ...], dtype) -> Callable[[int], Array]:
    """`batch -> [batch, *shape]` arrays of `dtype` (integers in [0, 255) for image-like
    dtypes), for a `NetworkCost`'s inputs."""

    def make(batch: int) -> Array:
        key = jax.random.PRNGKey(batch)
        if jax.numpy.issubdtype(dtype, jax.numpy.floating):
            return jax.random.normal(key, (batch, *shape), dtype)
        return jax.random.randint(key, (batch, *shape), 0, 255).astype(dtype)

    return make


def network_pass_costs(agent, forward: float, train: float, obs_shape=None) -> dict:
    """The usual cost model of one network on array observations: `forward` acting or
    target passes and `train` forward+backward passes with the learner's optimizer per env
    step (ACER's, DQN's, PPO's)."""
    spec, net = agent.env.spec, agent.network
    shape = spec.obs_shape if obs_shape is None else obs_shape
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, *shape), spec.obs_dtype))
    obs = random_inputs(shape, spec.obs_dtype)
    inputs = lambda b: (obs(b),)  # noqa: E731
    return {
        "forward": NetworkCost(net.apply, params, inputs, forward),
        "forward+backward+adam": NetworkCost(
            net.apply, params, inputs, train, agent.learner.optimizer
        ),
    }
