"""Trace-time argument checks shared by the loss functions.

Every check runs on static shapes and dtypes, so it costs nothing under `jax.jit` and raises
before any computation. Messages name the argument, the expected and the received shape.
"""

from __future__ import annotations

import jax.numpy as jnp


def _shape(x) -> tuple[int, ...]:
    return tuple(jnp.shape(x))


def check_float(name: str, x) -> None:
    """Require a floating-point array (integer rewards or discounts are a classic silent bug)."""
    if not jnp.issubdtype(jnp.result_type(x), jnp.floating):
        raise ValueError(f"{name} must be floating point, got dtype {jnp.result_type(x)}")


def check_int(name: str, x) -> None:
    if not jnp.issubdtype(jnp.result_type(x), jnp.integer):
        raise ValueError(
            f"{name} must be an integer array of action indices, got dtype {jnp.result_type(x)}"
        )


def check_shape(name: str, x, expected: tuple[int, ...], what: str = "") -> None:
    """Require `x.shape == expected` exactly; never broadcast `[T, B]` against `[T, B, 1]`."""
    got = _shape(x)
    if got != tuple(expected):
        hint = f" ({what})" if what else ""
        raise ValueError(f"{name} has shape {got}, expected {tuple(expected)}{hint}")


def check_rank(name: str, x, rank: int, what: str) -> tuple[int, ...]:
    got = _shape(x)
    if len(got) != rank:
        raise ValueError(f"{name} must have rank {rank} ({what}), got shape {got}")
    return got


def time_batch(name: str, x, rank: int, what: str) -> tuple[int, int]:
    """Return (T, B) of a time-major array of the given rank."""
    shape = check_rank(name, x, rank, what)
    if shape[0] < 1:
        raise ValueError(f"{name} has an empty time axis: shape {shape}")
    return shape[0], shape[1]


def check_prob(name: str, x, expected: tuple[int, ...]) -> None:
    check_float(name, x)
    check_shape(name, x, expected, "probabilities over actions")


def optional_mask(mask_t, shape: tuple[int, int], dtype):
    """`mask_t` defaults to all ones; otherwise it must be exactly `[T, B]`."""
    if mask_t is None:
        return jnp.ones(shape, dtype)
    check_shape("mask_t", mask_t, shape, "[T, B]: 1 for real transitions, 0 for auto-reset steps")
    return jnp.asarray(mask_t, dtype)


def check_trace_inputs(T: int, B: int, A: int, pi_t, mu_t, a_t, r_t, discount_t) -> None:
    """The per-step inputs every Retrace variant takes, against (T, B, A)."""
    check_prob("pi_t", pi_t, (T, B, A))
    check_prob("mu_t", mu_t, (T, B, A))
    check_int("a_t", a_t)
    check_shape("a_t", a_t, (T, B))
    check_float("r_t", r_t)
    check_shape("r_t", r_t, (T, B))
    check_float("discount_t", discount_t)
    check_shape("discount_t", discount_t, (T, B))
