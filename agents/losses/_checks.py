"""Argument checks shared by the loss functions.

Three kinds, from free to opt-in:

* Shapes and dtypes: always, at trace time (static information, so they cost nothing under
  `jax.jit`). Messages name the argument, the expected and the received shape.
* Ranges of hyperparameters and discounts (λ, c, c_max, discounts, δ, a categorical support):
  checked eagerly, with a one-line `ValueError` naming the argument, when the value is a
  Python number or a NumPy array/scalar. jax Arrays are not checked here, traced or not:
  a tracer has no value, and reading a concrete jax Array would force a device-to-host copy.
* Data (actions in [0, A), finite probabilities that sum to 1, and the ranges above for jax
  Arrays): only inside `agents.losses.checked`, which turns them into `checkify` checks.
  Outside it these functions emit nothing, so the compiled losses are unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

# True while `agents.losses.checked` traces a loss: the debug checks below emit checkify checks.
_DEBUG: contextvars.ContextVar[bool] = contextvars.ContextVar("losses_debug", default=False)


@contextlib.contextmanager
def debug_scope() -> Iterator[None]:
    token = _DEBUG.set(True)
    try:
        yield
    finally:
        _DEBUG.reset(token)


def debug_enabled() -> bool:
    return _DEBUG.get()


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


def check_scalar(name: str, x, what: str) -> None:
    """Require a rank-0 hyperparameter (a `[B]` or `[T, B]` value would broadcast silently)."""
    if jnp.ndim(x) != 0:
        raise ValueError(f"{name} must be a scalar ({what}), got shape {_shape(x)}")


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


# --------------------------------------------------------------------------- value ranges


def concrete(x) -> np.ndarray | None:
    """`x` as a NumPy array if it is a Python number or a NumPy value, else None.

    jax Arrays (tracers and concrete arrays alike) give None: they are not checked eagerly.
    """
    if isinstance(x, (bool, int, float, np.ndarray, np.generic)):
        return np.asarray(x)
    return None


def _first_bad(name: str, v: np.ndarray, ok: np.ndarray, rule: str) -> None:
    if np.all(ok):
        return
    if v.ndim == 0:
        raise ValueError(f"{name} must {rule}, got {v}")
    idx = tuple(int(i) for i in np.argwhere(~ok)[0])
    raise ValueError(f"{name} must {rule} everywhere, got {v[idx]} at index {idx}")


def check_unit_interval(name: str, x) -> None:
    """λ and discounts: every entry in [0, 1] (NaN fails)."""
    v = concrete(x)
    if v is not None:
        _first_bad(name, v, (v >= 0) & (v <= 1), "lie in [0, 1]")
    elif debug_enabled():
        checkify.check(jnp.all((x >= 0) & (x <= 1)), f"{name} must lie in [0, 1]")


def check_nonnegative(name: str, x) -> None:
    """Truncation levels (c, c_max, V-trace clips) and the trust-region δ: ≥ 0 (NaN fails)."""
    v = concrete(x)
    if v is not None:
        _first_bad(name, v, v >= 0, "be >= 0")
    elif debug_enabled():
        checkify.check(jnp.all(x >= 0), f"{name} must be >= 0")


def check_support(name: str, z) -> None:
    """A categorical support: finite and strictly increasing."""
    v = concrete(z)
    if v is not None:
        _first_bad(name, v, np.isfinite(v), "be finite")
        steps = np.diff(v)
        if np.any(steps <= 0):
            i = int(np.argmax(steps <= 0))
            raise ValueError(
                f"{name} must be strictly increasing, got {name}[{i}] = {v[i]} "
                f"and {name}[{i + 1}] = {v[i + 1]}"
            )
    elif debug_enabled():
        checkify.check(jnp.all(jnp.isfinite(z)), f"{name} must be finite")
        checkify.check(jnp.all(z[1:] > z[:-1]), f"{name} must be strictly increasing")


# --------------------------------------------------------------------------- debug-only data


def debug_check_actions(name: str, a, num_actions: int) -> None:
    """Under `checked`: every action in [0, num_actions)."""
    if not debug_enabled() or jnp.size(a) == 0:
        return  # (min/max of an empty batch would fail at trace time)
    checkify.check(
        jnp.all((a >= 0) & (a < num_actions)),
        f"{name} must lie in [0, {num_actions}) (the action range), got values from "
        "{lo} to {hi}",
        lo=jnp.min(a),
        hi=jnp.max(a),
    )


def debug_check_finite(name: str, x) -> None:
    """Under `checked`: no NaN or ±inf (signed masses, importance ratios)."""
    if debug_enabled():
        checkify.check(jnp.all(jnp.isfinite(x)), f"{name} must be finite (no NaN or inf)")


def debug_check_ratio(name: str, x) -> None:
    """Under `checked`: importance ratios are finite and ≥ 0."""
    if debug_enabled():
        checkify.check(
            jnp.all(jnp.isfinite(x) & (x >= 0)), f"{name} must be finite and >= 0 (a ratio π/μ)"
        )


def debug_check_probs(name: str, p, *, normalised: bool = True) -> None:
    """Under `checked`: finite, in [0, 1], and (if `normalised`) summing to 1 over the last
    axis within max(1e-3, n·eps) for n entries of the dtype's eps."""
    if not debug_enabled() or jnp.size(p) == 0:
        return
    checkify.check(jnp.all(jnp.isfinite(p)), f"{name} must be finite (no NaN or inf)")
    checkify.check(jnp.all((p >= 0) & (p <= 1)), f"{name} must lie in [0, 1]")
    if normalised:
        n = jnp.shape(p)[-1]
        tol = max(1e-3, n * float(jnp.finfo(jnp.result_type(p)).eps))
        total = jnp.sum(p, axis=-1)
        checkify.check(
            jnp.all(jnp.abs(total - 1) <= tol),
            f"{name} must sum to 1 over its last axis (within {tol:.3g}), got sums from "
            "{lo} to {hi}",
            lo=jnp.min(total),
            hi=jnp.max(total),
        )


def debug_check_trace_data(A: int, pi_t, mu_t, a_t) -> None:
    """Under `checked`: the data every Retrace variant takes (actions, π, μ)."""
    debug_check_actions("a_t", a_t, A)
    debug_check_probs("pi_t", pi_t)
    debug_check_probs("mu_t", mu_t)


def masked_squared_error(x_name, x, y_name, y, mask_t, layout, reduce=None):
    """(x − y)² per step, `[T, B]`, zero where masked, for `x` and `y` of one float shape
    `layout` ("[T, B]", or "[T, B, K]" with `reduce` of the last axis: e.g. a sum or a mean),
    each named in a mismatch's message. The caller stops `y`'s gradient where it should."""
    T, B = time_batch(x_name, x, layout.count(",") + 1, layout)
    check_float(x_name, x)
    check_float(y_name, y)
    check_shape(y_name, y, jnp.shape(x), f"the shape of {x_name}")
    mask = optional_mask(mask_t, (T, B), x.dtype)
    err = jnp.square(x - y)
    return jnp.where(mask > 0, err if reduce is None else reduce(err), 0.0)
