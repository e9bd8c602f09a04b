"""ACER actor: the pure policy step `select_action`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agents.rollout import ActorOutput


def make_select_action(network, recurrent: bool):
    """Return the pure policy step `select_action(params, obs, first, core_state, key)`."""

    def select_action(params, obs, first, core_state, key) -> ActorOutput:
        if recurrent:
            (logits, _), core_state = network.apply(params, obs[None], first[None], core_state)
            logits = logits[0]
        else:
            logits, _ = network.apply(params, obs)
        action = jax.random.categorical(key, logits).astype(jnp.int32)
        return ActorOutput(action, jax.nn.softmax(logits), core_state)

    return select_action
