"""`checked`: an opt-in debug mode that adds run-time data checks to any loss of this package.

The losses check shapes and dtypes at trace time, and concrete hyperparameters eagerly (see
`agents.losses._checks`). What they cannot check for free is the data itself: an action
a_t = −1 silently picks the last action and a_t = A gives NaN (out-of-bounds gathers), and a
NaN probability spreads quietly. `checked(fn)` traces `fn` with those checks switched on,
functionalises them with `jax.experimental.checkify`, compiles the result with `jax.jit`, and
raises `checkify.JaxRuntimeError` (a `ValueError`) naming the first failing argument.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.experimental import checkify

from agents.losses import _checks as C

__all__ = ["checked"]


def _is_array(x) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic))


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _run(fn, treedef, static, dynamic):
    """`fn` traced in debug mode and checkified. Non-array leaves are static (hashable)."""
    it = iter(dynamic)
    leaves = [next(it) if s is _DYNAMIC else s for s in static]
    args, kwargs = jax.tree.unflatten(treedef, leaves)

    def traced():
        with C.debug_scope():
            return fn(*args, **kwargs)

    return checkify.checkify(traced, errors=checkify.user_checks)()


class _Dynamic:
    """Placeholder for an array leaf in the static part of the arguments."""

    def __repr__(self) -> str:
        return "<array>"


_DYNAMIC = _Dynamic()


def checked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a loss of `agents.losses` so that it checks its data at run time.

    The wrapped function takes the same arguments and returns the same values. In addition,
    every function of this package called while it is traced checks, with `checkify`:

    * integer actions (`a_t`) lie in [0, A);
    * probabilities (`pi_t`, `mu_t`, `mu_a_t`, `pi_a_t`, `q_probs_t`, `bootstrap_probs`, and
      the C51 targets' `target_probs_t`, `bootstrap_target_probs`) are finite and in [0, 1],
      and policies and distributions sum to 1 over their last axis (within max(1e-3, n·eps));
      signed masses (`probs` of `categorical_projection`, the `target_probs_t` of a loss),
      importance ratios (`rho_t`) and DPG's `dqda_t` are finite;
    * the ranges that are checked eagerly for Python and NumPy values (λ ∈ [0, 1], c ≥ 0,
      discounts ∈ [0, 1], δ ≥ 0, a finite and strictly increasing support, PPO's ε, the
      temperature α, the rescaling ε and TD3's noise clip ≥ 0, action bounds finite with
      low < high) also hold for jax Arrays and traced values.

    The call is compiled with `jax.jit` (array arguments are traced; everything else, such as
    Python floats, ints and callables, is static and must be hashable) and raises
    `jax.experimental.checkify.JaxRuntimeError`, whose message names the argument, if a check
    fails. Call it outside `jax.jit`. Inside a function that you `checkify.checkify` yourself,
    the error is passed on to your checkify instead of raised. Meant for debugging and tests:
    the checks add reductions over the inputs and a device-to-host read of the error.

    Example::

        safe_retrace = losses.checked(losses.retrace_targets)
        q_ret = safe_retrace(q, pi, mu, a, r, disc, boot, lambda_=0.9)  # raises if a ∉ [0, A)
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        leaves, treedef = jax.tree.flatten((args, kwargs))
        static = tuple(_DYNAMIC if _is_array(x) else x for x in leaves)
        dynamic = [x for x in leaves if _is_array(x)]
        err, out = _run(fn, treedef, static, dynamic)
        checkify.check_error(err)
        return out

    return wrapper
