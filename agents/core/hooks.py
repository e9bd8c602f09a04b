"""User hooks of the on-policy agents (torch-ac's `reshape_reward` and `preprocess_obss`).

A hook is a config field; the config class lists its hook fields, with the arguments the
agent calls each with, in its `HOOKS` class attribute. On the command line a hook is named
as `module:function` (the module importable from the working directory or the Python path,
e.g. `--reshape-reward mypkg.shaping:bonus`); in Python the field may hold the callable
itself. Hooks run inside the agent's jitted programs, so they must be jittable: `jax.numpy`
on their array arguments, no Python control flow on values, no host I/O.

A hook is checked, never called, before it is used: a named hook must be a plain Python
function (`def` or `lambda`; not a builtin, a class or another callable object) defined in
the module named (not one it imports from elsewhere), and every hook's signature must take
the positional arguments the agent passes. Errors name the hook's flag: a bad hook fails
when the config is built (before anything compiles), with one line; a hook that raises
while it is traced (a wrong shape, a NumPy call on a tracer) fails with `HookError`, a
one-line `ValueError` naming the flag, the hook and the original error.

Hooks come only from the command line (or Python): a run folder's config.json records the
names a run was trained with, but loading it never imports them
(engine.common.load_run).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from agents.core.config import ConfigError, flag


class HookError(ValueError):
    """A user hook failed while the agent's programs were traced."""


def hook_fields(config) -> dict[str, tuple[str, ...]]:
    """`{field: the arguments the agent calls it with}` of a config (instance or class);
    empty for an agent without hooks."""
    return dict(getattr(config, "HOOKS", {}))


def resolve_hook(value: Any, name: str, params: tuple[str, ...]) -> Callable | None:
    """The callable of a hook field (None, a callable, or a `module:function` string),
    checked without calling it: a named one must be a plain function of that module, and
    either must accept the positional arguments `params` (their names, for the message)."""
    if value is None:
        return None
    if isinstance(value, str):
        fn = _import_function(value, name)
        shown = f"{flag(name)} {value!r}"
    elif callable(value):
        fn = value
        shown = f"{flag(name)} {getattr(value, '__qualname__', type(value).__name__)}"
    else:
        raise ConfigError(f"{flag(name)} must be module:function, got {value!r}")
    try:
        inspect.signature(fn).bind(*params)
    except (TypeError, ValueError) as err:  # ValueError: no signature to read
        called = f"{name}({', '.join(params)})"
        raise ConfigError(
            f"{shown}: {_signature(fn)} cannot take the {len(params)} positional "
            f"argument(s) of {called} ({err})"
        ) from None
    return fn


def _import_function(value: str, name: str) -> Callable:
    """The function `module:function` names, after checking what it is (not calling it)."""
    module_name, _, attr = value.partition(":")
    if (
        value.count(":") != 1
        or not attr.isidentifier()
        or not all(part.isidentifier() for part in module_name.split("."))
    ):
        raise ConfigError(f"{flag(name)} must be module:function, got {value!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # ImportError, or the module failing while it is imported
        raise ConfigError(
            f"{flag(name)} {value!r}: cannot import {module_name!r} ({type(err).__name__}: {err})"
        ) from None
    if not hasattr(module, attr):
        raise ConfigError(f"{flag(name)} {value!r}: {module_name} has no function {attr!r}")
    fn = getattr(module, attr)
    if not inspect.isfunction(fn):
        raise ConfigError(
            f"{flag(name)} {value!r}: {attr} is not a Python function (a def or lambda) "
            f"but a {'class' if inspect.isclass(fn) else type(fn).__name__}"
        )
    if fn.__module__ != module_name:
        raise ConfigError(
            f"{flag(name)} {value!r}: {attr} is defined in {fn.__module__}, not {module_name} "
            f"(name it where it is defined: {fn.__module__}:{fn.__name__})"
        )
    return fn


def _signature(fn) -> str:
    try:
        return f"{getattr(fn, '__name__', 'the hook')}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return "its signature"


def config_hook(config, name: str) -> Callable | None:
    """The checked callable of the hook field `name` of `config` (None when unset)."""
    return resolve_hook(getattr(config, name), name, hook_fields(config)[name])


def check_hooks(config) -> None:
    """Resolve every hook field of `config` that is set now, so a bad one fails before
    compiling."""
    for name, params in hook_fields(config).items():
        if getattr(config, name) is not None:
            resolve_hook(getattr(config, name), name, params)


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


def check_given_again(name: str, trained: str | None, given, run: str) -> None:
    """A run trained with the hook `name` = `trained` (as its config.json names it: never
    imported) needs it given again on the command line (`given`); a run trained without it
    takes none. `run` names the run in the one-line `ValueError`."""
    if trained is not None and given is None:
        raise ValueError(
            f"{flag(name)}: {run} was trained with {flag(name)} {trained!r}; give it again on "
            "the command line (a run folder's hooks are never imported)"
        )
    if trained is None and given is not None:
        raise ValueError(f"{flag(name)}: {run} was trained without {flag(name)}")


def plugged_torso(config, obs_spec):
    """The torso of the `network` hook (`--network module:function`: `function(obs_spec)`
    returns a flax module mapping a batch of observations `[B, ...]` (a pytree for dict
    observations) to features `[B, F]`), checked before anything compiles: a module, whose
    output for two zero observations is a float array `[2, F]`; a one-line `ConfigError`
    otherwise. None when the config has no such hook set."""
    if getattr(config, "network", None) is None:
        return None
    factory = config_hook(config, "network")
    import flax.linen as nn  # the agents' dependency, not this module's
    import jax
    import jax.numpy as jnp

    from envs import obs_zeros

    shown = f"{flag('network')} {config.network!r}"
    module = call_hook("network", factory, obs_spec)
    if not isinstance(module, nn.Module):
        raise ConfigError(f"{shown} returned a {type(module).__name__}, not a flax module")
    if isinstance(obs_spec, tuple) and all(isinstance(d, int) for d in obs_spec):
        sample = jnp.zeros((2, *obs_spec), jnp.float32)  # a shape: the preprocessed obs
    else:
        sample = obs_zeros(obs_spec, (2,), jnp)
    try:
        out = jax.eval_shape(lambda: module.init_with_output(jax.random.PRNGKey(0), sample)[0])
    except Exception as err:  # the user's module failing on the env's observations
        msg = str(err).splitlines()[0] if str(err) else ""
        raise ConfigError(
            f"{shown}: the module fails on observations of {spec_text(obs_spec)}: "
            f"{type(err).__name__}: {msg}"
        ) from None
    if not (hasattr(out, "shape") and len(out.shape) == 2 and out.shape[0] == 2
            and jnp.issubdtype(out.dtype, jnp.floating)):  # fmt: skip
        got = f"{tuple(out.shape)} {out.dtype}" if hasattr(out, "shape") else type(out).__name__
        raise ConfigError(
            f"{shown}: the module maps a batch of 2 observations to {got}; expected float "
            "features [2, F]"
        )
    return module


def spec_text(obs_spec) -> str:
    """An observation spec for a message: its shape, or its keys."""
    shape = getattr(obs_spec, "shape", None)
    if shape is not None:
        return f"shape {tuple(shape)}"
    return "keys " + ", ".join(obs_spec) if isinstance(obs_spec, dict) else str(obs_spec)
