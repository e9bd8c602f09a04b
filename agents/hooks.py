"""User hooks of the on-policy agents (torch-ac's `reshape_reward` and `preprocess_obss`).

A hook is a config field. On the command line it is named as `module:function` (the module
importable from the working directory or the Python path, e.g.
`--reshape-reward mypkg.shaping:bonus`); in Python the field may hold the callable itself.
Hooks run inside the agent's jitted programs, so they must be jittable: `jax.numpy` on
their array arguments, no Python control flow on values, no host I/O.

Errors name the hook's flag: a name that does not import or is not callable fails when the
config is built (before anything compiles); a hook that raises while it is traced (a wrong
shape, a NumPy call on a tracer) fails with `HookError`, a one-line `ValueError` naming the
flag, the hook and the original error.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from agents.config import ConfigError, flag


class HookError(ValueError):
    """A user hook failed while the agent's programs were traced."""


def resolve_hook(value: Any, name: str = "hook") -> Callable | None:
    """The callable of a hook field: None, a callable, or a `module:function` string."""
    if value is None or callable(value):
        return value
    if not isinstance(value, str) or value.count(":") != 1:
        raise ConfigError(f"{flag(name)} must be module:function, got {value!r}")
    module_name, attr = value.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # ImportError, or the module failing while it is imported
        raise ConfigError(
            f"{flag(name)} {value!r}: cannot import {module_name!r} ({type(err).__name__}: {err})"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"{flag(name)} {value!r}: {module_name} has no function {attr!r}")
    return fn


def check_hook(config, name: str) -> None:
    """Resolve the hook field `name` of `config` now, so a bad one fails before compiling."""
    resolve_hook(getattr(config, name), name)


def call_hook(name: str, fn: Callable, *args):
    """`fn(*args)`, with any exception turned into a `HookError` naming the flag."""
    try:
        return fn(*args)
    except Exception as err:
        what = getattr(fn, "__qualname__", repr(fn))
        module = getattr(fn, "__module__", None)
        where = f"{module}:{what}" if module else what
        msg = str(err).splitlines()[0] if str(err) else ""
        raise HookError(
            f"{flag(name)} hook {where} failed while traced: {type(err).__name__}: {msg}"
        ) from err
