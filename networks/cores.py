"""Recurrent cores that reset at episode starts.

Reset convention (envpool's NEXT_STEP auto-reset, see `agents.losses`): `first_t` is True when
x_t is the first observation of an episode, i.e. on the step after any termination or
truncation. The core state is replaced by the initial (zero) state *before* x_t is
processed, so no memory crosses an episode boundary, in acting and in replayed sequences.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class ResetLSTM(nn.Module):
    """An LSTM unrolled over time-major inputs `[T, B, D]` with per-step resets."""

    size: int = 256

    def initial_state(self, batch_size: int):
        zeros = jnp.zeros((batch_size, self.size), jnp.float32)
        return (zeros, zeros)

    @nn.compact
    def __call__(self, x, first, state):
        """x `[T, B, D]`, first `[T, B]` bool, state (c, h) each `[B, size]`.

        Returns outputs `[T, B, size]` and the final state.
        """
        cell = nn.OptimizedLSTMCell(self.size, name="cell")

        def step(cell, carry, inputs):
            x_t, first_t = inputs
            keep = (~first_t)[:, None].astype(x_t.dtype)
            carry = jax.tree.map(lambda s: s * keep, carry)
            carry, y = cell(carry, x_t)
            return carry, y

        scan = nn.scan(step, variable_broadcast="params", split_rngs={"params": False})
        state, ys = scan(cell, state, (x, first))
        return ys, state
