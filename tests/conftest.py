"""Shared pytest setup.

Tests run on CPU. Four fake host devices are requested before JAX initialises so that the
sharded code paths can be exercised on a machine with no accelerator.

Implicit rank promotion is an error in every test (`jax_numpy_rank_promotion = "raise"`):
`[T, B] + [T, B, 1]` must be written out (`x[..., None]`), never broadcast silently. Setting
it through the environment, before any test imports JAX, covers code that reads the config at
import time too; the `jax.config.update` below makes sure it holds even if JAX was already
imported by a plugin.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["JAX_NUMPY_RANK_PROMOTION"] = "raise"
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
    os.environ["XLA_FLAGS"] = (_flags + " --xla_force_host_platform_device_count=4").strip()

import jax  # noqa: E402  (after the environment above)

jax.config.update("jax_numpy_rank_promotion", "raise")
